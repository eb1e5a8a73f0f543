build/bench_decode --family pha --config evals/out/full/configs/pha.json --contexts 2048,8192,16384 --csv evals/out/full/iso/decode_pha.csv
