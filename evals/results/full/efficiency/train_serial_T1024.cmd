build/bench_model --family serial --T 1024 --config evals/out/full/configs/eff_serial.json --steps 5 --csv evals/out/full/efficiency/train_serial_T1024.csv
