build/bench_model --family swax --T 8192 --config evals/out/full/configs/eff_swax.json --steps 5 --csv evals/out/full/efficiency/train_swax_T8192.csv
