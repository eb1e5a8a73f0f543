build/bench_model --family transformer --T 8192 --config evals/out/full/configs/transformer_d192.json --steps 5 --csv evals/out/full/iso/bench_d192_T8192.csv
