// Checkpoints (model + vocabulary + training state) and run folders; see
// include/phax/checkpoint.h. The schedules a resumed run repeats: core/schedule.c.
#include "phax/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// Small helpers

// The files store little-endian bytes and are read and written with memcpy,
// so the host must be little-endian (every platform phax builds on is).
static int host_is_le(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static char *xstrdup(const char *s) {
    char *p = strdup(s ? s : "");
    if (!p) phax_fail("out of memory");
    return p;
}

static char *concat(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *p = malloc(na + nb + 1);
    if (!p) {
        phax_fail("out of memory");
        return NULL;
    }
    memcpy(p, a, na);
    memcpy(p + na, b, nb + 1);
    return p;
}

// The path without a trailing ".safetensors" (the checkpoint's stem).
static char *stem_of(const char *model_path) {
    static const char ext[] = ".safetensors";
    size_t n = strlen(model_path), ne = sizeof ext - 1;
    char *p = xstrdup(model_path);
    if (p && n > ne && !strcmp(model_path + n - ne, ext)) p[n - ne] = '\0';
    return p;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

// Directory part of path including the final '/', or "" for a bare name.
static char *dir_part(const char *path) {
    const char *s = strrchr(path, '/');
    size_t n = s ? (size_t)(s - path) + 1 : 0;
    char *p = malloc(n + 1);
    if (!p) {
        phax_fail("out of memory");
        return NULL;
    }
    memcpy(p, path, n);
    p[n] = '\0';
    return p;
}

// A run folder's "checkpoint.safetensors" is a symlink to the current
// generation's model file; resolve it (a few levels, relative targets against
// the link's folder) so that the state and vocabulary are read from the same
// generation. A dangling link is returned as it is (the reader names it).
static char *follow_links(char *p) {
    for (int depth = 0; p && depth < 8; depth++) {
        struct stat sb;
        if (lstat(p, &sb) != 0 || !S_ISLNK(sb.st_mode)) break;
        char target[4096];
        ssize_t n = readlink(p, target, sizeof target - 1);
        if (n <= 0) break;
        target[n] = '\0';
        if (stat(p, &sb) != 0) break;  // dangling: keep the link's own name
        char *next;
        if (target[0] == '/') {
            next = xstrdup(target);
        } else {
            char *d = dir_part(p);
            next = d ? concat(d, target) : NULL;
            free(d);
        }
        free(p);
        p = next;
    }
    return p;
}

char *phax_ckpt_model_path(const char *path) {
    struct stat sb;
    if (path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path);
        const char *sep = n && path[n - 1] == '/' ? "" : "/";
        char *d = concat(path, sep);
        char *r = d ? concat(d, PHAX_CKPT_DEFAULT_NAME ".safetensors") : NULL;
        free(d);
        return follow_links(r);
    }
    return path ? follow_links(xstrdup(path)) : xstrdup(path);
}

static char *with_suffix(const char *model_path, const char *suffix) {
    char *s = stem_of(model_path);
    char *r = s ? concat(s, suffix) : NULL;
    free(s);
    return r;
}

char *phax_ckpt_state_path(const char *model_path) { return with_suffix(model_path, ".state.safetensors"); }
char *phax_ckpt_vocab_path(const char *model_path) { return with_suffix(model_path, ".vocab"); }

static int add_meta_i64(phax_st_writer *w, const char *key, int64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return phax_st_add_meta(w, key, buf);
}

// A metadata value that must be a non-negative decimal integer.
static int meta_i64(const phax_st_file *f, const char *key, int required, int64_t *out) {
    const char *s = phax_st_meta(f, key);
    *out = 0;
    if (!s) return required ? phax_fail("%s: no \"%s\" metadata", f->path, key) : PHAX_OK;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < 0)
        return phax_fail("%s: metadata \"%s\" is \"%s\", expected a non-negative integer", f->path,
                         key, s);
    *out = v;
    return PHAX_OK;
}

static int check_format(const phax_st_file *f, const char *want, const char *what) {
    const char *fmt = phax_st_meta(f, "format");
    if (!fmt) return phax_fail("%s: not a %s (no \"format\" metadata)", f->path, what);
    if (strcmp(fmt, want))
        return phax_fail("%s: not a %s (format \"%s\", expected \"%s\")", f->path, what, fmt, want);
    return PHAX_OK;
}

// Tensor `name` must exist with the layout's shape and dtype dt.
static const phax_st_tensor *want_tensor(const phax_st_file *f, const char *name,
                                         const phax_param_info *p, phax_dtype dt) {
    const phax_st_tensor *t = phax_st_find(f, name);
    if (!t) {
        phax_fail("%s: tensor '%s' is missing", f->path, name);
        return NULL;
    }
    if (t->dtype != dt) {
        phax_fail("%s: tensor '%s' is %s, expected %s", f->path, name, phax_dtype_name(t->dtype),
                  phax_dtype_name(dt));
        return NULL;
    }
    int same = t->ndim == p->ndim;
    for (int i = 0; same && i < p->ndim; i++) same = t->shape[i] == p->shape[i];
    if (!same) {
        char got[128] = "", exp[128] = "";
        for (int i = 0; i < t->ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%" PRId64, i ? ", " : "",
                     t->shape[i]);
        for (int i = 0; i < p->ndim; i++)
            snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%" PRId64, i ? ", " : "",
                     p->shape[i]);
        phax_fail("%s: tensor '%s' has shape [%s], expected [%s]", f->path, name, got, exp);
        return NULL;
    }
    return t;
}

// ---------------------------------------------------------------------------
// Model file

int phax_ckpt_save(const char *model_path, const phax_ckpt *ck) {
    if (!model_path || !ck || !ck->params || !ck->vocab || !ck->layout.p)
        return phax_fail("checkpoint: NULL argument");
    if (!host_is_le()) return phax_fail("%s: checkpoints need a little-endian host", model_path);
    if ((size_t)ck->cfg.vocab_size != phax_vocab_size(ck->vocab))
        return phax_fail("%s: config vocab_size %d but the vocabulary has %zu tokens", model_path,
                         ck->cfg.vocab_size, phax_vocab_size(ck->vocab));
    char *cfg_json = phax_model_cfg_to_json(&ck->cfg);
    char *vpath = phax_ckpt_vocab_path(model_path);
    phax_st_writer *w = phax_st_writer_new();
    int rc = cfg_json && vpath && w ? PHAX_OK : PHAX_ERR;
    if (rc == PHAX_OK) rc = phax_vocab_save(ck->vocab, vpath);
    char hash[17];
    snprintf(hash, sizeof hash, "%016" PRIx64, phax_vocab_hash(ck->vocab));
    for (int i = 0; rc == PHAX_OK && i < ck->layout.n; i++) {
        const phax_param_info *p = &ck->layout.p[i];
        rc = phax_st_add_raw(w, p->name, PHAX_DT_F32, p->ndim, p->shape, ck->params + p->offset);
    }
    if (rc == PHAX_OK)
        rc = phax_st_add_meta(w, "format", PHAX_CKPT_FORMAT) |
             phax_st_add_meta(w, "config", cfg_json) |
             phax_st_add_meta(w, "vocab", base_name(vpath)) |
             phax_st_add_meta(w, "vocab_hash", hash) | add_meta_i64(w, "step", ck->step) |
             add_meta_i64(w, "tokens_seen", ck->tokens_seen) |
             add_meta_i64(w, "train_batch", ck->train_batch) |
             add_meta_i64(w, "train_seq", ck->train_seq);
    if (rc == PHAX_OK) rc = phax_st_write(w, model_path);
    phax_st_writer_free(w);
    free(vpath);
    free(cfg_json);
    return rc ? PHAX_ERR : PHAX_OK;
}

void phax_ckpt_free(phax_ckpt *ck) {
    if (!ck) return;
    free(ck->path);
    free(ck->vocab_path);
    phax_layout_free(&ck->layout);
    phax_free(ck->params);
    phax_vocab_free(ck->vocab);
    memset(ck, 0, sizeof *ck);
}

// Config from the "config" metadata, checked against the expected family.
static int load_config(const phax_st_file *f, int expect_family, phax_model_cfg *cfg) {
    const char *json = phax_st_meta(f, "config");
    if (!json) return phax_fail("%s: no \"config\" metadata", f->path);
    char *where = concat(f->path, ": config");
    if (!where) return PHAX_ERR;
    int rc = phax_model_cfg_from_json_str(cfg, json, where);
    free(where);
    if (rc) return PHAX_ERR;
    if (expect_family >= 0 && (int)cfg->family != expect_family)
        return phax_fail("%s: a %s checkpoint, expected %s", f->path, phax_family_name(cfg->family),
                         phax_family_name((phax_family)expect_family));
    return PHAX_OK;
}

// Every element of an F32 or F64 tensor finite: a NaN or Inf weight would only
// show later as a NaN perplexity or a stuck generator.
static int check_finite(const phax_st_file *f, const phax_st_tensor *t) {
    size_t es = phax_dtype_size(t->dtype);
    for (size_t j = 0; j < t->numel; j++) {
        double x;
        if (t->dtype == PHAX_DT_F32) {
            float v;
            memcpy(&v, t->data + j * es, sizeof v);
            x = v;
        } else {
            memcpy(&x, t->data + j * es, sizeof x);
        }
        if (!isfinite(x))
            return phax_fail("%s: tensor '%s' holds a non-finite value (%s at element %zu)", f->path,
                             t->name, isnan(x) ? "nan" : x > 0 ? "inf" : "-inf", j);
    }
    return PHAX_OK;
}

// Every layout tensor present, F32, of its shape and finite; nothing else. This
// runs on the file's own bytes before anything is allocated: the tensors tile the
// file's data buffer (phax_st_read), so a layout that passes is one the file
// actually holds, and a small file cannot make the loader allocate a large model.
static int check_params(const phax_st_file *f, const phax_layout *L) {
    for (int i = 0; i < L->n; i++) {
        const phax_st_tensor *t = want_tensor(f, L->p[i].name, &L->p[i], PHAX_DT_F32);
        if (!t || check_finite(f, t)) return PHAX_ERR;
    }
    // Names are unique within a file (phax_st_read): with every layout name found,
    // the file holds another tensor only if it has more than L->n.
    for (int i = 0; f->n > L->n && i < f->n; i++)
        if (phax_layout_find(L, f->t[i].name) < 0)
            return phax_fail("%s: unexpected tensor '%s' (not a parameter of this config)", f->path,
                             f->t[i].name);
    return PHAX_OK;
}

// The checked tensors (check_params) into params (layout.numel floats).
static void copy_params(const phax_st_file *f, const phax_layout *L, float *params) {
    for (int i = 0; i < L->n; i++) {
        const phax_st_tensor *t = phax_st_find(f, L->p[i].name);
        memcpy(params + L->p[i].offset, t->data, t->nbytes);
    }
}

// The vocabulary file named by the metadata, beside the checkpoint.
static int load_vocab(const phax_st_file *f, phax_ckpt *ck) {
    const char *name = phax_st_meta(f, "vocab");
    const char *hash = phax_st_meta(f, "vocab_hash");
    if (!name || !*name) return phax_fail("%s: no \"vocab\" metadata", f->path);
    if (strchr(name, '/')) return phax_fail("%s: vocab \"%s\" is not a plain file name", f->path, name);
    if (!hash) return phax_fail("%s: no \"vocab_hash\" metadata", f->path);
    char *dir = dir_part(f->path);
    ck->vocab_path = dir ? concat(dir, name) : NULL;
    free(dir);
    if (!ck->vocab_path) return PHAX_ERR;
    struct stat sb;
    if (stat(ck->vocab_path, &sb) != 0)
        return phax_fail("%s: vocabulary file %s is missing", f->path, ck->vocab_path);
    if (phax_vocab_load_expect(ck->vocab_path, ck->cfg.vocab_size, &ck->vocab)) {
        return phax_fail("%s: vocabulary: %s", f->path, phax_error());
    }
    char got[17];
    snprintf(got, sizeof got, "%016" PRIx64, phax_vocab_hash(ck->vocab));
    if (strcmp(got, hash))
        return phax_fail("%s: vocabulary file %s has hash %s, the checkpoint expects %s", f->path,
                         ck->vocab_path, got, hash);
    if (phax_vocab_size(ck->vocab) != (size_t)ck->cfg.vocab_size)
        return phax_fail("%s: vocabulary has %zu tokens, config vocab_size is %d", f->path,
                         phax_vocab_size(ck->vocab), ck->cfg.vocab_size);
    return PHAX_OK;
}

#define CKPT_MAX_BATCH (1 << 20)  // phax train's --batch limit

static int load_counters(const phax_st_file *f, phax_ckpt *ck) {
    int64_t b, t;
    if (meta_i64(f, "step", 1, &ck->step) || meta_i64(f, "tokens_seen", 1, &ck->tokens_seen) ||
        meta_i64(f, "train_batch", 0, &b) || meta_i64(f, "train_seq", 0, &t))
        return PHAX_ERR;
    // The limits of `phax train` (--batch, --seq): later commands size workspaces from them.
    if (b > CKPT_MAX_BATCH || t > PHAX_MAX_SEQ)
        return phax_fail("%s: train_batch %" PRId64 " / train_seq %" PRId64
                         " out of range (at most %d / %d)",
                         f->path, b, t, CKPT_MAX_BATCH, PHAX_MAX_SEQ);
    ck->train_batch = (int)b, ck->train_seq = (int)t;
    return PHAX_OK;
}

static int load_once(const char *path, int expect_family, phax_ckpt *ck) {
    memset(ck, 0, sizeof *ck);
    phax_st_file f = {0};
    ck->path = phax_ckpt_model_path(path);
    int rc = ck->path ? phax_st_read(&f, ck->path) : PHAX_ERR;
    if (rc == PHAX_OK) rc = check_format(&f, PHAX_CKPT_FORMAT, "phax checkpoint");
    if (rc == PHAX_OK) rc = load_config(&f, expect_family, &ck->cfg);
    if (rc == PHAX_OK) rc = phax_layout_build(&ck->layout, &ck->cfg);
    if (rc == PHAX_OK) rc = check_params(&f, &ck->layout);
    if (rc == PHAX_OK) rc = load_counters(&f, ck);
    if (rc == PHAX_OK) rc = load_vocab(&f, ck);
    // Allocated last, once the file is known to hold every parameter.
    if (rc == PHAX_OK && !(ck->params = phax_alloc(ck->layout.numel * sizeof(float)))) rc = PHAX_ERR;
    if (rc == PHAX_OK) copy_params(&f, &ck->layout, ck->params);
    phax_st_free(&f);
    if (rc != PHAX_OK) phax_ckpt_free(ck);
    return rc;
}

// A run folder's link moves to each new generation and the training prunes the older ones: a
// reader that resolved the link just before a prune finds its generation's files gone. When a
// load fails and the link now names another generation, it is loaded instead (a few times: a
// training that checkpoints every step moves it again).
#define CKPT_LOAD_TRIES 8
int phax_ckpt_load(const char *path, int expect_family, phax_ckpt *ck) {
    if (!ck) return phax_fail("checkpoint: NULL argument");
    memset(ck, 0, sizeof *ck);
    if (!path) return phax_fail("checkpoint: NULL path");
    if (!host_is_le()) return phax_fail("%s: checkpoints need a little-endian host", path);
    int rc = PHAX_ERR;
    for (int k = 0; k < CKPT_LOAD_TRIES; k++) {
        char *before = phax_ckpt_model_path(path);
        rc = load_once(path, expect_family, ck);
        char *after = rc != PHAX_OK ? phax_ckpt_model_path(path) : NULL;
        int moved = before && after && strcmp(before, after);
        free(before), free(after);
        if (rc == PHAX_OK || !moved) break;
    }
    return rc;
}

// ---------------------------------------------------------------------------
// Training state

static const char *const state_prefix[3] = {"m.", "v.", "p."};

int phax_ckpt_state_save(const char *state_path, const phax_layout *L, const phax_ckpt_state *s) {
    if (!state_path || !L || !s || !s->m || !s->v) return phax_fail("training state: NULL argument");
    if (!host_is_le()) return phax_fail("%s: checkpoints need a little-endian host", state_path);
    if (s->dtype != PHAX_DT_F32 && s->dtype != PHAX_DT_F64)
        return phax_fail("%s: training state dtype must be F32 or F64", state_path);
    if (s->master && s->dtype != PHAX_DT_F64)
        return phax_fail("%s: master parameters need dtype F64", state_path);
    size_t es = phax_dtype_size(s->dtype);
    const void *bufs[3] = {s->m, s->v, s->master};
    phax_st_writer *w = phax_st_writer_new();
    int rc = w ? PHAX_OK : PHAX_ERR;
    for (int k = 0; k < 3 && rc == PHAX_OK; k++) {
        if (!bufs[k]) continue;
        for (int i = 0; rc == PHAX_OK && i < L->n; i++) {
            const phax_param_info *p = &L->p[i];
            char name[96];
            snprintf(name, sizeof name, "%s%s", state_prefix[k], p->name);
            rc = phax_st_add_raw(w, name, s->dtype, p->ndim, p->shape,
                                 (const char *)bufs[k] + p->offset * es);
        }
    }
    if (rc == PHAX_OK)
        rc = phax_st_add_meta(w, "format", PHAX_CKPT_STATE_FORMAT) | add_meta_i64(w, "step", s->step) |
             phax_st_add_meta(w, "options", s->options_json ? s->options_json : "{}") |
             phax_st_add_meta(w, "rng", s->rng_json ? s->rng_json : "{}") |
             phax_st_add_meta(w, "data", s->data_json ? s->data_json : "{}");
    if (rc == PHAX_OK) rc = phax_st_write(w, state_path);
    phax_st_writer_free(w);
    return rc ? PHAX_ERR : PHAX_OK;
}

void phax_ckpt_state_free(phax_ckpt_state *s) {
    if (!s) return;
    phax_free(s->m), phax_free(s->v), phax_free(s->master);
    free(s->options_json), free(s->rng_json), free(s->data_json);
    memset(s, 0, sizeof *s);
}

// The tensors "<prefix><param>" of one moment/master group: with out == NULL
// check each (present, of dtype dt and the layout's shape, finite), else copy
// the checked tensors into out.
static int load_state_group(const phax_st_file *f, const phax_layout *L, const char *prefix,
                            phax_dtype dt, void *out) {
    size_t es = phax_dtype_size(dt);
    for (int i = 0; i < L->n; i++) {
        char name[96];
        snprintf(name, sizeof name, "%s%s", prefix, L->p[i].name);
        const phax_st_tensor *t = want_tensor(f, name, &L->p[i], dt);
        if (!t || (!out && check_finite(f, t))) return PHAX_ERR;
        if (out) memcpy((char *)out + L->p[i].offset * es, t->data, t->nbytes);
    }
    return PHAX_OK;
}

int phax_ckpt_state_load(const char *state_path, const phax_layout *L, phax_ckpt_state *s) {
    if (!s || !L || !state_path) return phax_fail("training state: NULL argument");
    memset(s, 0, sizeof *s);
    phax_st_file f = {0};
    int rc = phax_st_read(&f, state_path);
    if (rc == PHAX_OK) rc = check_format(&f, PHAX_CKPT_STATE_FORMAT, "phax training state");
    if (rc == PHAX_OK) rc = meta_i64(&f, "step", 1, &s->step);
    // The dtype is the first moment tensor's; every other must agree.
    const phax_st_tensor *t0 = NULL;
    if (rc == PHAX_OK && L->n) {
        char name[96];
        snprintf(name, sizeof name, "m.%s", L->p[0].name);
        t0 = phax_st_find(&f, name);
        if (!t0) rc = phax_fail("%s: tensor '%s' is missing", f.path, name);
    }
    if (rc == PHAX_OK) {
        s->dtype = t0 ? t0->dtype : PHAX_DT_F32;
        if (s->dtype != PHAX_DT_F32 && s->dtype != PHAX_DT_F64)
            rc = phax_fail("%s: moments are %s, expected F32 or F64", f.path, phax_dtype_name(s->dtype));
    }
    int has_master = 0;
    for (int i = 0; rc == PHAX_OK && i < f.n; i++) {
        const char *n = f.t[i].name;
        int known = strlen(n) > 2 && (n[0] == 'm' || n[0] == 'v' || n[0] == 'p') && n[1] == '.' &&
                    phax_layout_find(L, n + 2) >= 0;
        if (!known)
            rc = phax_fail("%s: unexpected tensor '%s' (not a moment of this config)", f.path, n);
        has_master |= n[0] == 'p';
    }
    if (rc == PHAX_OK && has_master && s->dtype != PHAX_DT_F64)
        rc = phax_fail("%s: master parameters 'p.*' in an F32 training state", f.path);
    // Every group checked on the file's bytes before any buffer is allocated.
    for (int k = 0; k < 2 + has_master && rc == PHAX_OK; k++)
        rc = load_state_group(&f, L, state_prefix[k], s->dtype, NULL);
    size_t bytes = L->numel * phax_dtype_size(s->dtype);
    void **bufs[3] = {&s->m, &s->v, &s->master};
    for (int k = 0; k < 2 + has_master && rc == PHAX_OK; k++) {
        if (!(*bufs[k] = phax_alloc(bytes))) rc = PHAX_ERR;
        if (rc == PHAX_OK) rc = load_state_group(&f, L, state_prefix[k], s->dtype, *bufs[k]);
    }
    const char *keys[3] = {"options", "rng", "data"};
    char **dst[3] = {&s->options_json, &s->rng_json, &s->data_json};
    for (int k = 0; k < 3 && rc == PHAX_OK; k++) {
        const char *v = phax_st_meta(&f, keys[k]);
        if (!v) rc = phax_fail("%s: no \"%s\" metadata", f.path, keys[k]);
        else if (!(*dst[k] = xstrdup(v))) rc = PHAX_ERR;
    }
    phax_st_free(&f);
    if (rc != PHAX_OK) phax_ckpt_state_free(s);
    return rc;
}

int phax_ckpt_state_check(const char *state_path, const phax_ckpt_state *s, int64_t model_step) {
    if (s->step != model_step)
        return phax_fail("%s: training state is at step %" PRId64 " but the model file is at step %" PRId64
                         " (torn checkpoint)",
                         state_path, s->step, model_step);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Run folders: checkpoint generations (see include/phax/checkpoint.h)

#include <dirent.h>
#include <fcntl.h>

#include "phax/atomic_file.h"

#define GEN_TMP_PREFIX ".ckpt-tmp-"
#define LINK_TMP_PREFIX "." PHAX_CKPT_DEFAULT_NAME ".link-"

int phax_ckpt_gen_name(const char *name, int64_t *step) {
    size_t np = sizeof PHAX_CKPT_GEN_PREFIX - 1;
    if (strncmp(name, PHAX_CKPT_GEN_PREFIX, np) || !name[np]) return 0;
    int64_t v = 0;
    for (const char *c = name + np; *c; c++) {
        if (*c < '0' || *c > '9' || v > (INT64_MAX - 9) / 10) return 0;
        v = v * 10 + (*c - '0');
    }
    if (step) *step = v;
    return 1;
}

// The generation a run folder's link points at ("ckpt-N"), or "" when there is
// none (no link, or a regular file: a run of an older phax).
static void current_gen(const char *link, char out[256]) {
    char t[4096];
    out[0] = '\0';
    ssize_t n = readlink(link, t, sizeof t - 1);
    if (n <= 0) return;
    t[n] = '\0';
    char *slash = strchr(t, '/');
    if (slash) *slash = '\0';
    if (phax_ckpt_gen_name(t, NULL) && strlen(t) < 256) strcpy(out, t);
}

// Remove folder `name` of dirfd and what it holds: a generation's files, and
// a folder or two more levels down (`phax eval` puts its token cache beside the
// model file it reads). Never follows a symlink: one in its place is removed itself.
static int remove_tree(int dirfd, const char *dir, const char *name, int depth) {
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return PHAX_OK;
        if (unlinkat(dirfd, name, 0) == 0) return PHAX_OK;
        return phax_fail("%s/%s: cannot remove: %s", dir, name, strerror(errno));
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return phax_fail("%s/%s: cannot list: %s", dir, name, strerror(errno));
    }
    struct dirent *e;
    int rc = PHAX_OK;
    while (rc == PHAX_OK && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (unlinkat(fd, e->d_name, 0) == 0) continue;
        if ((errno == EISDIR || errno == EPERM) && depth > 0)
            rc = remove_tree(fd, name, e->d_name, depth - 1);
        else
            rc = phax_fail("%s/%s/%s: cannot remove: %s", dir, name, e->d_name, strerror(errno));
    }
    closedir(d);
    if (rc == PHAX_OK && unlinkat(dirfd, name, AT_REMOVEDIR) != 0)
        rc = phax_fail("%s/%s: cannot remove: %s", dir, name, strerror(errno));
    return rc;
}

static int remove_gen(int dirfd, const char *dir, const char *name) { return remove_tree(dirfd, dir, name, 2); }

// Remove every generation but keep1/keep2 and every unfinished temporary
// folder. Best effort: what stays is removed by the next checkpoint.
static void prune_gens(const char *dir, const char *keep1, const char *keep2) {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return;
    int dfd2 = dup(dfd);
    DIR *d = dfd2 >= 0 ? fdopendir(dfd2) : NULL;
    if (!d) {
        if (dfd2 >= 0) close(dfd2);
        close(dfd);
        return;
    }
    char names[64][256];
    int n = 0;
    struct dirent *e;
    while (n < 64 && (e = readdir(d))) {
        const char *nm = e->d_name;
        if (!strncmp(nm, LINK_TMP_PREFIX, sizeof LINK_TMP_PREFIX - 1)) {  // a link never renamed
            (void)unlinkat(dfd, nm, 0);
            continue;
        }
        int gen = phax_ckpt_gen_name(nm, NULL);
        if (!gen && strncmp(nm, GEN_TMP_PREFIX, sizeof GEN_TMP_PREFIX - 1)) continue;
        if (!strcmp(nm, keep1) || !strcmp(nm, keep2) || strlen(nm) >= 256) continue;
        strcpy(names[n++], nm);
    }
    closedir(d);
    for (int i = 0; i < n; i++) (void)remove_gen(dfd, dir, names[i]);
    close(dfd);
}

int phax_ckpt_save_generation(const char *dir, const phax_ckpt *ck, const phax_layout *L,
                              const phax_ckpt_state *st) {
    if (!dir || !ck) return phax_fail("checkpoint: NULL argument");
    char *link = concat(dir, "/" PHAX_CKPT_DEFAULT_NAME ".safetensors");
    if (!link) return PHAX_ERR;
    char prev[256], gen[64], tmpname[64], linktmp[64];
    current_gen(link, prev);
    struct stat sb;
    int legacy = lstat(link, &sb) == 0 && S_ISREG(sb.st_mode);  // an older phax's single checkpoint
    snprintf(gen, sizeof gen, PHAX_CKPT_GEN_PREFIX "%08" PRId64, ck->step);
    if (!strcmp(gen, prev)) {
        phax_fail("%s/%s: is the current checkpoint; not replaced", dir, gen);
        free(link);
        return PHAX_ERR;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        phax_fail("%s: cannot open the run folder: %s", dir, strerror(errno));
        free(link);
        return PHAX_ERR;
    }
    // 0. What an earlier kill left (a temporary folder, a generation never made current)
    //    goes first, so that it cannot fill the disk this generation needs. Only with a
    //    current generation to keep: without one, nothing here is known to be stale.
    if (prev[0]) prune_gens(dir, prev, prev);
    // 1. The files, in a fresh folder nobody else can have prepared (exclusive,
    //    unpredictable name; mode 0777 minus the umask).
    int rc = PHAX_ERR, made = 0;
    for (int tries = 0; tries < 100 && !made; tries++) {
        char r[13];
        phax_random_name(r);
        snprintf(tmpname, sizeof tmpname, GEN_TMP_PREFIX "%s", r);
        if (mkdirat(dfd, tmpname, 0777) == 0) made = 1;
        else if (errno != EEXIST) break;
    }
    char *tdir = concat(dir, "/"), *tpath = NULL, *mpath = NULL, *spath = NULL;
    if (!made) {
        phax_fail("%s: cannot create a checkpoint folder: %s", dir, strerror(errno));
        goto done;
    }
    tpath = tdir ? concat(tdir, tmpname) : NULL;
    mpath = tpath ? concat(tpath, "/" PHAX_CKPT_DEFAULT_NAME ".safetensors") : NULL;
    spath = mpath ? phax_ckpt_state_path(mpath) : NULL;
    if (!spath) goto done;
    if (st && phax_ckpt_state_save(spath, L, st)) goto done;
    if (phax_ckpt_save(mpath, ck) || phax_fsync_dir(tpath)) goto done;
    phax_fault_point("gen:files-written");
    // 2. Under its final name (a stale folder of that name is never current: remove it).
    if (remove_gen(dfd, dir, gen)) goto done;
    if (renameat(dfd, tmpname, dfd, gen) != 0) {
        phax_fail("%s/%s: cannot rename the checkpoint folder into place: %s", dir, gen, strerror(errno));
        goto done;
    }
    made = 0;
    phax_fault_point("gen:folder-renamed");
    if (phax_fsync_dir(dir)) {
        (void)remove_gen(dfd, dir, gen);
        goto done;
    }
    // 3. One atomic step makes it current: a new link renamed over the old one.
    char target[128];
    snprintf(target, sizeof target, "%s/" PHAX_CKPT_DEFAULT_NAME ".safetensors", gen);
    int linked = 0;
    for (int tries = 0; tries < 100 && !linked; tries++) {
        char r[13];
        phax_random_name(r);
        snprintf(linktmp, sizeof linktmp, LINK_TMP_PREFIX "%s", r);
        if (symlinkat(target, dfd, linktmp) == 0) linked = 1;
        else if (errno != EEXIST) break;
    }
    if (linked) phax_fault_point("gen:link-made");
    if (!linked || renameat(dfd, linktmp, dfd, PHAX_CKPT_DEFAULT_NAME ".safetensors") != 0) {
        phax_fail("%s: cannot make %s current: %s", link, gen, strerror(errno));
        if (linked) unlinkat(dfd, linktmp, 0);
        (void)remove_gen(dfd, dir, gen);
        goto done;
    }
    if (phax_fsync_dir(dir)) goto done;  // current but perhaps not durable: report it
    phax_fault_point("gen:current");
    rc = PHAX_OK;
    // 4. Only now the older generations go (the previous one stays).
    prune_gens(dir, gen, prev);
    if (legacy) {
        unlinkat(dfd, PHAX_CKPT_DEFAULT_NAME ".state.safetensors", 0);
        unlinkat(dfd, PHAX_CKPT_DEFAULT_NAME ".vocab", 0);
    }
    (void)phax_fsync_dir(dir);
done:
    if (made) (void)remove_gen(dfd, dir, tmpname);
    close(dfd);
    free(link), free(tdir), free(tpath), free(mpath), free(spath);
    return rc;
}
