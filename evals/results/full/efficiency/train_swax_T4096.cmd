build/bench_model --family swax --T 4096 --config evals/out/full/configs/eff_swax.json --steps 5 --csv evals/out/full/efficiency/train_swax_T4096.csv
