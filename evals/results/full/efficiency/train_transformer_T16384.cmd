build/bench_model --family transformer --T 16384 --config evals/out/full/configs/eff_transformer.json --steps 5 --csv evals/out/full/efficiency/train_transformer_T16384.csv
