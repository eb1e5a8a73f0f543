// The training schedules beside the model plan (include/phax/model_plan.h): the learning rate
// by step, the seed of each random purpose, SWAX's window by step (docs/spec.md §3.4). Pure
// functions of their arguments, so a resumed run repeats them.
#ifndef PHAX_SCHEDULE_H
#define PHAX_SCHEDULE_H

#include <stdint.h>

#include "phax/model.h"

// Linear warmup then cosine decay, step s = 0 .. total−1:
//   s < warmup:  lr · (s + 1) / warmup
//   otherwise:   min_lr + ½ (lr − min_lr)(1 + cos(π q)),  q = (s − warmup) / max(1, total − warmup)
// A step ≥ total gets min_lr.
typedef struct {
    double lr, min_lr;
    long warmup, total;
} phax_lr_schedule;
double phax_lr_at(const phax_lr_schedule *s, long step);

// A 64-bit seed for one named purpose ("train.batches", "swax.window"),
// derived from the run's seed: the first draw of phax_rng_stream(seed,
// phax_hash_str(purpose)). Each purpose gets an independent stream.
uint64_t phax_seed_derive(uint64_t seed, const char *purpose);

// The SWA window of optimizer step `step` of `total` (docs/spec.md §3.4): w_long
// when step ≥ ⌈(1 − anneal)·total⌉ (the product gets 1e-9 slack so that
// 0.9 · 20 counts as 18), else w_short when u < p_short, u the first uniform of
// phax_rng_stream(window_seed, step), else w_long. cfg must be resolved. The
// same (window_seed, step, total) always give the same window.
int phax_swax_window_at(const phax_model_cfg *cfg, uint64_t window_seed, long step, long total);
// First step of the anneal tail.
long phax_swax_anneal_start(const phax_model_cfg *cfg, long total);

#endif
