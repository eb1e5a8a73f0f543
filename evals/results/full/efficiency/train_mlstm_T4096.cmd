build/bench_model --family mlstm --T 4096 --config evals/out/full/configs/eff_mlstm.json --steps 5 --csv evals/out/full/efficiency/train_mlstm_T4096.csv
