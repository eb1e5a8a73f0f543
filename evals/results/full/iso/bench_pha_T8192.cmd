build/bench_model --family pha --T 8192 --config evals/out/full/configs/pha.json --steps 5 --csv evals/out/full/iso/bench_pha_T8192.csv
