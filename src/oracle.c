// `phax oracle OP IN.safetensors OUT.safetensors`: run one op (or a whole
// model) of the float64 ref tier on the tensors in IN and write every output
// and every gradient to OUT. Inputs may be F64, F32, BF16 or F16 (promoted to
// float64); token ids and targets any integer type. See docs/oracle.md.
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/model.h"
#include "phax/model_plan.h"
#include "phax/names.h"
#include "phax/ref.h"
#include "phax/ref_model.h"
#include "phax/safetensors.h"
#include "cmd_args.h"
#include "oracle.h"
#include "oracle_ctx.h"


// --- the table ---------------------------------------------------------------------------------
typedef struct {
    const char *name;
    int (*run)(octx *);
    void (*example)(exw *);
    const char *inputs, *attrs, *outputs;
    // What IN may hold, as space-separated names: tensors (optional ones too),
    // attribute keys, and the outputs whose upstream gradient grad.<output> may be
    // given. Anything else is refused: a misspelt key or name would otherwise be
    // ignored and the comparison silently run on a default.
    const char *tensor_names, *attr_names, *upstream_names;
} oracle_op;

static const oracle_op OPS[] = {
    {"embedding", op_embedding, ex_embedding, "tokens (any shape, int), weight (V, d)", "-",
     "y (tokens.shape + (d)); grad.weight", "tokens weight", "", "y"},
    {"linear", op_linear, ex_linear, "x (..., in), weight (out, in), bias (out) optional", "-",
     "y (..., out); grad.x, grad.weight, grad.bias", "x weight bias", "", "y"},
    {"rmsnorm", op_rmsnorm, ex_rmsnorm, "x (..., d), weight (d)", "eps=1e-6", "y; grad.x, grad.weight", "x weight", "eps",
     "y"},
    {"layernorm", op_layernorm, ex_layernorm, "x (..., d), weight (d), bias (d) optional", "eps=1e-5",
     "y; grad.x, grad.weight, grad.bias", "x weight bias", "eps", "y"},
    {"headnorm", op_headnorm, ex_headnorm, "x (..., H*dh), weight (H*dh)", "heads (required), eps=1e-6",
     "y; grad.x, grad.weight", "x weight", "heads eps", "y"},
    {"gelu", op_gelu, ex_act, "x (any shape)", "-", "y; grad.x", "x", "", "y"},
    {"silu", op_silu, ex_act, "x (any shape)", "-", "y; grad.x", "x", "", "y"},
    {"swiglu", op_swiglu, ex_swiglu, "x (..., d), w_gate (hid, d), w_up (hid, d), w_down (d, hid)", "-",
     "y (..., d); grad.x, grad.w_gate, grad.w_up, grad.w_down", "x w_gate w_up w_down", "", "y"},
    {"rope", op_rope, ex_rope, "x (B, T, H, dh)", "rope_base=10000, pos0=0", "y; grad.x", "x", "rope_base pos0", "y"},
    {"attention", op_attention, ex_attention,
     "q (B, T, Hq, dh), k (B, T, Hkv, dh), v (B, T, Hkv, dv), logscale (Hq) if score=cosine",
     "score=dot|cosine, window=0 (0 = full), rope=1, rope_base=10000, pos0=0",
     "y (B, T, Hq, dv); grad.q, grad.k, grad.v, grad.logscale", "q k v logscale", "score window rope rope_base pos0", "y"},
    {"dss_kernel", op_dss_kernel, ex_dss_kernel, "lambda_re (N), lambda_im (N), c_re (H, N), c_im (H, N)",
     "T (required, <= 65536)", "k (H, T); grad.lambda_re, grad.lambda_im, grad.c_re, grad.c_im",
     "lambda_re lambda_im c_re c_im", "T", "k"},
    {"ssm_conv", op_ssm_conv, ex_ssm_conv, "u (B, T, H), k (H, T), d (H)", "-", "y (B, T, H); grad.u, grad.k, grad.d", "u k d", "", "y"},
    {"ssm_recurrent", op_ssm_recurrent, ex_ssm_recurrent,
     "u (B, T, H), lambda_re (N), lambda_im (N), c_re (H, N), c_im (H, N), d (H)", "-",
     "y (B, T, H); grad.u, grad.lambda_re, grad.lambda_im, grad.c_re, grad.c_im, grad.d",
     "u lambda_re lambda_im c_re c_im d", "", "y"},
    {"mlstm", op_mlstm, ex_mlstm, "q (B, T, H, dqk), k (B, T, H, dqk), v (B, T, H, dv), igate (B, T, H), fgate (B, T, H)",
     "form=parallel|recurrent, eps=1e-6, m0=0 (recurrent), grad=exact|stopgrad-normalizer (parallel: the normaliser "
     "and stabiliser held constant in the backward)", "h (B, T, H, dv); grad.q, grad.k, grad.v, grad.igate, grad.fgate",
     "q k v igate fgate", "form eps m0 grad", "h"},
    {"gdn", op_gdn, ex_gdn,
     "q (B, T, H, dk), k (B, T, H, dk), v (B, T, H, dv), g (B, T, H) log-decay, beta (B, T, H), initial_state "
     "(B, H, dk, dv) optional",
     "scale=1/sqrt(dk), qk_l2norm=1", "o (B, T, H, dv), final_state (B, H, dk, dv); grad.q, grad.k, grad.v, grad.g, "
     "grad.beta, grad.initial_state (when given)",
     "q k v g beta initial_state", "scale qk_l2norm", "o final_state"},
    {"mix", op_mix, ex_mix, "branches (nb, ...), p (nb)", "-", "y (...); grad.branches, grad.p", "branches p", "", "y"},
    {"cross_entropy", op_cross_entropy, ex_cross_entropy, "logits (..., V), targets (...) int, -1 = ignored", "-",
     "loss (scalar); grad.logits", "logits targets", "", "loss"},
    {"adamw", op_adamw, ex_adamw, "param, gradient, exp_avg (optional, 0), exp_avg_sq (optional, 0): one shape",
     "lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, clip=1, step=1, decay=1",
     "param, exp_avg, exp_avg_sq (after the step), grad_norm (before clipping)",
     "param gradient exp_avg exp_avg_sq", "lr beta1 beta2 eps weight_decay clip step decay", ""},
    {"model", op_model, ex_model, "every parameter by name (phax layout), tokens (B, T), targets (B, T)",
     "config (JSON, required), window=-1 (SWAX family: -1 = w_long, 0 = full)",
     "logits (B, T, V), loss; grad.<param> for every parameter",
     "tokens targets", "config window", ""},  // and the parameters of the config's layout: op_model checks those
};
#define NOPS ((int)(sizeof OPS / sizeof OPS[0]))

static const oracle_op *find_op(const char *name) {
    for (int i = 0; i < NOPS; i++)
        if (!strcmp(OPS[i].name, name)) return &OPS[i];
    return NULL;
}

// Is `name` one of the space-separated words of `list`?
static int in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        while (*p == ' ') p++;
        size_t w = strcspn(p, " ");
        if (w && w == n && !strncmp(p, name, n)) return 1;
        p += w;
    }
    return 0;
}

// Metadata every op accepts: "seed" (the drawn upstream gradients), "op" (the
// examples write it; it must name the op run), "format" (torch's safetensors
// writers add "pt").
#define COMMON_ATTRS "seed op format"

// Every attribute key and tensor name of IN must mean something to the op.
static int check_names(octx *c, const oracle_op *op) {
    char b[256];
    for (int i = 0; i < c->in.nmeta; i++) {
        const char *k = c->in.meta_key[i];
        if (!in_list(op->attr_names, k) && !in_list(COMMON_ATTRS, k))
            return phax_fail("%s: unknown attribute '%s' for op '%s' (attributes: %s%s%s)", c->path,
                             ox_shown(k, b, sizeof b), op->name, op->attr_names, *op->attr_names ? " " : "",
                             COMMON_ATTRS);
    }
    const char *opm = phax_st_meta(&c->in, "op");
    if (opm && strcmp(opm, op->name))
        return phax_fail("%s: metadata 'op' is '%s' but the op run is '%s'", c->path, ox_shown(opm, b, sizeof b),
                         op->name);
    for (int i = 0; i < c->in.n; i++) {
        const char *t = c->in.t[i].name;
        if (in_list(op->tensor_names, t) || (!strncmp(t, "grad.", 5) && in_list(op->upstream_names, t + 5)))
            continue;
        if (op->run == op_model) continue;  // parameters: op_model checks them against the config's layout
        return phax_fail("%s: tensor '%s' is not an input of op '%s' (inputs: %s%s%s)", c->path,
                         ox_shown(t, b, sizeof b), op->name, op->tensor_names, *op->upstream_names ? ", grad." : "",
                         op->upstream_names);
    }
    return PHAX_OK;
}

// The memory limit: --max-memory MIB, or 96 MiB plus 16x the input's tensors in float64.
static void set_limit(octx *c, double max_mib) {
    if (max_mib > 0) {
        c->limit = (size_t)(max_mib * (1 << 20));
    } else {  // the default (docs/oracle.md)
        size_t in = 0;
        for (int i = 0; i < c->in.n; i++) in = ox_sadd(in, ox_smul(c->in.t[i].numel, sizeof(double)));
        c->limit = ox_sadd(ORACLE_BASE_BYTES, ox_smul(ORACLE_INPUT_FACTOR, in));
    }
}

// --- phax check's entry (src/oracle.h) ----------------------------------------------------------
#define CHECKED_OPS \
    "embedding linear rmsnorm layernorm headnorm gelu silu swiglu rope attention ssm_conv mlstm gdn mix cross_entropy " \
    "adamw dss_kernel ssm_recurrent model"

// The baseline (and another algorithm's, where the op has one) is made five times: rounded
// to nearest (c), and with stochastic rounding from four seeds (alt[]), so that a tensor of a
// few elements is not judged against one lucky draw of the rounding errors (docs/oracle.md,
// "The bound").
struct phax_oracle_eval {
    octx c, alt[SR_RUNS];
};

// A tensor of n elements is judged against sr_draws(n) stochastic roundings of the baseline:
// about SR_ELEMENT_DRAWS element-draws of its error, at least SR_RUNS, at most SR_MAX_RUNS. A
// norm over many elements concentrates, so four draws say how large a sound algorithm's error
// can be; over two elements it does not: a correct chunkwise bf16 mLSTM at T 1 had grad.igate
// (2 elements, one of them a cancellation to ~0) 37 % off the truth where the worst of the
// baseline's five roundings was 8.5 % (ratio 4.38, a false FAIL), and 64 roundings reach 113 %.
// The extra roundings are made one at a time (each one's errors kept, its arrays freed), and
// only while cheap: all runs together at most SR_BUDGET elements in and out (a cosine
// attention's logscale has Hq elements at every T, and T 1024 takes minutes a run: its tensors
// of few elements get the four roundings there, as before). The model's runs cost far more than
// their elements say, so it aims at fewer element-draws (SR_MODEL_ELEMENT_DRAWS, at most
// SR_MODEL_MAX_RUNS runs): only its tensors of a handful of elements get more than four. Its three
// scalars of mix.p had been judged 11,000 times in tests/test_check_model.c's sweep without a
// false FAIL at four, but Gated DeltaNet's grad A_log (one element per head, a sum over every
// token that cancels) reached 0.98 of the bound there (swax_gdn, draw 154 of run 31062393025).
#define SR_ELEMENT_DRAWS 256
#define SR_MAX_RUNS 64
#define SR_MODEL_ELEMENT_DRAWS 32
#define SR_MODEL_MAX_RUNS 16
#define SR_BUDGET ((size_t)1 << 20)
static int sr_draws(const char *op, size_t n) {
    int model = !strcmp(op, "model");
    size_t want = model ? SR_MODEL_ELEMENT_DRAWS : SR_ELEMENT_DRAWS, most = model ? SR_MODEL_MAX_RUNS : SR_MAX_RUNS;
    size_t k = n ? (want + n - 1) / n : most;
    return k < SR_RUNS ? SR_RUNS : k > most ? (int)most : (int)k;
}

const char *phax_oracle_checked_ops(void) { return CHECKED_OPS; }

// ||x - truth|| over n (x NULL: 0); +inf when anything is NaN or inf.
static double dist_to(const double *x, const double *truth, size_t n) {
    if (!x) return 0;
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - truth[i];
        if (!isfinite(d)) return INFINITY;
        s += d * d;
    }
    return sqrt(s);
}

static void ctx_free(octx *c) {
    phax_st_free(&c->in);
    for (int i = 0; i < c->nallocs; i++) free(c->allocs[i]);
    free(c->allocs), free(c->col);
    c->allocs = NULL, c->col = NULL;
    c->nallocs = c->capallocs = c->ncol = c->capcol = 0;
}

// IN from the file in_path (buf NULL) or from the image buf (n bytes; in_path its label).
static int read_in(octx *c, const char *in_path, const void *buf, size_t n) {
    int rc = buf ? phax_st_read_mem(&c->in, buf, n, in_path) : phax_st_read(&c->in, in_path);
    return rc ? rc : phax_names_apply(c->names, &c->in);
}

// IN read into c (set up by the caller), its names and the seed of its upstream gradients
// checked, then op run on it. *seed: the seed (0 when absent).
static int run_ctx(octx *c, const oracle_op *op, const char *in_path, const void *buf, size_t n, double max_mib,
                   long *seed) {
    *seed = 0;
    int rc = read_in(c, in_path, buf, n);
    if (!rc) set_limit(c, max_mib);
    if (!rc) rc = check_names(c, op);
    if (!rc) rc = ox_attr_long(c, "seed", 0, 0, LONG_MAX, seed);
    c->rng = phax_rng_new((uint64_t)*seed);
    if (!rc) rc = op->run(c);
    return rc;
}

static phax_oracle_eval *eval_new(const char *opname, const char *in_path, const void *buf, size_t n,
                                  const phax_precision *pr, double max_mib, const phax_names *names) {
    const oracle_op *op = find_op(opname);
    if (!op) {
        phax_fail("%s: unknown op '%s' (see phax oracle --list)", in_path, opname);
        return NULL;
    }
    if (!in_list(CHECKED_OPS, op->name)) {
        phax_fail("check: op '%s' has no precision baseline yet (ops checked: %s)", op->name, CHECKED_OPS);
        return NULL;
    }
    phax_oracle_eval *e = calloc(1, sizeof *e);
    if (!e) {
        phax_fail("check: out of memory");
        return NULL;
    }
    octx *c = &e->c;
    c->path = in_path, c->op = op->name, c->prec = pr, c->names = names;
    long seed;
    int rc = run_ctx(c, op, in_path, buf, n, max_mib, &seed);
    // The four stochastic roundings every tensor gets are kept (alt[]), the further ones a tensor
    // of few elements gets (sr_draws) reduced to their errors as they are made (one octx at a time).
    int nruns = SR_RUNS;
    size_t size = 0;  // the cost of a run, as elements in and out
    for (int i = 0; !rc && i < c->in.n; i++) size = ox_sadd(size, c->in.t[i].numel);
    for (int i = 0; !rc && i < c->ncol; i++) size = ox_sadd(size, c->col[i].n);
    for (int i = 0; i < c->ncol && !rc; i++)
        if (!c->col[i].upstream && sr_draws(op->name, c->col[i].n) > nruns) nruns = sr_draws(op->name, c->col[i].n);
    if (nruns > SR_RUNS && (size_t)nruns * size > SR_BUDGET)  // too dear to repeat: as many as the budget buys
        nruns = SR_BUDGET / size > SR_RUNS ? (int)(SR_BUDGET / size) : SR_RUNS;
    for (int i = 0; i < c->ncol; i++) c->col[i].draws = 1 + (c->col[i].upstream ? 0 : SR_RUNS);
    for (int k = 0; k < nruns && !rc; k++) {
        octx extra = {0}, *a = k < SR_RUNS ? &e->alt[k] : &extra;
        a->path = in_path, a->op = op->name, a->prec = pr, a->names = names;
        rc = read_in(a, in_path, buf, n);
        if (!rc) set_limit(a, max_mib);
        a->rng = phax_rng_new((uint64_t)seed);  // the same upstream gradients
        phax_round_stochastic(0x9e3779b97f4a7c15ull * (uint64_t)(k + 1));
        if (!rc) rc = op->run(a);
        phax_round_stochastic(0);
        for (int i = 0; i < c->ncol && !rc; i++) {
            phax_oracle_tensor *o = &c->col[i];
            for (int j = 0; j < a->ncol; j++) {
                if (strcmp(o->name, a->col[j].name)) continue;
                if (k < SR_RUNS) o->base_sr[k] = a->col[j].base, o->base_alt_sr[k] = a->col[j].base_alt;
                else if (!o->upstream && k < sr_draws(op->name, o->n)) {
                    double eb = dist_to(a->col[j].base, o->truth, o->n), ea = dist_to(a->col[j].base_alt, o->truth, o->n);
                    if (!(eb <= o->extra_err)) o->extra_err = eb;
                    if (!(ea <= o->extra_err)) o->extra_err = ea;
                    o->draws++;
                }
            }
        }
        if (a == &extra) ctx_free(&extra);
    }
    if (rc) {
        phax_oracle_eval_free(e);
        return NULL;
    }
    return e;
}

phax_oracle_eval *phax_oracle_eval_new(const char *opname, const char *in_path, const phax_precision *pr,
                                       double max_mib, const phax_names *names) {
    return eval_new(opname, in_path, NULL, 0, pr, max_mib, names);
}

phax_oracle_eval *phax_oracle_truth_new(const char *opname, const char *in_path, const void *buf, size_t n,
                                        const phax_oracle_variant *var, double max_mib, const phax_names *names) {
    const oracle_op *op = find_op(opname);
    if (!op) {
        phax_fail("%s: unknown op '%s' (see phax oracle --list)", in_path, opname);
        return NULL;
    }
    phax_oracle_eval *e = calloc(1, sizeof *e);
    if (!e) {
        phax_fail("check: out of memory");
        return NULL;
    }
    octx *c = &e->c;  // out and prec NULL: every output kept in col, no baseline made
    c->path = in_path, c->op = op->name, c->names = names, c->var = var;
    long seed;  // the same upstream gradients as the judged run
    if (run_ctx(c, op, in_path, buf, n, max_mib, &seed)) {
        phax_oracle_eval_free(e);
        return NULL;
    }
    return e;
}

phax_oracle_eval *phax_oracle_eval_new_mem(const char *opname, const void *in, size_t n, const char *label,
                                           const phax_precision *pr, double max_mib) {
    if (!in) {
        phax_fail("%s: NULL input image", label);
        return NULL;
    }
    return eval_new(opname, label, in, n, pr, max_mib, NULL);
}

int phax_oracle_eval_count(const phax_oracle_eval *e) { return e->c.ncol; }

const phax_oracle_tensor *phax_oracle_eval_tensor(const phax_oracle_eval *e, int i) {
    return i >= 0 && i < e->c.ncol ? &e->c.col[i] : NULL;
}

void phax_oracle_eval_free(phax_oracle_eval *e) {
    if (!e) return;
    char msg[1024];  // keep the error a failed run recorded
    snprintf(msg, sizeof msg, "%s", phax_error());
    ctx_free(&e->c);
    for (int k = 0; k < SR_RUNS; k++) ctx_free(&e->alt[k]);
    free(e);
    phax_fail("%s", msg);
}

static void list_ops(void) {
    printf("phax oracle ops (every input may be F64/F32/BF16/F16; gradients are float64;\n"
           "an upstream gradient grad.<output> is read from IN or drawn N(0,1) from metadata 'seed'):\n");
    for (int i = 0; i < NOPS; i++)
        printf("\n%s\n  inputs:  %s\n  attrs:   %s\n  outputs: %s\n", OPS[i].name, OPS[i].inputs,
               OPS[i].attrs, OPS[i].outputs);
}

// `phax oracle OP IN OUT` up to the writing: IN from in_path or the image buf (n bytes,
// in_path its label); *out: every output and gradient, and the metadata OUT carries.
// On failure *out is NULL and the reason in phax_error().
static int oracle_run(const char *opname, const char *in_path, const void *buf, size_t n, double max_mib,
                      const phax_names *names, phax_st_writer **out) {
    *out = NULL;
    const oracle_op *op = find_op(opname);
    if (!op) return phax_fail("%s: unknown op '%s' (see phax oracle --list)", in_path, opname);
    octx c = {.path = in_path, .op = op->name, .names = names};
    if (read_in(&c, in_path, buf, n)) {
        ctx_free(&c);
        return PHAX_ERR;
    }
    set_limit(&c, max_mib);
    long seed = 0;
    int rc = check_names(&c, op);
    if (!rc) rc = ox_attr_long(&c, "seed", 0, 0, LONG_MAX, &seed);
    c.rng = phax_rng_new((uint64_t)seed);
    c.out = rc ? NULL : phax_st_writer_new();
    if (!rc && !c.out) rc = PHAX_ERR;
    if (!rc) rc = op->run(&c);
    if (!rc) rc = phax_st_add_meta(c.out, "op", op->name);
    if (!rc) rc = phax_st_add_meta(c.out, "phax_version", PHAX_VERSION);
    char msg[1024];  // ctx_free must not lose the reason
    snprintf(msg, sizeof msg, "%s", phax_error());
    ctx_free(&c);
    if (rc) {
        phax_st_writer_free(c.out);
        return phax_fail("%s", msg);
    }
    *out = c.out;
    return PHAX_OK;
}

int phax_oracle_run_mem(const char *opname, const void *in, size_t n, const char *label, double max_mib,
                        unsigned char **out, size_t *out_len) {
    *out = NULL, *out_len = 0;
    if (!in) return phax_fail("%s: NULL input image", label);
    phax_st_writer *w = NULL;
    int rc = oracle_run(opname, label, in, n, max_mib, NULL, &w);
    if (!rc) rc = phax_st_write_mem(w, out, out_len);
    phax_st_writer_free(w);
    return rc;
}

int phax_oracle_main(int argc, char **argv) {
    oracle_opts o;
    oracle_parse_args(argc, argv, &o);
    if (o.list) {
        list_ops();
        return 0;
    }
    if (o.example_out) {
        const oracle_op *op = find_op(o.op);
        if (!op) phax_die("oracle: unknown op '%s' (see phax oracle --list)", o.op);
        phax_rng r = phax_rng_new(phax_hash_str(op->name));
        exw e = {.w = phax_st_writer_new(), .r = &r};
        if (!e.w) phax_die("%s", phax_error());
        op->example(&e);
        if (!e.err) e.err = phax_st_add_meta(e.w, "op", op->name);
        if (!e.err) e.err = phax_st_add_meta(e.w, "seed", "0");
        if (e.err || phax_st_write(e.w, o.example_out)) {
            phax_st_writer_free(e.w);
            phax_die("%s", phax_error());
        }
        phax_st_writer_free(e.w);
        return 0;
    }
    const char *pos[3] = {o.op, o.in, o.out}, *map = o.names;
    double max_mib = o.max_mib;
    phax_names *names = map ? phax_names_load(map) : NULL;
    if (map && !names) phax_die("%s", phax_error());
    phax_st_writer *w = NULL;
    if (oracle_run(pos[0], pos[1], NULL, 0, max_mib, names, &w) || phax_st_write(w, pos[2])) {
        phax_st_writer_free(w);
        phax_names_free(names);
        phax_die("%s", phax_error());
    }
    phax_st_writer_free(w);
    phax_names_free(names);
    return 0;
}
