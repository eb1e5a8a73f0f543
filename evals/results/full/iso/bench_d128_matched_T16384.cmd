build/bench_model --family transformer --T 16384 --config evals/out/full/configs/transformer.json --steps 5 --csv evals/out/full/iso/bench_d128_matched_T16384.csv
