build/bench_model --family mlstm --T 1024 --config evals/out/full/configs/eff_mlstm.json --steps 5 --csv evals/out/full/efficiency/train_mlstm_T1024.csv
