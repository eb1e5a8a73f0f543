build/bench_decode --family mlstm --config evals/out/full/configs/eff_mlstm.json --contexts 512,1024,2048,4096,8192,16384 --csv evals/out/full/efficiency/decode_mlstm.csv
