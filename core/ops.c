// The op contract's attribute structs: defaults and checks (phax/ops.h). Shared by
// every tier: what an op accepts is part of its contract, not of an implementation.
#include "phax/ops.h"

phax_attn_cfg phax_attn_cfg_default(int Hq, int Hkv, int dh) {
    phax_attn_cfg c = {.Hq = Hq, .Hkv = Hkv, .dh = dh, .dv = dh, .window = 0,
                       .score = PHAX_SCORE_DOT, .rope = 1, .rope_base = PHAX_ROPE_BASE, .pos0 = 0};
    return c;
}

int phax_attn_cfg_check(const phax_attn_cfg *c) {
    if (c->Hq <= 0 || c->Hkv <= 0) return phax_fail("attention: heads Hq=%d Hkv=%d must be positive", c->Hq, c->Hkv);
    if (c->Hq % c->Hkv) return phax_fail("attention: Hq=%d is not divisible by Hkv=%d", c->Hq, c->Hkv);
    if (c->dh <= 0 || c->dv <= 0) return phax_fail("attention: head dims dh=%d dv=%d must be positive", c->dh, c->dv);
    if (c->rope && c->dh % 2) return phax_fail("attention: RoPE needs an even head dim, got dh=%d", c->dh);
    if (c->window < 0) return phax_fail("attention: window %d must be >= 0 (0 = full)", c->window);
    if (c->score != PHAX_SCORE_DOT && c->score != PHAX_SCORE_COSINE) return phax_fail("attention: unknown score mode %d", (int)c->score);
    if (c->rope && !(c->rope_base > 0)) return phax_fail("attention: rope base %g must be > 0", c->rope_base);
    return PHAX_OK;
}

phax_adamw_cfg phax_adamw_cfg_default(void) {
    phax_adamw_cfg c = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                        .weight_decay = 0.1, .clip = 1.0};
    return c;
}

int phax_adamw_cfg_check(const phax_adamw_cfg *c, long step) {
    if (step < 1) return phax_fail("adamw: step %ld must be >= 1", step);
    if (!(c->lr >= 0) || !(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1) ||
        !(c->eps > 0) || !(c->weight_decay >= 0) || !(c->clip >= 0))
        return phax_fail("adamw: bad settings lr=%g betas=(%g, %g) eps=%g wd=%g clip=%g", c->lr,
                         c->beta1, c->beta2, c->eps, c->weight_decay, c->clip);
    return PHAX_OK;
}
