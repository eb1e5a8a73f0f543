build/bench_model --family transformer --T 2048 --config evals/out/full/configs/eff_transformer.json --steps 5 --csv evals/out/full/efficiency/train_transformer_T2048.csv
