build/bench_model --family mlstm --T 2048 --config evals/out/full/configs/eff_mlstm.json --steps 5 --csv evals/out/full/efficiency/train_mlstm_T2048.csv
