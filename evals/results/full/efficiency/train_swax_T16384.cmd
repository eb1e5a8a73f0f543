build/bench_model --family swax --T 16384 --config evals/out/full/configs/eff_swax.json --steps 5 --csv evals/out/full/efficiency/train_swax_T16384.csv
