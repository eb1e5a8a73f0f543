// Needle-in-a-haystack prompts in token space, the string_match_all score and
// training rows; see include/phax/niah.h and docs/niah.md.
#include "phax/niah.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// The texts, written in the word-level (tokenized) form: words and punctuation
// separated by single spaces. "$K" is the key (or the list of keys), "$V" the
// value (or the list of values). A byte vocabulary gets the same words joined as
// plain English (no space before . , : ?).

static const char HEADER[] =
    "Some special magic numbers are hidden within the following text . Make sure to "
    "remember it . I will quiz you about the numbers afterwards .";
static const char NEEDLE[] = "One of the special magic numbers for $K is : $V .";
static const char NOISE[] =
    "The grass is green . The sky is blue . The sun is yellow . Here we go . There and "
    "back again .";
static const char QUESTION_ONE[] =
    "What is the special magic number for $K mentioned in the provided text ?";
static const char PREFIX_ONE[] = "The special magic number for $K mentioned in the provided text is";
static const char QUESTION_ALL[] =
    "What are all the special magic numbers for $K mentioned in the provided text ?";
static const char PREFIX_ALL[] =
    "The special magic numbers for $K mentioned in the provided text are";
static const char ANSWER[] = "$V .";

// The passkey variant (not in RULER's suite): a short trigger phrase of common words
// (all among WikiText-2's 5000 most frequent, so a capped vocabulary has them too),
// one needle without a key, a value of passkey_digits digits.
// The header does not contain "pass key is", so the trigger occurs only in the
// needle and in the answer prefix.
static const char PK_HEADER[] =
    "There is a pass key hidden within the following text . You will be asked about it at the "
    "end .";
static const char PK_NEEDLE[] = "The pass key is $V .";
static const char PK_QUESTION[] = "What is the pass key ?";
static const char PK_PREFIX[] = "The pass key is";

// Key candidates: common concrete nouns, none of them a word of the texts above.
static const char *const KEY_WORDS[] = {
    "apple",   "river",   "mountain", "garden",  "window",  "village", "island",  "forest",
    "bridge",  "castle",  "dragon",   "engine",  "feather", "guitar",  "hammer",  "harbor",
    "jacket",  "ladder",  "lantern",  "marble",  "orange",  "pencil",  "saddle",  "shadow",
    "silver",  "spider",  "tiger",    "tunnel",  "valley",  "wagon",   "whale",   "wizard",
    "anchor",  "arrow",   "basket",   "blanket", "bottle",  "butter",  "camera",  "carpet",
    "cherry",  "circle",  "cloud",    "copper",  "crystal", "desert",  "diamond", "eagle",
    "falcon",  "fountain", "glacier", "helmet",  "honey",   "horse",   "insect",  "jungle",
    "lemon",   "lion",    "meadow",   "mirror",  "monkey",  "ocean",   "owl",     "palace",
    "parrot",  "piano",   "planet",   "pyramid", "rocket",  "sailor",  "salmon",  "scarf",
    "shell",   "soldier", "statue",   "storm",   "temple",  "thunder", "tower",   "violin",
    "volcano", "wheel",   "wolf",
};
#define N_KEY_WORDS ((int)(sizeof KEY_WORDS / sizeof KEY_WORDS[0]))

static const char *const TEMPLATES[] = {HEADER,       NEEDLE,       NOISE,      QUESTION_ONE,
                                        PREFIX_ONE,   QUESTION_ALL, PREFIX_ALL, ANSWER};
static const char *const PK_TEMPLATES[] = {PK_HEADER, PK_NEEDLE, PK_QUESTION, PK_PREFIX};

struct phax_niah {
    const phax_vocab *v;
    phax_tok_kind kind;
    const int32_t *text;  // borrowed haystack text
    size_t n_text;
    int no_header, n_multi;
    int pk_digits;         // digits of a passkey value
    unsigned train_variants;  // mask of the variants training rows draw from
    int32_t eos, dot;      // word: ids of "<eos>" and "." (−1 when absent)
    int32_t digit[10];     // ids of the digits "0".."9"
    int n_keys;
    const char *keys[N_KEY_WORDS];
    int32_t *noise;        // the noise paragraph, encoded once
    size_t n_noise;
    char unknown[512];     // template words the vocabulary lacks
    char pk_missing[256];  // passkey template words the word vocabulary lacks ("" = none)
};

// ---------------------------------------------------------------------------
// Growable buffers.

typedef struct {
    int32_t *p;
    size_t n, cap;
} ibuf;

typedef struct {
    char *p;
    size_t n, cap;
} sbuf;

static int ibuf_reserve(ibuf *b, size_t extra) {
    if (b->n + extra <= b->cap) return PHAX_OK;
    size_t nc = b->cap ? b->cap : 64;
    while (nc < b->n + extra) nc *= 2;
    int32_t *np = realloc(b->p, nc * sizeof *np);
    if (!np) return phax_fail("niah: out of memory for %zu tokens", nc);
    b->p = np;
    b->cap = nc;
    return PHAX_OK;
}

static int ibuf_append(ibuf *b, const int32_t *src, size_t n) {
    if (ibuf_reserve(b, n) != PHAX_OK) return PHAX_ERR;
    if (n) memcpy(b->p + b->n, src, n * sizeof *src);
    b->n += n;
    return PHAX_OK;
}

static int sbuf_put(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) return phax_fail("niah: out of memory for %zu bytes of text", nc);
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Rendering a template into tokens.

typedef struct {
    const char *const *keys;  // the list $K stands for
    int n_keys;
    const uint32_t *values;   // the list $V stands for
    int n_values;
    int digits;               // digits of each value
} fill;

static int is_punct(const char *w, size_t n) {
    return n == 1 && (w[0] == '.' || w[0] == ',' || w[0] == ':' || w[0] == '?');
}

// One word of the output. Word vocabularies: words separated by spaces. Bytes:
// the same, except that punctuation attaches to the word before it.
static int put_word(const phax_niah *t, sbuf *s, const char *w, size_t n) {
    int space = s->n > 0 && s->p[s->n - 1] != ' ' && s->p[s->n - 1] != '\n' &&
                !(t->kind == PHAX_TOK_BYTE && is_punct(w, n));
    if (space && sbuf_put(s, " ", 1) != PHAX_OK) return PHAX_ERR;
    return sbuf_put(s, w, n);
}

// A value: one word of `digits` digits for bytes, that many one-digit words for a
// word vocabulary (leading zeros written).
static int put_value(const phax_niah *t, sbuf *s, uint32_t value, int digits) {
    char d[16];
    snprintf(d, sizeof d, "%0*u", digits, (unsigned)value);
    if (t->kind == PHAX_TOK_BYTE) return put_word(t, s, d, (size_t)digits);
    for (int i = 0; i < digits; i++)
        if (put_word(t, s, d + i, 1) != PHAX_OK) return PHAX_ERR;
    return PHAX_OK;
}

// "a", "a and b", "a , b and c" (written "a, b and c" in bytes).
static int put_list(const phax_niah *t, sbuf *s, const fill *f, int keys) {
    int n = keys ? f->n_keys : f->n_values;
    for (int i = 0; i < n; i++) {
        if (i > 0 && put_word(t, s, i == n - 1 ? "and" : ",", i == n - 1 ? 3 : 1) != PHAX_OK)
            return PHAX_ERR;
        int rc = keys ? put_word(t, s, f->keys[i], strlen(f->keys[i])) : put_value(t, s, f->values[i], f->digits);
        if (rc != PHAX_OK) return PHAX_ERR;
    }
    return PHAX_OK;
}

static int render_text(const phax_niah *t, const char *tmpl, const fill *f, sbuf *s) {
    for (const char *w = tmpl; *w;) {
        size_t n = strcspn(w, " ");
        int rc;
        if (n == 2 && w[0] == '$') rc = put_list(t, s, f, w[1] == 'K');
        else rc = put_word(t, s, w, n);
        if (rc != PHAX_OK) return PHAX_ERR;
        w += n;
        while (*w == ' ') w++;
    }
    return PHAX_OK;
}

// Encode text and append its tokens to out.
static int encode_into(const phax_niah *t, const sbuf *s, ibuf *out) {
    int32_t *ids;
    size_t n;
    if (phax_encode(t->v, (const uint8_t *)(s->p ? s->p : ""), s->n, "niah template", &ids, &n) !=
        PHAX_OK)
        return PHAX_ERR;
    int rc = ibuf_append(out, ids, n);
    free(ids);
    return rc;
}

// Pieces of text around templates, as they are spelled for the vocabulary.
enum { LEAD_NONE, LEAD_NL, LEAD_SPACE };
enum { TRAIL_NONE, TRAIL_NL, TRAIL_SENTENCE };

// Append template (with lead / trail) to out. A sentence of the haystack ends
// with a space in bytes, so that the next sentence or needle follows it as in prose.
static int render(const phax_niah *t, const char *tmpl, const fill *f, int lead, int trail,
                  ibuf *out) {
    sbuf s = {0};
    int nl = t->kind == PHAX_TOK_BYTE || t->eos >= 0;  // a word vocabulary without <eos> has no NL
    int rc = PHAX_OK;
    if (lead == LEAD_NL && nl) rc = sbuf_put(&s, "\n", 1);
    if (lead == LEAD_SPACE && t->kind == PHAX_TOK_BYTE) rc = sbuf_put(&s, " ", 1);
    if (rc == PHAX_OK) rc = render_text(t, tmpl, f, &s);
    if (rc == PHAX_OK && trail == TRAIL_NL && nl) rc = sbuf_put(&s, "\n", 1);
    if (rc == PHAX_OK && trail == TRAIL_SENTENCE && t->kind == PHAX_TOK_BYTE) rc = sbuf_put(&s, " ", 1);
    if (rc == PHAX_OK) rc = encode_into(t, &s, out);
    free(s.p);
    return rc;
}

// ---------------------------------------------------------------------------
// Names.

static const char *const VARIANT_NAMES[PHAX_NIAH_N_ALL_VARIANTS] = {
    "single", "multikey", "multivalue", "multiquery", "passkey"};
static const char *const HAYSTACK_NAMES[PHAX_NIAH_N_HAYSTACKS] = {"noise", "text", "needles"};

const char *phax_niah_variant_name(phax_niah_variant v) {
    return (unsigned)v < PHAX_NIAH_N_ALL_VARIANTS ? VARIANT_NAMES[v] : "?";
}

const char *phax_niah_haystack_name(phax_niah_haystack h) {
    return (unsigned)h < PHAX_NIAH_N_HAYSTACKS ? HAYSTACK_NAMES[h] : "?";
}

int phax_niah_variant_parse(const char *s, phax_niah_variant *out) {
    for (int i = 0; s && i < PHAX_NIAH_N_ALL_VARIANTS; i++)
        if (!strcmp(s, VARIANT_NAMES[i])) return *out = (phax_niah_variant)i, PHAX_OK;
    return phax_fail("niah: unknown variant '%s' (single, multikey, multivalue, multiquery, "
                     "passkey)", s ? s : "");
}

int phax_niah_variant_list_parse(const char *s, unsigned *mask) {
    if (!s || !mask) return phax_fail("phax_niah_variant_list_parse: NULL argument");
    unsigned m = 0;
    for (const char *w = s;; w++) {
        size_t n = strcspn(w, ",");
        char name[32];
        if (n == 0 || n >= sizeof name)
            return phax_fail("niah: '%s' is not a comma list of variants (single, multikey, "
                             "multivalue, multiquery, passkey)", s);
        memcpy(name, w, n);
        name[n] = 0;
        phax_niah_variant v;
        if (phax_niah_variant_parse(name, &v) != PHAX_OK) return PHAX_ERR;
        if (m & (1u << v)) return phax_fail("niah: variant '%s' is listed twice in '%s'", name, s);
        m |= 1u << v;
        w += n;
        if (!*w) break;
    }
    *mask = m;
    return PHAX_OK;
}

int phax_niah_digits_parse(const char *s, int *out) {
    if (!s || !out) return phax_fail("phax_niah_digits_parse: NULL argument");
    int ok = *s != 0 && strspn(s, "0123456789") == strlen(s) && strlen(s) <= 2;
    int d = ok ? atoi(s) : 0;
    if (!ok || d < 1 || d > PHAX_NIAH_DIGITS)
        return phax_fail("niah: passkey digits '%s' is not a whole number in [1, %d]", s,
                         PHAX_NIAH_DIGITS);
    *out = d;
    return PHAX_OK;
}

int phax_niah_haystack_parse(const char *s, phax_niah_haystack *out) {
    for (int i = 0; s && i < PHAX_NIAH_N_HAYSTACKS; i++)
        if (!strcmp(s, HAYSTACK_NAMES[i])) return *out = (phax_niah_haystack)i, PHAX_OK;
    return phax_fail("niah: unknown haystack '%s' (noise, text, needles)", s ? s : "");
}

// ---------------------------------------------------------------------------
// The task.

// Every digit must be a word: the values are spelled digit by digit.
static int check_digits(phax_niah *t) {
    for (char c = '0'; c <= '9'; c++)
        if ((t->digit[c - '0'] = phax_vocab_id(t->v, &c, 1)) < 0)
            return phax_fail("niah: the word vocabulary has no token '%c': the needle "
                             "values are written as single-digit words, so '0'..'9' must all be "
                             "in the vocabulary", c);
    return PHAX_OK;
}

// Collect the template words the vocabulary lacks; an error without <unk>.
static int check_template_words(phax_niah *t) {
    size_t k = 0;
    int missing = 0;
    for (size_t i = 0; i < sizeof TEMPLATES / sizeof TEMPLATES[0]; i++) {
        for (const char *w = TEMPLATES[i]; *w;) {
            size_t n = strcspn(w, " ");
            int placeholder = n == 2 && w[0] == '$';
            if (!placeholder && phax_vocab_id(t->v, w, n) < 0) {
                char word[64];
                snprintf(word, sizeof word, "'%.*s'", (int)n, w);
                if (!strstr(t->unknown, word)) {
                    missing++;
                    k += (size_t)snprintf(t->unknown + k, sizeof t->unknown - k, "%s%s",
                                          k ? ", " : "", word);
                    if (k >= sizeof t->unknown) k = sizeof t->unknown - 1;
                }
            }
            w += n;
            while (*w == ' ') w++;
        }
    }
    if (missing && phax_vocab_unk(t->v) < 0)
        return phax_fail("niah: the word vocabulary lacks the template words %s and has no <unk>",
                         t->unknown);
    return PHAX_OK;
}

// The passkey words the word vocabulary lacks, listed in t->pk_missing (no
// <unk> stands in for them: the trigger phrase must be real words).
static void check_passkey_words(phax_niah *t) {
    size_t k = 0;
    for (size_t i = 0; i < sizeof PK_TEMPLATES / sizeof PK_TEMPLATES[0]; i++)
        for (const char *w = PK_TEMPLATES[i]; *w;) {
            size_t n = strcspn(w, " ");
            if (!(n == 2 && w[0] == '$') && phax_vocab_id(t->v, w, n) < 0) {
                char word[64];
                snprintf(word, sizeof word, "'%.*s'", (int)n, w);
                if (!strstr(t->pk_missing, word) && k + strlen(word) + 3 < sizeof t->pk_missing)
                    k += (size_t)snprintf(t->pk_missing + k, sizeof t->pk_missing - k, "%s%s",
                                          k ? ", " : "", word);
            }
            w += n;
            while (*w == ' ') w++;
        }
}

static int passkey_usable(const phax_niah *t) {
    if (!t->pk_missing[0]) return PHAX_OK;
    return phax_fail("niah: the word vocabulary lacks the passkey words %s", t->pk_missing);
}

static int check_text(const phax_niah *t) {
    size_t V = phax_vocab_size(t->v);
    for (size_t i = 0; i < t->n_text; i++)
        if (t->text[i] < 0 || (size_t)t->text[i] >= V)
            return phax_fail("niah: haystack text token %zu is %d, outside the vocabulary [0, %zu)",
                             i, (int)t->text[i], V);
    return PHAX_OK;
}

int phax_niah_new(const phax_vocab *v, const int32_t *text, size_t n_text,
                  const phax_niah_opts *opts, phax_niah **out) {
    if (!v || !out || (!text && n_text)) return phax_fail("phax_niah_new: NULL argument");
    phax_niah_opts o = opts ? *opts : (phax_niah_opts){0};
    if (o.n_multi == 0) o.n_multi = 4;
    if (o.n_multi < 2 || o.n_multi > PHAX_NIAH_MAX_MULTI)
        return phax_fail("niah: n_multi %d is outside [2, %d]", o.n_multi, PHAX_NIAH_MAX_MULTI);
    if (o.passkey_digits == 0) o.passkey_digits = PHAX_NIAH_PASSKEY_DIGITS;
    if (o.passkey_digits < 1 || o.passkey_digits > PHAX_NIAH_DIGITS)
        return phax_fail("niah: passkey digits %d is outside [1, %d]", o.passkey_digits,
                         PHAX_NIAH_DIGITS);
    if (o.train_variants == 0) o.train_variants = (1u << PHAX_NIAH_N_VARIANTS) - 1;
    if (o.train_variants >> PHAX_NIAH_N_ALL_VARIANTS)
        return phax_fail("niah: train_variants 0x%x names no variant beyond bit %d",
                         o.train_variants, PHAX_NIAH_N_ALL_VARIANTS - 1);
    phax_niah *t = calloc(1, sizeof *t);
    if (!t) return phax_fail("niah: out of memory");
    t->v = v;
    t->kind = phax_vocab_kind(v);
    t->text = text;
    t->n_text = n_text;
    t->no_header = o.no_header;
    t->n_multi = o.n_multi;
    t->pk_digits = o.passkey_digits;
    t->train_variants = o.train_variants;
    for (int i = 0; i < 10; i++) t->digit[i] = t->kind == PHAX_TOK_BYTE ? '0' + i : -1;
    t->eos = t->kind == PHAX_TOK_WORD ? phax_vocab_eos(v) : -1;
    t->dot = t->kind == PHAX_TOK_WORD ? phax_vocab_id(v, ".", 1) : -1;
    int rc = check_text(t);
    if (rc == PHAX_OK && t->kind == PHAX_TOK_WORD) rc = check_digits(t);
    if (rc == PHAX_OK && t->kind == PHAX_TOK_WORD) rc = check_template_words(t);
    if (rc == PHAX_OK && t->kind == PHAX_TOK_WORD) check_passkey_words(t);
    if (rc == PHAX_OK && (t->train_variants & (1u << PHAX_NIAH_PASSKEY))) rc = passkey_usable(t);
    for (int i = 0; rc == PHAX_OK && i < N_KEY_WORDS; i++)
        if (t->kind == PHAX_TOK_BYTE || phax_vocab_id(v, KEY_WORDS[i], strlen(KEY_WORDS[i])) >= 0)
            t->keys[t->n_keys++] = KEY_WORDS[i];
    // Multiquery queries n_multi keys and the needle haystack needs one more.
    if (rc == PHAX_OK && t->n_keys < t->n_multi + 1)
        rc = phax_fail("niah: only %d of the %d key words are in the vocabulary; %d are needed",
                       t->n_keys, N_KEY_WORDS, t->n_multi + 1);
    ibuf noise = {0};
    if (rc == PHAX_OK) rc = render(t, NOISE, &(fill){0}, LEAD_NONE, TRAIL_SENTENCE, &noise);
    t->noise = noise.p;
    t->n_noise = noise.n;
    if (rc != PHAX_OK) {
        phax_niah_free(t);
        return PHAX_ERR;
    }
    *out = t;
    return PHAX_OK;
}

void phax_niah_free(phax_niah *t) {
    if (!t) return;
    free(t->noise);
    free(t);
}

const char *phax_niah_unknown_words(const phax_niah *t) { return t->unknown; }
int phax_niah_n_keys(const phax_niah *t) { return t->n_keys; }
const char *phax_niah_key(const phax_niah *t, int i) {
    return i >= 0 && i < t->n_keys ? t->keys[i] : NULL;
}

// ---------------------------------------------------------------------------
// What one prompt holds: the needles (key, value, depth) and what is asked.

typedef struct {
    phax_niah_variant variant;
    int n_needles;
    int key[PHAX_NIAH_MAX_MULTI];        // index into t->keys, per needle
    uint32_t value[PHAX_NIAH_MAX_MULTI];
    double depth[PHAX_NIAH_MAX_MULTI];
    int n_query;                         // queried keys: the first n_query needles' keys
} draw;

static uint32_t draw_value(phax_rng *r) { return 1000000u + (uint32_t)phax_rng_below(r, 9000000); }

static uint32_t pow10u(int d) {
    uint32_t p = 1;
    while (d-- > 0) p *= 10;
    return p;
}

// Digits of each value of a variant's prompts.
static int value_digits(const phax_niah *t, phax_niah_variant v) {
    return v == PHAX_NIAH_PASSKEY ? t->pk_digits : PHAX_NIAH_DIGITS;
}

static int value_used(const uint32_t *vals, int n, uint32_t v) {
    for (int i = 0; i < n; i++)
        if (vals[i] == v) return 1;
    return 0;
}

// Keys (distinct where they must differ), distinct values, then the depths of the
// needles after the first (uniform; the first goes at the requested depth).
static void draw_needles(const phax_niah *t, phax_niah_variant variant, double depth,
                         phax_rng *r, draw *d) {
    memset(d, 0, sizeof *d);
    d->variant = variant;
    if (variant == PHAX_NIAH_PASSKEY) {  // no key; a value uniform in [0, 10^digits)
        d->n_needles = 1;
        d->n_query = 0;
        d->value[0] = (uint32_t)phax_rng_below(r, pow10u(t->pk_digits));
        d->depth[0] = depth;
        return;
    }
    d->n_needles = variant == PHAX_NIAH_SINGLE ? 1 : t->n_multi;
    d->n_query = variant == PHAX_NIAH_MULTIQUERY ? t->n_multi : 1;
    int n_distinct = variant == PHAX_NIAH_MULTIVALUE ? 1 : d->n_needles;
    int perm[N_KEY_WORDS];
    for (int i = 0; i < N_KEY_WORDS; i++) perm[i] = i;
    for (int i = 0; i < n_distinct; i++) {  // partial Fisher–Yates
        int j = i + (int)phax_rng_below(r, (uint64_t)(t->n_keys - i));
        int tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (int i = 0; i < d->n_needles; i++) {
        d->key[i] = perm[variant == PHAX_NIAH_MULTIVALUE ? 0 : i];
        do d->value[i] = draw_value(r);
        while (value_used(d->value, i, d->value[i]));
    }
    d->depth[0] = depth;
    for (int i = 1; i < d->n_needles; i++) d->depth[i] = phax_rng_uniform(r);
}

// The needles whose values are expected: all of them for multivalue and
// multiquery, the first otherwise.
static int n_expected(const draw *d) {
    return d->variant == PHAX_NIAH_MULTIVALUE || d->variant == PHAX_NIAH_MULTIQUERY ? d->n_needles
                                                                                    : 1;
}

// ---------------------------------------------------------------------------
// Encoded pieces of a prompt.

typedef struct {
    ibuf head;                            // header + NL (empty without header)
    ibuf needle[PHAX_NIAH_MAX_MULTI];
    ibuf tail;                            // NL + question + answer prefix
} pieces;

static void pieces_free(pieces *p) {
    free(p->head.p);
    for (int i = 0; i < PHAX_NIAH_MAX_MULTI; i++) free(p->needle[i].p);
    free(p->tail.p);
    memset(p, 0, sizeof *p);
}

static int render_needle(const phax_niah *t, int key, uint32_t value, ibuf *out) {
    fill f = {&t->keys[key], 1, &value, 1, PHAX_NIAH_DIGITS};
    return render(t, NEEDLE, &f, LEAD_NONE, TRAIL_SENTENCE, out);
}

// Passkey: [header NL] needle ... NL question answer-prefix.
static int build_passkey_pieces(const phax_niah *t, const draw *d, pieces *p) {
    fill f = {NULL, 0, d->value, 1, t->pk_digits};
    int rc = t->no_header ? PHAX_OK : render(t, PK_HEADER, &f, LEAD_NONE, TRAIL_NL, &p->head);
    if (rc == PHAX_OK) rc = render(t, PK_NEEDLE, &f, LEAD_NONE, TRAIL_SENTENCE, &p->needle[0]);
    if (rc == PHAX_OK) rc = render(t, PK_QUESTION, &f, LEAD_NL, TRAIL_NONE, &p->tail);
    if (rc == PHAX_OK) rc = render(t, PK_PREFIX, &f, LEAD_SPACE, TRAIL_NONE, &p->tail);
    if (rc != PHAX_OK) pieces_free(p);
    return rc;
}

static int build_pieces(const phax_niah *t, const draw *d, pieces *p) {
    memset(p, 0, sizeof *p);
    if (d->variant == PHAX_NIAH_PASSKEY) return build_passkey_pieces(t, d, p);
    const char *qkeys[PHAX_NIAH_MAX_MULTI];
    for (int i = 0; i < d->n_query; i++) qkeys[i] = t->keys[d->key[i]];
    fill q = {qkeys, d->n_query, NULL, 0, PHAX_NIAH_DIGITS};
    int one = d->variant == PHAX_NIAH_SINGLE || d->variant == PHAX_NIAH_MULTIKEY;
    int rc = t->no_header ? PHAX_OK : render(t, HEADER, &q, LEAD_NONE, TRAIL_NL, &p->head);
    for (int i = 0; rc == PHAX_OK && i < d->n_needles; i++)
        rc = render_needle(t, d->key[i], d->value[i], &p->needle[i]);
    if (rc == PHAX_OK)
        rc = render(t, one ? QUESTION_ONE : QUESTION_ALL, &q, LEAD_NL, TRAIL_NONE, &p->tail);
    if (rc == PHAX_OK)
        rc = render(t, one ? PREFIX_ONE : PREFIX_ALL, &q, LEAD_SPACE, TRAIL_NONE, &p->tail);
    if (rc != PHAX_OK) pieces_free(p);
    return rc;
}

// Tokens of everything but the haystack filler.
static size_t overhead(const pieces *p, int n_needles) {
    size_t n = p->head.n + p->tail.n;
    for (int i = 0; i < n_needles; i++) n += p->needle[i].n;
    return n;
}

// The canonical answer for values in the given order: " 4019273." (bytes),
// "4 0 1 9 2 7 3 ." (words), lists as in "a, b and c".
static int render_answer(const phax_niah *t, const uint32_t *values, int n, int digits,
                         ibuf *out) {
    fill f = {NULL, 0, values, n, digits};
    return render(t, ANSWER, &f, LEAD_SPACE, TRAIL_NONE, out);
}

int phax_niah_min_length(const phax_niah *t, phax_niah_variant v, int *out) {
    if (!t || !out) return phax_fail("phax_niah_min_length: NULL argument");
    if ((unsigned)v >= PHAX_NIAH_N_ALL_VARIANTS) return phax_fail("niah: bad variant %d", (int)v);
    if (v == PHAX_NIAH_PASSKEY && passkey_usable(t) != PHAX_OK) return PHAX_ERR;
    // The longest keys give the longest pieces (a key is one word-level token).
    int order[N_KEY_WORDS];
    for (int i = 0; i < t->n_keys; i++) order[i] = i;
    for (int i = 0; i < t->n_keys; i++)
        for (int j = i + 1; j < t->n_keys; j++)
            if (strlen(t->keys[order[j]]) > strlen(t->keys[order[i]])) {
                int tmp = order[i];
                order[i] = order[j];
                order[j] = tmp;
            }
    phax_rng r = phax_rng_new(0);
    draw d;
    draw_needles(t, v, 0.0, &r, &d);
    for (int i = 0; v != PHAX_NIAH_PASSKEY && i < d.n_needles; i++)
        d.key[i] = order[v == PHAX_NIAH_MULTIVALUE ? 0 : i];
    pieces p;
    if (build_pieces(t, &d, &p) != PHAX_OK) return PHAX_ERR;
    *out = (int)overhead(&p, d.n_needles);
    pieces_free(&p);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Sentence and line starts.

// Whether position p (0..n) of f starts a sentence or a line (where a needle or
// a text haystack may begin): p = 0, p = n, or the token before p is "." or
// <eos> (word), '\n' or the space after '.' (bytes).
static int is_boundary(const phax_niah *t, const int32_t *f, size_t n, size_t p) {
    if (p == 0 || p == n) return 1;
    if (t->kind == PHAX_TOK_WORD) return f[p - 1] == t->dot || f[p - 1] == t->eos;
    return f[p - 1] == '\n' || (f[p - 1] == ' ' && p >= 2 && f[p - 2] == '.');
}

// ---------------------------------------------------------------------------
// Haystack filler: exactly n tokens.

static int fill_noise(const phax_niah *t, size_t n, ibuf *out) {
    if (ibuf_reserve(out, n) != PHAX_OK) return PHAX_ERR;
    for (size_t i = 0; i < n; i++) out->p[out->n++] = t->noise[i % t->n_noise];
    return PHAX_OK;
}

// A uniform offset, moved forward to the next sentence or line start when one
// leaves room for n tokens, so the haystack does not begin mid-sentence.
static int fill_text(const phax_niah *t, size_t n, phax_rng *r, ibuf *out) {
    if (t->n_text < n)
        return phax_fail("niah: the text haystack needs %zu tokens but the text has %zu", n,
                         t->n_text);
    size_t last = t->n_text - n;
    size_t off = (size_t)phax_rng_below(r, (uint64_t)last + 1);
    size_t s = off;
    while (s < last && !is_boundary(t, t->text, t->n_text, s)) s++;
    if (is_boundary(t, t->text, t->n_text, s)) off = s;
    return ibuf_append(out, t->text + off, n);
}

// Needles with keys that no needle of d uses and values none of d's has; the last
// one is cut off at n tokens.
static int fill_needles(const phax_niah *t, const draw *d, size_t n, phax_rng *r, ibuf *out) {
    int free_keys[N_KEY_WORDS], n_free = 0;
    for (int k = 0; k < t->n_keys; k++) {
        int used = 0;
        for (int i = 0; i < d->n_needles; i++) used |= d->key[i] == k;
        if (!used) free_keys[n_free++] = k;
    }
    while (out->n < n) {
        int key = free_keys[phax_rng_below(r, (uint64_t)n_free)];
        uint32_t value;
        do value = draw_value(r);
        while (value_used(d->value, d->n_needles, value));
        if (render_needle(t, key, value, out) != PHAX_OK) return PHAX_ERR;
    }
    out->n = n;
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Needle positions.

// round(depth · n) moved to the nearest boundary (the earlier one on a tie).
static size_t snap(const phax_niah *t, const int32_t *f, size_t n, double depth) {
    size_t target = (size_t)llround(depth * (double)n);
    for (size_t dist = 0; dist <= n; dist++) {
        if (dist <= target && is_boundary(t, f, n, target - dist)) return target - dist;
        if (target + dist <= n && is_boundary(t, f, n, target + dist)) return target + dist;
    }
    return target;  // not reached: 0 and n are boundaries
}

// ---------------------------------------------------------------------------
// Building a prompt.

static int fill_haystack(const phax_niah *t, const draw *d, phax_niah_haystack h, size_t n,
                         phax_rng *r, ibuf *out) {
    switch (h) {
    case PHAX_NIAH_NOISE: return fill_noise(t, n, out);
    case PHAX_NIAH_TEXT: return fill_text(t, n, r, out);
    case PHAX_NIAH_NEEDLES: return fill_needles(t, d, n, r, out);
    }
    return phax_fail("niah: bad haystack %d", (int)h);
}

// Expected values in answer order: the query order for multiquery, the order in
// the text for multivalue (needle order is the text order there after sorting).
static void expected_values(const draw *d, const int *text_order, uint32_t *vals, int *n) {
    *n = n_expected(d);
    for (int i = 0; i < *n; i++)
        vals[i] = d->value[d->variant == PHAX_NIAH_MULTIVALUE ? text_order[i] : i];
}

static int set_values(phax_niah_prompt *out, const uint32_t *vals, int n, int digits) {
    out->values = malloc((size_t)n * sizeof *out->values + (size_t)n * (PHAX_NIAH_DIGITS + 1));
    if (!out->values) return phax_fail("niah: out of memory");
    char *s = (char *)(out->values + n);
    for (int i = 0; i < n; i++, s += PHAX_NIAH_DIGITS + 1) {
        snprintf(s, PHAX_NIAH_DIGITS + 1, "%0*u", digits, (unsigned)vals[i]);
        out->values[i] = s;
    }
    out->n_values = n;
    return PHAX_OK;
}

// Lay out header, filler with the needles at their snapped positions, and tail,
// in exactly `length` tokens; fill in everything the prompt reports.
static int assemble(const phax_niah *t, const draw *d, phax_niah_haystack h, int length,
                    phax_rng *r, phax_niah_prompt *out) {
    pieces p;
    if (build_pieces(t, d, &p) != PHAX_OK) return PHAX_ERR;
    ibuf filler = {0}, all = {0}, answer = {0};
    int rc = PHAX_OK;
    size_t over = overhead(&p, d->n_needles);
    if ((size_t)length < over) {
        rc = phax_fail("niah: context length %d is too short for a %s prompt: the %sneedles, "
                       "question and answer prefix take %zu tokens",
                       length, phax_niah_variant_name(d->variant), t->no_header ? "" : "header, ",
                       over);
        goto done;
    }
    size_t n = (size_t)length - over;
    if ((rc = fill_haystack(t, d, h, n, r, &filler)) != PHAX_OK) goto done;
    size_t pos[PHAX_NIAH_MAX_MULTI];
    int order[PHAX_NIAH_MAX_MULTI];
    for (int i = 0; i < d->n_needles; i++) {
        pos[i] = snap(t, filler.p, n, d->depth[i]);
        order[i] = i;
    }
    for (int i = 1; i < d->n_needles; i++)  // insertion sort by (position, needle)
        for (int j = i; j > 0 && pos[order[j]] < pos[order[j - 1]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    // All `length` tokens are reserved here, so the appends below cannot fail.
    if ((rc = ibuf_reserve(&all, (size_t)length)) != PHAX_OK) goto done;
    ibuf_append(&all, p.head.p, p.head.n);
    out->haystack_at = all.n;
    size_t done_f = 0;
    for (int k = 0; k < d->n_needles; k++) {
        int i = order[k];
        ibuf_append(&all, filler.p + done_f, pos[i] - done_f);
        done_f = pos[i];
        if (i == 0) out->needle_at = all.n;
        ibuf_append(&all, p.needle[i].p, p.needle[i].n);
    }
    ibuf_append(&all, filler.p + done_f, n - done_f);
    out->haystack_len = all.n - out->haystack_at;
    ibuf_append(&all, p.tail.p, p.tail.n);
    uint32_t vals[PHAX_NIAH_MAX_MULTI];
    int nv;
    expected_values(d, order, vals, &nv);
    int digits = value_digits(t, d->variant);
    if ((rc = set_values(out, vals, nv, digits)) != PHAX_OK) goto done;
    if ((rc = render_answer(t, vals, nv, digits, &answer)) != PHAX_OK) goto done;
    out->keys = malloc((size_t)(d->n_query ? d->n_query : 1) * sizeof *out->keys);
    out->answer_digit = malloc(answer.n ? answer.n : 1);
    if (!out->keys || !out->answer_digit) {
        rc = phax_fail("niah: out of memory");
        goto done;
    }
    for (int i = 0; i < d->n_query; i++) out->keys[i] = t->keys[d->key[i]];
    out->n_keys = d->n_query;
    out->tokens = all.p, all.p = NULL;
    out->n_tokens = (size_t)length;
    out->answer = answer.p, answer.p = NULL;
    out->n_answer = answer.n;
    out->n_gen = (int)answer.n + PHAX_NIAH_GEN_SLACK;
    out->variant = d->variant;
    out->distance = (size_t)length - 1 - out->needle_at;
    out->n_answer_digits = 0;
    for (size_t i = 0; i < out->n_answer; i++) {
        out->answer_digit[i] = 0;
        for (int k = 0; k < 10; k++) out->answer_digit[i] |= out->answer[i] == t->digit[k];
        out->n_answer_digits += out->answer_digit[i];
    }
done:
    pieces_free(&p);
    free(filler.p);
    free(all.p);
    free(answer.p);
    return rc;
}

static int check_spec(const phax_niah *t, phax_niah_variant v, phax_niah_haystack h, double depth) {
    if ((unsigned)v >= PHAX_NIAH_N_ALL_VARIANTS) return phax_fail("niah: bad variant %d", (int)v);
    if ((unsigned)h >= PHAX_NIAH_N_HAYSTACKS) return phax_fail("niah: bad haystack %d", (int)h);
    if (v == PHAX_NIAH_PASSKEY && h == PHAX_NIAH_NEEDLES)
        return phax_fail("niah: the passkey variant has no needles haystack (its needle has no "
                         "key that distractors could differ in)");
    if (v == PHAX_NIAH_PASSKEY && passkey_usable(t) != PHAX_OK) return PHAX_ERR;
    if (!(depth >= 0.0 && depth <= 1.0)) return phax_fail("niah: depth %g is outside [0, 1]", depth);
    if (h == PHAX_NIAH_TEXT && t->n_text == 0)
        return phax_fail("niah: the text haystack needs a text, and the task was made without one");
    return PHAX_OK;
}

int phax_niah_build(const phax_niah *t, const phax_niah_spec *spec, phax_niah_prompt *out) {
    if (!t || !spec || !out) return phax_fail("phax_niah_build: NULL argument");
    memset(out, 0, sizeof *out);
    if (check_spec(t, spec->variant, spec->haystack, spec->depth) != PHAX_OK) return PHAX_ERR;
    if (spec->length < 1) return phax_fail("niah: context length %d must be positive", spec->length);
    phax_rng r = phax_rng_new(spec->seed);
    draw d;
    draw_needles(t, spec->variant, spec->depth, &r, &d);
    if (assemble(t, &d, spec->haystack, spec->length, &r, out) != PHAX_OK) {
        phax_niah_prompt_free(out);
        return PHAX_ERR;
    }
    return PHAX_OK;
}

void phax_niah_prompt_free(phax_niah_prompt *p) {
    if (!p) return;
    free(p->tokens);
    free(p->values);
    free(p->keys);
    free(p->answer);
    free(p->answer_digit);
    memset(p, 0, sizeof *p);
}

// ---------------------------------------------------------------------------
// Scoring.

static int ascii_lower(int c) { return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c; }

static int is_space(int c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Whether value occurs in text at i, comparing ASCII case-insensitively; with
// skip_space, whitespace in the text is passed over (it is not part of the match).
static int match_at(const char *text, size_t len, size_t i, const char *value, int skip_space) {
    for (const char *c = value; *c; c++, i++) {
        while (skip_space && i < len && is_space((unsigned char)text[i])) i++;
        if (i >= len || ascii_lower((unsigned char)text[i]) != ascii_lower((unsigned char)*c))
            return 0;
    }
    return 1;
}

static int occurs(const char *text, size_t len, const char *value, int skip_space) {
    if (!*value) return 1;
    for (size_t i = 0; i < len; i++)
        if (match_at(text, len, i, value, skip_space)) return 1;
    return 0;
}

double phax_niah_match(phax_tok_kind kind, const char *text, size_t len,
                       const char *const *values, int n_values) {
    if (n_values < 1 || !values || (!text && len)) return 0.0;
    int found = 0;
    for (int i = 0; i < n_values; i++) found += occurs(text, len, values[i], kind == PHAX_TOK_WORD);
    return (double)found / n_values;
}

static int is_digit(int c) { return c >= '0' && c <= '9'; }

double phax_niah_match_exact(phax_tok_kind kind, const char *text, size_t len, const char *value) {
    if (!value || (!text && len)) return 0.0;
    int skip_all = kind == PHAX_TOK_WORD;
    size_t i = 0;
    while (i < len && is_space((unsigned char)text[i])) i++;
    for (const char *c = value; *c; c++, i++) {
        while (skip_all && i < len && is_space((unsigned char)text[i])) i++;
        if (i >= len || text[i] != *c) return 0.0;
    }
    while (skip_all && i < len && is_space((unsigned char)text[i])) i++;
    return i < len && is_digit((unsigned char)text[i]) ? 0.0 : 1.0;
}

int phax_niah_score(const phax_vocab *v, const int32_t *ids, size_t n, const phax_niah_prompt *p,
                    double *score) {
    if (!v || (!ids && n) || !p || !score) return phax_fail("phax_niah_score: NULL argument");
    if (p->n_values < 1) return phax_fail("niah: the prompt has no expected values");
    char *text;
    size_t len;
    if (phax_decode(v, ids, n, &text, &len) != PHAX_OK) return PHAX_ERR;
    if (p->variant == PHAX_NIAH_PASSKEY)
        *score = phax_niah_match_exact(phax_vocab_kind(v), text, len, p->values[0]);
    else
        *score = phax_niah_match(phax_vocab_kind(v), text, len, (const char *const *)p->values,
                                 p->n_values);
    free(text);
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Graded score.

double phax_niah_logprob(const float *logits, int V, int32_t id) {
    if (!logits || V < 1 || id < 0 || id >= V) return NAN;
    double m = logits[0];
    for (int i = 1; i < V; i++)
        if (logits[i] > m || isnan(logits[i])) m = logits[i];
    if (isnan(m)) return NAN;
    if (isinf(m)) return m > 0 && logits[id] == m ? 0.0 : -INFINITY;  // +inf logits take all the mass
    double z = 0;
    for (int i = 0; i < V; i++) z += exp((double)logits[i] - m);
    return (double)logits[id] - m - log(z);
}

int phax_niah_graded(const phax_niah_prompt *p, const float *logits, int V, double *out) {
    if (!p || !logits || !out) return phax_fail("phax_niah_graded: NULL argument");
    if (V < 1) return phax_fail("niah: graded score: %d logits per row", V);
    if (p->n_answer_digits < 1) return phax_fail("niah: graded score: the answer has no digit token");
    double sum = 0;
    for (size_t i = 0; i < p->n_answer; i++)
        if (p->answer_digit[i]) {
            if (p->answer[i] < 0 || p->answer[i] >= V)
                return phax_fail("niah: graded score: answer token %d is outside the %d logits",
                                 (int)p->answer[i], V);
            sum += phax_niah_logprob(logits + i * (size_t)V, V, p->answer[i]);
        }
    *out = sum / p->n_answer_digits;
    return PHAX_OK;
}

// ---------------------------------------------------------------------------
// Training rows.

// Total length uniform in [max(shortest, ⌈T/2⌉), T].
static int draw_total(int shortest, int T, phax_rng *r) {
    int lo = shortest > (T + 1) / 2 ? shortest : (T + 1) / 2;
    return lo + (int)phax_rng_below(r, (uint64_t)(T - lo + 1));
}

int phax_niah_train_sample(const phax_niah *t, uint64_t seed, uint64_t index, int T, int32_t *x,
                           int32_t *y, phax_niah_sample_info *info) {
    if (!t || !x || !y) return phax_fail("phax_niah_train_sample: NULL argument");
    if (T < 1) return phax_fail("niah: row length %d must be positive", T);
    phax_rng r = phax_rng_stream(seed, index);
    // The variants of the mix (RULER's four by default: then the draw is the one
    // from before passkey existed, so the rows are unchanged).
    phax_niah_variant vars[PHAX_NIAH_N_ALL_VARIANTS];
    int n_vars = 0;
    for (int v = 0; v < PHAX_NIAH_N_ALL_VARIANTS; v++)
        if (t->train_variants & (1u << v)) vars[n_vars++] = (phax_niah_variant)v;
    phax_niah_variant variant = vars[phax_rng_below(&r, (uint64_t)n_vars)];
    phax_niah_haystack hays[PHAX_NIAH_N_HAYSTACKS];
    int n_hays = 0;
    hays[n_hays++] = PHAX_NIAH_NOISE;
    if (variant != PHAX_NIAH_PASSKEY) hays[n_hays++] = PHAX_NIAH_NEEDLES;
    if (t->n_text) hays[n_hays++] = PHAX_NIAH_TEXT;
    phax_niah_haystack hay = hays[phax_rng_below(&r, (uint64_t)n_hays)];
    double depth = phax_rng_uniform(&r);
    draw d;
    draw_needles(t, variant, depth, &r, &d);
    // Lengths that do not depend on the order of the values: pieces, answer, NL.
    pieces p;
    if (build_pieces(t, &d, &p) != PHAX_OK) return PHAX_ERR;
    size_t over = overhead(&p, d.n_needles);
    pieces_free(&p);
    ibuf answer = {0}, nl = {0};
    int rc = render_answer(t, d.value, n_expected(&d), value_digits(t, variant), &answer);
    if (rc == PHAX_OK) rc = render(t, "", &(fill){0}, LEAD_NONE, TRAIL_NL, &nl);
    size_t tail = answer.n + nl.n;
    free(answer.p);
    if (rc == PHAX_OK && over + tail > (size_t)T)
        rc = phax_fail("niah: a training row of %d tokens cannot hold a %s example (%zu tokens "
                       "at least)", T, phax_niah_variant_name(variant), over + tail);
    phax_niah_prompt pr = {0};
    if (rc == PHAX_OK) {
        int length = draw_total((int)(over + tail), T, &r) - (int)tail;
        rc = assemble(t, &d, hay, length, &r, &pr);
    }
    if (rc == PHAX_OK) {
        // s = prompt + answer + NL, written straight into x.
        size_t n = 0;
        memcpy(x, pr.tokens, pr.n_tokens * sizeof *x), n += pr.n_tokens;
        memcpy(x + n, pr.answer, pr.n_answer * sizeof *x), n += pr.n_answer;
        if (nl.n) x[n++] = nl.p[0];
        for (size_t i = 0; i + 1 < n; i++) y[i] = x[i + 1];
        y[n - 1] = -1;
        for (size_t i = n; i < (size_t)T; i++) x[i] = 0, y[i] = -1;
        if (info) {
            info->n = (int)n;
            info->prompt_len = (int)pr.n_tokens;
            info->variant = variant;
            info->haystack = hay;
            info->depth = depth;
            info->needle_at = (int)pr.needle_at;
        }
    }
    free(nl.p);
    phax_niah_prompt_free(&pr);
    return rc;
}
