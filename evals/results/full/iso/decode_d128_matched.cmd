build/bench_decode --family transformer --config evals/out/full/configs/transformer.json --contexts 2048,8192,16384 --csv evals/out/full/iso/decode_d128_matched.csv
