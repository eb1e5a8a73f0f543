build/bench_model --family swax --T 2048 --config evals/out/full/configs/eff_swax.json --steps 5 --csv evals/out/full/efficiency/train_swax_T2048.csv
