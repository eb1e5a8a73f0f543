build/bench_model --family pha --T 16384 --config evals/out/full/configs/pha.json --steps 5 --csv evals/out/full/iso/bench_pha_T16384.csv
