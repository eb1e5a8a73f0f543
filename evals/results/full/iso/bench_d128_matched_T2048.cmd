build/bench_model --family transformer --T 2048 --config evals/out/full/configs/transformer.json --steps 5 --csv evals/out/full/iso/bench_d128_matched_T2048.csv
