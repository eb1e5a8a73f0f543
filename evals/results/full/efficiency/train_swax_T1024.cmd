build/bench_model --family swax --T 1024 --config evals/out/full/configs/eff_swax.json --steps 5 --csv evals/out/full/efficiency/train_swax_T1024.csv
