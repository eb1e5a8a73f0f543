// ref embedding: known gathers and scatter-adds, finite-difference gradients
// with repeated tokens, and rejection of out-of-range token ids.
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "phax/ref.h"
#include "testutil.h"

Test(embedding, fwd_known) {
    // E = [[1, 2], [3, 4], [5, 6]] (V = 3, d = 2); tok = [2, 0, 2]
    // x = [E[2], E[0], E[2]] = [[5, 6], [1, 2], [5, 6]] — a copy, so exact.
    double *E = tu_buf(6), *x = tu_buf(6);
    double Ev[] = {1, 2, 3, 4, 5, 6}, want[] = {5, 6, 1, 2, 5, 6};
    memcpy(E, Ev, sizeof Ev);
    int32_t tok[] = {2, 0, 2};
    cr_assert(ref_embedding_fwd(x, E, tok, 3, 3, 2) == PHAX_OK, "%s", phax_error());
    cr_assert(tu_max_abs_diff(x, want, 6) == 0.0, "x = [%g %g %g %g %g %g]", x[0], x[1], x[2],
              x[3], x[4], x[5]);
    cr_assert(tu_intact(x) && tu_intact(E));
    tu_free(E), tu_free(x);
}

Test(embedding, bwd_known) {
    // dx = [[1, 2], [3, 4], [5, 6]], tok = [2, 0, 2], dE starts at 0.5 everywhere:
    // dE[0] = 0.5 + [3, 4];  dE[1] = 0.5 (unused);  dE[2] = 0.5 + [1+5, 2+6].
    // Small integers and halves: exact.
    double *dE = tu_buf(6), *dx = tu_buf(6);
    double dxv[] = {1, 2, 3, 4, 5, 6}, want[] = {3.5, 4.5, 0.5, 0.5, 6.5, 8.5};
    memcpy(dx, dxv, sizeof dxv);
    tu_fill(dE, 6, 0.5);
    int32_t tok[] = {2, 0, 2};
    ref_embedding_bwd(dE, dx, tok, 3, 2);
    cr_assert(tu_max_abs_diff(dE, want, 6) == 0.0, "dE = [%g %g %g %g %g %g]", dE[0], dE[1],
              dE[2], dE[3], dE[4], dE[5]);
    ref_embedding_bwd(NULL, dx, tok, 3, 2);  // a NULL gradient is skipped, not dereferenced
    cr_assert(tu_intact(dE) && tu_intact(dx));
    tu_free(dE), tu_free(dx);
}

typedef struct {
    size_t n;
    int V, d;
    const int32_t *tok;
    double *E, *x, *dy, *dE;
} emb_ctx;

static double emb_loss(void *p) {
    emb_ctx *c = p;
    tu_poison(c->x, c->n * c->d);
    if (ref_embedding_fwd(c->x, c->E, c->tok, c->n, c->V, c->d) != PHAX_OK) return NAN;
    return tu_dot(c->x, c->dy, c->n * c->d);
}

// Σ |dy ⊙ x|, the rounding scale of the loss.
static double emb_loss_mag(void *p) {
    emb_ctx *c = p;
    emb_loss(p);
    double s = 0;
    for (size_t i = 0; i < c->n * c->d; i++) s += fabs(c->dy[i] * c->x[i]);
    return s;
}

static void emb_bwd(void *p) {
    emb_ctx *c = p;
    ref_embedding_bwd(c->dE, c->dy, c->tok, c->n, c->d);
}

static void emb_grad_case(const char *label, size_t n, int V, int d) {
    phax_rng r = tu_rng(label);
    int32_t *tok = malloc(n * sizeof *tok);
    for (size_t t = 0; t < n; t++) tok[t] = (int32_t)phax_rng_below(&r, (uint64_t)V);
    emb_ctx c = {.n = n, .V = V, .d = d, .tok = tok};
    c.E = tu_buf((size_t)V * d), c.dE = tu_buf((size_t)V * d);
    c.x = tu_buf(n * d), c.dy = tu_buf(n * d);
    tu_fill_normal(c.E, (size_t)V * d, &r, 1.0);
    tu_fill_normal(c.dy, n * d, &r, 1.0);
    tu_tensor ts[] = {{"E", c.E, c.dE, (size_t)V * d}};
    tu_op op = {emb_loss, emb_bwd, emb_loss_mag, &c};
    cr_assert(tu_gradcheck(label, op, ts, 1, &r, NULL));
    cr_assert(tu_intact(c.x) && tu_intact(c.dy));
    tu_free(c.E), tu_free(c.dE), tu_free(c.x), tu_free(c.dy);
    free(tok);
}

// n = 11 > V = 7, so some token repeats (pigeonhole) and the scatter-add must
// accumulate; d = 5 is not a power of two. V·d = 35 < 48: every element is checked.
Test(embedding, grad_repeated) { emb_grad_case("embedding/grad_repeated", 11, 7, 5); }
// A single token (n = 1): every other row of E must get exactly zero gradient.
Test(embedding, grad_single) { emb_grad_case("embedding/grad_single", 1, 9, 3); }

// A bad token id anywhere makes the call fail before it writes anything: x keeps
// the caller's contents bit for bit (here a sentinel), so there is no partially
// gathered output to mistake for a result. The message names the first bad id and
// its index.
static void bad_token_case(int32_t bad, size_t at, const char *want_id, const char *want_at) {
    enum { V = 7, d = 3, n = 5 };
    double *E = tu_buf(V * d), *x = tu_buf(n * d);
    for (int i = 0; i < V * d; i++) E[i] = i;
    tu_fill(x, n * d, 42.0);
    int32_t tok[n] = {1, 6, 0, 3, 2};
    tok[at] = bad;
    phax_clear_error();
    int rc = ref_embedding_fwd(x, E, tok, n, V, d);
    cr_assert(rc == PHAX_ERR, "token %d at %zu accepted", (int)bad, at);
    cr_assert(strstr(phax_error(), want_id) != NULL, "message lacks '%s': %s", want_id,
              phax_error());
    cr_assert(strstr(phax_error(), want_at) != NULL, "message lacks '%s': %s", want_at,
              phax_error());
    for (int i = 0; i < n * d; i++) cr_assert(x[i] == 42.0, "x[%d] = %g was written", i, x[i]);
    cr_assert(tu_intact(x) && tu_intact(E));
    tu_free(E), tu_free(x);
}

Test(embedding, bad_token_negative) { bad_token_case(-1, 2, "token id -1", "index 2"); }
// V itself is the first id past the table.
Test(embedding, bad_token_eq_V) { bad_token_case(7, 4, "token id 7", "index 4"); }
Test(embedding, bad_token_int_min) {
    bad_token_case(INT32_MIN, 0, "token id -2147483648", "index 0");
}

// Two bad ids: the first one (by index) is reported.
Test(embedding, bad_token_first_reported) {
    double *E = tu_buf(6), *x = tu_buf(8);
    tu_fill(E, 6, 1.0);
    int32_t tok[] = {0, 5, -1, 1};
    cr_assert(ref_embedding_fwd(x, E, tok, 4, 3, 2) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "token id 5 at index 1") != NULL, "%s", phax_error());
    cr_assert(tu_intact(x) && tu_intact(E));
    tu_free(E), tu_free(x);
}
