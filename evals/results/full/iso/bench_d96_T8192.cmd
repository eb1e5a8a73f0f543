build/bench_model --family transformer --T 8192 --config evals/out/full/configs/transformer_d96.json --steps 5 --csv evals/out/full/iso/bench_d96_T8192.csv
