build/bench_model --family transformer --T 8192 --config evals/out/full/configs/transformer.json --steps 5 --csv evals/out/full/iso/bench_d128_matched_T8192.csv
