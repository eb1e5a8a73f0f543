// Name maps: see include/phax/names.h. The map and the file are untrusted, so nothing is
// quadratic: exact entries are found by binary search in two sorted views (their name → phax's,
// phax's → theirs), patterns (at most PHAX_NAMES_MAX_PATTERNS) by a scan, and collisions by
// sorting.
#include "phax/names.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "phax/core.h"

typedef struct {
    char *from, *to;  // their name, phax's (to_phax direction)
    int pat;          // both hold "{i}"
} entry;

struct phax_names {
    entry *e;
    int n;
    const entry **by[2];  // the exact entries sorted by from (to_phax) and by to (to_theirs)
    int nx;
    const entry **pat;    // the pattern entries, in the map's order
    int np;
};

void phax_names_free(phax_names *m) {
    if (!m) return;
    for (int i = 0; i < m->n; i++) free(m->e[i].from), free(m->e[i].to);
    free(m->e), free(m->by[0]), free(m->by[1]), free(m->pat);
    free(m);
}

static int cmp_from(const void *a, const void *b) {
    return strcmp((*(const entry *const *)a)->from, (*(const entry *const *)b)->from);
}
static int cmp_to(const void *a, const void *b) {
    return strcmp((*(const entry *const *)a)->to, (*(const entry *const *)b)->to);
}

static int count_i(const char *s) {
    int c = 0;
    for (const char *p = s; (p = strstr(p, "{i}")); p += 3) c++;
    return c;
}

// A name as a message may show it: printable ASCII, the rest as '?', at most 80 characters.
static const char *shown(const char *s, char *b, size_t n) {
    size_t o = 0;
    for (; *s && o + 4 < n && o < 80; s++) b[o++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
    if (*s && o + 4 < n) memcpy(b + o, "...", 3), o += 3;
    b[o] = 0;
    return b;
}

phax_names *phax_names_parse(const char *text, size_t len, const char *label) {
    char b1[96], b2[96];
    if (len > PHAX_NAMES_MAX_BYTES) {
        phax_fail("%s: name map is %zu bytes, more than the limit of %zu", label, len, PHAX_NAMES_MAX_BYTES);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        phax_fail("%s:%d: name map is not valid JSON: %s", label, je.line, shown(je.text, b1, sizeof b1));
        return NULL;
    }
    phax_names *m = NULL;
    if (!json_is_object(root)) {
        phax_fail("%s: name map must be a JSON object {\"their name\": \"phax name\", ...}", label);
        goto done;
    }
    size_t n = json_object_size(root);
    if (n > PHAX_NAMES_MAX_ENTRIES) {
        phax_fail("%s: name map has %zu entries, more than the limit of %d", label, n, PHAX_NAMES_MAX_ENTRIES);
        goto done;
    }
    m = calloc(1, sizeof *m);
    if (!m || !(m->e = calloc(n ? n : 1, sizeof *m->e))) {
        phax_fail("%s: out of memory", label);
        goto fail;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (!json_is_string(v)) {
            phax_fail("%s: name map entry '%s' must map to a string (a phax name)", label, shown(k, b1, sizeof b1));
            goto fail;
        }
        const char *to = json_string_value(v);
        size_t kl = strlen(k), tl = strlen(to);
        if (!kl || !tl || kl > PHAX_NAMES_MAX_LEN || tl > PHAX_NAMES_MAX_LEN) {
            phax_fail("%s: name map entry '%s': names must be 1 to %d bytes", label, shown(k, b1, sizeof b1),
                      PHAX_NAMES_MAX_LEN);
            goto fail;
        }
        int ck = count_i(k), cv = count_i(to);
        if (ck > 1 || ck != cv) {
            phax_fail("%s: name map entry '%s': \"{i}\" must appear at most once in a name, and in both or neither",
                      label, shown(k, b1, sizeof b1));
            goto fail;
        }
        entry *e = &m->e[m->n];
        e->from = strdup(k), e->to = strdup(to), e->pat = ck;
        if (!e->from || !e->to) {
            free(e->from), free(e->to);
            phax_fail("%s: out of memory", label);
            goto fail;
        }
        m->n++;
    }
    // The views; two keys onto one phax name are refused (adjacent once sorted by it).
    const entry **all = malloc((size_t)(m->n ? m->n : 1) * sizeof *all);
    m->by[0] = malloc((size_t)(m->n ? m->n : 1) * sizeof *m->by[0]);
    m->by[1] = malloc((size_t)(m->n ? m->n : 1) * sizeof *m->by[1]);
    m->pat = malloc((size_t)(m->n ? m->n : 1) * sizeof *m->pat);
    if (!all || !m->by[0] || !m->by[1] || !m->pat) {
        free(all);
        phax_fail("%s: out of memory", label);
        goto fail;
    }
    for (int i = 0; i < m->n; i++) all[i] = &m->e[i];
    qsort(all, (size_t)m->n, sizeof *all, cmp_to);
    for (int i = 1; i < m->n; i++)
        if (!strcmp(all[i]->to, all[i - 1]->to)) {
            phax_fail("%s: name map gives two names the phax name '%s' ('%s' and '%s')", label,
                      shown(all[i]->to, b1, sizeof b1), shown(all[i - 1]->from, b2, sizeof b2), all[i]->from);
            free(all);
            goto fail;
        }
    free(all);
    for (int i = 0; i < m->n; i++) {
        if (m->e[i].pat) m->pat[m->np++] = &m->e[i];
        else m->by[0][m->nx] = m->by[1][m->nx] = &m->e[i], m->nx++;
    }
    if (m->np > PHAX_NAMES_MAX_PATTERNS) {
        phax_fail("%s: name map has %d \"{i}\" patterns, more than the limit of %d", label, m->np,
                  PHAX_NAMES_MAX_PATTERNS);
        goto fail;
    }
    qsort(m->by[0], (size_t)m->nx, sizeof *m->by[0], cmp_from);
    qsort(m->by[1], (size_t)m->nx, sizeof *m->by[1], cmp_to);
    goto done;
fail:
    phax_names_free(m);
    m = NULL;
done:
    json_decref(root);
    return m;
}

phax_names *phax_names_load(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        phax_fail("%s: cannot open the name map: %s", path, strerror(errno));
        return NULL;
    }
    // Bound the size before reading: one byte more than the limit says "too large".
    char *buf = malloc(PHAX_NAMES_MAX_BYTES + 1);
    if (!buf) {
        fclose(f);
        phax_fail("%s: out of memory", path);
        return NULL;
    }
    size_t len = fread(buf, 1, PHAX_NAMES_MAX_BYTES + 1, f);
    int err = ferror(f);
    fclose(f);
    phax_names *m = NULL;
    if (err) phax_fail("%s: cannot read the name map", path);
    else m = phax_names_parse(buf, len, path);
    free(buf);
    return m;
}

// Does `name` match pattern `pat` ("a{i}b")? Then the layer number is [*s, *s + *l).
static int match(const char *pat, const char *name, size_t *s, size_t *l) {
    const char *at = strstr(pat, "{i}");
    size_t pre = (size_t)(at - pat), suf = strlen(at + 3), nl = strlen(name);
    if (nl < pre + suf + 1 || strncmp(name, pat, pre) || strcmp(name + nl - suf, at + 3)) return 0;
    size_t dl = nl - pre - suf;
    for (size_t i = 0; i < dl; i++)
        if (name[pre + i] < '0' || name[pre + i] > '9') return 0;
    if (dl > 1 && name[pre] == '0') return 0;  // no leading zero: "01" is not layer 1
    *s = pre, *l = dl;
    return 1;
}

static int put(char *out, size_t n, const char *prefix, const char *a, size_t al, const char *mid, size_t ml,
               const char *b) {
    int w = snprintf(out, n, "%s%.*s%.*s%s", prefix, (int)al, a, (int)ml, mid, b);
    return w < 0 || (size_t)w >= n ? phax_fail("name map: the name '%.60s...' is too long", out) : PHAX_OK;
}

static int map_one(const phax_names *m, int dir, const char *name, char *out, size_t n) {
    // exact entries first (binary search), then patterns
    entry key = {.from = (char *)name, .to = (char *)name};
    const entry *kp = &key, **hit = bsearch(&kp, m->by[dir], (size_t)m->nx, sizeof *m->by[dir],
                                            dir ? cmp_to : cmp_from);
    if (hit) {
        const char *to = dir ? (*hit)->from : (*hit)->to;
        return put(out, n, "", to, strlen(to), "", 0, "") ? PHAX_ERR : 1;
    }
    for (int i = 0; i < m->np; i++) {
        const char *from = dir ? m->pat[i]->to : m->pat[i]->from, *to = dir ? m->pat[i]->from : m->pat[i]->to;
        size_t s, l;
        if (!match(from, name, &s, &l)) continue;
        const char *at = strstr(to, "{i}");
        return put(out, n, "", to, (size_t)(at - to), name + s, l, at + 3) ? PHAX_ERR : 1;
    }
    return 0;
}

static int map_name(const phax_names *m, int dir, const char *name, char *out, size_t n) {
    int r = map_one(m, dir, name, out, n);
    if (r) return r;
    if (!strncmp(name, "grad.", 5)) {  // a gradient follows its tensor's entry
        char tmp[PHAX_NAMES_MAX_LEN + 8];
        r = map_one(m, dir, name + 5, tmp, sizeof tmp);
        if (r == 1) return put(out, n, "grad.", tmp, strlen(tmp), "", 0, "") ? PHAX_ERR : 1;
        if (r < 0) return r;
    }
    int w = snprintf(out, n, "%s", name);
    return w < 0 || (size_t)w >= n ? phax_fail("name map: a name of %zu bytes is too long", strlen(name)) : 0;
}

int phax_names_to_phax(const phax_names *m, const char *name, char *out, size_t n) {
    return map_name(m, 0, name, out, n);
}
int phax_names_to_theirs(const phax_names *m, const char *name, char *out, size_t n) {
    return map_name(m, 1, name, out, n);
}

typedef struct {
    const char *s;
    int i;
} named;
static int cmp_named(const void *a, const void *b) {
    int c = strcmp(((const named *)a)->s, ((const named *)b)->s);
    return c ? c : ((const named *)a)->i - ((const named *)b)->i;
}

int phax_names_apply(const phax_names *m, phax_st_file *f) {
    if (!m || !f->n) return PHAX_OK;
    char **nn = calloc((size_t)f->n, sizeof *nn);
    if (!nn) return phax_fail("%s: out of memory", f->path);
    char buf[PHAX_NAMES_MAX_LEN + 8], b1[96], b2[96];
    int rc = PHAX_OK;
    for (int i = 0; i < f->n && !rc; i++) {
        int r = map_name(m, 0, f->t[i].name, buf, sizeof buf);
        if (r < 0) rc = phax_fail("%s: %s", f->path, phax_error());
        else if (!(nn[i] = strdup(buf))) rc = phax_fail("%s: out of memory", f->path);
    }
    // Two tensors onto one name: adjacent once the new names are sorted (with their index).
    named *srt = rc ? NULL : malloc((size_t)f->n * sizeof *srt);
    if (!rc && !srt) rc = phax_fail("%s: out of memory", f->path);
    if (!rc) {
        for (int i = 0; i < f->n; i++) srt[i] = (named){nn[i], i};
        qsort(srt, (size_t)f->n, sizeof *srt, cmp_named);
        for (int i = 1; i < f->n && !rc; i++)
            if (!strcmp(srt[i].s, srt[i - 1].s)) {
                int a = srt[i - 1].i < srt[i].i ? srt[i - 1].i : srt[i].i, b = srt[i - 1].i ^ srt[i].i ^ a;
                rc = phax_fail("%s: with the name map, tensors '%s' and '%s' would both be '%s'", f->path,
                               shown(f->t[a].name, b1, sizeof b1), shown(f->t[b].name, b2, sizeof b2), srt[i].s);
            }
    }
    free(srt);
    for (int i = 0; i < f->n; i++) {
        if (rc) {
            free(nn[i]);
            continue;
        }
        free(f->t[i].name);
        f->t[i].name = nn[i];
    }
    free(nn);
    return rc;
}
