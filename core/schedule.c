// The training schedules: the learning rate by step and SWAX's window by step, pure functions
// of their arguments so that a resumed run repeats them (include/phax/schedule.h).
#include "phax/schedule.h"

#include <math.h>

#include "phax/core.h"

static const double PI = 3.14159265358979323846;

double phax_lr_at(const phax_lr_schedule *s, long step) {
    if (step < 0) step = 0;
    if (step >= s->total) return s->min_lr;
    if (step < s->warmup) return s->lr * (double)(step + 1) / (double)s->warmup;
    long span = s->total - s->warmup;
    double q = (double)(step - s->warmup) / (double)(span > 1 ? span : 1);
    return s->min_lr + 0.5 * (s->lr - s->min_lr) * (1.0 + cos(PI * q));
}

uint64_t phax_seed_derive(uint64_t seed, const char *purpose) {
    phax_rng r = phax_rng_stream(seed, phax_hash_str(purpose));
    return phax_rng_u64(&r);
}

long phax_swax_anneal_start(const phax_model_cfg *cfg, long total) {
    return (long)ceil((1.0 - cfg->anneal) * (double)total - 1e-9);
}

int phax_swax_window_at(const phax_model_cfg *cfg, uint64_t window_seed, long step, long total) {
    if (step >= phax_swax_anneal_start(cfg, total)) return cfg->w_long;
    phax_rng r = phax_rng_stream(window_seed, (uint64_t)step);
    return phax_rng_uniform(&r) < cfg->p_short ? cfg->w_short : cfg->w_long;
}
