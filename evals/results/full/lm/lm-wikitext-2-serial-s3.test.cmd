build/phax eval evals/out/full/runs/lm-wikitext-2-serial-s3 --data data/wikitext-2 --split test --cache-dir evals/out/full/cache --json evals/out/full/lm/lm-wikitext-2-serial-s3.test.json
