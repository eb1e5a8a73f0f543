build/bench_model --family serial --T 4096 --config evals/out/full/configs/eff_serial.json --steps 5 --csv evals/out/full/efficiency/train_serial_T4096.csv
