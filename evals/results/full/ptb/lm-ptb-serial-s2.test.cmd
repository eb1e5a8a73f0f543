build/phax eval evals/out/full/runs/lm-ptb-serial-s2 --data data/ptb --split test --cache-dir evals/out/full/cache --json evals/out/full/ptb/lm-ptb-serial-s2.test.json
