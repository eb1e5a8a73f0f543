build/bench_model --family swa --T 16384 --config evals/out/full/configs/eff_swa.json --steps 5 --csv evals/out/full/efficiency/train_swa_T16384.csv
