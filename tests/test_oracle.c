// `phax oracle`, end to end: the real binary (PHAX_BIN, set by meson) run on
// its own examples, every op's outputs and gradients checked against a direct
// call of the ref kernel on the same inputs with the same upstream gradient;
// the upstream gradient given or drawn from the seed; F32 inputs promoted; and
// every kind of bad input refused with one line on stderr, exit status 1, no
// output file and no crash.
//
// Tolerances: none. The binary and this test run the same float64 ref code on
// the same float64 values (the oracle reads them from the file, which stores
// F64 bit-exactly; F32 promotes exactly), so every output and gradient must be
// BIT-identical: compared with memcmp, after checking that every value is
// finite, so a NaN fails even where both sides have the same NaN bits. The one
// check against a computation written here (grad.x = grad.y·W for a given
// grad.y) uses dyadic values small enough that every product and partial sum
// is exact in float64, so it is exact in any summation order too.
#define _DEFAULT_SOURCE  // wait4: the child's own peak memory (issue 11 tests below)
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "phax/model.h"
#include "phax/ref.h"
#include "phax/ref_model.h"
#include "phax/safetensors.h"
#include "testutil.h"

extern char **environ;

// Every op `phax oracle --list` must name; each has a roundtrip_<op> test below.
static const char *const ALL_OPS[] = {"embedding", "linear", "rmsnorm", "layernorm", "headnorm", "gelu",
                                      "silu", "swiglu", "rope", "attention", "dss_kernel", "ssm_conv",
                                      "ssm_recurrent", "mlstm", "gdn", "mix", "cross_entropy", "adamw", "model"};
#define N_ALL_OPS ((int)(sizeof ALL_OPS / sizeof ALL_OPS[0]))

// --- the private temp dir: <dir>/w holds the files the oracle sees, <dir>/io
// the captured stdout/stderr (so a check of <dir>/w sees only oracle files) ---------
static char g_dir[64], g_work[96], g_io[96];

static void rm_rf(const char *path) {
    struct stat st;
    if (lstat(path, &st)) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char sub[PATH_MAX];
                snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                rm_rf(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void setup(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/phax_oracle_XXXXXX");
    cr_assert(mkdtemp(g_dir), "mkdtemp: %s", strerror(errno));
    snprintf(g_work, sizeof g_work, "%s/w", g_dir);
    snprintf(g_io, sizeof g_io, "%s/io", g_dir);
    cr_assert(mkdir(g_work, 0700) == 0 && mkdir(g_io, 0700) == 0, "mkdir: %s", strerror(errno));
}

static void teardown(void) {
    if (g_dir[0]) rm_rf(g_dir);
    g_dir[0] = 0;
}

TestSuite(oracle, .init = setup, .fini = teardown);

// A path under the work dir (rotating static buffers: enough for one test's names).
static const char *wpath(const char *name) {
    static char pool[32][PATH_MAX];
    static int next;
    char *p = pool[next++ % 32];
    snprintf(p, PATH_MAX, "%s/%s", g_work, name);
    return p;
}

static size_t numel(int ndim, const int64_t *s) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)s[i];
    return n;
}

static char *slurp(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    cr_assert(fp, "%s: %s", path, strerror(errno));
    cr_assert(fseek(fp, 0, SEEK_END) == 0);
    long n = ftell(fp);
    cr_assert(n >= 0 && fseek(fp, 0, SEEK_SET) == 0);
    char *b = malloc((size_t)n + 1);
    cr_assert(b && fread(b, 1, (size_t)n, fp) == (size_t)n);
    fclose(fp);
    b[n] = 0;
    if (len) *len = (size_t)n;
    return b;
}

static void spill(const char *path, const void *bytes, size_t len) {
    FILE *fp = fopen(path, "wb");
    cr_assert(fp, "%s: %s", path, strerror(errno));
    cr_assert(len == 0 || fwrite(bytes, 1, len, fp) == len);
    cr_assert(fclose(fp) == 0);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// --- running the binary ------------------------------------------------------------------
static const char *phax_bin(void) {
    static char buf[PATH_MAX];
    const char *e = getenv("PHAX_BIN");
    if (e && *e) return e;
    // Run by hand (./build/test_oracle): phax sits next to this executable.
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 8);
    cr_assert(n > 0, "PHAX_BIN is not set (run through meson test)");
    buf[n] = 0;
    char *slash = strrchr(buf, '/');
    cr_assert(slash);
    strcpy(slash + 1, "phax");
    return buf;
}

typedef struct {
    int exited, code, signaled, sig;
    char *out, *err;  // captured stdout, stderr (malloc'd)
} proc;

static void proc_free(proc *p) {
    free(p->out);
    free(p->err);
}

// phax oracle [a0 a1] op [in [out]]: argv passed as is (no shell), stdout/stderr to files;
// with the child's peak resident memory (KiB) in *rss_kib.
static proc oracle_rss(const char *a0, const char *a1, const char *op, const char *in, const char *out,
                       long *rss_kib) {
    const char *bin = phax_bin();
    char *argv[8] = {(char *)bin, "oracle"};
    int k = 2;
    if (a0) argv[k++] = (char *)a0, argv[k++] = (char *)a1;
    argv[k++] = (char *)op, argv[k++] = (char *)in, argv[k++] = (char *)out, argv[k] = NULL;
    char outp[PATH_MAX], errp[PATH_MAX];
    snprintf(outp, sizeof outp, "%s/stdout", g_io);
    snprintf(errp, sizeof errp, "%s/stderr", g_io);
    posix_spawn_file_actions_t fa;
    cr_assert(posix_spawn_file_actions_init(&fa) == 0);
    cr_assert(posix_spawn_file_actions_addopen(&fa, 1, outp, O_WRONLY | O_CREAT | O_TRUNC, 0600) == 0);
    cr_assert(posix_spawn_file_actions_addopen(&fa, 2, errp, O_WRONLY | O_CREAT | O_TRUNC, 0600) == 0);
    pid_t pid;
    int rc = posix_spawn(&pid, bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    cr_assert(rc == 0, "posix_spawn %s: %s", bin, strerror(rc));
    int st;
    struct rusage ru;
    while (wait4(pid, &st, 0, &ru) < 0) cr_assert(errno == EINTR, "wait4: %s", strerror(errno));
    *rss_kib = ru.ru_maxrss;  // Linux: KiB
    proc p = {.exited = WIFEXITED(st), .code = WIFEXITED(st) ? WEXITSTATUS(st) : -1,
              .signaled = WIFSIGNALED(st), .sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0};
    p.out = slurp(outp, NULL);
    p.err = slurp(errp, NULL);
    return p;
}

static proc oracle(const char *a1, const char *a2, const char *a3) {
    long rss;
    return oracle_rss(NULL, NULL, a1, a2, a3, &rss);
}

static void expect_success(proc *p, const char *what) {
    cr_assert(!p->signaled, "%s: killed by signal %d; stderr:\n%s", what, p->sig, p->err);
    cr_assert(p->exited && p->code == 0, "%s: exit status %d; stderr:\n%s", what, p->code, p->err);
    cr_assert(p->err[0] == 0, "%s: succeeded but wrote to stderr:\n%s", what, p->err);
}

static void run_ok(const char *op, const char *in, const char *out) {
    proc p = oracle(op, in, out);
    char what[PATH_MAX + 64];
    snprintf(what, sizeof what, "phax oracle %s %s %s", op, in, out);
    expect_success(&p, what);
    proc_free(&p);
}

static void example(const char *op, const char *path) {
    proc p = oracle(op, "--example", path);
    char what[PATH_MAX + 64];
    snprintf(what, sizeof what, "phax oracle %s --example %s", op, path);
    expect_success(&p, what);
    proc_free(&p);
}

static phax_st_file st_open(const char *path) {
    phax_st_file f;
    cr_assert(phax_st_read(&f, path) == PHAX_OK, "%s", phax_error());
    return f;
}

// A writer holding every tensor and metadata entry of f except those whose
// name / key is in skip (NULL-terminated; NULL for none). The caller adds the
// replacements, then st_write_free.
static phax_st_writer *copy_except(const phax_st_file *f, const char *const *skip) {
    phax_st_writer *w = phax_st_writer_new();
    cr_assert(w);
    for (int i = 0; i < f->n; i++) {
        int drop = 0;
        for (int j = 0; skip && skip[j]; j++) drop |= !strcmp(f->t[i].name, skip[j]);
        if (!drop)
            cr_assert(phax_st_add_raw(w, f->t[i].name, f->t[i].dtype, f->t[i].ndim, f->t[i].shape, f->t[i].data) ==
                      PHAX_OK, "%s", phax_error());
    }
    for (int i = 0; i < f->nmeta; i++) {
        int drop = 0;
        for (int j = 0; skip && skip[j]; j++) drop |= !strcmp(f->meta_key[i], skip[j]);
        if (!drop) cr_assert(phax_st_add_meta(w, f->meta_key[i], f->meta_val[i]) == PHAX_OK, "%s", phax_error());
    }
    return w;
}

static void st_write_free(phax_st_writer *w, const char *path) {
    cr_assert(phax_st_write(w, path) == PHAX_OK, "%s", phax_error());
    phax_st_writer_free(w);
}

// The example of `op` with some tensors / metadata dropped, metadata key=val set
// (key NULL: none), written to path.
static void edited_example(const char *op, const char *path, const char *const *skip, const char *key,
                           const char *val) {
    const char *ex = wpath("example.safetensors");
    example(op, ex);
    phax_st_file f = st_open(ex);
    const char *sk[16];
    int n = 0;
    for (int j = 0; skip && skip[j] && n < 14; j++) sk[n++] = skip[j];
    if (key) sk[n++] = key;
    sk[n] = NULL;
    phax_st_writer *w = copy_except(&f, sk);
    if (key) cr_assert(phax_st_add_meta(w, key, val) == PHAX_OK);
    st_write_free(w, path);
    phax_st_free(&f);
    cr_assert(unlink(ex) == 0);
}

// --- expected outputs: a direct call of the ref kernel -----------------------------------
typedef struct {
    char name[96];
    const double *x;
    int ndim;
    int64_t shape[PHAX_ST_MAX_NDIM];
} expect_t;

typedef struct {
    const char *op;
    phax_st_file in, out;
    expect_t e[96];
    int ne;
    int nup;  // upstream gradients read from out
    void *mem[256];
    int nmem;
} rt;

static void *keep(rt *r, void *p) {
    cr_assert(p, "out of memory");
    cr_assert(r->nmem < 256);
    return r->mem[r->nmem++] = p;
}

static double *zeros(rt *r, size_t n) { return keep(r, calloc(n ? n : 1, sizeof(double))); }

static const phax_st_tensor *in_t(rt *r, const char *name) {
    const phax_st_tensor *t = phax_st_find(&r->in, name);
    cr_assert(t, "%s: the example has no tensor '%s'", r->op, name);
    return t;
}

// An input tensor promoted to float64, and its shape.
static double *in_f64(rt *r, const char *name, int *ndim, int64_t *shape) {
    const phax_st_tensor *t = in_t(r, name);
    double *x = zeros(r, t->numel);
    cr_assert(phax_st_to_f64(t, x) == PHAX_OK, "%s", phax_error());
    if (ndim) *ndim = t->ndim;
    if (shape) memcpy(shape, t->shape, sizeof t->shape);
    return x;
}

static int32_t *in_i32(rt *r, const char *name, int *ndim, int64_t *shape) {
    const phax_st_tensor *t = in_t(r, name);
    int32_t *x = keep(r, calloc(t->numel ? t->numel : 1, sizeof(int32_t)));
    cr_assert(phax_st_to_i32(t, x) == PHAX_OK, "%s", phax_error());
    if (ndim) *ndim = t->ndim;
    if (shape) memcpy(shape, t->shape, sizeof t->shape);
    return x;
}

static const char *meta_s(rt *r, const char *key, const char *def) {
    const char *s = phax_st_meta(&r->in, key);
    return s ? s : def;
}

static long meta_l(rt *r, const char *key, long def) {
    const char *s = phax_st_meta(&r->in, key);
    if (!s) return def;
    char *end;
    long v = strtol(s, &end, 10);
    cr_assert(end != s && !*end, "metadata %s='%s'", key, s);
    return v;
}

static double meta_d(rt *r, const char *key, double def) {
    const char *s = phax_st_meta(&r->in, key);
    if (!s) return def;
    char *end;
    double v = strtod(s, &end);
    cr_assert(end != s && !*end, "metadata %s='%s'", key, s);
    return v;
}

static void check_tensor_f64(const phax_st_tensor *t, const char *file, const char *name, int ndim,
                             const int64_t *shape) {
    cr_assert(t, "%s: no tensor '%s'", file, name);
    cr_assert(t->dtype == PHAX_DT_F64, "%s: '%s' has dtype %s, not F64", file, name, phax_dtype_name(t->dtype));
    cr_assert(t->ndim == ndim, "%s: '%s' has %d dims, expected %d", file, name, t->ndim, ndim);
    for (int i = 0; i < ndim; i++)
        cr_assert(t->shape[i] == shape[i], "%s: '%s' dim %d is %lld, expected %lld", file, name, i,
                  (long long)t->shape[i], (long long)shape[i]);
}

// The upstream gradient grad.<out> the oracle used: present in OUT, F64, the
// output's shape, finite. Returned for the direct backward call.
static const double *upstream(rt *r, const char *out, int ndim, const int64_t *shape) {
    char name[96];
    snprintf(name, sizeof name, "grad.%s", out);
    const phax_st_tensor *t = phax_st_find(&r->out, name);
    check_tensor_f64(t, r->op, name, ndim, shape);
    double *g = zeros(r, t->numel);
    cr_assert(phax_st_to_f64(t, g) == PHAX_OK);
    cr_assert(tu_all_finite(g, t->numel), "%s: upstream %s is not finite", r->op, name);
    r->nup++;
    return g;
}

static void expect(rt *r, const char *name, const double *x, int ndim, const int64_t *shape) {
    cr_assert(r->ne < 96);
    expect_t *e = &r->e[r->ne++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->x = x;
    e->ndim = ndim;
    if (ndim) memcpy(e->shape, shape, (size_t)ndim * sizeof *shape);
}

// Compare OUT with the expectations: each present, F64, right shape, finite,
// bit-identical; nothing else in OUT but the upstream gradients; metadata op and
// phax_version.
static void check_out(rt *r) {
    for (int i = 0; i < r->ne; i++) {
        const expect_t *e = &r->e[i];
        const phax_st_tensor *t = phax_st_find(&r->out, e->name);
        check_tensor_f64(t, r->op, e->name, e->ndim, e->shape);
        size_t n = t->numel;
        double *got = malloc((n ? n : 1) * sizeof *got);
        cr_assert(got && phax_st_to_f64(t, got) == PHAX_OK);
        cr_assert(tu_all_finite(got, n), "%s: '%s' from the oracle is not finite", r->op, e->name);
        cr_assert(tu_all_finite(e->x, n), "%s: '%s' from the direct call is not finite", r->op, e->name);
        if (memcmp(got, e->x, n * sizeof *got)) {
            size_t k = 0;
            while (memcmp(&got[k], &e->x[k], sizeof *got) == 0) k++;
            cr_assert_fail("%s: '%s' differs from the direct ref call at element %zu: oracle %.17g, ref %.17g "
                           "(bit-identical expected: same float64 code on the same data)",
                           r->op, e->name, k, got[k], e->x[k]);
        }
        free(got);
        for (int j = 0; j < i; j++) cr_assert(strcmp(r->e[j].name, e->name), "expected '%s' twice", e->name);
    }
    cr_assert(r->out.n == r->ne + r->nup, "%s: OUT has %d tensors, expected %d outputs/gradients + %d upstream",
              r->op, r->out.n, r->ne, r->nup);
    const char *op = phax_st_meta(&r->out, "op"), *ver = phax_st_meta(&r->out, "phax_version");
    cr_assert(op && !strcmp(op, r->op), "%s: metadata op is '%s'", r->op, op ? op : "(absent)");
    cr_assert(ver && !strcmp(ver, PHAX_VERSION), "%s: metadata phax_version is '%s'", r->op, ver ? ver : "(absent)");
}

static void rt_free(rt *r) {
    phax_st_free(&r->in);
    phax_st_free(&r->out);
    for (int i = 0; i < r->nmem; i++) free(r->mem[i]);
    free(r);
}

typedef void (*expfn)(rt *);
typedef void (*prepfn)(const char *example_path, const char *in_path);

// Example → (optional edit) → IN → oracle → OUT; then the direct call on IN
// with OUT's upstream gradient must give OUT's tensors bit for bit.
static void roundtrip_in(const char *op, const char *in, expfn f) {
    const char *out = wpath("out.safetensors");
    run_ok(op, in, out);
    rt *r = calloc(1, sizeof *r);
    cr_assert(r);
    r->op = op;
    r->in = st_open(in);
    r->out = st_open(out);
    f(r);
    check_out(r);
    rt_free(r);
}

static void roundtrip(const char *op, expfn f, prepfn prep) {
    const char *ex = wpath("example.safetensors"), *in = ex;
    example(op, ex);
    if (prep) {
        in = wpath("in.safetensors");
        prep(ex, in);
    }
    roundtrip_in(op, in, f);
}

// --- the direct calls, one per op ----------------------------------------------------------
static void exp_embedding(rt *r) {
    int nt, nw;
    int64_t ts[8], ws[8], ys[8];
    int32_t *tok = in_i32(r, "tokens", &nt, ts);
    double *E = in_f64(r, "weight", &nw, ws);
    cr_assert(nw == 2);
    size_t n = numel(nt, ts);
    int V = (int)ws[0], d = (int)ws[1];
    memcpy(ys, ts, sizeof ys);
    ys[nt] = d;
    double *y = zeros(r, n * d), *dE = zeros(r, (size_t)V * d);
    cr_assert(ref_embedding_fwd(y, E, tok, n, V, d) == PHAX_OK, "%s", phax_error());
    ref_embedding_bwd(dE, upstream(r, "y", nt + 1, ys), tok, n, d);
    expect(r, "y", y, nt + 1, ys);
    expect(r, "grad.weight", dE, 2, ws);
}

static void exp_linear(rt *r) {
    int nx, nw;
    int64_t xs[8], ws[8], ys[8];
    double *x = in_f64(r, "x", &nx, xs), *W = in_f64(r, "weight", &nw, ws);
    int has_b = phax_st_find(&r->in, "bias") != NULL;
    double *b = has_b ? in_f64(r, "bias", NULL, NULL) : NULL;
    int in = (int)xs[nx - 1], out = (int)ws[0];
    size_t n = numel(nx - 1, xs);
    memcpy(ys, xs, sizeof ys);
    ys[nx - 1] = out;
    int64_t bs[1] = {out};
    double *y = zeros(r, n * out), *dx = zeros(r, n * in), *dW = zeros(r, (size_t)out * in), *db = zeros(r, out);
    ref_linear_fwd(y, x, W, b, n, in, out);
    ref_linear_bwd(dx, dW, has_b ? db : NULL, upstream(r, "y", nx, ys), x, W, n, in, out);
    expect(r, "y", y, nx, ys);
    expect(r, "grad.x", dx, nx, xs);
    expect(r, "grad.weight", dW, 2, ws);
    if (has_b) expect(r, "grad.bias", db, 1, bs);
}

static void exp_norm(rt *r, int kind) {  // 0 rms, 1 layer, 2 head
    int nx;
    int64_t xs[8];
    double *x = in_f64(r, "x", &nx, xs), *g = in_f64(r, "weight", NULL, NULL);
    int d = (int)xs[nx - 1];
    size_t n = numel(nx - 1, xs);
    int has_b = kind == 1 && phax_st_find(&r->in, "bias");
    double *b = has_b ? in_f64(r, "bias", NULL, NULL) : NULL;
    double eps = meta_d(r, "eps", kind == 0 ? PHAX_RMSNORM_EPS : kind == 1 ? PHAX_LAYERNORM_EPS : PHAX_HEADNORM_EPS);
    int H = (int)meta_l(r, "heads", 1);
    int64_t gs[1] = {d};
    double *y = zeros(r, n * d), *dx = zeros(r, n * d), *dg = zeros(r, d), *db = zeros(r, d);
    if (kind == 0) ref_rmsnorm_fwd(y, x, g, n, d, eps);
    if (kind == 1) ref_layernorm_fwd(y, x, g, b, n, d, eps);
    if (kind == 2) ref_headnorm_fwd(y, x, g, n, H, d / H, eps);
    const double *gy = upstream(r, "y", nx, xs);
    if (kind == 0) ref_rmsnorm_bwd(dx, dg, gy, x, g, n, d, eps);
    if (kind == 1) ref_layernorm_bwd(dx, dg, has_b ? db : NULL, gy, x, g, n, d, eps);
    if (kind == 2) ref_headnorm_bwd(dx, dg, gy, x, g, n, H, d / H, eps);
    expect(r, "y", y, nx, xs);
    expect(r, "grad.x", dx, nx, xs);
    expect(r, "grad.weight", dg, 1, gs);
    if (has_b) expect(r, "grad.bias", db, 1, gs);
}
static void exp_rmsnorm(rt *r) { exp_norm(r, 0); }
static void exp_layernorm(rt *r) { exp_norm(r, 1); }
static void exp_headnorm(rt *r) { exp_norm(r, 2); }

static void exp_act(rt *r, int silu) {
    int nx;
    int64_t xs[8];
    double *x = in_f64(r, "x", &nx, xs);
    size_t n = numel(nx, xs);
    double *y = zeros(r, n), *dx = zeros(r, n);
    (silu ? ref_silu_fwd : ref_gelu_fwd)(y, x, n);
    (silu ? ref_silu_bwd : ref_gelu_bwd)(dx, upstream(r, "y", nx, xs), x, n);
    expect(r, "y", y, nx, xs);
    expect(r, "grad.x", dx, nx, xs);
}
static void exp_gelu(rt *r) { exp_act(r, 0); }
static void exp_silu(rt *r) { exp_act(r, 1); }

static void exp_swiglu(rt *r) {
    int nx;
    int64_t xs[8], hs[8], ds[8];
    double *x = in_f64(r, "x", &nx, xs), *Wg = in_f64(r, "w_gate", NULL, hs), *Wu = in_f64(r, "w_up", NULL, NULL),
           *Wd = in_f64(r, "w_down", NULL, ds);
    int d = (int)xs[nx - 1], hid = (int)hs[0];
    size_t n = numel(nx - 1, xs);
    double *y = zeros(r, n * d), *dx = zeros(r, n * d), *dWg = zeros(r, (size_t)hid * d),
           *dWu = zeros(r, (size_t)hid * d), *dWd = zeros(r, (size_t)hid * d);
    cr_assert(ref_swiglu_fwd(y, x, Wg, Wu, Wd, n, d, hid) == PHAX_OK);
    cr_assert(ref_swiglu_bwd(dx, dWg, dWu, dWd, upstream(r, "y", nx, xs), x, Wg, Wu, Wd, n, d, hid) == PHAX_OK);
    expect(r, "y", y, nx, xs);
    expect(r, "grad.x", dx, nx, xs);
    expect(r, "grad.w_gate", dWg, 2, hs);
    expect(r, "grad.w_up", dWu, 2, hs);
    expect(r, "grad.w_down", dWd, 2, ds);
}

static void exp_rope(rt *r) {
    int nx;
    int64_t xs[8];
    double *x = in_f64(r, "x", &nx, xs);
    cr_assert(nx == 4);
    double base = meta_d(r, "rope_base", PHAX_ROPE_BASE);
    long pos0 = meta_l(r, "pos0", 0);
    size_t n = numel(4, xs);
    int B = (int)xs[0], T = (int)xs[1], H = (int)xs[2], dh = (int)xs[3];
    double *y = zeros(r, n), *dx = zeros(r, n);
    cr_assert(ref_rope_fwd(y, x, B, T, H, dh, base, pos0) == PHAX_OK);
    cr_assert(ref_rope_bwd(dx, upstream(r, "y", 4, xs), B, T, H, dh, base, pos0) == PHAX_OK);
    expect(r, "y", y, 4, xs);
    expect(r, "grad.x", dx, 4, xs);
}

static void exp_attention(rt *r) {
    int64_t qs[8], ks[8], vs[8];
    double *q = in_f64(r, "q", NULL, qs), *k = in_f64(r, "k", NULL, ks), *v = in_f64(r, "v", NULL, vs);
    int B = (int)qs[0], T = (int)qs[1];
    phax_attn_cfg a = phax_attn_cfg_default((int)qs[2], (int)ks[2], (int)qs[3]);
    a.dv = (int)vs[3];
    const char *score = meta_s(r, "score", "dot");
    cr_assert(!strcmp(score, "dot") || !strcmp(score, "cosine"));
    int cosine = !strcmp(score, "cosine");
    a.score = cosine ? PHAX_SCORE_COSINE : PHAX_SCORE_DOT;
    a.window = (int)meta_l(r, "window", 0);
    a.rope = (int)meta_l(r, "rope", 1);
    a.rope_base = meta_d(r, "rope_base", PHAX_ROPE_BASE);
    a.pos0 = meta_l(r, "pos0", 0);
    cr_assert(phax_attn_cfg_check(&a) == PHAX_OK, "%s", phax_error());
    double *l = cosine ? in_f64(r, "logscale", NULL, NULL) : NULL;
    int64_t ls[1] = {a.Hq}, ys[4] = {B, T, a.Hq, a.dv};
    double *y = zeros(r, numel(4, ys)), *dq = zeros(r, numel(4, qs)), *dk = zeros(r, numel(4, ks)),
           *dv = zeros(r, numel(4, vs)), *dl = zeros(r, a.Hq);
    cr_assert(ref_attention_fwd(y, q, k, v, l, B, T, &a) == PHAX_OK, "%s", phax_error());
    cr_assert(ref_attention_bwd(dq, dk, dv, cosine ? dl : NULL, upstream(r, "y", 4, ys), q, k, v, l, B, T, &a) ==
              PHAX_OK, "%s", phax_error());
    expect(r, "y", y, 4, ys);
    expect(r, "grad.q", dq, 4, qs);
    expect(r, "grad.k", dk, 4, ks);
    expect(r, "grad.v", dv, 4, vs);
    if (cosine) expect(r, "grad.logscale", dl, 1, ls);
}

// Λ, C and their gradients' expectations (dss_kernel, ssm_recurrent).
typedef struct {
    double *Lre, *Lim, *Cre, *Cim, *dLre, *dLim, *dCre, *dCim;
    int H, N;
    int64_t ns[1], cs[8];
} dss;

static dss get_dss(rt *r) {
    dss s;
    s.Lre = in_f64(r, "lambda_re", NULL, NULL);
    s.Lim = in_f64(r, "lambda_im", NULL, NULL);
    s.Cre = in_f64(r, "c_re", NULL, s.cs);
    s.Cim = in_f64(r, "c_im", NULL, NULL);
    s.H = (int)s.cs[0], s.N = (int)s.cs[1];
    s.ns[0] = s.N;
    s.dLre = zeros(r, s.N), s.dLim = zeros(r, s.N);
    s.dCre = zeros(r, (size_t)s.H * s.N), s.dCim = zeros(r, (size_t)s.H * s.N);
    return s;
}

static void expect_dss(rt *r, const dss *s) {
    expect(r, "grad.lambda_re", s->dLre, 1, s->ns);
    expect(r, "grad.lambda_im", s->dLim, 1, s->ns);
    expect(r, "grad.c_re", s->dCre, 2, s->cs);
    expect(r, "grad.c_im", s->dCim, 2, s->cs);
}

static void exp_dss_kernel(rt *r) {
    dss s = get_dss(r);
    int T = (int)meta_l(r, "T", 0);
    int64_t ks[2] = {s.H, T};
    double *K = zeros(r, (size_t)s.H * T);
    ref_dss_kernel_fwd(K, s.Lre, s.Lim, s.Cre, s.Cim, s.H, s.N, T);
    ref_dss_kernel_bwd(s.dLre, s.dLim, s.dCre, s.dCim, upstream(r, "k", 2, ks), s.Lre, s.Lim, s.Cre, s.Cim, s.H, s.N,
                       T);
    expect(r, "k", K, 2, ks);
    expect_dss(r, &s);
}

static void exp_ssm(rt *r, int recurrent) {
    int64_t us[8], hs[8];
    double *u = in_f64(r, "u", NULL, us), *D = in_f64(r, "d", NULL, hs);
    int B = (int)us[0], T = (int)us[1], H = (int)us[2];
    size_t n = numel(3, us);
    double *y = zeros(r, n), *du = zeros(r, n), *dD = zeros(r, H);
    if (!recurrent) {
        int64_t ks[8];
        double *K = in_f64(r, "k", NULL, ks), *dK = zeros(r, (size_t)H * T);
        ref_ssm_conv_fwd(y, u, K, D, B, T, H);
        ref_ssm_conv_bwd(du, dK, dD, upstream(r, "y", 3, us), u, K, D, B, T, H);
        expect(r, "grad.k", dK, 2, ks);
    } else {
        dss s = get_dss(r);
        ref_ssm_recurrent_fwd(y, u, s.Lre, s.Lim, s.Cre, s.Cim, D, B, T, H, s.N);
        cr_assert(ref_ssm_recurrent_bwd(du, s.dLre, s.dLim, s.dCre, s.dCim, dD, upstream(r, "y", 3, us), u, s.Lre,
                                        s.Lim, s.Cre, s.Cim, D, B, T, H, s.N) == PHAX_OK);
        expect_dss(r, &s);
    }
    expect(r, "y", y, 3, us);
    expect(r, "grad.u", du, 3, us);
    expect(r, "grad.d", dD, 1, hs);
}
static void exp_ssm_conv(rt *r) { exp_ssm(r, 0); }
static void exp_ssm_recurrent(rt *r) { exp_ssm(r, 1); }

static void exp_mlstm(rt *r) {
    int64_t qs[8], vs[8], gs[8];
    double *q = in_f64(r, "q", NULL, qs), *k = in_f64(r, "k", NULL, NULL), *v = in_f64(r, "v", NULL, vs),
           *ig = in_f64(r, "igate", NULL, gs), *fg = in_f64(r, "fgate", NULL, NULL);
    int B = (int)qs[0], T = (int)qs[1], H = (int)qs[2], dqk = (int)qs[3], dv = (int)vs[3];
    const char *form = meta_s(r, "form", "parallel");
    cr_assert(!strcmp(form, "parallel") || !strcmp(form, "recurrent"));
    int rec = !strcmp(form, "recurrent");
    double eps = meta_d(r, "eps", PHAX_MLSTM_EPS), m0 = meta_d(r, "m0", 0.0);
    size_t nqk = numel(4, qs), nv = numel(4, vs), ng = numel(3, gs);
    double *h = zeros(r, nv), *dq = zeros(r, nqk), *dk = zeros(r, nqk), *dvv = zeros(r, nv), *di = zeros(r, ng),
           *df = zeros(r, ng);
    if (rec) cr_assert(ref_mlstm_recurrent_fwd(h, q, k, v, ig, fg, B, T, H, dqk, dv, eps, m0) == PHAX_OK);
    else cr_assert(ref_mlstm_parallel_fwd(h, q, k, v, ig, fg, B, T, H, dqk, dv, eps) == PHAX_OK);
    const double *gh = upstream(r, "h", 4, vs);
    if (rec)
        cr_assert(ref_mlstm_recurrent_bwd(dq, dk, dvv, di, df, gh, q, k, v, ig, fg, B, T, H, dqk, dv, eps, m0) ==
                  PHAX_OK);
    else cr_assert(ref_mlstm_parallel_bwd(dq, dk, dvv, di, df, gh, q, k, v, ig, fg, B, T, H, dqk, dv, eps) == PHAX_OK);
    expect(r, "h", h, 4, vs);
    expect(r, "grad.q", dq, 4, qs);
    expect(r, "grad.k", dk, 4, qs);
    expect(r, "grad.v", dvv, 4, vs);
    expect(r, "grad.igate", di, 3, gs);
    expect(r, "grad.fgate", df, 3, gs);
}

// Gated DeltaNet: the state tensors in the stored (B, H, dk, dv) layout; grad.initial_state
// only where IN gives an initial state.
static void exp_gdn(rt *r) {
    int64_t qs[8], vs[8], gs[8], ss[8] = {0};
    double *q = in_f64(r, "q", NULL, qs), *k = in_f64(r, "k", NULL, NULL), *v = in_f64(r, "v", NULL, vs),
           *g = in_f64(r, "g", NULL, gs), *beta = in_f64(r, "beta", NULL, NULL);
    int B = (int)qs[0], T = (int)qs[1], H = (int)qs[2], dk = (int)qs[3], dv = (int)vs[3];
    int has_s0 = phax_st_find(&r->in, "initial_state") != NULL;
    double *s0 = has_s0 ? in_f64(r, "initial_state", NULL, NULL) : NULL;
    ss[0] = B, ss[1] = H, ss[2] = dk, ss[3] = dv;
    phax_gdn_cfg c = {meta_d(r, "scale", 1 / sqrt((double)dk)), (int)meta_d(r, "qk_l2norm", 1)};
    size_t nqk = numel(4, qs), nv = numel(4, vs), ng = numel(3, gs), ns = numel(4, ss);
    double *o = zeros(r, nv), *sT = zeros(r, ns), *dq = zeros(r, nqk), *dk_ = zeros(r, nqk), *dvv = zeros(r, nv),
           *dg = zeros(r, ng), *db = zeros(r, ng), *ds0 = zeros(r, ns);
    cr_assert(ref_gdn_recurrent_fwd(o, sT, q, k, v, g, beta, s0, B, T, H, dk, dv, &c) == PHAX_OK);
    const double *go = upstream(r, "o", 4, vs), *gsT = upstream(r, "final_state", 4, ss);
    cr_assert(ref_gdn_recurrent_bwd(dq, dk_, dvv, dg, db, has_s0 ? ds0 : NULL, go, gsT, q, k, v, g, beta, s0, B, T, H,
                                    dk, dv, &c) == PHAX_OK);
    expect(r, "o", o, 4, vs);
    expect(r, "final_state", sT, 4, ss);
    expect(r, "grad.q", dq, 4, qs);
    expect(r, "grad.k", dk_, 4, qs);
    expect(r, "grad.v", dvv, 4, vs);
    expect(r, "grad.g", dg, 3, gs);
    expect(r, "grad.beta", db, 3, gs);
    if (has_s0) expect(r, "grad.initial_state", ds0, 4, ss);
}

static void exp_mix(rt *r) {
    int nb_;
    int64_t bs[8], ps[8];
    double *b = in_f64(r, "branches", &nb_, bs), *p = in_f64(r, "p", NULL, ps);
    int nb = (int)bs[0];
    size_t n = numel(nb_ - 1, bs + 1);
    double *y = zeros(r, n), *db = zeros(r, numel(nb_, bs)), *dp = zeros(r, nb);
    ref_mix_fwd(y, b, p, nb, n);
    ref_mix_bwd(db, dp, upstream(r, "y", nb_ - 1, bs + 1), b, p, nb, n);
    expect(r, "y", y, nb_ - 1, bs + 1);
    expect(r, "grad.branches", db, nb_, bs);
    expect(r, "grad.p", dp, 1, ps);
}

static void exp_cross_entropy(rt *r) {
    int nl;
    int64_t ls[8];
    double *x = in_f64(r, "logits", &nl, ls);
    int32_t *tg = in_i32(r, "targets", NULL, NULL);
    int V = (int)ls[nl - 1];
    size_t n = numel(nl - 1, ls);
    double *loss = zeros(r, 1), *dx = zeros(r, numel(nl, ls));
    cr_assert(ref_cross_entropy_fwd(loss, x, tg, n, V) == PHAX_OK, "%s", phax_error());
    cr_assert(ref_cross_entropy_bwd(dx, *upstream(r, "loss", 0, NULL), x, tg, n, V) == PHAX_OK);
    expect(r, "loss", loss, 0, NULL);
    expect(r, "grad.logits", dx, nl, ls);
}

static void exp_adamw(rt *r) {
    int np;
    int64_t ps[8];
    double *p = in_f64(r, "param", &np, ps), *g = in_f64(r, "gradient", NULL, NULL);
    size_t n = numel(np, ps);
    double *m = phax_st_find(&r->in, "exp_avg") ? in_f64(r, "exp_avg", NULL, NULL) : zeros(r, n);
    double *v = phax_st_find(&r->in, "exp_avg_sq") ? in_f64(r, "exp_avg_sq", NULL, NULL) : zeros(r, n);
    phax_adamw_cfg a = phax_adamw_cfg_default();
    a.lr = meta_d(r, "lr", a.lr);
    a.beta1 = meta_d(r, "beta1", a.beta1);
    a.beta2 = meta_d(r, "beta2", a.beta2);
    a.eps = meta_d(r, "eps", a.eps);
    a.weight_decay = meta_d(r, "weight_decay", a.weight_decay);
    a.clip = meta_d(r, "clip", a.clip);
    ref_adamw_param t = {.p = p, .g = g, .m = m, .v = v, .n = n, .decay = (int)meta_l(r, "decay", 1)};
    double *gn = zeros(r, 1);
    cr_assert(ref_adamw_step(&t, 1, &a, meta_l(r, "step", 1), gn) == PHAX_OK, "%s", phax_error());
    expect(r, "param", p, np, ps);
    expect(r, "exp_avg", m, np, ps);
    expect(r, "exp_avg_sq", v, np, ps);
    expect(r, "grad_norm", gn, 0, NULL);
}

// The model: a ref_model from the config JSON in IN's metadata, every parameter
// loaded from IN (which must hold exactly the layout's set plus tokens and
// targets), forward then backward as the oracle documents.
static void exp_model(rt *r) {
    const char *json = phax_st_meta(&r->in, "config");
    cr_assert(json, "model example without metadata 'config'");
    phax_model_cfg cfg;
    cr_assert(phax_model_cfg_from_json_str(&cfg, json, "config") == PHAX_OK, "%s", phax_error());
    int window = (int)meta_l(r, "window", -1);
    int64_t ts[8];
    int nt;
    int32_t *tok = in_i32(r, "tokens", &nt, ts), *tg = in_i32(r, "targets", NULL, NULL);
    cr_assert(nt == 2);
    int B = (int)ts[0], T = (int)ts[1];
    ref_model m;
    cr_assert(ref_model_new(&m, &cfg, 0) == PHAX_OK, "%s", phax_error());
    cr_assert(r->in.n == m.layout.n + 2, "IN has %d tensors; the layout has %d parameters (+ tokens, targets)",
              r->in.n, m.layout.n);
    for (int i = 0; i < m.layout.n; i++) {
        const phax_param_info *p = &m.layout.p[i];
        cr_assert(phax_st_get_f64(&r->in, p->name, p->ndim, p->shape, m.params + p->offset) == PHAX_OK, "%s",
                  phax_error());
    }
    size_t V = (size_t)m.cfg.vocab_size;
    double *logits = zeros(r, (size_t)B * T * V), *loss = zeros(r, 1);
    cr_assert(ref_model_forward(&m, tok, tg, B, T, window, logits, loss) == PHAX_OK, "%s", phax_error());
    cr_assert(ref_model_backward(&m, tok, tg, B, T, window, loss) == PHAX_OK, "%s", phax_error());
    int64_t lsh[3] = {B, T, (int64_t)V};
    expect(r, "logits", logits, 3, lsh);
    expect(r, "loss", loss, 0, NULL);
    for (int i = 0; i < m.layout.n; i++) {
        const phax_param_info *p = &m.layout.p[i];
        char name[96];
        snprintf(name, sizeof name, "grad.%s", p->name);
        double *g = zeros(r, p->numel);
        memcpy(g, m.grads + p->offset, p->numel * sizeof *g);
        expect(r, name, g, p->ndim, p->shape);
    }
    ref_model_free(&m);
}

// --- 1. round trip of every op ---------------------------------------------------------------
Test(oracle, roundtrip_embedding) { roundtrip("embedding", exp_embedding, NULL); }
Test(oracle, roundtrip_linear) { roundtrip("linear", exp_linear, NULL); }
Test(oracle, roundtrip_rmsnorm) { roundtrip("rmsnorm", exp_rmsnorm, NULL); }
Test(oracle, roundtrip_layernorm) { roundtrip("layernorm", exp_layernorm, NULL); }
Test(oracle, roundtrip_headnorm) { roundtrip("headnorm", exp_headnorm, NULL); }
Test(oracle, roundtrip_gelu) { roundtrip("gelu", exp_gelu, NULL); }
Test(oracle, roundtrip_silu) { roundtrip("silu", exp_silu, NULL); }
Test(oracle, roundtrip_swiglu) { roundtrip("swiglu", exp_swiglu, NULL); }
Test(oracle, roundtrip_rope) { roundtrip("rope", exp_rope, NULL); }
Test(oracle, roundtrip_attention) { roundtrip("attention", exp_attention, NULL); }
Test(oracle, roundtrip_dss_kernel) { roundtrip("dss_kernel", exp_dss_kernel, NULL); }
Test(oracle, roundtrip_ssm_conv) { roundtrip("ssm_conv", exp_ssm_conv, NULL); }
Test(oracle, roundtrip_ssm_recurrent) { roundtrip("ssm_recurrent", exp_ssm_recurrent, NULL); }
Test(oracle, roundtrip_mlstm) { roundtrip("mlstm", exp_mlstm, NULL); }
Test(oracle, roundtrip_gdn) { roundtrip("gdn", exp_gdn, NULL); }
Test(oracle, roundtrip_mix) { roundtrip("mix", exp_mix, NULL); }
Test(oracle, roundtrip_cross_entropy) { roundtrip("cross_entropy", exp_cross_entropy, NULL); }
Test(oracle, roundtrip_adamw) { roundtrip("adamw", exp_adamw, NULL); }
Test(oracle, roundtrip_model) { roundtrip("model", exp_model, NULL); }

// Variants the examples do not reach: optional inputs absent (then their
// gradient must be absent too), the other attention / mLSTM modes, a SWAX model.
static void prep_drop_bias(const char *ex, const char *in) {
    phax_st_file f = st_open(ex);
    st_write_free(copy_except(&f, (const char *const[]){"bias", NULL}), in);
    phax_st_free(&f);
}
Test(oracle, roundtrip_linear_no_bias) { roundtrip("linear", exp_linear, prep_drop_bias); }
Test(oracle, roundtrip_layernorm_no_bias) { roundtrip("layernorm", exp_layernorm, prep_drop_bias); }

static void prep_attention_dot(const char *ex, const char *in) {
    phax_st_file f = st_open(ex);
    phax_st_writer *w = copy_except(&f, (const char *const[]){"logscale", "score", "window", "rope", NULL});
    cr_assert(phax_st_add_meta(w, "score", "dot") == PHAX_OK);
    cr_assert(phax_st_add_meta(w, "rope", "0") == PHAX_OK);  // and window absent: full causal
    st_write_free(w, in);
    phax_st_free(&f);
}
Test(oracle, roundtrip_attention_dot_full) { roundtrip("attention", exp_attention, prep_attention_dot); }

static void prep_mlstm_recurrent(const char *ex, const char *in) {
    phax_st_file f = st_open(ex);
    phax_st_writer *w = copy_except(&f, (const char *const[]){"form", NULL});
    cr_assert(phax_st_add_meta(w, "form", "recurrent") == PHAX_OK);
    cr_assert(phax_st_add_meta(w, "m0", "0.5") == PHAX_OK);
    st_write_free(w, in);
    phax_st_free(&f);
}
Test(oracle, roundtrip_mlstm_recurrent) { roundtrip("mlstm", exp_mlstm, prep_mlstm_recurrent); }

// Gated DeltaNet from a zero state (no initial_state: no grad.initial_state either), q and k
// as given (qk_l2norm 0) with a scale of 0.5.
static void prep_gdn_raw(const char *ex, const char *in) {
    phax_st_file f = st_open(ex);
    phax_st_writer *w = copy_except(&f, (const char *const[]){"initial_state", NULL});
    cr_assert(phax_st_add_meta(w, "qk_l2norm", "0") == PHAX_OK && phax_st_add_meta(w, "scale", "0.5") == PHAX_OK);
    st_write_free(w, in);
    phax_st_free(&f);
}
Test(oracle, roundtrip_gdn_zero_state_raw) { roundtrip("gdn", exp_gdn, prep_gdn_raw); }

// A SWAX model written here (the example is PHA): both mixers, a window
// attribute, and ignored targets (−1).
Test(oracle, roundtrip_model_swax) {
    phax_model_cfg cfg = phax_model_cfg_default(PHAX_FAMILY_SWAX);
    cfg.vocab_size = 13, cfg.d_model = 16, cfg.n_layers = 2, cfg.n_heads = 2, cfg.n_kv_heads = 1;
    cfg.ffn_hidden = 24, cfg.mlstm_heads = 2, cfg.train_len = 16;
    phax_rng rng = tu_rng("oracle/roundtrip_model_swax");
    ref_model m;
    cr_assert(ref_model_new(&m, &cfg, phax_rng_u64(&rng)) == PHAX_OK, "%s", phax_error());
    phax_st_writer *w = phax_st_writer_new();
    cr_assert(w);
    char *json = phax_model_cfg_to_json(&m.cfg);
    cr_assert(json && phax_st_add_meta(w, "config", json) == PHAX_OK);
    free(json);
    cr_assert(phax_st_add_meta(w, "window", "2") == PHAX_OK);
    for (int i = 0; i < m.layout.n; i++) {
        const phax_param_info *p = &m.layout.p[i];
        cr_assert(phax_st_add_f64(w, p->name, m.params + p->offset, p->ndim, p->shape) == PHAX_OK);
    }
    ref_model_free(&m);
    int32_t tok[2 * 6], tg[2 * 6];
    for (int i = 0; i < 12; i++) {
        tok[i] = (int32_t)phax_rng_below(&rng, 13);
        tg[i] = i % 5 == 2 ? -1 : (int32_t)phax_rng_below(&rng, 13);
    }
    int64_t ts[2] = {2, 6};
    cr_assert(phax_st_add_i32(w, "tokens", tok, 2, ts) == PHAX_OK);
    cr_assert(phax_st_add_i32(w, "targets", tg, 2, ts) == PHAX_OK);
    const char *in = wpath("in.safetensors");
    st_write_free(w, in);
    roundtrip_in("model", in, exp_model);
}

// --- 2. the upstream gradient --------------------------------------------------------------
// Values k/2^s with small k: every product and partial sum below is a multiple
// of 2^-5 and below 2^7 in magnitude, so float64 holds it exactly and the
// sums are exact in any order; == is the right comparison.
static void fill_dyadic(double *x, size_t n, phax_rng *r, int half_range, double scale) {
    for (size_t i = 0; i < n; i++)
        x[i] = (double)((int)phax_rng_below(r, (uint64_t)(2 * half_range + 1)) - half_range) * scale;
}

Test(oracle, upstream_given_is_used) {
    enum { B = 2, T = 3, IN = 4, OUT = 5, N = B * T };
    phax_rng rng = tu_rng("oracle/upstream_given_is_used");
    double x[N * IN], W[OUT * IN], b[OUT], gy[N * OUT];
    fill_dyadic(x, N * IN, &rng, 8, 0.25);  // [-2, 2] in steps of 1/4
    fill_dyadic(W, OUT * IN, &rng, 8, 0.125);  // [-1, 1] in steps of 1/8
    fill_dyadic(b, OUT, &rng, 4, 0.5);
    fill_dyadic(gy, N * OUT, &rng, 3, 1.0);  // integers in [-3, 3]
    int64_t xs[3] = {B, T, IN}, ws[2] = {OUT, IN}, bs[1] = {OUT}, ys[3] = {B, T, OUT};
    phax_st_writer *w = phax_st_writer_new();
    cr_assert(w);
    cr_assert(phax_st_add_f64(w, "x", x, 3, xs) == PHAX_OK && phax_st_add_f64(w, "weight", W, 2, ws) == PHAX_OK &&
              phax_st_add_f64(w, "bias", b, 1, bs) == PHAX_OK && phax_st_add_f64(w, "grad.y", gy, 3, ys) == PHAX_OK);
    const char *in = wpath("in.safetensors"), *out = wpath("out.safetensors");
    st_write_free(w, in);
    run_ok("linear", in, out);
    phax_st_file f = st_open(out);
    double y_o[N * OUT], gy_o[N * OUT], dx_o[N * IN], dW_o[OUT * IN], db_o[OUT];
    cr_assert(phax_st_get_f64(&f, "y", 3, ys, y_o) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_st_get_f64(&f, "grad.y", 3, ys, gy_o) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_st_get_f64(&f, "grad.x", 3, xs, dx_o) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_st_get_f64(&f, "grad.weight", 2, ws, dW_o) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_st_get_f64(&f, "grad.bias", 1, bs, db_o) == PHAX_OK, "%s", phax_error());
    phax_st_free(&f);
    for (int i = 0; i < N * OUT; i++) cr_assert(gy_o[i] == gy[i], "grad.y[%d] = %g, given %g", i, gy_o[i], gy[i]);
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < IN; j++) {  // grad.x = grad.y · W
            double s = 0;
            for (int o = 0; o < OUT; o++) s += gy[i * OUT + o] * W[o * IN + j];
            cr_assert(dx_o[i * IN + j] == s, "grad.x[%d,%d] = %.17g, grad.y·W = %.17g", i, j, dx_o[i * IN + j], s);
        }
        for (int o = 0; o < OUT; o++) {  // y = x Wᵀ + b
            double s = b[o];
            for (int j = 0; j < IN; j++) s += x[i * IN + j] * W[o * IN + j];
            cr_assert(y_o[i * OUT + o] == s, "y[%d,%d] = %.17g, x·Wᵀ + b = %.17g", i, o, y_o[i * OUT + o], s);
        }
    }
    for (int o = 0; o < OUT; o++) {
        double sb = 0;
        for (int i = 0; i < N; i++) sb += gy[i * OUT + o];
        cr_assert(db_o[o] == sb, "grad.bias[%d] = %.17g, Σ grad.y = %.17g", o, db_o[o], sb);
        for (int j = 0; j < IN; j++) {  // grad.weight = grad.yᵀ · x
            double s = 0;
            for (int i = 0; i < N; i++) s += gy[i * OUT + o] * x[i * IN + j];
            cr_assert(dW_o[o * IN + j] == s, "grad.weight[%d,%d] = %.17g, grad.yᵀ·x = %.17g", o, j,
                      dW_o[o * IN + j], s);
        }
    }
}

static double *tensor_f64(const phax_st_file *f, const char *name, size_t *n) {
    const phax_st_tensor *t = phax_st_find(f, name);
    cr_assert(t, "%s: no '%s'", f->path, name);
    double *x = malloc((t->numel ? t->numel : 1) * sizeof *x);
    cr_assert(x && phax_st_to_f64(t, x) == PHAX_OK);
    *n = t->numel;
    return x;
}

Test(oracle, upstream_drawn_from_seed) {
    const char *ex = wpath("example.safetensors");
    example("linear", ex);
    phax_st_file e = st_open(ex);
    cr_assert(!phax_st_find(&e, "grad.y"), "the example already holds grad.y");
    const char *s = phax_st_meta(&e, "seed");
    cr_assert(s && !strcmp(s, "0"), "the example's seed is not '0'");
    const char *ex1 = wpath("seed1.safetensors"), *ex_none = wpath("noseed.safetensors");
    phax_st_writer *w = copy_except(&e, (const char *const[]){"seed", NULL});
    st_write_free(w, ex_none);
    w = copy_except(&e, (const char *const[]){"seed", NULL});
    cr_assert(phax_st_add_meta(w, "seed", "1") == PHAX_OK);
    st_write_free(w, ex1);
    phax_st_free(&e);

    const char *o1 = wpath("o1.safetensors"), *o2 = wpath("o2.safetensors"), *o3 = wpath("o3.safetensors"),
               *o4 = wpath("o4.safetensors");
    run_ok("linear", ex, o1);
    run_ok("linear", ex, o2);
    run_ok("linear", ex1, o3);
    run_ok("linear", ex_none, o4);
    // Same input, same seed: the same file, byte for byte.
    size_t l1, l2;
    char *b1 = slurp(o1, &l1), *b2 = slurp(o2, &l2);
    cr_assert(l1 == l2 && memcmp(b1, b2, l1) == 0, "two runs with seed 0 wrote different files");
    free(b1);
    free(b2);

    phax_st_file f1 = st_open(o1), f3 = st_open(o3), f4 = st_open(o4);
    size_t n1, n3, n4, m1, m3;
    double *g1 = tensor_f64(&f1, "grad.y", &n1), *g3 = tensor_f64(&f3, "grad.y", &n3),
           *g4 = tensor_f64(&f4, "grad.y", &n4);
    cr_assert(n1 == n3 && n1 == n4 && n1 > 1);
    cr_assert(tu_all_finite(g1, n1) && tu_all_finite(g3, n3));
    // A draw, not a constant (a sum of all-ones hides errors that cancel).
    int varies = 0;
    for (size_t i = 1; i < n1; i++) varies |= g1[i] != g1[0];
    cr_assert(varies, "the drawn grad.y is constant");
    // Another seed: another grad.y, element by element; the default seed is 0.
    size_t same = 0;
    for (size_t i = 0; i < n1; i++) same += g1[i] == g3[i];
    cr_assert(same == 0, "seeds 0 and 1 drew %zu equal grad.y elements of %zu", same, n1);
    cr_assert(memcmp(g1, g4, n1 * sizeof *g1) == 0, "no seed did not draw what seed 0 draws");
    // The forward does not depend on the seed; the input gradient does.
    double *y1 = tensor_f64(&f1, "y", &m1), *y3 = tensor_f64(&f3, "y", &m3);
    cr_assert(m1 == m3 && memcmp(y1, y3, m1 * sizeof *y1) == 0, "y depends on the seed");
    free(y1);
    free(y3);
    double *dx1 = tensor_f64(&f1, "grad.x", &m1), *dx3 = tensor_f64(&f3, "grad.x", &m3);
    cr_assert(m1 == m3 && memcmp(dx1, dx3, m1 * sizeof *dx1) != 0, "grad.x does not depend on the seed");
    free(dx1);
    free(dx3);
    free(g1);
    free(g3);
    free(g4);
    phax_st_free(&f1);
    phax_st_free(&f3);
    phax_st_free(&f4);
}

// --- 3. F32 inputs ----------------------------------------------------------------------------
// The linear example re-stored in F32: the oracle must give exactly what the
// ref gives on the F32-rounded values in float64 (promotion is exact).
Test(oracle, f32_inputs_promoted) {
    const char *ex = wpath("example.safetensors"), *in = wpath("in32.safetensors");
    example("linear", ex);
    phax_st_file e = st_open(ex);
    const char *names[] = {"x", "weight", "bias"};
    phax_st_writer *w = copy_except(&e, (const char *const[]){"x", "weight", "bias", NULL});
    double *orig[3];
    size_t n[3];
    for (int i = 0; i < 3; i++) {
        const phax_st_tensor *t = phax_st_find(&e, names[i]);
        cr_assert(t && t->dtype == PHAX_DT_F64);
        orig[i] = tensor_f64(&e, names[i], &n[i]);
        cr_assert(phax_st_add_f32_from_f64(w, names[i], orig[i], t->ndim, t->shape) == PHAX_OK, "%s", phax_error());
    }
    st_write_free(w, in);
    phax_st_free(&e);
    // The file really holds F32, rounded to nearest, and rounding changed something.
    phax_st_file f = st_open(in);
    size_t changed = 0;
    for (int i = 0; i < 3; i++) {
        const phax_st_tensor *t = phax_st_find(&f, names[i]);
        cr_assert(t && t->dtype == PHAX_DT_F32, "'%s' not stored as F32", names[i]);
        size_t m;
        double *x = tensor_f64(&f, names[i], &m);
        cr_assert(m == n[i]);
        for (size_t j = 0; j < m; j++) {
            cr_assert(x[j] == (double)(float)orig[i][j], "'%s'[%zu]: %.17g is not the F32 rounding of %.17g",
                      names[i], j, x[j], orig[i][j]);
            changed += x[j] != orig[i][j];
        }
        free(x);
        free(orig[i]);
    }
    phax_st_free(&f);
    cr_assert(changed > 0, "no value changed by rounding to F32: the test would not tell F32 from F64");
    // exp_linear promotes IN's F32 tensors with phax_st_to_f64 (exact) and
    // calls the ref on them; everything must match bit for bit.
    roundtrip_in("linear", in, exp_linear);
}

// --- 4. bad input ----------------------------------------------------------------------------
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    cr_assert(d, "%s: %s", dir, strerror(errno));
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

// `phax oracle op in out` must fail cleanly: no signal, exit status 1, exactly
// one line on stderr starting "phax: " and naming `named` (the input file,
// unless the problem is the output) and containing `needle` (the problem; NULL
// for any), no output file and nothing else new in the work dir.
static void refused_out(const char *op, const char *in, const char *out, const char *named, const char *needle) {
    int before = count_entries(g_work);
    proc p = oracle(op, in, out);
    cr_assert(!p.signaled, "%s %s: killed by signal %d; stderr:\n%s", op, in, p.sig, p.err);
    cr_assert(p.exited && p.code == 1, "%s %s: exit status %d (expected 1); stderr:\n%s", op, in, p.code, p.err);
    size_t len = strlen(p.err);
    cr_assert(len > 0 && p.err[len - 1] == '\n' && strchr(p.err, '\n') == p.err + len - 1,
              "%s %s: stderr is not exactly one line:\n%s", op, in, p.err);
    cr_assert(strncmp(p.err, "phax: ", 6) == 0, "%s %s: stderr does not start with 'phax: ': %s", op, in, p.err);
    cr_assert(strstr(p.err, named), "%s %s: the message does not name %s: %s", op, in, named, p.err);
    cr_assert(!needle || strstr(p.err, needle), "%s %s: the message does not mention '%s': %s", op, in, needle,
              p.err);
    cr_assert(!exists(out), "%s %s: a failed run left %s", op, in, out);
    cr_assert(count_entries(g_work) == before, "%s %s: a failed run left a file in the work dir", op, in);
    proc_free(&p);
}

static void refused(const char *op, const char *in, const char *needle) {
    refused_out(op, in, wpath("out.safetensors"), in, needle);
}

Test(oracle, bad_missing_tensor) {
    const char *in = wpath("no_k.safetensors");
    edited_example("attention", in, (const char *const[]){"k", NULL}, NULL, NULL);
    refused("attention", in, "'k'");
}

Test(oracle, bad_misshaped_tensor) {
    const char *ex = wpath("example.safetensors"), *in = wpath("bad_w.safetensors");
    example("linear", ex);
    phax_st_file e = st_open(ex);
    const phax_st_tensor *x = phax_st_find(&e, "x");
    cr_assert(x);
    int64_t ws[2] = {7, x->shape[x->ndim - 1] + 1};  // one input column too many
    double W[7 * 16] = {0};
    cr_assert(ws[1] <= 16);
    phax_st_writer *w = copy_except(&e, (const char *const[]){"weight", NULL});
    cr_assert(phax_st_add_f64(w, "weight", W, 2, ws) == PHAX_OK);
    st_write_free(w, in);
    phax_st_free(&e);
    refused("linear", in, "weight");
}

Test(oracle, bad_upstream_shape) {
    const char *ex = wpath("example.safetensors"), *in = wpath("bad_gy.safetensors");
    example("linear", ex);
    phax_st_file e = st_open(ex);
    double g[3] = {1, 2, 3};
    int64_t gs[1] = {3};
    phax_st_writer *w = copy_except(&e, NULL);
    cr_assert(phax_st_add_f64(w, "grad.y", g, 1, gs) == PHAX_OK);
    st_write_free(w, in);
    phax_st_free(&e);
    refused("linear", in, "grad.y");
}

Test(oracle, bad_dtype_integer_x) {
    const char *ex = wpath("example.safetensors"), *in = wpath("int_x.safetensors");
    example("linear", ex);
    phax_st_file e = st_open(ex);
    const phax_st_tensor *x = phax_st_find(&e, "x");
    cr_assert(x);
    int32_t *xi = calloc(x->numel, sizeof *xi);
    cr_assert(xi);
    phax_st_writer *w = copy_except(&e, (const char *const[]){"x", NULL});
    cr_assert(phax_st_add_i32(w, "x", xi, x->ndim, x->shape) == PHAX_OK);
    free(xi);
    st_write_free(w, in);
    phax_st_free(&e);
    refused("linear", in, "'x'");
}

Test(oracle, bad_unknown_op) {
    const char *in = wpath("in.safetensors");
    example("linear", in);
    refused("no_such_op", in, "unknown op");
}

Test(oracle, bad_attribute_unknown_value) {
    const char *in = wpath("euclid.safetensors");
    edited_example("attention", in, NULL, "score", "euclid");
    refused("attention", in, "score");
}

Test(oracle, bad_attribute_invalid) {
    const char *in1 = wpath("window_abc.safetensors"), *in2 = wpath("window_neg.safetensors"),
               *in3 = wpath("window_big.safetensors"), *in4 = wpath("heads_abc.safetensors");
    edited_example("attention", in1, NULL, "window", "abc");
    edited_example("attention", in2, NULL, "window", "-1");
    edited_example("attention", in3, NULL, "window", "99999999999999999999");
    edited_example("headnorm", in4, NULL, "heads", "4");  // does not divide d = 6
    refused("attention", in1, "window");
    refused("attention", in2, "window");
    refused("attention", in3, "window");
    refused("headnorm", in4, "heads");
}

Test(oracle, bad_heads_not_divisible) {
    const char *ex = wpath("example.safetensors"), *in = wpath("gqa.safetensors");
    example("attention", ex);
    phax_st_file e = st_open(ex);
    const phax_st_tensor *q = phax_st_find(&e, "q"), *k = phax_st_find(&e, "k");
    cr_assert(q && k && k->shape[2] == 2);
    int64_t qs[4] = {q->shape[0], q->shape[1], 3, q->shape[3]}, ls[1] = {3};  // Hq = 3, Hkv = 2
    size_t n = numel(4, qs);
    double *qq = calloc(n, sizeof *qq), l[3] = {2, 2, 2};
    cr_assert(qq);
    for (size_t i = 0; i < n; i++) qq[i] = 0.01 * (double)(i % 17);
    phax_st_writer *w = copy_except(&e, (const char *const[]){"q", "logscale", NULL});
    cr_assert(phax_st_add_f64(w, "q", qq, 4, qs) == PHAX_OK && phax_st_add_f64(w, "logscale", l, 1, ls) == PHAX_OK);
    free(qq);
    st_write_free(w, in);
    phax_st_free(&e);
    refused("attention", in, "divisible");
}

// The example with integer tensor `name` replaced: element `at` set to `bad`.
static void int_edit(const char *op, const char *name, int at, int32_t bad, const char *path) {
    const char *ex = wpath("example.safetensors");
    example(op, ex);
    phax_st_file e = st_open(ex);
    const phax_st_tensor *t = phax_st_find(&e, name);
    cr_assert(t && (int)t->numel > at);
    int32_t *v = calloc(t->numel, sizeof *v);
    cr_assert(v && phax_st_to_i32(t, v) == PHAX_OK);
    v[at] = bad;
    phax_st_writer *w = copy_except(&e, (const char *const[]){name, NULL});
    cr_assert(phax_st_add_i32(w, name, v, t->ndim, t->shape) == PHAX_OK);
    free(v);
    st_write_free(w, path);
    phax_st_free(&e);
    unlink(ex);
}

Test(oracle, bad_token_out_of_range) {
    const char *in1 = wpath("tok_v.safetensors"), *in2 = wpath("tok_neg.safetensors");
    int_edit("embedding", "tokens", 3, 11, in1);  // V = 11
    int_edit("embedding", "tokens", 0, -1, in2);
    refused("embedding", in1, "11");
    refused("embedding", in2, "-1");
}

Test(oracle, bad_target_out_of_range) {
    const char *in1 = wpath("tg_v.safetensors"), *in2 = wpath("tg_neg.safetensors");
    int_edit("cross_entropy", "targets", 4, 11, in1);  // V = 11
    int_edit("cross_entropy", "targets", 1, -2, in2);  // −1 is "ignored", −2 is not
    refused("cross_entropy", in1, "11");
    refused("cross_entropy", in2, "-2");
}

Test(oracle, bad_model_missing_parameter) {
    const char *in1 = wpath("no_embed.safetensors"), *in2 = wpath("no_block.safetensors");
    edited_example("model", in1, (const char *const[]){"embed.weight", NULL}, NULL, NULL);
    // The last parameter of the layout, whatever it is.
    const char *ex = wpath("example.safetensors");
    example("model", ex);
    phax_st_file e = st_open(ex);
    phax_model_cfg cfg;
    cr_assert(phax_model_cfg_from_json_str(&cfg, phax_st_meta(&e, "config"), "config") == PHAX_OK);
    phax_layout L;
    cr_assert(phax_model_cfg_resolve(&cfg) == PHAX_OK && phax_layout_build(&L, &cfg) == PHAX_OK);
    char last[96];
    snprintf(last, sizeof last, "%s", L.p[L.n - 1].name);
    phax_layout_free(&L);
    st_write_free(copy_except(&e, (const char *const[]){last, NULL}), in2);
    phax_st_free(&e);
    refused("model", in1, "embed.weight");
    refused("model", in2, last);
}

Test(oracle, bad_model_config) {
    const char *in1 = wpath("json.safetensors"), *in2 = wpath("heads.safetensors"),
               *in3 = wpath("key.safetensors"), *in4 = wpath("noconfig.safetensors");
    edited_example("model", in1, NULL, "config", "{\"family\": \"pha\", \"d_model\": ");
    edited_example("model", in2, NULL, "config", "{\"family\": \"pha\", \"n_heads\": 3, \"n_kv_heads\": 2}");
    edited_example("model", in3, NULL, "config", "{\"family\": \"pha\", \"no_such_key\": 1}");
    edited_example("model", in4, (const char *const[]){"config", NULL}, NULL, NULL);
    refused("model", in1, "config");
    refused("model", in2, "n_kv_heads");
    refused("model", in3, "no_such_key");
    refused("model", in4, "config");
}

Test(oracle, bad_truncated_file) {
    const char *ex = wpath("example.safetensors");
    example("linear", ex);
    size_t len;
    char *b = slurp(ex, &len);
    cr_assert(len > 64);
    size_t cuts[] = {0, 5, 8, 20, len / 2, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "cut%zu.safetensors", cuts[i]);
        const char *in = wpath(name);
        spill(in, b, cuts[i]);
        refused("linear", in, NULL);
    }
    free(b);
}

Test(oracle, bad_not_safetensors) {
    phax_rng rng = tu_rng("oracle/bad_not_safetensors");
    unsigned char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)phax_rng_below(&rng, 256);
    const char *in1 = wpath("random.safetensors"), *in2 = wpath("garbage_header.safetensors");
    spill(in1, junk, sizeof junk);
    // A plausible length prefix (100) followed by random bytes: not JSON.
    for (int i = 0; i < 8; i++) junk[i] = (unsigned char)(i == 0 ? 100 : 0);
    junk[8] = 0xff;  // not even UTF-8
    spill(in2, junk, sizeof junk);
    refused("linear", in1, NULL);
    refused("linear", in2, NULL);
    const char *in3 = wpath("text.safetensors");
    spill(in3, "hello, world\n", 13);
    refused("linear", in3, NULL);
}

Test(oracle, bad_header_length_beyond_file) {
    const char *ex = wpath("example.safetensors");
    example("linear", ex);
    size_t len;
    char *b = slurp(ex, &len);
    uint64_t bad[] = {len - 8 + 1, len, UINT64_MAX / 2, UINT64_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int k = 0; k < 8; k++) b[k] = (char)(unsigned char)(bad[i] >> (8 * k));
        char name[64];
        snprintf(name, sizeof name, "hlen%zu.safetensors", i);
        const char *in = wpath(name);
        spill(in, b, len);
        refused("linear", in, NULL);
    }
    free(b);
}

Test(oracle, bad_missing_input_file) {
    refused("linear", wpath("does_not_exist.safetensors"), NULL);
}

// OUT in a directory that does not exist: the error names OUT (the input is
// fine), and no file or directory appears.
Test(oracle, bad_output_dir_missing) {
    const char *in = wpath("in.safetensors"), *out = wpath("no_such_dir/out.safetensors");
    example("linear", in);
    refused_out("linear", in, out, out, NULL);
    cr_assert(!exists(wpath("no_such_dir")));
}

// --- 5. --list --------------------------------------------------------------------------------
Test(oracle, list_names_every_op) {
    proc p = oracle("--list", NULL, NULL);
    expect_success(&p, "phax oracle --list");
    // Each op heads its own entry as a line of its own.
    for (int i = 0; i < N_ALL_OPS; i++) {
        char line[64];
        snprintf(line, sizeof line, "\n%s\n", ALL_OPS[i]);
        cr_assert(strstr(p.out, line), "--list does not name '%s':\n%s", ALL_OPS[i], p.out);
    }
    // And no op this file does not test: every unindented word-only line is one of ALL_OPS.
    int nops = 0;
    for (char *s = p.out; *s;) {
        char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        int word = len > 0 && s[0] != ' ';
        for (size_t j = 0; j < len && word; j++)
            word = (s[j] >= 'a' && s[j] <= 'z') || s[j] == '_' || (s[j] >= '0' && s[j] <= '9');
        if (word) {
            int known = 0;
            for (int i = 0; i < N_ALL_OPS; i++) known |= strlen(ALL_OPS[i]) == len && !strncmp(ALL_OPS[i], s, len);
            cr_assert(known, "--list names an op with no round-trip test here: %.*s", (int)len, s);
            nops++;
        }
        s += len + (nl != NULL);
    }
    cr_assert(nops == N_ALL_OPS, "--list names %d ops, expected %d", nops, N_ALL_OPS);
    proc_free(&p);
}

// --- 6. issue 11: names the op does not know (item 10), inputs that ask for too much (item 2),
// the model's head-norm eps from its config (item 12) ------------------------------------------
// Every refusal below goes through refused(): exit status 1, one line naming the input
// file and the offending key or tensor, no output file.

// The example of `op` with one extra F64 tensor `name` of shape (n) added.
static void with_extra_tensor(const char *op, const char *path, const char *name, int64_t n) {
    const char *ex = wpath("example.safetensors");
    example(op, ex);
    phax_st_file f = st_open(ex);
    phax_st_writer *w = copy_except(&f, NULL);
    double *x = calloc((size_t)n, sizeof *x);
    cr_assert(x);
    cr_assert(phax_st_add_f64(w, name, x, 1, &n) == PHAX_OK, "%s", phax_error());
    free(x);
    st_write_free(w, path);
    phax_st_free(&f);
    cr_assert(unlink(ex) == 0);
}

// A misspelt attribute key ("windw") used to run full attention silently.
Test(oracle, unknown_attribute_key_refused) {
    const char *in1 = wpath("windw.safetensors"), *in2 = wpath("eps_typo.safetensors");
    edited_example("attention", in1, NULL, "windw", "3");
    edited_example("rmsnorm", in2, NULL, "epsilon", "1e-3");
    refused("attention", in1, "'windw'");
    refused("attention", in1, "window");  // and the message lists the known keys
    refused("rmsnorm", in2, "'epsilon'");
    // The keys every op accepts: seed, op (which must name the op run), format (torch writers).
    const char *in3 = wpath("format.safetensors"), *in4 = wpath("op_other.safetensors");
    edited_example("linear", in3, NULL, "format", "pt");
    run_ok("linear", in3, wpath("out3.safetensors"));
    edited_example("linear", in4, NULL, "op", "rmsnorm");
    refused("linear", in4, "'op'");
    // Keys and values are someone else's bytes: a newline in either still gives one line.
    const char *in5 = wpath("nl_key.safetensors"), *in6 = wpath("nl_value.safetensors");
    edited_example("attention", in5, NULL, "win\ndow", "3");
    edited_example("attention", in6, NULL, "window", "3\n4");
    refused("attention", in5, "win\\x0adow");
    refused("attention", in6, "'window'");
}

// An extra or misspelt tensor beside the right ones used to be ignored.
Test(oracle, unknown_tensor_refused) {
    const char *in1 = wpath("wieght.safetensors"), *in2 = wpath("grad_z.safetensors"),
               *in3 = wpath("bias_rms.safetensors");
    with_extra_tensor("linear", in1, "wieght", 6);
    with_extra_tensor("linear", in2, "grad.z", 3);  // an upstream gradient of no output
    with_extra_tensor("rmsnorm", in3, "bias", 6);   // rmsnorm has no bias (layernorm has)
    refused("linear", in1, "'wieght'");
    refused("linear", in2, "'grad.z'");
    refused("rmsnorm", in3, "'bias'");
    // A misspelt name instead of the right one: the unknown name is what the message names.
    const char *in4 = wpath("only_wieght.safetensors");
    const char *ex = wpath("example.safetensors");
    example("linear", ex);
    phax_st_file f = st_open(ex);
    const phax_st_tensor *wt = phax_st_find(&f, "weight");
    cr_assert(wt);
    phax_st_writer *w = copy_except(&f, (const char *const[]){"weight", NULL});
    cr_assert(phax_st_add_raw(w, "wieght", wt->dtype, wt->ndim, wt->shape, wt->data) == PHAX_OK);
    st_write_free(w, in4);
    phax_st_free(&f);
    refused("linear", in4, "'wieght'");
}

// A tensor or attribute that only one setting of the op uses, given with the other.
Test(oracle, unused_by_setting_refused) {
    const char *in1 = wpath("m0_parallel.safetensors"), *in2 = wpath("logscale_dot.safetensors");
    edited_example("mlstm", in1, NULL, "m0", "0.5");  // the example's form is parallel
    edited_example("attention", in2, NULL, "score", "dot");  // keeps its logscale
    refused("mlstm", in1, "'m0'");
    refused("attention", in2, "'logscale'");
    // RoPE's attributes without RoPE; a SWA window for a PHA-family model (it has attn_window).
    const char *in3 = wpath("pos0_norope.safetensors"), *in4 = wpath("window_pha.safetensors");
    const char *ex = wpath("example.safetensors");
    example("attention", ex);
    phax_st_file f = st_open(ex);
    phax_st_writer *w = copy_except(&f, (const char *const[]){"rope", NULL});
    cr_assert(phax_st_add_meta(w, "rope", "0") == PHAX_OK && phax_st_add_meta(w, "pos0", "5") == PHAX_OK);
    st_write_free(w, in3);
    phax_st_free(&f);
    edited_example("model", in4, NULL, "window", "3");  // the example is PHA
    refused("attention", in3, "'pos0'");
    refused("model", in4, "'window'");
}

// The model op: lm_head.weight with a tied config, a parameter name the layout lacks,
// an upstream gradient (the model's loss is its own output: none is read).
Test(oracle, model_unknown_tensor_refused) {
    const char *ex = wpath("model_ex.safetensors");
    example("model", ex);
    phax_st_file f = st_open(ex);
    const phax_st_tensor *E = phax_st_find(&f, "embed.weight");
    cr_assert(E && E->ndim == 2);
    cr_assert(strstr(phax_st_meta(&f, "config"), "\"tie_embeddings\": true"));
    const char *in1 = wpath("lm_head.safetensors"), *in2 = wpath("typo_param.safetensors"),
               *in3 = wpath("grad_logits.safetensors");
    phax_st_writer *w = copy_except(&f, NULL);
    cr_assert(phax_st_add_raw(w, "lm_head.weight", E->dtype, 2, E->shape, E->data) == PHAX_OK);
    st_write_free(w, in1);
    w = copy_except(&f, NULL);
    cr_assert(phax_st_add_raw(w, "blocks.0.attn.wq.wieght", E->dtype, 2, E->shape, E->data) == PHAX_OK);
    st_write_free(w, in2);
    w = copy_except(&f, NULL);
    cr_assert(phax_st_add_raw(w, "grad.logits", E->dtype, 2, E->shape, E->data) == PHAX_OK);
    st_write_free(w, in3);
    phax_st_free(&f);
    refused("model", in1, "'lm_head.weight'");
    refused("model", in1, "tie_embeddings");
    refused("model", in2, "'blocks.0.attn.wq.wieght'");
    refused("model", in3, "'grad.logits'");
    // A parameter of the wrong shape is named with the shape the config gives it.
    const char *in4 = wpath("wk_shape.safetensors");
    f = st_open(ex);
    E = phax_st_find(&f, "embed.weight");
    w = copy_except(&f, (const char *const[]){"blocks.0.attn.wk.weight", NULL});
    cr_assert(phax_st_add_raw(w, "blocks.0.attn.wk.weight", E->dtype, 2, E->shape, E->data) == PHAX_OK);
    st_write_free(w, in4);
    phax_st_free(&f);
    refused("model", in4, "'blocks.0.attn.wk.weight' does not have the shape this config gives it (6, 12)");
}

// A config error names its source once: "<file>: config: n_heads ...", not "config: config:".
Test(oracle, model_config_prefix_once) {
    const char *in = wpath("heads.safetensors");
    edited_example("model", in, NULL, "config", "{\"family\": \"pha\", \"n_heads\": 3, \"n_kv_heads\": 2}");
    refused("model", in, ": config: n_heads (3)");
    proc p = oracle("model", in, wpath("out.safetensors"));
    cr_assert(!strstr(p.err, "config: config"), "the prefix is repeated: %s", p.err);
    proc_free(&p);
}

// --- item 2: inputs that ask for more than they can be --------------------------------------
// A writer with F32 tensors of the given shapes, all 1.0 (names and shapes: NULL-terminated).
typedef struct {
    const char *name;
    int ndim;
    int64_t s[4];
} tspec;

static void write_ones(const char *path, const tspec *ts, const char *const *meta) {
    phax_st_writer *w = phax_st_writer_new();
    cr_assert(w);
    for (int i = 0; ts[i].name; i++) {
        size_t n = numel(ts[i].ndim, ts[i].s);
        float *x = malloc(n * sizeof *x);
        cr_assert(x);
        for (size_t j = 0; j < n; j++) x[j] = 1.0f;
        cr_assert(phax_st_add_raw(w, ts[i].name, PHAX_DT_F32, ts[i].ndim, ts[i].s, x) == PHAX_OK, "%s", phax_error());
        free(x);
    }
    for (int i = 0; meta && meta[i]; i += 2) cr_assert(phax_st_add_meta(w, meta[i], meta[i + 1]) == PHAX_OK);
    st_write_free(w, path);
}

// Refused (refused()'s checks) in one line mentioning `needle`, with a peak resident
// memory at most 32 MiB above the binary's own: that of refusing a missing file,
// measured here (~6 MiB; more under sanitizers). Why 32: a refusal happens after
// reading the (< 1 MB) file and its header, before any op allocation. Each of these
// inputs made the previous code allocate 0.5 GB to 16 GB (docs/oracle.md).
static void refused_small(const char *op, const char *in, const char *needle) {
    refused(op, in, needle);
    long rss, base;
    proc p = oracle_rss(NULL, NULL, op, wpath("no_such_file.safetensors"), wpath("out.safetensors"), &base);
    cr_assert(p.exited && p.code == 1, "%s", p.err);
    proc_free(&p);
    p = oracle_rss(NULL, NULL, op, in, wpath("out.safetensors"), &rss);
    cr_assert(p.exited && p.code == 1, "%s", p.err);
    cr_assert(rss <= base + 32 * 1024, "%s %s: peak resident memory %ld KiB before refusing (baseline %ld KiB)", op,
              in, rss, base);
    proc_free(&p);
    struct stat sb;
    cr_assert(stat(in, &sb) == 0 && sb.st_size < (1 << 20), "%s is not under 1 MB", in);
}

Test(oracle, dss_kernel_T_bounded) {
    // 338 bytes in the issue: T = 2^24 took 4 GB and wrote 2 GB.
    const char *in1 = wpath("dss_T24.safetensors"), *in2 = wpath("dss_T16_H4096.safetensors");
    write_ones(in1, (tspec[]){{"lambda_re", 1, {1}}, {"lambda_im", 1, {1}}, {"c_re", 2, {8, 1}}, {"c_im", 2, {8, 1}}, {0}},
               (const char *const[]){"T", "16777216", NULL});
    refused_small("dss_kernel", in1, "'T'");
    // T at its maximum (65536), but 4096 channels: 2^28 elements of k.
    write_ones(in2, (tspec[]){{"lambda_re", 1, {1}}, {"lambda_im", 1, {1}}, {"c_re", 2, {4096, 1}}, {"c_im", 2, {4096, 1}}, {0}},
               (const char *const[]){"T", "65536", NULL});
    refused_small("dss_kernel", in2, "MiB");
}

// Outputs that are products of independent input dimensions.
Test(oracle, products_of_dims_bounded) {
    const char *e = wpath("emb.safetensors"), *l = wpath("lin.safetensors"), *s = wpath("swiglu.safetensors"),
               *m = wpath("mlstm.safetensors"), *a = wpath("attn.safetensors");
    write_ones(e, (tspec[]){{"weight", 2, {1, 64}}, {0}}, NULL);
    {  // tokens (1, 200000), all 0 (V = 1): y is 200000 x 64
        phax_st_file f = st_open(e);
        phax_st_writer *w = copy_except(&f, NULL);
        int64_t ts[2] = {1, 200000};
        unsigned char *z = calloc(200000, 1);
        cr_assert(z && phax_st_add_raw(w, "tokens", PHAX_DT_U8, 2, ts, z) == PHAX_OK);
        free(z);
        phax_st_free(&f);
        st_write_free(w, e);
    }
    write_ones(l, (tspec[]){{"x", 2, {100000, 1}}, {"weight", 2, {2000, 1}}, {0}}, NULL);  // y: 2e8
    write_ones(s, (tspec[]){{"x", 2, {50000, 1}}, {"w_gate", 2, {2000, 1}}, {"w_up", 2, {2000, 1}},
                            {"w_down", 2, {1, 2000}}, {0}}, NULL);  // backward scratch 7 x 1e8
    write_ones(m, (tspec[]){{"q", 4, {1, 2, 1, 4000}}, {"k", 4, {1, 2, 1, 4000}}, {"v", 4, {1, 2, 1, 4000}},
                            {"igate", 3, {1, 2, 1}}, {"fgate", 3, {1, 2, 1}}, {0}},
               (const char *const[]){"form", "recurrent", NULL});  // tape: 3 x 4000 x 4000
    write_ones(a, (tspec[]){{"q", 4, {1, 1000, 40, 2}}, {"k", 4, {1, 1000, 1, 2}}, {"v", 4, {1, 1000, 1, 100}}, {0}},
               (const char *const[]){"rope", "0", NULL});  // y: 1000 x 40 x 100, x4 with copies
    refused_small("embedding", e, "MiB");
    refused_small("linear", l, "MiB");
    refused_small("swiglu", s, "MiB");
    refused_small("mlstm", m, "MiB");
    refused_small("attention", a, "MiB");
}

// A model config whose parameters the file does not hold is refused from the header,
// before the model is allocated. vocab 2^21 x d 512 (the largest vocabulary the config
// maxima allow, 2^30 parameters) is 16 GB of float64 parameters and gradients.
Test(oracle, model_sizes_checked_before_allocating) {
    const char *in1 = wpath("vocab.safetensors"), *in2 = wpath("layers.safetensors");
    const char *cfg1 = "{\"family\": \"transformer\", \"vocab_size\": 2097152, \"d_model\": 512, \"n_heads\": 1, "
                       "\"n_layers\": 1, \"ffn_hidden\": 1}";
    const char *cfg2 = "{\"family\": \"pha\", \"n_layers\": 200000000}";
    for (int i = 0; i < 2; i++) {
        phax_st_writer *w = phax_st_writer_new();
        int32_t t[2] = {0, 0};
        int64_t s[2] = {1, 2};
        cr_assert(w && phax_st_add_i32(w, "tokens", t, 2, s) == PHAX_OK && phax_st_add_i32(w, "targets", t, 2, s) == PHAX_OK);
        cr_assert(phax_st_add_meta(w, "config", i ? cfg2 : cfg1) == PHAX_OK);
        st_write_free(w, i ? in2 : in1);
    }
    refused_small("model", in1, "'embed.weight'");
    refused_small("model", in2, "n_layers");
}

// --max-memory: the limit is a default, not a ceiling on what the oracle can do.
Test(oracle, max_memory_option) {
    // H 64, T 65536: k and its upstream gradient are 2 x 32 MiB, 134 MiB with the writer's
    // copies: over the default limit (96 MiB + 16x this tiny input), under 256 MiB.
    const char *in = wpath("dss_H64.safetensors"), *out = wpath("dss_out.safetensors");
    write_ones(in, (tspec[]){{"lambda_re", 1, {1}}, {"lambda_im", 1, {1}}, {"c_re", 2, {64, 1}}, {"c_im", 2, {64, 1}}, {0}},
               (const char *const[]){"T", "65536", NULL});
    refused("dss_kernel", in, "--max-memory");
    long rss;
    proc p = oracle_rss("--max-memory", "256", "dss_kernel", in, out, &rss);
    expect_success(&p, "phax oracle --max-memory 256 dss_kernel");
    proc_free(&p);
    phax_st_file f = st_open(out);
    const phax_st_tensor *k = phax_st_find(&f, "k");
    cr_assert(k && k->ndim == 2 && k->shape[0] == 64 && k->shape[1] == 65536);
    phax_st_free(&f);
    cr_assert(unlink(out) == 0);
    // A bad value is a usage error (one line, exit 1), not a silent default.
    const char *bad[] = {"abc", "0", "-5", "1e300", ""};
    for (int i = 0; i < 5; i++) {
        p = oracle_rss("--max-memory", bad[i], "dss_kernel", in, out, &rss);
        cr_assert(p.exited && p.code == 1 && strstr(p.err, "--max-memory"), "'%s': %s", bad[i], p.err);
        cr_assert(!exists(out));
        proc_free(&p);
    }
}

// --- item 12: the model op takes the mLSTM head-norm eps from its config ------------------------
// A SWAX model at mlstm_norm_eps 1e-5: the oracle's logits are bit-identical to ref's at 1e-5
// (the same float64 code on the same values), and differ from ref's at the default 1e-6.
Test(oracle, model_mlstm_norm_eps) {
    phax_model_cfg cfg = phax_model_cfg_default(PHAX_FAMILY_SWAX);
    cfg.vocab_size = 11, cfg.d_model = 12, cfg.n_layers = 2, cfg.n_heads = 2, cfg.n_kv_heads = 1;
    cfg.mlstm_heads = 2, cfg.ffn_hidden = 16, cfg.train_len = 16, cfg.mlstm_norm_eps = 1e-5;
    ref_model m5, m6;
    cr_assert(ref_model_new(&m5, &cfg, 7) == PHAX_OK, "%s", phax_error());
    phax_model_cfg c6 = cfg;
    c6.mlstm_norm_eps = 1e-6;
    cr_assert(ref_model_new(&m6, &c6, 7) == PHAX_OK, "%s", phax_error());
    const int B = 2, T = 7, V = 11;
    int32_t tok[14], tg[14];
    for (int i = 0; i < B * T; i++) tok[i] = (i * 5) % V, tg[i] = (i * 3 + 1) % V;
    phax_st_writer *w = phax_st_writer_new();
    char *json = phax_model_cfg_to_json(&m5.cfg);
    cr_assert(w && json && strstr(json, "\"mlstm_norm_eps\": 1e-5"), "%s", json ? json : phax_error());
    cr_assert(phax_st_add_meta(w, "config", json) == PHAX_OK);
    free(json);
    for (int i = 0; i < m5.layout.n; i++) {
        const phax_param_info *p = &m5.layout.p[i];
        cr_assert(phax_st_add_f64(w, p->name, m5.params + p->offset, p->ndim, p->shape) == PHAX_OK);
    }
    int64_t s[2] = {B, T};
    cr_assert(phax_st_add_i32(w, "tokens", tok, 2, s) == PHAX_OK && phax_st_add_i32(w, "targets", tg, 2, s) == PHAX_OK);
    const char *in = wpath("swax_eps.safetensors"), *out = wpath("swax_eps_out.safetensors");
    st_write_free(w, in);
    run_ok("model", in, out);
    double l5[14 * 11], l6[14 * 11];
    cr_assert(ref_model_forward(&m5, tok, tg, B, T, -1, l5, NULL) == PHAX_OK);
    cr_assert(ref_model_forward(&m6, tok, tg, B, T, -1, l6, NULL) == PHAX_OK);
    phax_st_file f = st_open(out);
    size_t n;
    double *lo = tensor_f64(&f, "logits", &n);
    cr_assert(n == (size_t)B * T * V);
    double d6 = 0, n6 = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert(isfinite(lo[i]));
        d6 += (lo[i] - l6[i]) * (lo[i] - l6[i]), n6 += l6[i] * l6[i];
    }
    cr_assert(memcmp(lo, l5, n * sizeof *lo) == 0, "the oracle's logits are not ref's at eps 1e-5");
    // At the default igate bias −10 a head's variance is ~1e-6: the eps moves logits by
    // tens of per cent (measured 0.6 in fmodel/mlstm_norm_eps); 1e-3 is far from rounding.
    cr_assert(sqrt(d6 / n6) > 1e-3, "eps 1e-5 and 1e-6 give logits %.3e apart", sqrt(d6 / n6));
    free(lo);
    phax_st_free(&f);
    ref_model_free(&m5), ref_model_free(&m6);
}
