// One copy of the device backend's entries (tests/harness_cuda.c includes this twice): FC(op)
// is the library's entry (fcuda_emu_op: the CPU emulation; fcuda_op: a real device), N(x) this
// copy's static names. Each entry takes HOST pointers (harness.h) and copies: every buffer
// goes up whole — outputs too, so the tests' NaN poison and an accumulating gradient's prior
// reach the kernel — with guard floats after it, and comes back (outputs) or is only checked
// (inputs); a guard float overwritten on the device fails the test. Workspaces are the
// entries' own device buffers. A failing call of a void entry fails the test with the error;
// an int entry returns the call's result, its phax_error() intact (the copies back succeed or
// fail the test, and success leaves the error alone).

// A device copy of h (n floats; h NULL: NaN) followed by CUDA_GUARD guard floats.
static float *N(up)(const float *h, size_t n) {
    void *p = NULL;
    cr_assert_eq(FC(malloc)(&p, (n + CUDA_GUARD) * sizeof(float)), PHAX_OK, "%s", phax_error());
    float *t = malloc((n + CUDA_GUARD) * sizeof *t);
    cr_assert(t);
    for (size_t i = 0; i < n; i++) t[i] = h ? h[i] : NAN;
    for (size_t i = n; i < n + CUDA_GUARD; i++) memcpy(&t[i], &(uint32_t){CUDA_GUARD_BITS}, 4);
    cr_assert_eq(FC(upload)(p, t, (n + CUDA_GUARD) * sizeof(float), NULL), PHAX_OK, "%s", phax_error());
    free(t);
    return p;
}

static int32_t *N(up_i32)(const int32_t *h, size_t n) {
    void *p = NULL;
    cr_assert_eq(FC(malloc)(&p, (n + CUDA_GUARD) * sizeof(int32_t)), PHAX_OK, "%s", phax_error());
    int32_t *t = malloc((n + CUDA_GUARD) * sizeof *t);
    cr_assert(t);
    memcpy(t, h, n * sizeof *t);
    for (size_t i = n; i < n + CUDA_GUARD; i++) t[i] = (int32_t)CUDA_GUARD_BITS;
    cr_assert_eq(FC(upload)(p, t, (n + CUDA_GUARD) * sizeof(int32_t), NULL), PHAX_OK, "%s", phax_error());
    free(t);
    return p;
}

// Checks d's guard, copies its n floats into h (h NULL: an input, not copied) and frees d.
static void N(down)(float *h, void *d, size_t n, const char *what) {
    if (!d) return;
    uint32_t *t = malloc((n + CUDA_GUARD) * 4);
    cr_assert(t);
    cr_assert_eq(FC(download)(t, d, (n + CUDA_GUARD) * 4, NULL), PHAX_OK, "%s", phax_error());
    for (size_t i = n; i < n + CUDA_GUARD; i++)
        cr_expect(t[i] == CUDA_GUARD_BITS, "%s: guard float %zu after the device buffer overwritten", what, i - n);
    if (h) memcpy(h, t, n * 4);
    free(t);
    cr_expect_eq(FC(free)(d), PHAX_OK, "%s", phax_error());
}

static void *N(ws)(size_t bytes) {
    void *p = NULL;
    cr_assert_eq(FC(malloc)(&p, bytes ? bytes : 1), PHAX_OK, "%s", phax_error());
    return p;
}
static void N(ws_free)(void *p) { cr_expect_eq(FC(free)(p), PHAX_OK, "%s", phax_error()); }

#define N_OK(call, op) cr_assert_eq((call), PHAX_OK, "%s: %s", op, phax_error())

// --- gemm ----------------------------------------------------------------------------------------
static void N(sgemm)(bool ta, bool tb, int M, int N_, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc) {
    size_t na = h_flen(A), nb = h_flen(B), nc = h_flen(C);  // the whole guarded payloads
    float *dA = N(up)(A, na), *dB = N(up)(B, nb), *dC = N(up)(C, nc);
    N_OK(FC(sgemm)(ta, tb, M, N_, K, alpha, dA, lda, dB, ldb, beta, dC, ldc, NULL), "sgemm");
    N(down)(NULL, dA, na, "A"), N(down)(NULL, dB, nb, "B"), N(down)(C, dC, nc, "C");
}

// --- embedding, linear ---------------------------------------------------------------------------
static int N(embedding_fwd)(float *x, const float *E, const int32_t *tok, size_t n, int V, int d) {
    float *dX = N(up)(x, n * d), *dE = N(up)(E, (size_t)V * d);
    int32_t *dT = N(up_i32)(tok, n);
    int rc = FC(embedding_fwd)(dX, dE, dT, n, V, d, NULL);
    N(down)(x, dX, n * d, "x"), N(down)(NULL, dE, (size_t)V * d, "E"), N(down)(NULL, dT, n, "tok");
    return rc;
}

static void N(embedding_bwd)(float *dE, const float *dx, const int32_t *tok, size_t n, int d) {
    size_t ne = h_flen(dE);  // V·d: the table's whole payload
    float *dDE = N(up)(dE, ne), *dDX = N(up)(dx, n * d);
    int32_t *dT = N(up_i32)(tok, n);
    N_OK(FC(embedding_bwd)(dDE, dDX, dT, n, d, NULL), "embedding_bwd");
    N(down)(dE, dDE, ne, "dE"), N(down)(NULL, dDX, n * d, "dx"), N(down)(NULL, dT, n, "tok");
}

static void N(linear_fwd)(float *y, const float *x, const float *W, const float *b, size_t n, int in, int out) {
    float *dY = N(up)(y, n * out), *dX = N(up)(x, n * in), *dW = N(up)(W, (size_t)out * in),
          *dB = b ? N(up)(b, out) : NULL;
    N_OK(FC(linear_fwd)(dY, dX, dW, dB, n, in, out, NULL), "linear_fwd");
    N(down)(y, dY, n * out, "y"), N(down)(NULL, dX, n * in, "x"), N(down)(NULL, dW, (size_t)out * in, "W");
    N(down)(NULL, dB, out, "b");
}

static void N(linear_bwd)(float *dx, float *dW, float *db, const float *dy, const float *x, const float *W, size_t n,
                          int in, int out) {
    float *dDX = dx ? N(up)(dx, n * in) : NULL, *dDW = dW ? N(up)(dW, (size_t)out * in) : NULL,
          *dDB = db ? N(up)(db, out) : NULL;
    float *dDY = N(up)(dy, n * out), *dX = N(up)(x, n * in), *dW_ = N(up)(W, (size_t)out * in);
    N_OK(FC(linear_bwd)(dDX, dDW, dDB, dDY, dX, dW_, n, in, out, NULL), "linear_bwd");
    N(down)(dx, dDX, n * in, "dx"), N(down)(dW, dDW, (size_t)out * in, "dW"), N(down)(db, dDB, out, "db");
    N(down)(NULL, dDY, n * out, "dy"), N(down)(NULL, dX, n * in, "x"), N(down)(NULL, dW_, (size_t)out * in, "W");
}

// --- rmsnorm, activations ------------------------------------------------------------------------
static void N(rmsnorm_fwd)(float *y, const float *x, const float *g, size_t n, int d, double eps) {
    float *dY = N(up)(y, n * d), *dX = N(up)(x, n * d), *dG = N(up)(g, d);
    N_OK(FC(rmsnorm_fwd)(dY, dX, dG, n, d, eps, NULL), "rmsnorm_fwd");
    N(down)(y, dY, n * d, "y"), N(down)(NULL, dX, n * d, "x"), N(down)(NULL, dG, d, "g");
}

static size_t N(rmsnorm_bwd_ws)(size_t n, int d) { return FC(rmsnorm_bwd_ws)(n, d); }

static void N(rmsnorm_bwd)(float *dx, float *dg, const float *dy, const float *x, const float *g, size_t n, int d,
                           double eps, void *ws_host) {
    (void)ws_host;  // the device's own workspace below
    float *dDX = dx ? N(up)(dx, n * d) : NULL, *dDG = dg ? N(up)(dg, d) : NULL;
    float *dDY = N(up)(dy, n * d), *dX = N(up)(x, n * d), *dG = N(up)(g, d);
    void *ws = N(ws)(FC(rmsnorm_bwd_ws)(n, d));
    N_OK(FC(rmsnorm_bwd)(dDX, dDG, dDY, dX, dG, n, d, eps, ws, NULL), "rmsnorm_bwd");
    N(down)(dx, dDX, n * d, "dx"), N(down)(dg, dDG, d, "dg");
    N(down)(NULL, dDY, n * d, "dy"), N(down)(NULL, dX, n * d, "x"), N(down)(NULL, dG, d, "g");
    N(ws_free)(ws);
}

static void N(layernorm_fwd)(float *y, const float *x, const float *g, const float *b, size_t n, int d, double eps) {
    float *dY = N(up)(y, n * d), *dX = N(up)(x, n * d), *dG = N(up)(g, d), *dB = b ? N(up)(b, d) : NULL;
    N_OK(FC(layernorm_fwd)(dY, dX, dG, dB, n, d, eps, NULL), "layernorm_fwd");
    N(down)(y, dY, n * d, "y"), N(down)(NULL, dX, n * d, "x"), N(down)(NULL, dG, d, "g"), N(down)(NULL, dB, d, "b");
}

static size_t N(layernorm_bwd_ws)(size_t n, int d) { return FC(layernorm_bwd_ws)(n, d); }

static void N(layernorm_bwd)(float *dx, float *dg, float *db, const float *dy, const float *x, const float *g,
                             size_t n, int d, double eps, void *ws_host) {
    (void)ws_host;
    float *dDX = dx ? N(up)(dx, n * d) : NULL, *dDG = dg ? N(up)(dg, d) : NULL, *dDB = db ? N(up)(db, d) : NULL;
    float *dDY = N(up)(dy, n * d), *dX = N(up)(x, n * d), *dG = N(up)(g, d);
    void *ws = N(ws)(FC(layernorm_bwd_ws)(n, d));
    N_OK(FC(layernorm_bwd)(dDX, dDG, dDB, dDY, dX, dG, n, d, eps, ws, NULL), "layernorm_bwd");
    N(down)(dx, dDX, n * d, "dx"), N(down)(dg, dDG, d, "dg"), N(down)(db, dDB, d, "db");
    N(down)(NULL, dDY, n * d, "dy"), N(down)(NULL, dX, n * d, "x"), N(down)(NULL, dG, d, "g");
    N(ws_free)(ws);
}

static void N(headnorm_fwd)(float *y, const float *x, const float *g, size_t n, int H, int dh, double eps) {
    size_t w = (size_t)H * dh;
    float *dY = N(up)(y, n * w), *dX = N(up)(x, n * w), *dG = N(up)(g, w);
    N_OK(FC(headnorm_fwd)(dY, dX, dG, n, H, dh, eps, NULL), "headnorm_fwd");
    N(down)(y, dY, n * w, "y"), N(down)(NULL, dX, n * w, "x"), N(down)(NULL, dG, w, "g");
}

static size_t N(headnorm_bwd_ws)(size_t n, int H, int dh) { return FC(headnorm_bwd_ws)(n, H, dh); }

static void N(headnorm_bwd)(float *dx, float *dg, const float *dy, const float *x, const float *g, size_t n, int H,
                            int dh, double eps, void *ws_host) {
    (void)ws_host;
    size_t w = (size_t)H * dh;
    float *dDX = dx ? N(up)(dx, n * w) : NULL, *dDG = dg ? N(up)(dg, w) : NULL;
    float *dDY = N(up)(dy, n * w), *dX = N(up)(x, n * w), *dG = N(up)(g, w);
    void *ws = N(ws)(FC(headnorm_bwd_ws)(n, H, dh));
    N_OK(FC(headnorm_bwd)(dDX, dDG, dDY, dX, dG, n, H, dh, eps, ws, NULL), "headnorm_bwd");
    N(down)(dx, dDX, n * w, "dx"), N(down)(dg, dDG, w, "dg");
    N(down)(NULL, dDY, n * w, "dy"), N(down)(NULL, dX, n * w, "x"), N(down)(NULL, dG, w, "g");
    N(ws_free)(ws);
}

#define N_ACT(name)                                                                               \
    static void N(name##_fwd)(float *y, const float *x, size_t n) {                               \
        float *dY = N(up)(y, n), *dX = N(up)(x, n);                                               \
        N_OK(FC(name##_fwd)(dY, dX, n, NULL), #name "_fwd");                                      \
        N(down)(y, dY, n, "y"), N(down)(NULL, dX, n, "x");                                        \
    }                                                                                             \
    static void N(name##_bwd)(float *dx, const float *dy, const float *x, size_t n) {             \
        float *dDX = N(up)(dx, n), *dDY = N(up)(dy, n), *dX = N(up)(x, n);                        \
        N_OK(FC(name##_bwd)(dDX, dDY, dX, n, NULL), #name "_bwd");                                \
        N(down)(dx, dDX, n, "dx"), N(down)(NULL, dDY, n, "dy"), N(down)(NULL, dX, n, "x");        \
    }
N_ACT(gelu)
N_ACT(silu)
#undef N_ACT

// --- rope, mix -----------------------------------------------------------------------------------
static size_t N(rope_table_len)(int T, int dh) { return FC(rope_table_len)(T, dh); }

static int N(rope_table)(float *cs, int T, int dh, double base, long pos0) {
    size_t n = FC(rope_table_len)(T, dh);
    float *dCS = N(up)(cs, n);
    int rc = FC(rope_table)(dCS, T, dh, base, pos0, NULL);
    N(down)(cs, dCS, n, "cs");
    return rc;
}

static int N(rope_run)(int bwd, float *y, const float *x, int B, int T, int H, int dh, double base, long pos0,
                       const float *cs) {
    size_t n = B > 0 && T > 0 && H > 0 && dh > 0 ? (size_t)B * T * H * dh : 0;
    size_t ncs = cs ? FC(rope_table_len)(T, dh) : 0;
    float *dY = N(up)(y, n), *dX = N(up)(x, n), *dCS = cs ? N(up)(cs, ncs) : NULL;
    int rc = bwd ? FC(rope_bwd)(dY, dX, B, T, H, dh, base, pos0, dCS, NULL)
                 : FC(rope_fwd)(dY, dX, B, T, H, dh, base, pos0, dCS, NULL);
    N(down)(y, dY, n, bwd ? "dx" : "y"), N(down)(NULL, dX, n, bwd ? "dy" : "x"), N(down)(NULL, dCS, ncs, "cs");
    return rc;
}
static int N(rope_fwd)(float *y, const float *x, int B, int T, int H, int dh, double base, long pos0,
                       const float *cs) {
    return N(rope_run)(0, y, x, B, T, H, dh, base, pos0, cs);
}
static int N(rope_bwd)(float *dx, const float *dy, int B, int T, int H, int dh, double base, long pos0,
                       const float *cs) {
    return N(rope_run)(1, dx, dy, B, T, H, dh, base, pos0, cs);
}

static void N(mix_fwd)(float *m, const float *b, const float *p, int nb, size_t n) {
    size_t nbn = (size_t)(nb > 0 ? nb : 0) * n;
    float *dM = N(up)(m, n), *dB = N(up)(b, nbn), *dP = N(up)(p, nb > 0 ? nb : 0);
    N_OK(FC(mix_fwd)(dM, dB, dP, nb, n, NULL), "mix_fwd");
    N(down)(m, dM, n, "m"), N(down)(NULL, dB, nbn, "b"), N(down)(NULL, dP, nb > 0 ? nb : 0, "p");
}

static void N(mix_bwd)(float *db, float *dp, const float *dm, const float *b, const float *p, int nb, size_t n) {
    size_t nbn = (size_t)(nb > 0 ? nb : 0) * n, np = nb > 0 ? nb : 0;
    float *dDB = db ? N(up)(db, nbn) : NULL, *dDP = dp ? N(up)(dp, np) : NULL;
    float *dDM = N(up)(dm, n), *dB = N(up)(b, nbn), *dP = N(up)(p, np);
    void *ws = N(ws)(FC(mix_bwd_ws)(nb, n));
    N_OK(FC(mix_bwd)(dDB, dDP, dDM, dB, dP, nb, n, ws, NULL), "mix_bwd");
    N(down)(db, dDB, nbn, "db"), N(down)(dp, dDP, np, "dp");
    N(down)(NULL, dDM, n, "dm"), N(down)(NULL, dB, nbn, "b"), N(down)(NULL, dP, np, "p");
    N(ws_free)(ws);
}

// --- swiglu --------------------------------------------------------------------------------------
// The weights and activations each go up whole; ws/keep are device buffers of the same sizes
// (keep comes back: the kept backward reads the host copy the test hands it).
typedef struct {
    float *x, *Wg, *Wu, *Wd;
    size_t nx, nh;  // n·d, hid·d
} N(ffn_in);
static N(ffn_in) N(ffn_up)(const float *x, const float *Wg, const float *Wu, const float *Wd, size_t n, int d,
                           int hid) {
    size_t nx = n * (size_t)(d > 0 ? d : 0), nh = (size_t)(hid > 0 ? hid : 0) * (size_t)(d > 0 ? d : 0);
    return (N(ffn_in)){N(up)(x, nx), N(up)(Wg, nh), N(up)(Wu, nh), N(up)(Wd, nh), nx, nh};
}
static void N(ffn_down)(N(ffn_in) *f) {
    N(down)(NULL, f->x, f->nx, "x"), N(down)(NULL, f->Wg, f->nh, "Wg"), N(down)(NULL, f->Wu, f->nh, "Wu");
    N(down)(NULL, f->Wd, f->nh, "Wd");
}
static size_t N(swiglu_fwd_ws)(size_t n, int d, int hid) { return FC(swiglu_fwd_ws)(n, d, hid); }
static size_t N(swiglu_bwd_ws)(size_t n, int d, int hid) { return FC(swiglu_bwd_ws)(n, d, hid); }
static size_t N(swiglu_keep_len)(size_t n, int hid) { return FC(swiglu_keep_len)(n, hid); }
static size_t N(swiglu_fwd_keep_ws)(size_t n, int d, int hid) { return FC(swiglu_fwd_keep_ws)(n, d, hid); }
static size_t N(swiglu_bwd_kept_ws)(size_t n, int d, int hid) { return FC(swiglu_bwd_kept_ws)(n, d, hid); }

static int N(swiglu_fwd_keep)(float *y, float *keep, const float *x, const float *Wg, const float *Wu,
                              const float *Wd, size_t n, int d, int hid, void *ws_host) {
    (void)ws_host;  // scratch: the device's own
    N(ffn_in) f = N(ffn_up)(x, Wg, Wu, Wd, n, d, hid);
    size_t nk = FC(swiglu_keep_len)(n, hid);
    float *dY = N(up)(y, f.nx), *dK = N(up)(keep, nk);
    void *ws = N(ws)(FC(swiglu_fwd_keep_ws)(n, d, hid));
    N_OK(FC(swiglu_fwd_keep)(dY, dK, f.x, f.Wg, f.Wu, f.Wd, n, d, hid, ws, NULL), "swiglu_fwd_keep");
    N(down)(y, dY, f.nx, "y"), N(down)(keep, dK, nk, "keep"), N(ffn_down)(&f), N(ws_free)(ws);
    return PHAX_OK;
}
static int N(swiglu_fwd)(float *y, const float *x, const float *Wg, const float *Wu, const float *Wd, size_t n, int d,
                         int hid, void *ws_host) {
    (void)ws_host;
    N(ffn_in) f = N(ffn_up)(x, Wg, Wu, Wd, n, d, hid);
    float *dY = N(up)(y, f.nx);
    void *ws = N(ws)(FC(swiglu_fwd_ws)(n, d, hid));
    N_OK(FC(swiglu_fwd)(dY, f.x, f.Wg, f.Wu, f.Wd, n, d, hid, ws, NULL), "swiglu_fwd");
    N(down)(y, dY, f.nx, "y"), N(ffn_down)(&f), N(ws_free)(ws);
    return PHAX_OK;
}
static int N(swiglu_bwd_any)(const float *keep, float *dx, float *dWg, float *dWu, float *dWd, const float *dy,
                             const float *x, const float *Wg, const float *Wu, const float *Wd, size_t n, int d,
                             int hid) {
    N(ffn_in) f = N(ffn_up)(x, Wg, Wu, Wd, n, d, hid);
    float *dDX = dx ? N(up)(dx, f.nx) : NULL, *dDG = dWg ? N(up)(dWg, f.nh) : NULL,
          *dDU = dWu ? N(up)(dWu, f.nh) : NULL, *dDD = dWd ? N(up)(dWd, f.nh) : NULL, *dDY = N(up)(dy, f.nx);
    size_t nk = FC(swiglu_keep_len)(n, hid);
    float *dK = keep ? N(up)(keep, nk) : NULL;
    void *ws = N(ws)(keep ? FC(swiglu_bwd_kept_ws)(n, d, hid) : FC(swiglu_bwd_ws)(n, d, hid));
    if (keep)
        N_OK(FC(swiglu_bwd_kept)(dDX, dDG, dDU, dDD, dDY, f.x, f.Wg, f.Wu, f.Wd, n, d, hid, dK, ws, NULL),
             "swiglu_bwd_kept");
    else
        N_OK(FC(swiglu_bwd)(dDX, dDG, dDU, dDD, dDY, f.x, f.Wg, f.Wu, f.Wd, n, d, hid, ws, NULL), "swiglu_bwd");
    N(down)(dx, dDX, f.nx, "dx"), N(down)(dWg, dDG, f.nh, "dWg"), N(down)(dWu, dDU, f.nh, "dWu");
    N(down)(dWd, dDD, f.nh, "dWd"), N(down)(NULL, dDY, f.nx, "dy"), N(down)(NULL, dK, nk, "keep");
    N(ffn_down)(&f), N(ws_free)(ws);
    return PHAX_OK;
}
static int N(swiglu_bwd)(float *dx, float *dWg, float *dWu, float *dWd, const float *dy, const float *x,
                         const float *Wg, const float *Wu, const float *Wd, size_t n, int d, int hid, void *ws_host) {
    (void)ws_host;
    return N(swiglu_bwd_any)(NULL, dx, dWg, dWu, dWd, dy, x, Wg, Wu, Wd, n, d, hid);
}
static int N(swiglu_bwd_kept)(float *dx, float *dWg, float *dWu, float *dWd, const float *dy, const float *x,
                              const float *Wg, const float *Wu, const float *Wd, size_t n, int d, int hid,
                              const float *keep, void *ws_host) {
    (void)ws_host;
    return N(swiglu_bwd_any)(keep, dx, dWg, dWu, dWd, dy, x, Wg, Wu, Wd, n, d, hid);
}

// The cross-entropy entries: targets and a loss word on the device; the workspace the entry's own.
static int N(ce_call)(int fwd, int bwd, float *loss, float *dl, float dloss, const float *L, const int32_t *t,
                      size_t n, int V) {
    size_t nl = n * (size_t)(V > 0 ? V : 0);
    float *dLoss = loss ? N(up)(loss, 1) : NULL, *dDL = dl ? N(up)(dl, nl) : NULL, *dL = N(up)(L, nl);
    int32_t *dT = N(up_i32)(t, n);
    void *ws = N(ws)(FC(cross_entropy_ws)());
    int rc = fwd && bwd ? FC(cross_entropy_fwd_bwd)(dLoss, dDL, dloss, dL, dT, n, V, ws, NULL)
             : fwd      ? FC(cross_entropy_fwd)(dLoss, dL, dT, n, V, ws, NULL)
                        : FC(cross_entropy_bwd)(dDL, dloss, dL, dT, n, V, ws, NULL);
    N(down)(loss, dLoss, 1, "loss"), N(down)(dl, dDL, nl, "dlogits"), N(down)(NULL, dL, nl, "logits");
    N(down)(NULL, dT, n, "targets"), N(ws_free)(ws);
    return rc;
}
static int N(cross_entropy_fwd)(float *loss, const float *L, const int32_t *t, size_t n, int V) {
    return N(ce_call)(1, 0, loss, NULL, 0.0f, L, t, n, V);
}
static int N(cross_entropy_bwd)(float *dl, float dloss, const float *L, const int32_t *t, size_t n, int V) {
    return N(ce_call)(0, 1, NULL, dl, dloss, L, t, n, V);
}
static int N(cross_entropy_fwd_bwd)(float *loss, float *dl, float dloss, const float *L, const int32_t *t, size_t n,
                                    int V) {
    return N(ce_call)(1, 1, loss, dl, dloss, L, t, n, V);
}
static size_t N(lce_tile_rows)(int V) { return FC(lce_tile_rows)(V); }
static size_t N(linear_cross_entropy_ws)(size_t n, int d, int V) { return FC(linear_cross_entropy_ws)(n, d, V); }
static int N(linear_cross_entropy)(float *loss, float *dx, float *dW, float dloss, const float *x, const float *W,
                                   const int32_t *t, size_t n, int d, int V, void *ws_host) {
    (void)ws_host;
    size_t nx = n * (size_t)(d > 0 ? d : 0), nw = (size_t)(V > 0 ? V : 0) * (size_t)(d > 0 ? d : 0);
    float *dLoss = loss ? N(up)(loss, 1) : NULL, *dDX = dx ? N(up)(dx, nx) : NULL, *dDW = dW ? N(up)(dW, nw) : NULL;
    float *dX = N(up)(x, nx), *dW_ = N(up)(W, nw);
    int32_t *dT = N(up_i32)(t, n);
    void *ws = N(ws)(FC(linear_cross_entropy_ws)(n, d, V));
    int rc = FC(linear_cross_entropy)(dLoss, dDX, dDW, dloss, dX, dW_, dT, n, d, V, ws, NULL);
    N(down)(loss, dLoss, 1, "loss"), N(down)(dx, dDX, nx, "dx"), N(down)(dW, dDW, nw, "dW");
    N(down)(NULL, dX, nx, "x"), N(down)(NULL, dW_, nw, "W"), N(down)(NULL, dT, n, "targets"), N(ws_free)(ws);
    return rc;
}

static int N(adamw_step)(h_adamw_param *ps, int np, const phax_adamw_cfg *c, long step, double *gnorm) {
    fcuda_adamw_param *dp = calloc(np > 0 ? np : 1, sizeof *dp);
    cr_assert(dp);
    for (int j = 0; j < np; j++)
        dp[j] = (fcuda_adamw_param){N(up)(ps[j].p, ps[j].n), N(up)(ps[j].g, ps[j].n), N(up)(ps[j].m, ps[j].n),
                                    N(up)(ps[j].v, ps[j].n), ps[j].n, ps[j].decay};
    void *ws = N(ws)(FC(adamw_ws)(np));
    int rc = FC(adamw_step)(dp, np, c, step, gnorm, ws, NULL);
    for (int j = 0; j < np; j++) {
        N(down)(ps[j].p, dp[j].p, ps[j].n, "p"), N(down)(NULL, (void *)dp[j].g, ps[j].n, "g");
        N(down)(ps[j].m, dp[j].m, ps[j].n, "m"), N(down)(ps[j].v, dp[j].v, ps[j].n, "v");
    }
    N(ws_free)(ws), free(dp);
    return rc;
}

// --- ssm: the DSS kernel ---------------------------------------------------------------------------
static size_t N(dss_fwd_ws)(int H, int N_, int T) { return FC(dss_kernel_fwd_ws)(H, N_, T); }
static size_t N(dss_bwd_ws)(int H, int N_, int T) { return FC(dss_kernel_bwd_ws)(H, N_, T); }
static void N(dss_fwd)(float *K, const float *Lre, const float *Lim, const float *Cre, const float *Cim, int H, int N_,
                       int T, void *ws_host) {
    (void)ws_host;
    size_t hn = (size_t)H * N_, ht = (size_t)H * T;
    float *dK = N(up)(K, ht), *dLr = N(up)(Lre, N_), *dLi = N(up)(Lim, N_), *dCr = N(up)(Cre, hn), *dCi = N(up)(Cim, hn);
    void *ws = N(ws)(FC(dss_kernel_fwd_ws)(H, N_, T));
    N_OK(FC(dss_kernel_fwd)(dK, dLr, dLi, dCr, dCi, H, N_, T, ws, NULL), "dss_kernel_fwd");
    N(down)(K, dK, ht, "K"), N(down)(NULL, dLr, N_, "Lre"), N(down)(NULL, dLi, N_, "Lim");
    N(down)(NULL, dCr, hn, "Cre"), N(down)(NULL, dCi, hn, "Cim"), N(ws_free)(ws);
}
static void N(dss_bwd)(float *dLre, float *dLim, float *dCre, float *dCim, const float *dK, const float *Lre,
                       const float *Lim, const float *Cre, const float *Cim, int H, int N_, int T, void *ws_host) {
    (void)ws_host;
    size_t hn = (size_t)H * N_, ht = (size_t)H * T;
    float *gLr = dLre ? N(up)(dLre, N_) : NULL, *gLi = dLim ? N(up)(dLim, N_) : NULL;
    float *gCr = dCre ? N(up)(dCre, hn) : NULL, *gCi = dCim ? N(up)(dCim, hn) : NULL;
    float *dDK = N(up)(dK, ht), *dLr = N(up)(Lre, N_), *dLi = N(up)(Lim, N_), *dCr = N(up)(Cre, hn),
          *dCi = N(up)(Cim, hn);
    void *ws = N(ws)(FC(dss_kernel_bwd_ws)(H, N_, T));
    N_OK(FC(dss_kernel_bwd)(gLr, gLi, gCr, gCi, dDK, dLr, dLi, dCr, dCi, H, N_, T, ws, NULL), "dss_kernel_bwd");
    N(down)(dLre, gLr, N_, "dLre"), N(down)(dLim, gLi, N_, "dLim"), N(down)(dCre, gCr, hn, "dCre");
    N(down)(dCim, gCi, hn, "dCim"), N(down)(NULL, dDK, ht, "dK"), N(down)(NULL, dLr, N_, "Lre");
    N(down)(NULL, dLi, N_, "Lim"), N(down)(NULL, dCr, hn, "Cre"), N(down)(NULL, dCi, hn, "Cim"), N(ws_free)(ws);
}

// --- ssm conv: the plan is the library's host object; ws mirrors the host pointer's alignment --
static void *N(ssm_plan_new)(int B, int T, int H, int method) { return FC(ssm_plan_new)(B, T, H, method); }
static void N(ssm_plan_free)(void *p) { FC(ssm_plan_free)((fcuda_ssm_plan *)p); }
static int N(ssm_plan_method)(const void *p) { return FC(ssm_plan_method)((const fcuda_ssm_plan *)p); }
static int N(ssm_plan_fft_len)(const void *p) { return FC(ssm_plan_fft_len)((const fcuda_ssm_plan *)p); }
static size_t N(ssm_conv_fwd_ws)(const void *p) { return FC(ssm_conv_fwd_ws)((const fcuda_ssm_plan *)p); }
static size_t N(ssm_conv_bwd_ws)(const void *p) { return FC(ssm_conv_bwd_ws)((const fcuda_ssm_plan *)p); }

// A device workspace of `bytes` at the same offset from a 64-byte boundary as the test's host
// pointer (a deliberately misaligned host workspace stays misaligned on the device).
static void *N(ws_like)(const void *host, size_t bytes, void **base) {
    size_t off = (uintptr_t)host % 64;
    *base = N(ws)(bytes + off);
    return (char *)*base + off;
}

static int N(ssm_conv_fwd)(float *y, const float *u, const float *K, const float *D, int B, int T, int H,
                           const void *plan, void *ws_host) {
    size_t bth = (size_t)(B > 0 ? B : 0) * (T > 0 ? T : 0) * (H > 0 ? H : 0), ht = (size_t)(H > 0 ? H : 0) * (T > 0 ? T : 0);
    float *dY = N(up)(y, bth), *dU = N(up)(u, bth), *dK = N(up)(K, ht), *dD = N(up)(D, H > 0 ? H : 0);
    void *base, *ws = N(ws_like)(ws_host, FC(ssm_conv_fwd_ws)((const fcuda_ssm_plan *)plan), &base);
    int rc = FC(ssm_conv_fwd)(dY, dU, dK, dD, B, T, H, (const fcuda_ssm_plan *)plan, ws, NULL);
    N(down)(y, dY, bth, "y"), N(down)(NULL, dU, bth, "u"), N(down)(NULL, dK, ht, "K"), N(down)(NULL, dD, H, "D");
    N(ws_free)(base);
    return rc;
}

static int N(ssm_conv_bwd)(float *du, float *dK, float *dD, const float *dy, const float *u, const float *K,
                           const float *D, int B, int T, int H, const void *plan, void *ws_host) {
    size_t bth = (size_t)(B > 0 ? B : 0) * (T > 0 ? T : 0) * (H > 0 ? H : 0), ht = (size_t)(H > 0 ? H : 0) * (T > 0 ? T : 0);
    float *gU = du ? N(up)(du, bth) : NULL, *gK = dK ? N(up)(dK, ht) : NULL, *gD = dD ? N(up)(dD, H) : NULL;
    float *dY = N(up)(dy, bth), *dU = N(up)(u, bth), *dKk = N(up)(K, ht), *dDd = N(up)(D, H);
    void *base, *ws = N(ws_like)(ws_host, FC(ssm_conv_bwd_ws)((const fcuda_ssm_plan *)plan), &base);
    int rc = FC(ssm_conv_bwd)(gU, gK, gD, dY, dU, dKk, dDd, B, T, H, (const fcuda_ssm_plan *)plan, ws, NULL);
    N(down)(du, gU, bth, "du"), N(down)(dK, gK, ht, "dK"), N(down)(dD, gD, H, "dD");
    N(down)(NULL, dY, bth, "dy"), N(down)(NULL, dU, bth, "u"), N(down)(NULL, dKk, ht, "K"), N(down)(NULL, dDd, H, "D");
    N(ws_free)(base);
    return rc;
}

// --- attention -------------------------------------------------------------------------------------
// Sizes from the config (the op's contract); optional buffers stay NULL on the device.
static size_t N(attention_fwd_ws)(int B, int T, const phax_attn_cfg *c, int nthreads) {
    (void)nthreads;
    return FC(attention_fwd_ws)(B, T, c);
}
static size_t N(attention_bwd_ws)(int B, int T, const phax_attn_cfg *c, int nthreads) {
    (void)nthreads;
    return FC(attention_bwd_ws)(B, T, c);
}

typedef struct {
    size_t nq, nk, nv, no, nl;
} N(at_sizes);
static N(at_sizes) N(at_sizes_of)(int B, int T, const phax_attn_cfg *c) {
    size_t bt = (size_t)(B > 0 ? B : 0) * (size_t)(T > 0 ? T : 0);
    return (N(at_sizes)){bt * c->Hq * c->dh, bt * c->Hkv * c->dh, bt * c->Hkv * c->dv, bt * c->Hq * c->dv, bt * c->Hq};
}
#define N_UP_OPT(h, n) ((h) ? N(up)((h), (n)) : NULL)

static int N(attention_fwd)(float *o, float *lse, float *st, const float *q, const float *k, const float *v,
                            const float *ls, int B, int T, const phax_attn_cfg *c, void *ws_host) {
    (void)ws_host;
    N(at_sizes) z = N(at_sizes_of)(B, T, c);
    float *dO = N(up)(o, z.no), *dL = N_UP_OPT(lse, z.nl), *dS = N_UP_OPT(st, 2 * z.nl);
    float *dQ = N(up)(q, z.nq), *dK = N(up)(k, z.nk), *dV = N(up)(v, z.nv), *dLS = N_UP_OPT(ls, (size_t)c->Hq);
    void *ws = N(ws)(FC(attention_fwd_ws)(B, T, c));
    int rc = FC(attention_fwd)(dO, dL, dS, dQ, dK, dV, dLS, B, T, c, ws, NULL);
    N(down)(o, dO, z.no, "o"), N(down)(lse, dL, z.nl, "lse"), N(down)(st, dS, 2 * z.nl, "stats");
    N(down)(NULL, dQ, z.nq, "q"), N(down)(NULL, dK, z.nk, "k"), N(down)(NULL, dV, z.nv, "v");
    N(down)(NULL, dLS, (size_t)c->Hq, "logscale"), N(ws_free)(ws);
    return rc;
}

static int N(attention_bwd)(float *dq, float *dk, float *dv, float *dls, const float *dout, const float *o,
                            const float *st, const float *q, const float *k, const float *v, const float *ls, int B,
                            int T, const phax_attn_cfg *c, void *ws_host) {
    (void)ws_host;
    N(at_sizes) z = N(at_sizes_of)(B, T, c);
    float *gQ = N_UP_OPT(dq, z.nq), *gK = N_UP_OPT(dk, z.nk), *gV = N_UP_OPT(dv, z.nv),
          *gL = N_UP_OPT(dls, (size_t)c->Hq);
    float *dDO = N(up)(dout, z.no), *dO = N_UP_OPT(o, z.no), *dS = N_UP_OPT(st, 2 * z.nl);
    float *dQ = N(up)(q, z.nq), *dK = N(up)(k, z.nk), *dV = N(up)(v, z.nv), *dLS = N_UP_OPT(ls, (size_t)c->Hq);
    void *ws = N(ws)(FC(attention_bwd_ws)(B, T, c));
    int rc = FC(attention_bwd)(gQ, gK, gV, gL, dDO, dO, dS, dQ, dK, dV, dLS, B, T, c, ws, NULL);
    N(down)(dq, gQ, z.nq, "dq"), N(down)(dk, gK, z.nk, "dk"), N(down)(dv, gV, z.nv, "dv");
    N(down)(dls, gL, (size_t)c->Hq, "dlogscale"), N(down)(NULL, dDO, z.no, "dout"), N(down)(NULL, dO, z.no, "o");
    N(down)(NULL, dS, 2 * z.nl, "stats"), N(down)(NULL, dQ, z.nq, "q"), N(down)(NULL, dK, z.nk, "k");
    N(down)(NULL, dV, z.nv, "v"), N(down)(NULL, dLS, (size_t)c->Hq, "logscale"), N(ws_free)(ws);
    return rc;
}
#undef N_UP_OPT

// --- mlstm -----------------------------------------------------------------------------------------
// Sizes from the arguments (0 for invalid ones: the call refuses them); NULL gradients and states
// stay NULL on the device.
typedef struct {
    size_t nk, nv, ng, ns;
} N(ml_sizes);
static N(ml_sizes) N(ml_sizes_of)(int B, int T, int H, int dqk, int dv) {
    size_t bh = B > 0 && H > 0 ? (size_t)B * H : 0, bth = T > 0 ? bh * T : 0;
    size_t k = dqk > 0 ? (size_t)dqk : 0, v = dv > 0 ? (size_t)dv : 0;
    return (N(ml_sizes)){bth * k, bth * v, bth, bh * FCPU_MLSTM_STATE_LEN(k, v)};
}
#define N_ML_UP(h, n) ((h) ? N(up)((h), (n)) : NULL)
static size_t N(mlstm_state_len)(int dqk, int dv) { return FCPU_MLSTM_STATE_LEN(dqk, dv); }
static size_t N(mlstm_fwd_ws)(int B, int T, int H, int dqk, int dv, int chunk) {
    return FC(mlstm_fwd_ws)(B, T, H, dqk, dv, chunk);
}
static size_t N(mlstm_bwd_ws)(int B, int T, int H, int dqk, int dv, int chunk) {
    return FC(mlstm_bwd_ws)(B, T, H, dqk, dv, chunk);
}

static int N(mlstm_fwd)(float *h, const float *q, const float *k, const float *v, const float *ig, const float *fg,
                        int B, int T, int H, int dqk, int dv, float eps, int chunk, const float *sin, float *sout,
                        void *ws_host) {
    (void)ws_host;
    N(ml_sizes) z = N(ml_sizes_of)(B, T, H, dqk, dv);
    float *dH = N(up)(h, z.nv), *dQ = N(up)(q, z.nk), *dK = N(up)(k, z.nk), *dV = N(up)(v, z.nv);
    float *dI = N(up)(ig, z.ng), *dF = N(up)(fg, z.ng), *dSI = N_ML_UP(sin, z.ns), *dSO = N_ML_UP(sout, z.ns);
    void *ws = N(ws)(FC(mlstm_fwd_ws)(B, T, H, dqk, dv, chunk));
    int rc = FC(mlstm_fwd)(dH, dQ, dK, dV, dI, dF, B, T, H, dqk, dv, eps, chunk, dSI, dSO, ws, NULL);
    N(down)(h, dH, z.nv, "h"), N(down)(sout, dSO, z.ns, "state_out"), N(down)(NULL, dSI, z.ns, "state_in");
    N(down)(NULL, dQ, z.nk, "q"), N(down)(NULL, dK, z.nk, "k"), N(down)(NULL, dV, z.nv, "v");
    N(down)(NULL, dI, z.ng, "igate"), N(down)(NULL, dF, z.ng, "fgate"), N(ws_free)(ws);
    return rc;
}

static int N(mlstm_bwd)(float *dq, float *dk, float *dv_, float *dig, float *dfg, const float *dh, const float *q,
                        const float *k, const float *v, const float *ig, const float *fg, int B, int T, int H, int dqk,
                        int dv, float eps, int chunk, void *ws_host) {
    (void)ws_host;
    N(ml_sizes) z = N(ml_sizes_of)(B, T, H, dqk, dv);
    float *gQ = N_ML_UP(dq, z.nk), *gK = N_ML_UP(dk, z.nk), *gV = N_ML_UP(dv_, z.nv), *gI = N_ML_UP(dig, z.ng),
          *gF = N_ML_UP(dfg, z.ng);
    float *dDH = N(up)(dh, z.nv), *dQ = N(up)(q, z.nk), *dK = N(up)(k, z.nk), *dV = N(up)(v, z.nv);
    float *dI = N(up)(ig, z.ng), *dF = N(up)(fg, z.ng);
    void *ws = N(ws)(FC(mlstm_bwd_ws)(B, T, H, dqk, dv, chunk));
    int rc = FC(mlstm_bwd)(gQ, gK, gV, gI, gF, dDH, dQ, dK, dV, dI, dF, B, T, H, dqk, dv, eps, chunk, ws, NULL);
    N(down)(dq, gQ, z.nk, "dq"), N(down)(dk, gK, z.nk, "dk"), N(down)(dv_, gV, z.nv, "dv");
    N(down)(dig, gI, z.ng, "digate"), N(down)(dfg, gF, z.ng, "dfgate"), N(down)(NULL, dDH, z.nv, "dh");
    N(down)(NULL, dQ, z.nk, "q"), N(down)(NULL, dK, z.nk, "k"), N(down)(NULL, dV, z.nv, "v");
    N(down)(NULL, dI, z.ng, "igate"), N(down)(NULL, dF, z.ng, "fgate"), N(ws_free)(ws);
    return rc;
}
#undef N_ML_UP

// --- gdn -------------------------------------------------------------------------------------------
// Sizes from the arguments (0 for invalid ones: the call refuses them); NULL states and gradients
// stay NULL on the device.
typedef struct {
    size_t nk, nv, ng, ns;
} N(gd_sizes);
static N(gd_sizes) N(gd_sizes_of)(int B, int T, int H, int dk, int dv) {
    size_t bh = B > 0 && H > 0 ? (size_t)B * H : 0, bth = T > 0 ? bh * T : 0;
    size_t k = dk > 0 ? (size_t)dk : 0, v = dv > 0 ? (size_t)dv : 0;
    return (N(gd_sizes)){bth * k, bth * v, bth, bh * k * v};
}
#define N_GD_UP(h, n) ((h) ? N(up)((h), (n)) : NULL)
static size_t N(gdn_fwd_ws)(int B, int T, int H, int dk, int dv, int chunk) { return FC(gdn_fwd_ws)(B, T, H, dk, dv, chunk); }
static size_t N(gdn_bwd_ws)(int B, int T, int H, int dk, int dv, int chunk) { return FC(gdn_bwd_ws)(B, T, H, dk, dv, chunk); }

static int N(gdn_fwd)(float *o, float *sT, const float *q, const float *k, const float *v, const float *g,
                      const float *beta, const float *s0, int B, int T, int H, int dk, int dv, const phax_gdn_cfg *c,
                      int chunk, void *ws_host) {
    (void)ws_host;
    N(gd_sizes) z = N(gd_sizes_of)(B, T, H, dk, dv);
    float *dO = N(up)(o, z.nv), *dST = N_GD_UP(sT, z.ns), *dQ = N(up)(q, z.nk), *dK = N(up)(k, z.nk);
    float *dV = N(up)(v, z.nv), *dG = N(up)(g, z.ng), *dB = N(up)(beta, z.ng), *dS0 = N_GD_UP(s0, z.ns);
    void *ws = N(ws)(FC(gdn_fwd_ws)(B, T, H, dk, dv, chunk));
    int rc = FC(gdn_fwd)(dO, dST, dQ, dK, dV, dG, dB, dS0, B, T, H, dk, dv, c, chunk, ws, NULL);
    N(down)(o, dO, z.nv, "o"), N(down)(sT, dST, z.ns, "final_state"), N(down)(NULL, dS0, z.ns, "initial_state");
    N(down)(NULL, dQ, z.nk, "q"), N(down)(NULL, dK, z.nk, "k"), N(down)(NULL, dV, z.nv, "v");
    N(down)(NULL, dG, z.ng, "g"), N(down)(NULL, dB, z.ng, "beta"), N(ws_free)(ws);
    return rc;
}

static int N(gdn_bwd)(float *dq, float *dk_, float *dv_, float *dg, float *dbeta, float *ds0, const float *do_,
                      const float *dsT, const float *q, const float *k, const float *v, const float *g,
                      const float *beta, const float *s0, int B, int T, int H, int dk, int dv, const phax_gdn_cfg *c,
                      int chunk, void *ws_host) {
    (void)ws_host;
    N(gd_sizes) z = N(gd_sizes_of)(B, T, H, dk, dv);
    float *gQ = N_GD_UP(dq, z.nk), *gK = N_GD_UP(dk_, z.nk), *gV = N_GD_UP(dv_, z.nv), *gG = N_GD_UP(dg, z.ng);
    float *gB = N_GD_UP(dbeta, z.ng), *gS0 = N_GD_UP(ds0, z.ns), *dDO = N(up)(do_, z.nv), *dDST = N_GD_UP(dsT, z.ns);
    float *dQ = N(up)(q, z.nk), *dK = N(up)(k, z.nk), *dV = N(up)(v, z.nv), *dG = N(up)(g, z.ng);
    float *dB = N(up)(beta, z.ng), *dS0 = N_GD_UP(s0, z.ns);
    void *ws = N(ws)(FC(gdn_bwd_ws)(B, T, H, dk, dv, chunk));
    int rc = FC(gdn_bwd)(gQ, gK, gV, gG, gB, gS0, dDO, dDST, dQ, dK, dV, dG, dB, dS0, B, T, H, dk, dv, c, chunk, ws,
                         NULL);
    N(down)(dq, gQ, z.nk, "dq"), N(down)(dk_, gK, z.nk, "dk"), N(down)(dv_, gV, z.nv, "dv");
    N(down)(dg, gG, z.ng, "dg"), N(down)(dbeta, gB, z.ng, "dbeta"), N(down)(ds0, gS0, z.ns, "ds0");
    N(down)(NULL, dDO, z.nv, "do"), N(down)(NULL, dDST, z.ns, "dsT"), N(down)(NULL, dQ, z.nk, "q");
    N(down)(NULL, dK, z.nk, "k"), N(down)(NULL, dV, z.nv, "v"), N(down)(NULL, dG, z.ng, "g");
    N(down)(NULL, dB, z.ng, "beta"), N(down)(NULL, dS0, z.ns, "s0"), N(ws_free)(ws);
    return rc;
}

static int N(gdn_conv_fwd)(float *y, const float *x, const float *w, int B, int T, int C, int K) {
    size_t nx = B > 0 && T > 0 && C > 0 ? (size_t)B * T * C : 0, nw = C > 0 && K > 0 ? (size_t)C * K : 0;
    float *dY = N(up)(y, nx), *dX = N(up)(x, nx), *dW = N(up)(w, nw);
    int rc = FC(gdn_conv_fwd)(dY, dX, dW, B, T, C, K, NULL);
    N(down)(y, dY, nx, "y"), N(down)(NULL, dX, nx, "x"), N(down)(NULL, dW, nw, "w");
    return rc;
}

static size_t N(gdn_conv_bwd_ws)(int B, int T, int C) { return FC(gdn_conv_bwd_ws)(B, T, C); }

static int N(gdn_conv_bwd)(float *dx, float *dw, const float *dy, const float *x, const float *w, int B, int T, int C,
                           int K, void *ws_host) {
    (void)ws_host;
    size_t nx = B > 0 && T > 0 && C > 0 ? (size_t)B * T * C : 0, nw = C > 0 && K > 0 ? (size_t)C * K : 0;
    float *gX = N_GD_UP(dx, nx), *gW = N_GD_UP(dw, nw), *dDY = N(up)(dy, nx), *dX = N(up)(x, nx), *dW = N(up)(w, nw);
    void *ws = N(ws)(FC(gdn_conv_bwd_ws)(B, T, C));
    int rc = FC(gdn_conv_bwd)(gX, gW, dDY, dX, dW, B, T, C, K, ws, NULL);
    N(down)(dx, gX, nx, "dx"), N(down)(dw, gW, nw, "dw"), N(down)(NULL, dDY, nx, "dy");
    N(down)(NULL, dX, nx, "x"), N(down)(NULL, dW, nw, "w"), N(ws_free)(ws);
    return rc;
}

static int N(gdn_gates_fwd)(float *g, float *beta, const float *a, const float *b, const float *A_log,
                            const float *dt_bias, size_t n, int H) {
    size_t ne = H > 0 ? n * (size_t)H : 0, nh = H > 0 ? (size_t)H : 0;
    float *dG = N_GD_UP(g, ne), *dBt = N_GD_UP(beta, ne), *dA = N(up)(a, ne), *dB = N(up)(b, ne);
    float *dL = N(up)(A_log, nh), *dT = N(up)(dt_bias, nh);
    int rc = FC(gdn_gates_fwd)(dG, dBt, dA, dB, dL, dT, n, H, NULL);
    N(down)(g, dG, ne, "g"), N(down)(beta, dBt, ne, "beta"), N(down)(NULL, dA, ne, "a"), N(down)(NULL, dB, ne, "b");
    N(down)(NULL, dL, nh, "A_log"), N(down)(NULL, dT, nh, "dt_bias");
    return rc;
}

static int N(gdn_gates_bwd)(float *da, float *db, float *dA_log, float *ddt_bias, const float *dg, const float *dbeta,
                            const float *a, const float *b, const float *A_log, const float *dt_bias, size_t n, int H) {
    size_t ne = H > 0 ? n * (size_t)H : 0, nh = H > 0 ? (size_t)H : 0;
    float *gA = N_GD_UP(da, ne), *gB = N_GD_UP(db, ne), *gL = N_GD_UP(dA_log, nh), *gT = N_GD_UP(ddt_bias, nh);
    float *dG = N_GD_UP(dg, ne), *dBt = N_GD_UP(dbeta, ne), *dA = N(up)(a, ne), *dB = N(up)(b, ne);
    float *dL = N(up)(A_log, nh), *dT = N(up)(dt_bias, nh);
    int rc = FC(gdn_gates_bwd)(gA, gB, gL, gT, dG, dBt, dA, dB, dL, dT, n, H, NULL);
    N(down)(da, gA, ne, "da"), N(down)(db, gB, ne, "db"), N(down)(dA_log, gL, nh, "dA_log");
    N(down)(ddt_bias, gT, nh, "ddt_bias"), N(down)(NULL, dG, ne, "dg"), N(down)(NULL, dBt, ne, "dbeta");
    N(down)(NULL, dA, ne, "a"), N(down)(NULL, dB, ne, "b"), N(down)(NULL, dL, nh, "A_log"), N(down)(NULL, dT, nh, "dt_bias");
    return rc;
}
#undef N_GD_UP

// --- whole models: fast/cpu's runner over fast/cuda's op table (fmodel_new_ops) -------------
// Parameters, gradients, logits and per-row losses live on the device and cross by copies;
// tokens and targets go as host arrays (the table uploads them). A void entry's failure
// (FC(ops_error)) fails the call.
static void *N(model_new)(const phax_model_cfg *cfg, uint64_t seed) {
    fmodel *m = calloc(1, sizeof *m);
    cr_assert(m);
    if (fmodel_new_ops(m, cfg, seed, FC(f32_ops)()) || FC(ops_error)()) {
        free(m);
        return NULL;
    }
    return m;
}
static void N(model_free)(void *m) {
    if (!m) return;
    fmodel_free(m);
    N_OK(FC(ops_error)(), "model_free");
    free(m);
}
static size_t N(model_numel)(const void *m) { return ((const fmodel *)m)->layout.numel; }
static void N(model_set_f64)(void *m, const double *p) {
    fmodel_set_params_f64(m, p);
    N_OK(FC(ops_error)(), "set_params_f64");
}
static void N(model_get)(const void *m, float *out) {
    const fmodel *f = m;
    N_OK(FC(download)(out, f->params, f->layout.numel * sizeof(float), NULL), "get_params");
}
static void N(model_set)(void *m, const float *in) {
    fmodel *f = m;
    N_OK(FC(upload)(f->params, in, f->layout.numel * sizeof(float), NULL), "set_params");
}
static void N(model_grads)(const void *m, float *out) {
    const fmodel *f = m;
    N_OK(FC(download)(out, f->grads, f->layout.numel * sizeof(float), NULL), "get_grads");
}
static void N(model_zero)(void *m) {
    fmodel_zero_grad(m);
    N_OK(FC(ops_error)(), "zero_grad");
}
static void *N(model_ws_new)(const void *m, int B, int T) {
    fmodel_ws *w = fmodel_ws_new(m, B, T);
    if (w && FC(ops_error)()) {
        fmodel_ws_free(w);
        return NULL;
    }
    return w;
}
static void N(model_ws_free)(void *w) {
    fmodel_ws_free(w);
    N_OK(FC(ops_error)(), "ws_free");
}
static int N(model_forward)(const void *m, void *ws, const int32_t *tok, const int32_t *tg, int window, float *logits,
                            double *loss) {
    const fmodel *f = m;
    size_t nv = (size_t)fmodel_ws_B(ws) * fmodel_ws_T(ws) * f->cfg.vocab_size;
    float *dl = logits ? N(up)(logits, nv) : NULL;
    int rc = fmodel_forward(f, ws, tok, tg, window, dl, loss);
    if (!rc) rc = FC(ops_error)();
    N(down)(logits, dl, nv, "logits");
    return rc;
}
static int N(model_token_losses)(const void *m, void *ws, const int32_t *tok, const int32_t *tg, int window,
                                 float *rows) {
    size_t n = (size_t)fmodel_ws_B(ws) * fmodel_ws_T(ws);
    float *dr = N(up)(rows, n);
    int rc = fmodel_token_losses(m, ws, tok, tg, window, dr);
    if (!rc) rc = FC(ops_error)();
    N(down)(rows, dr, n, "rows");
    return rc;
}
static int N(model_backward)(void *m, void *ws, const int32_t *tok, const int32_t *tg, int window, double *loss) {
    int rc = fmodel_backward(m, ws, tok, tg, window, loss);
    if (!rc) rc = FC(ops_error)();
    return rc;
}

// --- decoders: fast/cuda/decode.cu (tokens and logits cross on the host) ----------------------
static void *N(decoder_new_chunked)(const void *m, int max_len, int window, int chunk) {
    const fmodel *f = m;
    if (!f) return FC(decoder_new)(NULL, NULL, NULL, max_len, window, chunk);  // its own "no model"
    return FC(decoder_new)(&f->cfg, &f->layout, f->params, max_len, window, chunk);
}
static void *N(decoder_new)(const void *m, int max_len, int window) {
    return N(decoder_new_chunked)(m, max_len, window, FCUDA_PREFILL_CHUNK);
}
static void N(decoder_free)(void *d) { FC(decoder_free)(d); }
static void N(decoder_reset)(void *d) { N_OK(FC(decoder_reset)(d), "decoder_reset"); }
static int N(decoder_pos)(const void *d) { return FC(decoder_pos)(d); }
static int N(decoder_step)(void *d, int32_t token, float *logits) { return FC(decoder_step)(d, token, logits); }
static int N(decoder_prefill)(void *d, const int32_t *tokens, int n, float *logits) {
    return FC(decoder_prefill)(d, tokens, n, logits);
}
static int N(decoder_prefill_all)(void *d, const int32_t *tokens, int n, float *logits) {
    return FC(decoder_prefill_all)(d, tokens, n, logits);
}

// The entries above as a backend (name and availability from the including file).
#define N_BACKEND(nm, why)                                                                        \
    {                                                                                             \
        .name = nm, .unavailable = why, .not_applicable = cuda_not_applicable,       \
        .gemm = {.sgemm = N(sgemm)},       \
        .decode = {.new_decoder = N(decoder_new),                                                 \
                   .new_chunked = N(decoder_new_chunked),                                         \
                   .free_decoder = N(decoder_free),                                               \
                   .reset = N(decoder_reset),                                                     \
                   .pos = N(decoder_pos),                                                         \
                   .step = N(decoder_step),                                                       \
                   .prefill = N(decoder_prefill),                                                 \
                   .prefill_all = N(decoder_prefill_all),                                         \
                   .chunk_max = FCUDA_PREFILL_CHUNK_MAX},                                         \
        .model = {.new_model = N(model_new),                                                      \
                  .free_model = N(model_free),                                                    \
                  .numel = N(model_numel),                                                        \
                  .set_params_f64 = N(model_set_f64),                                             \
                  .get_params = N(model_get),                                                     \
                  .set_params = N(model_set),                                                     \
                  .get_grads = N(model_grads),                                                    \
                  .zero_grad = N(model_zero),                                                     \
                  .ws_new = N(model_ws_new),                                                      \
                  .ws_free = N(model_ws_free),                                                    \
                  .forward = N(model_forward),                                                    \
                  .token_losses = N(model_token_losses),                                          \
                  .backward = N(model_backward)},                                                 \
        .attention = {.fwd_ws = N(attention_fwd_ws),                                              \
                      .bwd_ws = N(attention_bwd_ws),                                              \
                      .fwd = N(attention_fwd),                                                    \
                      .bwd = N(attention_bwd)},                                                   \
        .mlstm = {.state_len = N(mlstm_state_len),                                                \
                  .fwd_ws = N(mlstm_fwd_ws),                                                      \
                  .fwd = N(mlstm_fwd),                                                            \
                  .bwd_ws = N(mlstm_bwd_ws),                                                      \
                  .bwd = N(mlstm_bwd)},                                                           \
        .gdn = {.fwd_ws = N(gdn_fwd_ws),                                                          \
                .fwd = N(gdn_fwd),                                                                \
                .bwd_ws = N(gdn_bwd_ws),                                                          \
                .bwd = N(gdn_bwd),                                                                \
                .conv_fwd = N(gdn_conv_fwd),                                                      \
                .conv_bwd_ws = N(gdn_conv_bwd_ws),                                                \
                .conv_bwd = N(gdn_conv_bwd),                                                      \
                .gates_fwd = N(gdn_gates_fwd),                                                    \
                .gates_bwd = N(gdn_gates_bwd)},                                                   \
        .ssm = {.kernel_fwd_ws = N(dss_fwd_ws),                                                   \
                .kernel_fwd = N(dss_fwd),                                                         \
                .kernel_bwd_ws = N(dss_bwd_ws),                                                   \
                .kernel_bwd = N(dss_bwd),                                                         \
                .plan_new = N(ssm_plan_new),                                                      \
                .plan_free = N(ssm_plan_free),                                                    \
                .plan_method = N(ssm_plan_method),                                                \
                .plan_fft_len = N(ssm_plan_fft_len),                                              \
                .conv_fwd_ws = N(ssm_conv_fwd_ws),                                                \
                .conv_bwd_ws = N(ssm_conv_bwd_ws),                                                \
                .conv_fwd = N(ssm_conv_fwd),                                                      \
                .conv_bwd = N(ssm_conv_bwd)},                                                        \
        .embedding = {.fwd = N(embedding_fwd), .bwd = N(embedding_bwd)},                          \
        .linear = {.fwd = N(linear_fwd), .bwd = N(linear_bwd)},                                   \
        .norm =                                                                                   \
            {                                                                                     \
                .rmsnorm_fwd = N(rmsnorm_fwd),                                                    \
                .rmsnorm_bwd_ws = N(rmsnorm_bwd_ws),                                              \
                .rmsnorm_bwd = N(rmsnorm_bwd),                                                    \
                .layernorm_fwd = N(layernorm_fwd),                                                \
                .layernorm_bwd_ws = N(layernorm_bwd_ws),                                          \
                .layernorm_bwd = N(layernorm_bwd),                                                \
                .headnorm_fwd = N(headnorm_fwd),                                                  \
                .headnorm_bwd_ws = N(headnorm_bwd_ws),                                            \
                .headnorm_bwd = N(headnorm_bwd),                                                  \
            },                                                                                    \
        .activation =                                                                             \
            {                                                                                     \
                .gelu_fwd = N(gelu_fwd),                                                          \
                .gelu_bwd = N(gelu_bwd),                                                          \
                .silu_fwd = N(silu_fwd),                                                          \
                .silu_bwd = N(silu_bwd),                                                          \
            },                                                                                    \
        .ffn =                                                                                    \
            {                                                                                     \
                .swiglu_fwd_ws = N(swiglu_fwd_ws),                                                \
                .swiglu_fwd = N(swiglu_fwd),                                                      \
                .swiglu_bwd_ws = N(swiglu_bwd_ws),                                                \
                .swiglu_bwd = N(swiglu_bwd),                                                      \
                .swiglu_keep_len = N(swiglu_keep_len),                                            \
                .swiglu_fwd_keep = N(swiglu_fwd_keep),                                            \
                .swiglu_fwd_keep_ws = N(swiglu_fwd_keep_ws),                                      \
                .swiglu_bwd_kept_ws = N(swiglu_bwd_kept_ws),                                      \
                .swiglu_bwd_kept = N(swiglu_bwd_kept),                                            \
            },                                                                                    \
        .rope =                                                                                   \
            {                                                                                     \
                .table_len = N(rope_table_len),                                                   \
                .table = N(rope_table),                                                           \
                .fwd = N(rope_fwd),                                                               \
                .bwd = N(rope_bwd),                                                               \
            },                                                                                    \
        .mix = {.fwd = N(mix_fwd), .bwd = N(mix_bwd)},                                            \
        .loss =                                                                                   \
            {                                                                                     \
                .cross_entropy_fwd = N(cross_entropy_fwd),                                        \
                .cross_entropy_bwd = N(cross_entropy_bwd),                                        \
                .cross_entropy_fwd_bwd = N(cross_entropy_fwd_bwd),                                \
                .lce_tile_rows = N(lce_tile_rows),                                                \
                .linear_cross_entropy_ws = N(linear_cross_entropy_ws),                            \
                .linear_cross_entropy = N(linear_cross_entropy),                                  \
            },                                                                                    \
        .adamw = {.step = N(adamw_step)},                                                         \
    }
