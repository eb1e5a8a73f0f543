build/bench_decode --family pha --config evals/out/full/configs/eff_pha.json --contexts 512,1024,2048,4096,8192,16384 --csv evals/out/full/efficiency/decode_pha.csv
