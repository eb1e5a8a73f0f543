build/bench_model --family pha --T 16384 --config evals/out/full/configs/eff_pha.json --steps 5 --csv evals/out/full/efficiency/train_pha_T16384.csv
