build/phax eval evals/out/full/runs/lm-ptb-pha-s1 --data data/ptb --split test --cache-dir evals/out/full/cache --json evals/out/full/ptb/lm-ptb-pha-s1.test.json
