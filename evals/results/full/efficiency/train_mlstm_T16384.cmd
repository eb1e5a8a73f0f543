build/bench_model --family mlstm --T 16384 --config evals/out/full/configs/eff_mlstm.json --steps 5 --csv evals/out/full/efficiency/train_mlstm_T16384.csv
