build/bench_model --family pha --T 2048 --config evals/out/full/configs/eff_pha.json --steps 5 --csv evals/out/full/efficiency/train_pha_T2048.csv
