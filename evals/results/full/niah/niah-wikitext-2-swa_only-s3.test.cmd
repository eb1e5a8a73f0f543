build/phax eval evals/out/full/runs/niah-wikitext-2-swa_only-s3 --data data/wikitext-2 --split test --cache-dir evals/out/full/cache --json evals/out/full/niah/niah-wikitext-2-swa_only-s3.test.json
