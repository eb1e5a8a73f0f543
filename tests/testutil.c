#define _GNU_SOURCE  // vasprintf
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

// ---------------------------------------------------------------------------
uint64_t tu_base_seed(void) {
    static uint64_t seed;
    static int have;
    if (!have) {
        const char *env = getenv("PHAX_TEST_SEED");
        if (env && *env) {
            seed = strtoull(env, NULL, 0);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            seed = ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
            seed %= 1000000007u;  // short enough to type back in
        }
        have = 1;
    }
    return seed;
}

phax_rng tu_rng(const char *test_name) {
    uint64_t s = tu_base_seed();
    printf("[%s] PHAX_TEST_SEED=%llu\n", test_name, (unsigned long long)s);
    fflush(stdout);
    return phax_rng_stream(s, phax_hash_str(test_name));
}

// ---------------------------------------------------------------------------
// Layout: [n (as size_t in a double slot)] [GUARD doubles] [n payload] [GUARD doubles]
#define GUARD 16
static const uint64_t GUARD_BITS = 0x7FF4DEADBEEFCAFEull;  // a signalling-NaN pattern

static void set_guard(double *g) {
    for (int i = 0; i < GUARD; i++) memcpy(&g[i], &GUARD_BITS, 8);
}

static bool guard_ok(const double *g) {
    for (int i = 0; i < GUARD; i++)
        if (memcmp(&g[i], &GUARD_BITS, 8) != 0) return false;
    return true;
}

double *tu_buf(size_t n) {
    double *base = malloc((n + 2 * GUARD + 1) * sizeof(double));
    if (!base) {
        fprintf(stderr, "tu_buf: out of memory (%zu doubles)\n", n);
        abort();
    }
    memcpy(&base[0], &n, sizeof n);
    set_guard(base + 1);
    set_guard(base + 1 + GUARD + n);
    double *p = base + 1 + GUARD;
    tu_poison(p, n);
    return p;
}

size_t tu_len(const double *p) {
    size_t n;
    memcpy(&n, p - GUARD - 1, sizeof n);
    return n;
}

bool tu_intact(const double *p) {
    size_t n = tu_len(p);
    return guard_ok(p - GUARD) && guard_ok(p + n);
}

void tu_free(double *p) {
    if (p) free(p - GUARD - 1);
}

// Float buffers: [n (size_t in two float slots) | 2 pad][GUARD floats][n payload][GUARD floats].
static const uint32_t FGUARD_BITS = 0x7FA1CAFEu;  // a signalling-NaN pattern
#define FHDR 4

static void fset_guard(float *g) {
    for (int i = 0; i < GUARD; i++) memcpy(&g[i], &FGUARD_BITS, 4);
}

static bool fguard_ok(const float *g) {
    for (int i = 0; i < GUARD; i++)
        if (memcmp(&g[i], &FGUARD_BITS, 4) != 0) return false;
    return true;
}

float *tu_fbuf(size_t n) {
    float *base = malloc((n + 2 * GUARD + FHDR) * sizeof(float));
    if (!base) {
        fprintf(stderr, "tu_fbuf: out of memory (%zu floats)\n", n);
        abort();
    }
    memcpy(base, &n, sizeof n);
    fset_guard(base + FHDR);
    fset_guard(base + FHDR + GUARD + n);
    float *p = base + FHDR + GUARD;
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

size_t tu_flen(const float *p) {
    size_t n;
    memcpy(&n, p - GUARD - FHDR, sizeof n);
    return n;
}

bool tu_fintact(const float *p) {
    return !p || (fguard_ok(p - GUARD) && fguard_ok(p + tu_flen(p)));
}

void tu_ffree(float *p) {
    if (p) free(p - GUARD - FHDR);
}

void tu_fill_normal(double *x, size_t n, phax_rng *r, double scale) {
    for (size_t i = 0; i < n; i++) x[i] = scale * phax_rng_normal(r);
}

void tu_fill_uniform(double *x, size_t n, phax_rng *r, double lo, double hi) {
    for (size_t i = 0; i < n; i++) x[i] = phax_rng_uniform_range(r, lo, hi);
}

void tu_fill(double *x, size_t n, double v) {
    for (size_t i = 0; i < n; i++) x[i] = v;
}

void tu_poison(double *x, size_t n) { tu_fill(x, n, NAN); }

double *tu_copy(const double *x, size_t n) {
    double *y = tu_buf(n);
    memcpy(y, x, n * sizeof *x);
    return y;
}

// ---------------------------------------------------------------------------
double tu_err_ratio(const double *a, const double *b, size_t n, double atol, double rtol) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
        double r = fabs(a[i] - b[i]) / (atol + rtol * fabs(b[i]));
        if (!(r <= worst)) worst = r;
    }
    return worst;
}

double tu_max_abs_diff(const double *a, const double *b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (isnan(d)) return NAN;
        if (d > worst) worst = d;
    }
    return worst;
}

double tu_max_abs(const double *a, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i])) return NAN;
        if (fabs(a[i]) > worst) worst = fabs(a[i]);
    }
    return worst;
}

bool tu_all_finite(const double *a, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i])) return false;
    return true;
}

double tu_dot(const double *a, const double *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

// ---------------------------------------------------------------------------
tu_gc_opts tu_gc_default(void) {
    tu_gc_opts o = {.h = 1e-6, .rtol = 1e-6, .max_elems = 48};
    return o;
}

bool tu_gradcheck(const char *label, tu_op op, tu_tensor *ts, int nt, phax_rng *r,
                  const tu_gc_opts *opts) {
    tu_gc_opts o = opts ? *opts : tu_gc_default();
    // Analytic gradients: prefill with a random prior, run backward, subtract the prior.
    double **prior = calloc((size_t)nt, sizeof *prior);
    for (int j = 0; j < nt; j++) {
        if (tu_len(ts[j].grad) != ts[j].n || tu_len(ts[j].x) != ts[j].n) {
            printf("[%s] %s: buffer length mismatch (test bug)\n", label, ts[j].name);
            return false;
        }
        prior[j] = tu_buf(ts[j].n);
        tu_fill_normal(prior[j], ts[j].n, r, 1.0);
        memcpy(ts[j].grad, prior[j], ts[j].n * sizeof(double));
    }
    op.backward(op.ctx);
    for (int j = 0; j < nt; j++)
        for (size_t i = 0; i < ts[j].n; i++) ts[j].grad[i] -= prior[j][i];

    double L0 = op.loss(op.ctx);
    double Lmag = op.loss_mag ? op.loss_mag(op.ctx) : fabs(L0);
    bool ok = isfinite(L0);
    if (!ok) printf("[%s] loss is not finite: %g\n", label, L0);

    for (int j = 0; j < nt && ok; j++) {
        tu_tensor *t = &ts[j];
        double gscale = tu_max_abs(t->grad, t->n);
        if (!isfinite(gscale)) {
            printf("[%s] %s: analytic gradient has NaN/inf\n", label, t->name);
            ok = false;
            break;
        }
        size_t m = t->n < o.max_elems ? t->n : o.max_elems;
        double worst = 0;
        size_t worst_i = 0;
        double worst_fd = 0, worst_an = 0, worst_tol = 0;
        for (size_t s = 0; s < m; s++) {
            size_t i = t->n <= o.max_elems ? s : (size_t)phax_rng_below(r, t->n);
            double x0 = t->x[i];
            double h = o.h * fmax(1.0, fabs(x0));
            t->x[i] = x0 + h;
            double Lp = op.loss(op.ctx);
            t->x[i] = x0 - h;
            double Lm = op.loss(op.ctx);
            t->x[i] = x0;
            double fd = (Lp - Lm) / (2 * h);
            double an = t->grad[i];
            // Tolerance: rtol of the tensor's gradient scale (a wrong formula is
            // off by O(gscale)), plus the rounding noise of the difference
            // quotient, ~1e-15·Σ|dy⊙y|/h (10× float64's eps·|L| per evaluation).
            double tol = fmax(o.rtol * gscale + 1e-15 * Lmag / h, 1e-300);
            double ratio = fabs(fd - an) / tol;
            if (!(ratio <= worst)) {
                worst = ratio;
                worst_i = i;
                worst_fd = fd;
                worst_an = an;
                worst_tol = tol;
            }
        }
        printf("[%s] %-10s n=%-6zu checked=%-3zu |grad|max=%.3e worst err/tol=%.3e\n", label,
               t->name, t->n, m, gscale, worst);
        if (!(worst <= 1.0)) {
            printf("[%s] %s[%zu]: finite difference %.12e vs backward %.12e (tol %.3e)\n", label,
                   t->name, worst_i, worst_fd, worst_an, worst_tol);
            ok = false;
        }
    }
    for (int j = 0; j < nt; j++) {
        if (!tu_intact(ts[j].x) || !tu_intact(ts[j].grad)) {
            printf("[%s] %s: guard zone overwritten\n", label, ts[j].name);
            ok = false;
        }
        tu_free(prior[j]);
    }
    free(prior);
    fflush(stdout);
    return ok;
}

// ---------------------------------------------------------------------------
static void tu_die(const char *what, const char *path) {
    fprintf(stderr, "testutil: %s %s: %s\n", what, path, strerror(errno));
    abort();
}

char *tu_tmpdir(const char *tag) {
    const char *t = getenv("TMPDIR");
    char *d = malloc(4096);
    if (!d) abort();
    snprintf(d, 4096, "%s/%s_XXXXXX", t && *t ? t : "/tmp", tag);
    if (!mkdtemp(d)) tu_die("mkdtemp", d);
    return d;
}

char *tu_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p) abort();
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

void tu_write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) tu_die("cannot write", path);
    if ((n && fwrite(p, 1, n, f) != n) | (fclose(f) != 0)) tu_die("cannot write", path);
}

void tu_rm_rf(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char *c = tu_join(path, e->d_name);
            tu_rm_rf(c);
            free(c);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

char *tu_slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) tu_die("cannot read", path);
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap + 1);
    if (!buf) abort();
    while ((got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap && !(buf = realloc(buf, (cap *= 2) + 1))) abort();
    }
    if (ferror(f)) tu_die("cannot read", path);
    fclose(f);
    buf[len] = '\0';
    if (n) *n = len;
    return buf;
}

int tu_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

char *tu_xprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) abort();
    va_end(ap);
    return s;
}

pid_t tu_spawn(const char *const *argv, const char *out, const char *err, const tu_limits *lim) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) tu_die("cannot fork for", argv[0]);
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = err ? open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644) : o;
        if (o < 0 || e < 0) _exit(127);
        dup2(o, 1), dup2(e, 2);
        if (lim && lim->cpu_s > 0) {
            struct rlimit r = {(rlim_t)lim->cpu_s, (rlim_t)lim->cpu_s};
            setrlimit(RLIMIT_CPU, &r);
        }
        if (!TU_ASAN && lim && lim->as_mb > 0) {
            struct rlimit r = {(rlim_t)lim->as_mb << 20, (rlim_t)lim->as_mb << 20};
            setrlimit(RLIMIT_AS, &r);
        }
        setenv("OMP_NUM_THREADS", "1", 1);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

int tu_wait(pid_t pid, long *peak_kb) {
    int st;
    struct rusage ru;
    pid_t r;
    while ((r = wait4(pid, &st, 0, &ru)) < 0 && errno == EINTR) {}
    if (r != pid) tu_die("wait for a child failed", "");
    if (peak_kb) *peak_kb = ru.ru_maxrss;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

pid_t tu_phax_spawn(const char *out, const char *err, const tu_limits *lim, const char *const *args) {
    const char *bin = getenv("PHAX_BIN");
    if (!bin || !*bin) {
        fprintf(stderr, "testutil: PHAX_BIN is not set (meson sets it for the suites that run phax)\n");
        abort();
    }
    const char *argv[64];
    int n = 0;
    argv[n++] = bin;
    for (; *args; args++) {
        if (n == 63) tu_die("too many arguments for", bin);
        argv[n++] = *args;
    }
    argv[n] = NULL;
    return tu_spawn(argv, out, err, lim);
}

int tu_phax_v(const char *out, const char *err, const tu_limits *lim, long *peak_kb, const char *const *args) {
    return tu_wait(tu_phax_spawn(out, err, lim, args), peak_kb);
}

int tu_phax(const char *out, const char *err, const tu_limits *lim, long *peak_kb, const char *arg0, ...) {
    const char *args[64];
    int n = 0;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a; a = va_arg(ap, const char *)) {
        if (n == 63) tu_die("too many arguments for", "phax");
        args[n++] = a;
    }
    va_end(ap);
    args[n] = NULL;
    return tu_phax_v(out, err, lim, peak_kb, args);
}

char *tu_cli_error_check(const char *err_path, int rc, const char *prefix, const char *frag) {
    char *e = tu_slurp(err_path, NULL), *why = NULL;
    char *nl = strchr(e, '\n');
    if (rc != 1) why = tu_xprintf("exit %d, stderr: %s", rc, e);
    else if (strncmp(e, prefix, strlen(prefix))) why = tu_xprintf("stderr does not start with \"%s\": %s", prefix, e);
    else if (!nl || nl[1] != '\0') why = tu_xprintf("not one line: %s", e);
    else if (!strstr(e, frag)) why = tu_xprintf("stderr lacks \"%s\": %s", frag, e);
    free(e);
    return why;
}

char *tu_log_without_timing(const char *path) {
    char *t = tu_slurp(path, NULL), *o = malloc(strlen(t) + 1), *q = o;
    if (!o) abort();
    for (char *p = t; *p;) {
        if (!strncmp(p, ", \"tokens_per_s\": ", 18)) {
            p += 18;
            while (*p && *p != '}') p++;
        } else {
            *q++ = *p++;
        }
    }
    *q = '\0';
    free(t);
    return o;
}

int tu_dir_count(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

void tu_check_keep(const char *dir, const char *stem, const char *in, const char *theirs) {
    static int nkept;
    const char *src[2] = {in, theirs}, *nm[2] = {"in", "theirs"};
    for (int i = 0; i < 2; i++) {
        size_t len;
        char *b = tu_slurp(src[i], &len), *dst = tu_xprintf("%s/%s-%d.%s.safetensors", dir, stem, nkept, nm[i]);
        tu_write_file(dst, b, len);
        free(b), free(dst);
    }
    fprintf(stderr, "  kept as %s/%s-%d.{in,theirs}.safetensors\n", dir, stem, nkept++);
}

char *tu_check_report(const char *out, int k, int n) {
    if (n <= 1) return strdup(out);
    char h[48], h2[48];
    snprintf(h, sizeof h, "== THEIRS %d of %d: ", k, n), snprintf(h2, sizeof h2, "\n== THEIRS %d of %d: ", k + 1, n);
    const char *a = strstr(out, h), *b = a ? strstr(a, h2) : NULL;
    a = a ? strchr(a, '\n') : NULL;
    if (!a) return strdup("");
    return b ? strndup(a + 1, (size_t)(b + 1 - (a + 1))) : strdup(a + 1);
}
