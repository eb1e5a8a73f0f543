// `phax info CHECKPOINT|CONFIG.json [--batch B] [--seq T]`: the resolved
// config, the parameter count per component (embedding, head, and per block
// per branch), and the memory a fast/cpu training run needs: parameters,
// gradients, AdamW moments and the model workspace for (B, T) — by default
// the checkpoint's training batch, else 8 × train_len.
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_args.h"
#include "phax/checkpoint.h"
#include "phax/fmodel.h"
#include "phax/model.h"

#define die(...) cli_die("phax info", __VA_ARGS__)

// Components of a parameter name, in print order.
enum { C_ATTN, C_GSS, C_FFN, C_FFN_AUX, C_MLSTM, C_GDN, C_NORMS, NCOMP };
static const char *comp_name[NCOMP] = {"attn", "gss", "ffn", "ffn_aux", "mlstm", "gdn", "norms/mix"};

// Block index of "blocks.{l}.<comp>...", and its component; −1 for the others.
static int classify(const char *name, int *comp) {
    int l, off = 0;
    if (sscanf(name, "blocks.%d.%n", &l, &off) != 1 || off == 0) return -1;
    const char *rest = name + off;
    static const char *prefix[] = {"attn.", "gss.", "ffn.", "ffn_aux.", "mlstm.", "gdn."};
    *comp = C_NORMS;  // norm_* and mix.p
    for (int c = 0; c < C_NORMS; c++)
        if (!strncmp(rest, prefix[c], strlen(prefix[c]))) *comp = c;
    return l;
}

// "12,345,678"
static const char *grouped(size_t v, char buf[32]) {
    char t[32];
    int n = snprintf(t, sizeof t, "%zu", v), k = 0;
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0) buf[k++] = ',';
        buf[k++] = t[i];
    }
    buf[k] = '\0';
    return buf;
}

static void print_params(const phax_model_cfg *c, const phax_layout *L) {
    int nl = c->n_layers;
    size_t (*blk)[NCOMP] = calloc((size_t)nl, sizeof *blk);
    size_t emb = 0, head = 0, top_norms = 0, used[NCOMP] = {0};
    if (!blk) die("out of memory");
    for (int i = 0; i < L->n; i++) {
        const phax_param_info *p = &L->p[i];
        int comp, l = classify(p->name, &comp);
        if (l >= 0 && l < nl) blk[l][comp] += p->numel, used[comp] += p->numel;
        else if (!strcmp(p->name, "embed.weight")) emb += p->numel;
        else if (!strcmp(p->name, "lm_head.weight")) head += p->numel;
        else top_norms += p->numel;
    }
    char b[32];
    printf("parameters (%d tensors):\n", L->n);
    printf("  %-22s %14s\n", "embedding", grouped(emb, b));
    if (c->tie_embeddings) printf("  %-22s %14s\n", "head", "tied (0)");
    else printf("  %-22s %14s\n", "head", grouped(head, b));
    printf("  %-22s %14s\n", "norms (emb/final)", grouped(top_norms, b));
    for (int l = 0; l < nl; l++) {
        size_t tot = 0;
        printf("  block %-3d", l);
        for (int k = 0; k < NCOMP; k++) {
            if (!used[k]) continue;
            printf("  %s %s", comp_name[k], grouped(blk[l][k], b));
            tot += blk[l][k];
        }
        printf("  = %s\n", grouped(tot, b));
    }
    printf("  %-22s", "all blocks");
    for (int k = 0; k < NCOMP; k++)
        if (used[k]) printf("  %s %s", comp_name[k], grouped(used[k], b));
    printf("\n  %-22s %14s\n", "total", grouped(L->numel, b));
    free(blk);
}

// Bytes as "1.5 MB" (decimal units).
static const char *human(double bytes, char buf[32]) {
    static const char *unit[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    while (bytes >= 1000 && u < 4) bytes /= 1000, u++;
    snprintf(buf, 32, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
    return buf;
}

// From the sizes alone: nothing of the model is allocated.
static void print_memory(const phax_model_cfg *c, size_t n, int B, int T) {
    // The workspace is counted, not allocated (a config file may describe a model far larger
    // than this machine), by part.
    size_t part[FMODEL_WS_NPARTS], ws = 0;
    if (fmodel_ws_breakdown(c, B, T, part)) die("%s", phax_error());
    for (int i = 0; i < FMODEL_WS_NPARTS; i++) ws += part[i];
    double p = 4.0 * n;
    char b[32];
    printf("memory, fast/cpu float32 training at batch %d x %d:\n", B, T);
    printf("  %-22s %12s\n", "parameters", human(p, b));
    printf("  %-22s %12s\n", "gradients", human(p, b));
    printf("  %-22s %12s\n", "AdamW moments (m, v)", human(2 * p, b));
    printf("  %-22s %12s\n", "workspace", human((double)ws, b));
    for (int i = 0; i < FMODEL_WS_NPARTS; i++)
        if (part[i]) printf("    %-20s %12s\n", fmodel_ws_part_name(i), human((double)part[i], b));
    printf("  %-22s %12s\n", "total", human(4 * p + (double)ws, b));
}

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

int phax_model_info_main(int argc, char **argv) {
    info_opts o;
    info_parse_args(argc, argv, &o);
    const char *path = o.path;
    int B = o.B, T = o.T;
    phax_model_cfg cfg;
    phax_ckpt ck = {0};
    int have_ckpt = !ends_with(path, ".json");
    if (have_ckpt) {
        if (phax_ckpt_load(path, -1, &ck)) die("%s", phax_error());
        cfg = ck.cfg;
        if (!B) B = ck.train_batch;
        if (!T) T = ck.train_seq;
    } else if (phax_model_cfg_from_json_file(&cfg, path)) {
        die("%s", phax_error());
    }
    if (!B) B = 8;
    if (!T) T = cfg.train_len;
    char *json = phax_model_cfg_to_json(&cfg);
    if (!json) die("%s", phax_error());
    printf("%s: %s\nconfig (resolved):\n%s", path, phax_family_name(cfg.family), json);
    free(json);
    if (have_ckpt)
        printf("checkpoint: step %lld, %lld tokens seen, trained at batch %d x %d, vocabulary %s\n",
               (long long)ck.step, (long long)ck.tokens_seen, ck.train_batch, ck.train_seq, ck.vocab_path);
    phax_layout L;
    if (phax_layout_build(&L, &cfg)) die("%s", phax_error());
    print_params(&cfg, &L);
    print_memory(&cfg, L.numel, B, T);
    phax_layout_free(&L);
    phax_ckpt_free(&ck);
    return 0;
}
