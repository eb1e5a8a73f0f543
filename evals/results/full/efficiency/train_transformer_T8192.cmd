build/bench_model --family transformer --T 8192 --config evals/out/full/configs/eff_transformer.json --steps 5 --csv evals/out/full/efficiency/train_transformer_T8192.csv
