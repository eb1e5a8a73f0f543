// Untrusted sizes (issue 11): crafted configs and checkpoints of a few hundred
// bytes to a few KB must be refused with one line naming the file and what is
// wrong, before anything their contents cannot justify is allocated; every
// product of config dimensions is computed without wrapping; a NaN or Inf weight
// is refused at load with the tensor's name; train_seq from a checkpoint keeps
// to --seq's limit and the mLSTM workspace sizes do not overflow at any int T.
//
// "Refused before allocating" is measured: the growth of this process's peak
// resident memory (ru_maxrss; each test runs in its own process) around the
// call, and for the phax command the child's peak. Outside AddressSanitizer an
// address-space limit is also set around the blow-up inputs, so that a
// regression fails at once instead of taking the machine's memory (ASan
// reserves terabytes of address space, so there the limit is left off).
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "phax/checkpoint.h"
#include "phax/fcpu_mlstm.h"
#include "phax/model.h"
#include "phax/safetensors.h"
#include "testutil.h"


// --- helpers ---------------------------------------------------------------------------------

static long peak_kb(void) {
    struct rusage ru;
    cr_assert(getrusage(RUSAGE_SELF, &ru) == 0);
    return ru.ru_maxrss;
}

// The safety net: address space limited to what the process has now plus
// `mb` (not under ASan, see the top).
static void limit_address_space(long mb) {
    if (TU_ASAN) return;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return;
    char line[256];
    long vm_kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %ld kB", &vm_kb) == 1) break;
    fclose(f);
    if (vm_kb < 0) return;
    struct rlimit rl;
    cr_assert(getrlimit(RLIMIT_AS, &rl) == 0);
    rlim_t want = (rlim_t)(vm_kb + mb * 1024) * 1024;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) return;  // already tighter
    rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
    cr_assert(setrlimit(RLIMIT_AS, &rl) == 0);
}

// The one-line message of a refusal must contain `what` (and start with `file` if given).
static void expect_msg(const char *file, const char *what) {
    const char *e = phax_error();
    if (file) cr_assert(!strncmp(e, file, strlen(file)), "message does not start with %s: %s", file, e);
    cr_assert(strstr(e, what), "message lacks \"%s\": %s", what, e);
    cr_assert(!strchr(e, '\n'), "message is not one line: %s", e);
}

// phax_ckpt_load must refuse `path` with `what`, growing the peak memory by less than 64 MB.
static void expect_ckpt_refused(const char *path, const char *what) {
    phax_ckpt ck;
    phax_clear_error();
    long before = peak_kb();
    int rc = phax_ckpt_load(path, -1, &ck);
    long grew = peak_kb() - before;
    cr_assert(rc == PHAX_ERR, "loaded %s (expected: %s)", path, what);
    expect_msg(path, what);
    cr_assert(ck.params == NULL);
    cr_assert(grew < 64 * 1024, "refusing %s grew the peak memory by %ld MB", path, grew / 1024);
    phax_ckpt_free(&ck);
}

static void add_meta_ckpt(phax_st_writer *w, const char *config_json) {
    cr_assert(phax_st_add_meta(w, "format", PHAX_CKPT_FORMAT) == PHAX_OK);
    cr_assert(phax_st_add_meta(w, "config", config_json) == PHAX_OK);
    cr_assert(phax_st_add_meta(w, "vocab", "x.vocab") == PHAX_OK);
    cr_assert(phax_st_add_meta(w, "vocab_hash", "0000000000000000") == PHAX_OK);
    cr_assert(phax_st_add_meta(w, "step", "0") == PHAX_OK);
    cr_assert(phax_st_add_meta(w, "tokens_seen", "0") == PHAX_OK);
}

// A checkpoint file that holds one F32 tensor `name` (rows × cols, all 0.5) beside
// a config: what a crafted file needs to reach the parameter loader.
static void write_crafted(const char *path, const char *config_json, const char *name, int64_t rows,
                          int64_t cols) {
    size_t n = (size_t)(rows * cols);
    float *x = malloc(n * sizeof *x);
    cr_assert(x);
    for (size_t i = 0; i < n; i++) x[i] = 0.5f;
    phax_st_writer *w = phax_st_writer_new();
    int64_t shape[2] = {rows, cols};
    cr_assert(phax_st_add_raw(w, name, PHAX_DT_F32, 2, shape, x) == PHAX_OK);
    add_meta_ckpt(w, config_json);
    cr_assert(phax_st_write(w, path) == PHAX_OK, "%s", phax_error());
    phax_st_writer_free(w);
    free(x);
}

static long file_size(const char *path) {
    struct stat sb;
    cr_assert(stat(path, &sb) == 0);
    return (long)sb.st_size;
}

// A small valid transformer checkpoint over the byte vocabulary, its parameters
// the seeded init, element `elem` of parameter `poison` (if not NULL) set to value.
static void write_valid_ckpt(const char *path, const char *poison, size_t elem, float value, int train_seq) {
    phax_ckpt ck = {0};
    cr_assert(phax_vocab_byte(&ck.vocab) == PHAX_OK);
    ck.cfg = phax_model_cfg_default(PHAX_FAMILY_TRANSFORMER);
    ck.cfg.d_model = 16, ck.cfg.n_heads = 2, ck.cfg.n_layers = 1;
    cr_assert(phax_model_cfg_resolve(&ck.cfg) == PHAX_OK, "%s", phax_error());
    cr_assert(phax_layout_build(&ck.layout, &ck.cfg) == PHAX_OK);
    double *p64 = malloc(ck.layout.numel * sizeof *p64);
    ck.params = malloc(ck.layout.numel * sizeof(float));
    cr_assert(p64 && ck.params);
    cr_assert(phax_model_init(p64, &ck.layout, &ck.cfg, 7) == PHAX_OK);
    for (size_t i = 0; i < ck.layout.numel; i++) ck.params[i] = (float)p64[i];
    if (poison) {
        int i = phax_layout_find(&ck.layout, poison);
        cr_assert(i >= 0 && elem < ck.layout.p[i].numel);
        ck.params[ck.layout.p[i].offset + elem] = value;
    }
    ck.step = 1, ck.tokens_seen = 16, ck.train_batch = 1, ck.train_seq = train_seq;
    cr_assert(phax_ckpt_save(path, &ck) == PHAX_OK, "%s", phax_error());
    free(p64), free(ck.params);
    phax_layout_free(&ck.layout);
    phax_vocab_free(ck.vocab);
}

// --- configs: documented maxima -----------------------------------------------------------------

typedef struct {
    const char *key;
    int *field;
    int max;
} cap;

Test(bounds, config_maxima_each_named) {
    phax_model_cfg c0 = phax_model_cfg_default(PHAX_FAMILY_PHA), c;
    cap caps[] = {  // (head_dim: max + 2, as it must be even)
        {"vocab_size", &c.vocab_size, PHAX_MAX_VOCAB}, {"d_model", &c.d_model, PHAX_MAX_D_MODEL},
        {"n_layers", &c.n_layers, PHAX_MAX_LAYERS},    {"head_dim", &c.head_dim, PHAX_MAX_HEAD_DIM},
        {"ffn_hidden", &c.ffn_hidden, PHAX_MAX_WIDTH}, {"ffn_aux_hidden", &c.ffn_aux_hidden, PHAX_MAX_WIDTH},
        {"gss_expand", &c.gss_expand, PHAX_MAX_WIDTH}, {"gss_hidden", &c.gss_hidden, PHAX_MAX_WIDTH},
        {"gss_state", &c.gss_state, PHAX_MAX_GSS_STATE}, {"train_len", &c.train_len, PHAX_MAX_SEQ},
        {"attn_window", &c.attn_window, PHAX_MAX_SEQ}, {"w_long", &c.w_long, PHAX_MAX_SEQ},
    };
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        c = c0;
        int over = caps[i].max + (caps[i].field == &c.head_dim ? 2 : 1);
        *caps[i].field = over;
        if (caps[i].field == &c.d_model) c.n_heads = 1, c.head_dim = 2;  // keep d_model the only fault
        phax_clear_error();
        cr_assert(phax_model_cfg_resolve(&c) == PHAX_ERR, "%s = %d accepted", caps[i].key, over);
        char want[96];
        snprintf(want, sizeof want, "%s (%d) exceeds the maximum %d", caps[i].key, over, caps[i].max);
        expect_msg("config: ", want);
    }
    // Heads (n_heads divisible by n_kv_heads; mlstm_heads divides d_model/2 in the SWAX family).
    c = c0, c.n_heads = PHAX_MAX_HEADS + 1, c.head_dim = 2;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_ERR);
    expect_msg("config: ", "n_heads (4097) exceeds the maximum 4096");
    c = c0, c.n_heads = 4097 * 2, c.n_kv_heads = 4097, c.head_dim = 2;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_ERR);
    expect_msg("config: ", "n_heads (8194) exceeds");
    c = phax_model_cfg_default(PHAX_FAMILY_SWA), c.mlstm_heads = PHAX_MAX_HEADS + 1;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_ERR);
    expect_msg("config: ", "mlstm_heads (4097) exceeds the maximum 4096");
    // w_short (w_long ≥ w_short is checked first, so both are over).
    c = phax_model_cfg_default(PHAX_FAMILY_SWAX), c.w_short = c.w_long = PHAX_MAX_SEQ + 1;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_ERR);
    expect_msg("config: ", "w_short (65537) exceeds the maximum 65536");

    // At the maxima (where the parameter total allows): accepted.
    c = c0, c.vocab_size = PHAX_MAX_VOCAB;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s", phax_error());
    c = c0, c.n_layers = PHAX_MAX_LAYERS, c.train_len = PHAX_MAX_SEQ, c.attn_window = PHAX_MAX_SEQ;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s", phax_error());
    c = c0, c.gss_state = PHAX_MAX_GSS_STATE, c.n_heads = 1, c.head_dim = PHAX_MAX_HEAD_DIM;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s", phax_error());

    // From JSON: the message names the file.
    phax_model_cfg j = c0;
    cr_assert(phax_model_cfg_from_json_str(&j, "{\"family\": \"mlstm\", \"n_layers\": 200000000}", "x.json") ==
              PHAX_ERR);
    expect_msg("x.json", "n_layers (200000000) exceeds the maximum 1024");
}

Test(bounds, config_products_and_total) {
    // n_heads × head_dim wrapped int in the layout and every model; bounded as a product.
    phax_model_cfg c = phax_model_cfg_default(PHAX_FAMILY_TRANSFORMER);
    c.n_heads = 4096, c.head_dim = 4096;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_ERR);
    expect_msg("config: ", "n_heads x head_dim (4096 x 4096 = 16777216) exceeds the maximum 262144");
    // Every dimension within its maximum, the parameters together not: 2^21 × 4096 × 2.
    c = phax_model_cfg_default(PHAX_FAMILY_TRANSFORMER);
    c.vocab_size = PHAX_MAX_VOCAB, c.d_model = 4096, c.n_heads = 32, c.tie_embeddings = 0;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_ERR);
    expect_msg("config: ", "parameters exceed the maximum 2147483647");
    // Just under the total: accepted, and counted without building the layout.
    c = phax_model_cfg_default(PHAX_FAMILY_TRANSFORMER);
    c.vocab_size = 50000, c.d_model = 4096, c.n_layers = 3;
    cr_assert(phax_model_cfg_resolve(&c) == PHAX_OK, "%s", phax_error());
    int n;
    int64_t numel;
    cr_assert(phax_layout_count(&c, &n, &numel) == PHAX_OK);
    cr_assert(n == 3 * 10 + 2 && numel == 809594892, "%d tensors, %lld", n, (long long)numel);
}

// The layout alone, on a config resolve would refuse: sizes in 64 bits, never wrapped.
Test(bounds, layout_sizes_in_64_bits) {
    phax_model_cfg c = phax_model_cfg_default(PHAX_FAMILY_TRANSFORMER);
    c.vocab_size = 16, c.d_model = 8, c.n_layers = 1, c.n_heads = 65537, c.n_kv_heads = 1;
    c.head_dim = 32768, c.ffn_hidden = 1431609338;
    c.rope_base = 10000, c.ffn_aux_hidden = 4, c.gss_expand = 16, c.gss_hidden = 2, c.gss_state = 64;
    c.mlstm_heads = 1, c.train_len = 256, c.w_short = 2, c.w_long = 32;
    // In int, 65537 · 32768 wrapped to −2147450880 and, with this ffn_hidden, the
    // whole layout to 9 elements (36 bytes) while embed.weight alone is 128.
    int64_t qd = 65537LL * 32768, d = 8, F = 1431609338;
    int64_t want = 16 * d + 3 * d + 2 * qd * d + 2 * 32768 * d + 65537 + 3 * F * d;
    int64_t numel;
    cr_assert(phax_layout_count(&c, NULL, &numel) == PHAX_OK, "%s", phax_error());
    cr_assert(numel == want, "layout counts %lld elements, expected %lld", (long long)numel, (long long)want);
    phax_layout L;
    cr_assert(phax_layout_build(&L, &c) == PHAX_OK, "%s", phax_error());
    cr_assert((int64_t)L.numel == want);
    int wq = phax_layout_find(&L, "blocks.0.attn.wq.weight");
    cr_assert(wq >= 0 && L.p[wq].shape[0] == qd && L.p[wq].numel == (size_t)(qd * d));
    phax_layout_free(&L);
    // A negative dimension (an unresolved config) is an error, not a huge size_t.
    c.ffn_hidden = -3;
    cr_assert(phax_layout_count(&c, NULL, &numel) == PHAX_ERR);
    expect_msg("layout: ", "impossible size");
    cr_assert(phax_layout_build(&L, &c) == PHAX_ERR && L.p == NULL && L.n == 0);
}

// --- checkpoints: crafted files ---------------------------------------------------------------

// Issue 11 item 1: a ~1 KB checkpoint whose config wrapped the layout to 9 elements;
// phax_ckpt_load allocated 36 bytes and copied the file's 512-byte embed.weight over the heap.
Test(bounds, ckpt_heap_overflow_config_refused) {
    char *dir = tu_tmpdir("phax_bounds");
    char *path = tu_join(dir, "ovf.safetensors");
    write_crafted(path,
                  "{\"family\": \"transformer\", \"vocab_size\": 16, \"d_model\": 8, \"n_layers\": 1, "
                  "\"n_heads\": 65537, \"n_kv_heads\": 1, \"head_dim\": 32768, \"ffn_hidden\": 1431609338}",
                  "embed.weight", 16, 8);
    cr_assert(file_size(path) < 2048, "%ld bytes", file_size(path));
    limit_address_space(1024);
    expect_ckpt_refused(path, "n_heads (65537) exceeds the maximum 4096");
    tu_rm_rf(dir);
    free(dir), free(path);
}

// A few hundred bytes with n_layers 2e8: the layout grew without bound before.
Test(bounds, ckpt_many_layers_refused) {
    char *dir = tu_tmpdir("phax_bounds");
    char *path = tu_join(dir, "layers.safetensors");
    write_crafted(path, "{\"family\": \"mlstm\", \"vocab_size\": 2, \"d_model\": 2, \"n_heads\": 1, \"n_layers\": 200000000}",
                  "embed.weight", 2, 2);
    cr_assert(file_size(path) < 1024);
    limit_address_space(1024);
    expect_ckpt_refused(path, "n_layers (200000000) exceeds the maximum 1024");
    tu_rm_rf(dir);
    free(dir), free(path);
}

// A valid config of 810 M parameters in a file that holds one 2 × 2 tensor: refused
// on the tensors before the 3.2 GB of parameters are allocated (before: 3 GB, 18 s).
Test(bounds, ckpt_large_config_small_file_refused_before_allocating) {
    char *dir = tu_tmpdir("phax_bounds");
    char *path = tu_join(dir, "big.safetensors");
    const char *cfg = "{\"family\": \"transformer\", \"vocab_size\": 50000, \"d_model\": 4096, \"n_layers\": 3}";
    write_crafted(path, cfg, "embed.weight", 2, 2);
    cr_assert(file_size(path) < 1024);
    limit_address_space(1024);
    expect_ckpt_refused(path, "tensor 'embed.weight' has shape [2, 2], expected [50000, 4096]");
    // 1.3 MB holding the right embedding of a 1000-layer model (53 M parameters, 213 MB)
    // and nothing else: the first missing tensor is named, still before allocating.
    write_crafted(path, "{\"family\": \"transformer\", \"vocab_size\": 5000, \"d_model\": 64, \"n_layers\": 1000}",
                  "embed.weight", 5000, 64);
    expect_ckpt_refused(path, "tensor 'blocks.0.norm_attn.weight' is missing");

    // The training state of the same large layout, from a small file: refused on its
    // tensors before the moments (2 × 3.2 GB) are allocated.
    phax_model_cfg c;
    cr_assert(phax_model_cfg_from_json_str(&c, cfg, "cfg") == PHAX_OK, "%s", phax_error());
    phax_layout L;
    cr_assert(phax_layout_build(&L, &c) == PHAX_OK);
    char *st = tu_join(dir, "big.state.safetensors");
    phax_st_writer *w = phax_st_writer_new();
    float z[4] = {0};
    int64_t shape[2] = {2, 2};
    cr_assert(phax_st_add_raw(w, "m.embed.weight", PHAX_DT_F32, 2, shape, z) == PHAX_OK);
    cr_assert(phax_st_add_raw(w, "v.embed.weight", PHAX_DT_F32, 2, shape, z) == PHAX_OK);
    cr_assert(phax_st_add_meta(w, "format", PHAX_CKPT_STATE_FORMAT) == PHAX_OK);
    cr_assert(phax_st_add_meta(w, "step", "0") == PHAX_OK);
    cr_assert(phax_st_write(w, st) == PHAX_OK);
    phax_st_writer_free(w);
    phax_ckpt_state s;
    phax_clear_error();
    long before = peak_kb();
    cr_assert(phax_ckpt_state_load(st, &L, &s) == PHAX_ERR);
    long grew = peak_kb() - before;
    expect_msg(st, "tensor 'm.embed.weight' has shape [2, 2], expected [50000, 4096]");
    cr_assert(s.m == NULL && s.v == NULL);
    cr_assert(grew < 64 * 1024, "refusing the state grew the peak memory by %ld MB", grew / 1024);
    phax_layout_free(&L);
    tu_rm_rf(dir);
    free(dir), free(path), free(st);
}

// Issue 11 item 9: NaN/Inf weights loaded silently (eval printed perplexity nan, exit 0).
Test(bounds, ckpt_non_finite_weight_refused) {
    char *dir = tu_tmpdir("phax_bounds");
    char *path = tu_join(dir, "m.safetensors");
    phax_ckpt ck;
    struct {
        const char *name;
        size_t at;
        float v;
        const char *what;
    } cases[] = {
        {"blocks.0.attn.wq.weight", 5, NAN, "tensor 'blocks.0.attn.wq.weight' holds a non-finite value (nan at element 5)"},
        {"blocks.0.attn.wq.weight", 5, INFINITY, "tensor 'blocks.0.attn.wq.weight' holds a non-finite value (inf at element 5)"},
        {"norm_f.weight", 15, -INFINITY, "tensor 'norm_f.weight' holds a non-finite value (-inf at element 15)"},
        {"embed.weight", 0, NAN, "tensor 'embed.weight' holds a non-finite value (nan at element 0)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_valid_ckpt(path, cases[i].name, cases[i].at, cases[i].v, 16);
        expect_ckpt_refused(path, cases[i].what);
    }
    // A training state with an Inf moment: refused the same way.
    write_valid_ckpt(path, NULL, 0, 0, 16);
    cr_assert(phax_ckpt_load(path, -1, &ck) == PHAX_OK, "%s", phax_error());
    size_t n = ck.layout.numel;
    phax_ckpt_state s = {.step = 1, .dtype = PHAX_DT_F32};
    float *m = calloc(n, sizeof *m), *v = calloc(n, sizeof *v);
    cr_assert(m && v);
    s.m = m, s.v = v;
    v[n - 1] = INFINITY;
    char *st = phax_ckpt_state_path(path);
    cr_assert(phax_ckpt_state_save(st, &ck.layout, &s) == PHAX_OK, "%s", phax_error());
    phax_ckpt_state got;
    phax_clear_error();
    cr_assert(phax_ckpt_state_load(st, &ck.layout, &got) == PHAX_ERR);
    expect_msg(st, "tensor 'v.norm_f.weight' holds a non-finite value (inf at element 15)");
    v[n - 1] = 0;
    cr_assert(phax_ckpt_state_save(st, &ck.layout, &s) == PHAX_OK);
    cr_assert(phax_ckpt_state_load(st, &ck.layout, &got) == PHAX_OK, "%s", phax_error());
    phax_ckpt_state_free(&got);
    free(m), free(v), free(st);
    phax_ckpt_free(&ck);
    tu_rm_rf(dir);
    free(dir), free(path);
}

// Issue 11 item 11: train_seq from the metadata skipped --seq's 65,536 limit
// (2^31 − 1 then overflowed int in fast/cpu/mlstm.c when a workspace was sized).
Test(bounds, ckpt_train_seq_within_seq_limit) {
    char *dir = tu_tmpdir("phax_bounds");
    char *path = tu_join(dir, "m.safetensors");
    write_valid_ckpt(path, NULL, 0, 0, PHAX_MAX_SEQ);
    phax_ckpt ck;
    cr_assert(phax_ckpt_load(path, -1, &ck) == PHAX_OK, "%s", phax_error());
    cr_assert(ck.train_seq == PHAX_MAX_SEQ);
    phax_ckpt_free(&ck);
    write_valid_ckpt(path, NULL, 0, 0, PHAX_MAX_SEQ + 1);
    expect_ckpt_refused(path, "train_seq 65537 out of range (at most 1048576 / 65536)");
    write_valid_ckpt(path, NULL, 0, 0, INT_MAX);
    expect_ckpt_refused(path, "train_seq 2147483647 out of range");
    tu_rm_rf(dir);
    free(dir), free(path);
}

// The mLSTM workspace at T = 2^31 − 1: T + chunk − 1 and T + 1 overflowed int
// (UBSan: signed overflow; otherwise a negative chunk count and a wrapped size).
Test(bounds, mlstm_workspace_at_int_max_T) {
    const int T = INT_MAX;
    size_t bw = fcpu_mlstm_chunkwise_bwd_ws(1, T, 1, 2, 2, 0);
    // Per sequence the backward keeps three double rows over T (dig, dphi, mud: 3·8·T
    // bytes) and per chunk of 64 a 2 × 2 state, its n, m and argmax (≈ 0.5 bytes per step).
    double per_t = (double)bw / T;
    cr_assert(per_t >= 24 && per_t < 26, "bwd workspace %zu bytes at T = 2^31 - 1 (%.3f per step)", bw, per_t);
    size_t fw = fcpu_mlstm_chunkwise_fwd_ws(1, T, 1, 2, 2, 0);
    cr_assert(fw > 0 && fw < (1u << 20), "fwd workspace %zu bytes", fw);  // O(chunk²), not O(T)
}

// --- the phax command ----------------------------------------------------------------------------

// Run phax with the NULL-terminated arguments, stdout and stderr into `out`; returns the
// exit status and the child's peak resident memory in *peak_mb.
static int phax_run_v(const char *out, long *peak_mb, const char *const *args) {
    long kb;
    int rc = tu_phax_v(out, NULL, NULL, &kb, args);
    *peak_mb = kb / 1024;
    return rc;
}
#define phax_run(out, peak_mb, ...) phax_run_v((out), (peak_mb), (const char *const[]){__VA_ARGS__})

// The whole file; valid until the next call.
static const char *slurp_text(const char *path) {
    static char *last;
    free(last);
    return last = tu_slurp(path, NULL);
}

// `phax info CONFIG.json` of a valid 127 M-parameter config counts it; before, it
// allocated and initialised the model (16 bytes a parameter: 2 GB; at 810 M, 13 GB).
Test(bounds, cli_info_config_counts_without_allocating) {
    char *dir = tu_tmpdir("phax_bounds");
    char *cfg = tu_join(dir, "big.json"), *out = tu_join(dir, "out.txt");
    const char *json = "{\"family\": \"transformer\", \"vocab_size\": 50000, \"d_model\": 1024, \"n_layers\": 6}\n";
    tu_write_file(cfg, json, strlen(json));
    long peak;
    int rc = phax_run(out, &peak, "info", cfg, NULL);
    const char *o = slurp_text(out);
    cr_assert(rc == 0, "exit %d:\n%s", rc, o);
    cr_assert(strstr(o, "127,104,024"), "no parameter total:\n%s", o);
    cr_assert(strstr(o, "workspace"), "no workspace line:\n%s", o);
    cr_assert(peak < 200, "phax info on a config peaked at %ld MB", peak);
    tu_rm_rf(dir);
    free(dir), free(cfg), free(out);
}

// The crafted checkpoints through the command: one line, exit 1, little memory.
Test(bounds, cli_crafted_checkpoints_refused) {
    char *dir = tu_tmpdir("phax_bounds");
    char *big = tu_join(dir, "big.safetensors"), *nan = tu_join(dir, "nan.safetensors");
    char *out = tu_join(dir, "out.txt"), *text = tu_join(dir, "text.txt"), *cache = tu_join(dir, "cache");
    write_crafted(big, "{\"family\": \"transformer\", \"vocab_size\": 50000, \"d_model\": 4096, \"n_layers\": 3}",
                  "embed.weight", 2, 2);
    long peak;
    int rc = phax_run(out, &peak, "info", big, NULL);
    const char *o = slurp_text(out);
    cr_assert(rc == 1 && strstr(o, "expected [50000, 4096]") && strchr(o, '\n') == o + strlen(o) - 1,
              "exit %d, not one line:\n%s", rc, o);
    cr_assert(peak < 200, "phax info on an 800-byte checkpoint peaked at %ld MB", peak);
    rc = phax_run(out, &peak, "eval", big, "--file", big, NULL);
    o = slurp_text(out);
    cr_assert(rc == 1 && strstr(o, "expected [50000, 4096]"), "exit %d:\n%s", rc, o);
    cr_assert(peak < 200, "phax eval on an 800-byte checkpoint peaked at %ld MB", peak);

    // A NaN weight: eval printed "perplexity nan" and exit 0.
    const char *t = "the cat sat on the mat and the dog sat on the log\n";
    tu_write_file(text, t, strlen(t));
    write_valid_ckpt(nan, "blocks.0.attn.wq.weight", 3, NAN, 16);
    rc = phax_run(out, &peak, "eval", nan, "--file", text, "--seq", "8", "--cache-dir", cache, NULL);
    o = slurp_text(out);
    cr_assert(rc == 1 && strstr(o, "nan.safetensors: tensor 'blocks.0.attn.wq.weight' holds a non-finite value"),
              "exit %d:\n%s", rc, o);
    tu_rm_rf(dir);
    free(dir), free(big), free(nan), free(out), free(text), free(cache);
}
