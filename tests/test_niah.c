// niah: needle-in-a-haystack prompts on a hand word vocabulary and the byte
// vocabulary (exact token sequences at depths 0, 0.5, 1; every variant's
// needles and expected values; text and distractor-needle haystacks), the
// string_match_all score on hand continuations, training rows, errors, and
// (when the shared data is present) prompts with the WikiText-2 vocabulary; the
// passkey variant (exact prompts, depth, no leak, training targets, exact match,
// the graded score on crafted logits, refusals).
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "phax/data.h"
#include "phax/niah.h"
#include "phax/tokenizer.h"
#include "testutil.h"

// --- fixtures --------------------------------------------------------------------------------

// Every word of the templates, the ten digits, exactly five keys (n_multi 4 needs
// n_multi + 1), and a newline so that "<eos>" exists.
static const char HAND_TEXT[] =
    "Some special magic numbers are hidden within the following text . Make sure to remember it "
    ". I will quiz you about the numbers afterwards . One of for is : What mentioned in provided "
    "? The number are all , and grass green sky blue sun yellow Here we go There back again\n"
    "0 1 2 3 4 5 6 7 8 9 apple river garden window tiger\n";

static const char NOISE_BYTES[] =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ";
static const char NOISE_WORDS[] =
    "The grass is green . The sky is blue . The sun is yellow . Here we go . There and back again .";

static phax_vocab *word_vocab_of(const char *text) {
    phax_vocab *v;
    cr_assert(phax_vocab_build_text((const uint8_t *)text, strlen(text), "hand", &v) == PHAX_OK, "%s",
              phax_error());
    return v;
}

static phax_vocab *byte_vocab(void) {
    phax_vocab *v;
    cr_assert(phax_vocab_byte(&v) == PHAX_OK, "%s", phax_error());
    return v;
}

static phax_niah *task(const phax_vocab *v, const int32_t *text, size_t n, int no_header) {
    phax_niah_opts o = {.no_header = no_header};
    phax_niah *t;
    cr_assert(phax_niah_new(v, text, n, &o, &t) == PHAX_OK, "%s", phax_error());
    return t;
}

static void build(const phax_niah *t, phax_niah_variant var, phax_niah_haystack h, int len,
                  double depth, uint64_t seed, phax_niah_prompt *p) {
    phax_niah_spec s = {var, h, len, depth, seed};
    cr_assert(phax_niah_build(t, &s, p) == PHAX_OK, "%s", phax_error());
    cr_assert(p->n_tokens == (size_t)len, "%zu tokens, asked for %d", p->n_tokens, len);
}

static int32_t *encode(const phax_vocab *v, const char *s, size_t *n) {
    int32_t *ids;
    cr_assert(phax_encode(v, (const uint8_t *)s, strlen(s), "expected", &ids, n) == PHAX_OK, "%s",
              phax_error());
    return ids;
}

static char *decode(const phax_vocab *v, const int32_t *ids, size_t n) {
    char *s;
    cr_assert(phax_decode(v, ids, n, &s, NULL) == PHAX_OK, "%s", phax_error());
    return s;
}

// The prompt's tokens must be exactly the encoding of want.
static void assert_prompt(const phax_vocab *v, const phax_niah_prompt *p, const char *want) {
    size_t n;
    int32_t *ids = encode(v, want, &n);
    char *got = decode(v, p->tokens, p->n_tokens);
    cr_assert(n == p->n_tokens, "prompt has %zu tokens, expected %zu\n got: %s\nwant: %s",
              p->n_tokens, n, got, want);
    for (size_t i = 0; i < n; i++)
        cr_assert(ids[i] == p->tokens[i], "token %zu differs\n got: %s\nwant: %s", i, got, want);
    free(ids);
    free(got);
}

// Repeat s (cyclically) to n bytes.
static char *cycle(const char *s, size_t n) {
    size_t m = strlen(s);
    char *o = malloc(n + 1);
    cr_assert(o);
    for (size_t i = 0; i < n; i++) o[i] = s[i % m];
    o[n] = 0;
    return o;
}

// A text haystack: s repeated to n bytes, encoded with v (free the ids).
static int32_t *cyclic_ids(const phax_vocab *v, const char *s, size_t n_bytes, size_t *n) {
    char *big = cycle(s, n_bytes);
    int32_t *ids = encode(v, big, n);
    free(big);
    return ids;
}

static char *cat(const char *const *parts, int n) {
    size_t len = 1;
    for (int i = 0; i < n; i++) len += strlen(parts[i]);
    char *o = malloc(len);
    cr_assert(o);
    o[0] = 0;
    for (int i = 0; i < n; i++) strcat(o, parts[i]);
    return o;
}

static int starts_with(const char *s, const char *prefix) {
    return !strncmp(s, prefix, strlen(prefix));
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

// The needles in a decoded byte-level prompt, in text order; `cut` counts needle
// starts that are not a whole needle (the needle haystack cuts its last one).
typedef struct {
    int n, cut;
    char key[64][32];
    char value[64][8];
} needles;

static int whole_needle(const char *k, const char *e, const char *v) {
    if (!e || e - k >= 32 || e == k) return 0;
    for (const char *c = k; c < e; c++)
        if (*c < 'a' || *c > 'z') return 0;
    for (int i = 0; i < 7; i++)
        if (v[i] < '0' || v[i] > '9') return 0;
    return v[7] == '.';
}

static void parse_needles(const char *text, needles *out) {
    static const char lead[] = "One of the special magic numbers for ";
    out->n = out->cut = 0;
    for (const char *s = strstr(text, lead); s; s = strstr(s + 1, lead)) {
        const char *k = s + strlen(lead), *e = strstr(k, " is: ");
        if (!whole_needle(k, e, e ? e + 5 : NULL)) {
            out->cut++;
            continue;
        }
        cr_assert(out->n < 64);
        snprintf(out->key[out->n], 32, "%.*s", (int)(e - k), k);
        snprintf(out->value[out->n], 8, "%.7s", e + 5);
        out->n++;
    }
}

// --- exact prompts ----------------------------------------------------------------------------

// Byte vocabulary, no header, single needle, noise haystack of exactly 100 bytes:
// 90 bytes of noise paragraph + "The grass ". Depth 0 puts the needle first, 1
// last, 0.5 at round(50) snapped to the nearest sentence start, 56 ("The sun",
// 6 away; "The sky" at 37 is 13 away).
Test(niah, byte_single_noise_exact) {
    phax_vocab *v = byte_vocab();
    phax_niah *t = task(v, NULL, 0, 1);
    const double depths[3] = {0.0, 0.5, 1.0};
    const size_t at[3] = {0, 56, 100};
    for (int di = 0; di < 3; di++) {
        // The key and value come from the seed: read them, then check every token.
        phax_niah_prompt p;
        build(t, PHAX_NIAH_SINGLE, PHAX_NIAH_NOISE, 400, depths[di], 7, &p);
        cr_assert(p.n_values == 1 && p.n_keys == 1 && strlen(p.values[0]) == 7);
        cr_assert(p.values[0][0] >= '1', "value %s has a leading zero", p.values[0]);
        const char *k = p.keys[0];
        char needle[256], tail[512];
        snprintf(needle, sizeof needle, "One of the special magic numbers for %s is: %s. ", k,
                 p.values[0]);
        snprintf(tail, sizeof tail,
                 "\nWhat is the special magic number for %s mentioned in the provided text? The "
                 "special magic number for %s mentioned in the provided text is", k, k);
        int len = (int)(100 + strlen(needle) + strlen(tail));
        phax_niah_prompt_free(&p);
        build(t, PHAX_NIAH_SINGLE, PHAX_NIAH_NOISE, len, depths[di], 7, &p);
        char *filler = cycle(NOISE_BYTES, 100), a[101], b[101];
        snprintf(a, sizeof a, "%.*s", (int)at[di], filler);
        snprintf(b, sizeof b, "%s", filler + at[di]);
        char *want = cat((const char *[]){a, needle, b, tail}, 4);
        assert_prompt(v, &p, want);
        cr_assert(p.needle_at == at[di], "needle at %zu, expected %zu", p.needle_at, at[di]);
        cr_assert(p.haystack_at == 0 && p.haystack_len == 100 + strlen(needle));
        char *ans = decode(v, p.answer, p.n_answer), want_ans[16];
        snprintf(want_ans, sizeof want_ans, " %s.", p.values[0]);
        cr_assert_str_eq(ans, want_ans);
        cr_assert(p.n_gen == (int)p.n_answer + PHAX_NIAH_GEN_SLACK);
        free(ans), free(want), free(filler);
        phax_niah_prompt_free(&p);
    }
    phax_niah_free(t);
    phax_vocab_free(v);
}

// Hand word vocabulary with the header: every text in tokenized form, the value as
// seven digit words. Haystack of 51 tokens = two 24-token noise paragraphs +
// "The grass is"; depth 0.5 → round(25.5) = 26, nearest sentence start 24 (29 is 3 away).
Test(niah, word_single_noise_exact) {
    phax_vocab *v = word_vocab_of(HAND_TEXT);
    phax_niah *t = task(v, NULL, 0, 0);
    cr_assert_str_eq(phax_niah_unknown_words(t), "");
    cr_assert(phax_niah_n_keys(t) == 5);
    const double depths[3] = {0.0, 0.5, 1.0};
    const int at[3] = {0, 24, 51};
    for (int di = 0; di < 3; di++) {
        phax_niah_prompt p;
        build(t, PHAX_NIAH_SINGLE, PHAX_NIAH_NOISE, 200, depths[di], 11, &p);
        const char *k = p.keys[0], *d = p.values[0];
        char needle[256], tail[512], header[256];
        snprintf(needle, sizeof needle,
                 "One of the special magic numbers for %s is : %c %c %c %c %c %c %c .", k, d[0],
                 d[1], d[2], d[3], d[4], d[5], d[6]);
        snprintf(tail, sizeof tail,
                 "\nWhat is the special magic number for %s mentioned in the provided text ? The "
                 "special magic number for %s mentioned in the provided text is", k, k);
        snprintf(header, sizeof header,
                 "Some special magic numbers are hidden within the following text . Make sure to "
                 "remember it . I will quiz you about the numbers afterwards .\n");
        size_t nn, nt, nh;
        free(encode(v, needle, &nn)), free(encode(v, tail, &nt)), free(encode(v, header, &nh));
        cr_assert(nn == 18 && nt == 27 && nh == 27, "needle %zu, tail %zu, header %zu tokens", nn,
                  nt, nh);
        phax_niah_prompt_free(&p);
        build(t, PHAX_NIAH_SINGLE, PHAX_NIAH_NOISE, (int)(nh + 51 + nn + nt), depths[di], 11, &p);
        // Word-level haystack: the noise words, cycled, cut at 51 words.
        char a[512] = "", b[512] = "";
        const char *w = NOISE_WORDS;
        for (int i = 0; i < 51; i++) {
            size_t l = strcspn(w, " ");
            char *dst = i < at[di] ? a : b;
            snprintf(dst + strlen(dst), 512 - strlen(dst), "%.*s ", (int)l, w);
            w += l;
            w = *w ? w + 1 : NOISE_WORDS;
        }
        char *want = cat((const char *[]){header, a, needle, " ", b, tail}, 6);
        assert_prompt(v, &p, want);
        cr_assert(p.needle_at == nh + (size_t)at[di], "needle at %zu", p.needle_at);
        char *ans = decode(v, p.answer, p.n_answer), want_ans[32];
        d = p.values[0];  // the same value: same seed
        snprintf(want_ans, sizeof want_ans, "%c %c %c %c %c %c %c .", d[0], d[1], d[2], d[3], d[4],
                 d[5], d[6]);
        cr_assert_str_eq(ans, want_ans);
        free(ans), free(want);
        phax_niah_prompt_free(&p);
    }
    phax_niah_free(t);
    phax_vocab_free(v);
}

// --- variants ---------------------------------------------------------------------------------

static int key_index(const phax_niah_prompt *p, const char *key) {
    for (int i = 0; i < p->n_keys; i++)
        if (!strcmp(p->keys[i], key)) return i;
    return -1;
}

// The needles, the question and the expected values of one byte-level prompt.
static void check_variant(const phax_vocab *v, const phax_niah_prompt *p, phax_niah_variant var,
                          phax_niah_haystack h, int n_multi) {
    char *text = decode(v, p->tokens, p->n_tokens);
    char *hay = decode(v, p->tokens + p->haystack_at, p->haystack_len);
    needles nd;
    parse_needles(hay, &nd);
    int want_needles = var == PHAX_NIAH_SINGLE ? 1 : n_multi;
    int want_values = var == PHAX_NIAH_MULTIVALUE || var == PHAX_NIAH_MULTIQUERY ? n_multi : 1;
    cr_assert(p->n_values == want_values, "%d values", p->n_values);
    cr_assert(p->n_keys == (var == PHAX_NIAH_MULTIQUERY ? n_multi : 1));
    // Needles of queried keys: exactly the expected values (the needle haystack adds
    // others, with keys never queried).
    int queried = 0, seen[PHAX_NIAH_MAX_MULTI] = {0};
    for (int i = 0; i < nd.n; i++) {
        int q = key_index(p, nd.key[i]);
        if (q < 0) continue;
        if (var == PHAX_NIAH_MULTIVALUE) {
            cr_assert_str_eq(nd.value[i], p->values[queried], "multivalue: values in text order");
        } else {
            int vi = var == PHAX_NIAH_MULTIQUERY ? q : 0;
            cr_assert_str_eq(nd.value[i], p->values[vi], "value of key %s", nd.key[i]);
            cr_assert(!seen[q]++, "key %s twice", nd.key[i]);
        }
        queried++;
    }
    cr_assert(queried == want_values, "%d needles of queried keys, expected %d", queried,
              want_values);
    if (h != PHAX_NIAH_NEEDLES) cr_assert(nd.n == want_needles && !nd.cut, "%d needles", nd.n);
    cr_assert(nd.cut <= 1, "%d cut needles", nd.cut);
    if (var == PHAX_NIAH_MULTIKEY && h != PHAX_NIAH_NEEDLES)  // distractor keys all distinct
        for (int i = 0; i < nd.n; i++)
            for (int j = i + 1; j < nd.n; j++) cr_assert(strcmp(nd.key[i], nd.key[j]));
    // Question and answer prefix at the end.
    char keys[256] = "";
    for (int i = 0; i < p->n_keys; i++)
        snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s%s",
                 i == 0 ? "" : i == p->n_keys - 1 ? " and " : ", ", p->keys[i]);
    char q[512];
    int one = var == PHAX_NIAH_SINGLE || var == PHAX_NIAH_MULTIKEY;
    snprintf(q, sizeof q,
             one ? "\nWhat is the special magic number for %s mentioned in the provided text? The "
                   "special magic number for %s mentioned in the provided text is"
                 : "\nWhat are all the special magic numbers for %s mentioned in the provided text? "
                   "The special magic numbers for %s mentioned in the provided text are",
             keys, keys);
    cr_assert(ends_with(text, q), "prompt ends: %s", text + strlen(text) - 200);
    cr_assert(starts_with(text, "Some special magic numbers are hidden"));
    // Canonical answer: " v1, v2, v3 and v4."
    char want[256] = " ";
    for (int i = 0; i < p->n_values; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s",
                 i == 0 ? "" : i == p->n_values - 1 ? " and " : ", ", p->values[i]);
    strcat(want, ".");
    char *ans = decode(v, p->answer, p->n_answer);
    cr_assert_str_eq(ans, want);
    double s;
    cr_assert(phax_niah_score(v, p->answer, p->n_answer, p, &s) == PHAX_OK && s == 1.0);
    free(ans), free(text), free(hay);
}

Test(niah, variants_noise_and_needles) {
    phax_vocab *v = byte_vocab();
    phax_niah *t = task(v, NULL, 0, 0);
    for (int var = 0; var < PHAX_NIAH_N_VARIANTS; var++)
        for (int h = 0; h < PHAX_NIAH_N_HAYSTACKS; h += 2)  // noise, needles
            for (uint64_t seed = 1; seed <= 8; seed++) {
                phax_niah_prompt p;
                build(t, (phax_niah_variant)var, (phax_niah_haystack)h, 1500, 0.1 * (double)seed,
                      seed, &p);
                check_variant(v, &p, (phax_niah_variant)var, (phax_niah_haystack)h, 4);
                phax_niah_prompt_free(&p);
            }
    // n_multi = 6 and no header: six needles / values / keys.
    phax_niah_opts o = {.n_multi = 6};
    phax_niah *t6;
    cr_assert(phax_niah_new(v, NULL, 0, &o, &t6) == PHAX_OK, "%s", phax_error());
    for (int var = 1; var < PHAX_NIAH_N_VARIANTS; var++) {
        phax_niah_prompt p;
        build(t6, (phax_niah_variant)var, PHAX_NIAH_NOISE, 2000, 0.5, 3, &p);
        check_variant(v, &p, (phax_niah_variant)var, PHAX_NIAH_NOISE, 6);
        phax_niah_prompt_free(&p);
    }
    phax_niah_free(t6);
    phax_niah_free(t);
    phax_vocab_free(v);
}

// Word vocabulary: multiquery question lists keys as "a , b , c and d"; answer
// "v1 , v2 , v3 and v4 ." with each value as digit words.
Test(niah, word_multiquery_wording) {
    phax_vocab *v = word_vocab_of(HAND_TEXT);
    phax_niah *t = task(v, NULL, 0, 1);
    phax_niah_prompt p;
    build(t, PHAX_NIAH_MULTIQUERY, PHAX_NIAH_NOISE, 300, 0.25, 5, &p);
    char *text = decode(v, p.tokens, p.n_tokens), want[512];
    snprintf(want, sizeof want,
             "\nWhat are all the special magic numbers for %s , %s , %s and %s mentioned in the "
             "provided text ? The special magic numbers for %s , %s , %s and %s mentioned in the "
             "provided text are",
             p.keys[0], p.keys[1], p.keys[2], p.keys[3], p.keys[0], p.keys[1], p.keys[2], p.keys[3]);
    cr_assert(ends_with(text, want), "%s", text);
    char *ans = decode(v, p.answer, p.n_answer);
    cr_assert(p.n_answer == 4 * 7 + 3 + 1, "answer of %zu tokens: %s", p.n_answer, ans);
    double s;
    cr_assert(phax_niah_score(v, p.answer, p.n_answer, &p, &s) == PHAX_OK && s == 1.0, "%s", ans);
    free(ans), free(text);
    phax_niah_prompt_free(&p);
    phax_niah_free(t);
    phax_vocab_free(v);
}

// Text haystack: the haystack minus the needle is a consecutive run of the text,
// and the needle starts a sentence or a line (or the haystack, or ends it).
Test(niah, text_haystack) {
    static const char TEXT[] =
        "Alpha beta gamma. Delta epsilon.\nZeta eta theta iota. Kappa lambda mu.\nNu xi omicron. "
        "Pi rho sigma tau. Upsilon phi chi psi omega.\n";
    phax_vocab *v = byte_vocab();
    char *big = cycle(TEXT, 3000);
    size_t n;
    int32_t *ids = encode(v, big, &n);
    phax_niah *t = task(v, ids, n, 1);
    for (uint64_t seed = 0; seed < 24; seed++) {
        double depth = (double)seed / 23.0;
        phax_niah_prompt p;
        build(t, PHAX_NIAH_SINGLE, PHAX_NIAH_TEXT, 700, depth, seed, &p);
        char *hay = decode(v, p.tokens + p.haystack_at, p.haystack_len);
        const char *nd = strstr(hay, "One of the special magic numbers for ");
        cr_assert(nd);
        const char *end = strstr(nd, ". ") + 2;
        size_t at = (size_t)(nd - hay);
        cr_assert(at == p.needle_at - p.haystack_at);
        // Without the needle: a substring of the text.
        char *rest = malloc(strlen(hay) + 1);
        snprintf(rest, strlen(hay) + 1, "%.*s%s", (int)at, hay, end);
        cr_assert(strstr(big, rest), "haystack is not consecutive text: %s", rest);
        cr_assert(at == 0 || *end == 0 || hay[at - 1] == '\n' ||
                      (hay[at - 1] == ' ' && at >= 2 && hay[at - 2] == '.'),
                  "needle inside a sentence: ...%.20s|%.20s", hay + (at > 20 ? at - 20 : 0), nd);
        // Within one sentence (≤ 45 bytes) of the requested depth.
        double want = depth * (double)(strlen(hay) - (size_t)(end - nd));
        cr_assert(at + 45 >= want && (double)at <= want + 45, "needle at %zu, depth at %.0f", at, want);
        free(rest), free(hay);
        phax_niah_prompt_free(&p);
    }
    // Seeds pick different offsets into the text.
    phax_niah_prompt p1, p2;
    build(t, PHAX_NIAH_SINGLE, PHAX_NIAH_TEXT, 700, 1.0, 1, &p1);
    build(t, PHAX_NIAH_SINGLE, PHAX_NIAH_TEXT, 700, 1.0, 2, &p2);
    cr_assert(memcmp(p1.tokens, p2.tokens, 100 * sizeof(int32_t)));
    phax_niah_prompt_free(&p1), phax_niah_prompt_free(&p2);
    phax_niah_free(t);
    free(ids), free(big);
    phax_vocab_free(v);
}

Test(niah, deterministic) {
    phax_vocab *v = byte_vocab();
    phax_niah *t = task(v, NULL, 0, 0);
    phax_niah_prompt a, b, c;
    build(t, PHAX_NIAH_MULTIKEY, PHAX_NIAH_NEEDLES, 900, 0.4, 42, &a);
    build(t, PHAX_NIAH_MULTIKEY, PHAX_NIAH_NEEDLES, 900, 0.4, 42, &b);
    build(t, PHAX_NIAH_MULTIKEY, PHAX_NIAH_NEEDLES, 900, 0.4, 43, &c);
    cr_assert(!memcmp(a.tokens, b.tokens, 900 * sizeof(int32_t)));
    cr_assert(memcmp(a.tokens, c.tokens, 900 * sizeof(int32_t)));
    phax_niah_prompt_free(&a), phax_niah_prompt_free(&b), phax_niah_prompt_free(&c);
    phax_niah_free(t);
    phax_vocab_free(v);
}

// --- scoring ----------------------------------------------------------------------------------

Test(niah, score_hand) {
    const char *one[] = {"4019273"}, *two[] = {"4019273", "1234567"};
    const phax_tok_kind W = PHAX_TOK_WORD, B = PHAX_TOK_BYTE;
#define M(kind, s, vals, n) phax_niah_match(kind, s, strlen(s), vals, n)
    cr_assert(M(W, "4 0 1 9 2 7 3 .", one, 1) == 1.0);
    cr_assert(M(B, " 4019273.", one, 1) == 1.0);
    cr_assert(M(W, "4 0 1 9 2 7 3 , 1 2 3 4 5 6 7 .", two, 2) == 1.0);
    cr_assert(M(W, "1 2 3 4 5 6 7 and 9 9 9", two, 2) == 0.5);
    cr_assert(M(B, " 4019273, 7654321.", two, 2) == 0.5);
    cr_assert(M(B, " 7654321.", two, 2) == 0.0);
    cr_assert(M(W, "", one, 1) == 0.0);
    // Split by extra spaces / line breaks: found for words (spaces are token
    // separators), not for bytes (the text as written).
    cr_assert(M(W, "40 19  273\n.", one, 1) == 1.0);
    cr_assert(M(B, " 4019 273.", one, 1) == 0.0);
    // Partial digits do not count.
    cr_assert(M(W, "4 0 1 9 2 7 .", one, 1) == 0.0);
    cr_assert(M(B, " 401927", one, 1) == 0.0);
    cr_assert(M(B, " 40192733", one, 1) == 1.0);  // a substring, as in RULER
#undef M
    // phax_niah_score decodes ids first.
    phax_vocab *v = word_vocab_of(HAND_TEXT);
    phax_niah *t = task(v, NULL, 0, 1);
    phax_niah_prompt p;
    build(t, PHAX_NIAH_MULTIVALUE, PHAX_NIAH_NOISE, 300, 0.5, 9, &p);
    char half[128];
    snprintf(half, sizeof half, "%c %c %c %c %c %c %c , %c %c %c %c %c %c %c , 1 2", p.values[1][0],
             p.values[1][1], p.values[1][2], p.values[1][3], p.values[1][4], p.values[1][5],
             p.values[1][6], p.values[3][0], p.values[3][1], p.values[3][2], p.values[3][3],
             p.values[3][4], p.values[3][5], p.values[3][6]);
    size_t n;
    int32_t *ids = encode(v, half, &n);
    double s;
    cr_assert(phax_niah_score(v, ids, n, &p, &s) == PHAX_OK);
    cr_assert(s == 0.5, "score %g for %s", s, half);
    free(ids);
    int32_t bad = (int32_t)phax_vocab_size(v);
    cr_assert(phax_niah_score(v, &bad, 1, &p, &s) == PHAX_ERR);
    phax_niah_prompt_free(&p);
    phax_niah_free(t);
    phax_vocab_free(v);
}

// --- training rows ----------------------------------------------------------------------------

static void check_rows(const phax_vocab *v, const phax_niah *t, int T, int rows) {
    int32_t *x = malloc((size_t)T * sizeof *x), *y = malloc((size_t)T * sizeof *y);
    int32_t *x2 = malloc((size_t)T * sizeof *x), *y2 = malloc((size_t)T * sizeof *y);
    int var_seen[PHAX_NIAH_N_VARIANTS] = {0}, hay_seen[PHAX_NIAH_N_HAYSTACKS] = {0};
    int nl = phax_vocab_kind(v) == PHAX_TOK_BYTE ? '\n' : phax_vocab_eos(v);
    for (int i = 0; i < rows; i++) {
        phax_niah_sample_info info;
        cr_assert(phax_niah_train_sample(t, 77, (uint64_t)i, T, x, y, &info) == PHAX_OK, "%s",
                  phax_error());
        var_seen[info.variant]++, hay_seen[info.haystack]++;
        cr_assert(info.n <= T && info.n >= (T + 1) / 2, "row of %d tokens, T %d", info.n, T);
        for (int k = 0; k + 1 < info.n; k++) cr_assert(y[k] == x[k + 1], "target %d", k);
        cr_assert(y[info.n - 1] == -1 && x[info.n - 1] == nl);
        for (int k = info.n; k < T; k++) cr_assert(x[k] == 0 && y[k] == -1, "padding %d", k);
        // The prompt is exactly what phax_niah_build would give; the answer follows it.
        char *prompt = decode(v, x, (size_t)info.prompt_len);
        cr_assert(ends_with(prompt, "mentioned in the provided text is") ||
                      ends_with(prompt, "mentioned in the provided text are"),
                  "%s", prompt);
        char *ans = decode(v, x + info.prompt_len, (size_t)(info.n - info.prompt_len));
        cr_assert(ends_with(ans, ".\n"), "answer '%s'", ans);
        free(prompt), free(ans);
        // Deterministic in (seed, index).
        cr_assert(phax_niah_train_sample(t, 77, (uint64_t)i, T, x2, y2, NULL) == PHAX_OK);
        cr_assert(!memcmp(x, x2, (size_t)T * sizeof *x) && !memcmp(y, y2, (size_t)T * sizeof *y));
        cr_assert(phax_niah_train_sample(t, 78, (uint64_t)i, T, x2, y2, NULL) == PHAX_OK);
        cr_assert(memcmp(x, x2, (size_t)T * sizeof *x), "seed 78 gave seed 77's row %d", i);
    }
    for (int k = 0; k < PHAX_NIAH_N_VARIANTS; k++) cr_assert(var_seen[k], "variant %d never drawn", k);
    cr_assert(hay_seen[PHAX_NIAH_NOISE] && hay_seen[PHAX_NIAH_NEEDLES]);
    free(x), free(y), free(x2), free(y2);
}

Test(niah, train_rows) {
    phax_vocab *v = byte_vocab();
    size_t n;
    int32_t *ids = cyclic_ids(v, "A first sentence. A second one.\nAnd a third line here. ", 5000, &n);
    phax_niah *t = task(v, ids, n, 0);
    check_rows(v, t, 900, 64);
    phax_vocab *w = word_vocab_of(HAND_TEXT);
    phax_niah *tw = task(w, NULL, 0, 1);
    check_rows(w, tw, 160, 64);
    // Too short a row: the message says how long the example must be.
    int32_t x[60], y[60];
    cr_assert(phax_niah_train_sample(tw, 1, 0, 60, x, y, NULL) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "cannot hold"), "%s", phax_error());
    phax_niah_free(tw), phax_niah_free(t);
    phax_vocab_free(w), phax_vocab_free(v);
    free(ids);
}

// --- errors -----------------------------------------------------------------------------------

Test(niah, errors) {
    phax_vocab *v = byte_vocab();
    phax_niah *t = task(v, NULL, 0, 0);
    phax_niah_prompt p;
    int min;
    cr_assert(phax_niah_min_length(t, PHAX_NIAH_MULTIQUERY, &min) == PHAX_OK);
    // Every key works at min (the longest keys define it); one less is too short for some.
    for (uint64_t s = 0; s < 16; s++) {
        build(t, PHAX_NIAH_MULTIQUERY, PHAX_NIAH_NOISE, min, 0.5, s, &p);
        phax_niah_prompt_free(&p);
    }
    phax_niah_spec sp = {PHAX_NIAH_SINGLE, PHAX_NIAH_NOISE, 100, 0.5, 1};
    cr_assert(phax_niah_build(t, &sp, &p) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "context length 100 is too short for a single prompt"), "%s",
              phax_error());
    cr_assert(p.tokens == NULL);
    sp.length = 4000, sp.depth = 1.5;
    cr_assert(phax_niah_build(t, &sp, &p) == PHAX_ERR && strstr(phax_error(), "depth"));
    sp.depth = 0.5, sp.haystack = PHAX_NIAH_TEXT;
    cr_assert(phax_niah_build(t, &sp, &p) == PHAX_ERR && strstr(phax_error(), "without one"),
              "%s", phax_error());
    phax_niah_free(t);
    // A text too short for the haystack.
    int32_t few[50] = {0};
    t = task(v, few, 50, 0);
    cr_assert(phax_niah_build(t, &sp, &p) == PHAX_ERR && strstr(phax_error(), "text has 50"), "%s",
              phax_error());
    phax_niah_free(t);
    // Text ids must be inside the vocabulary.
    int32_t bad[2] = {65, 300};
    cr_assert(phax_niah_new(v, bad, 2, NULL, &t) == PHAX_ERR && strstr(phax_error(), "300"));
    phax_vocab_free(v);

    phax_niah_variant var;
    cr_assert(phax_niah_variant_parse("multivalue", &var) == PHAX_OK && var == PHAX_NIAH_MULTIVALUE);
    cr_assert(phax_niah_variant_parse("multi", &var) == PHAX_ERR);
    phax_niah_haystack h;
    cr_assert(phax_niah_haystack_parse("needles", &h) == PHAX_OK && h == PHAX_NIAH_NEEDLES);
}

Test(niah, vocab_errors) {
    phax_niah *t;
    // No digit 7: the values cannot be spelled.
    char *text = strdup(HAND_TEXT);
    *strchr(text, '7') = 'x';
    phax_vocab *v = word_vocab_of(text);
    cr_assert(phax_niah_new(v, NULL, 0, NULL, &t) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "no token '7'"), "%s", phax_error());
    phax_vocab_free(v);
    free(text);
    // Template words missing: an error without <unk>, listed with it.
    v = word_vocab_of("0 1 2 3 4 5 6 7 8 9 apple river garden window tiger\n");
    cr_assert(phax_niah_new(v, NULL, 0, NULL, &t) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "lacks the template words 'Some', 'special'") &&
                  strstr(phax_error(), "no <unk>"),
              "%s", phax_error());
    phax_vocab_free(v);
    v = word_vocab_of("<unk> 0 1 2 3 4 5 6 7 8 9 apple river garden window tiger\n");
    cr_assert(phax_niah_new(v, NULL, 0, NULL, &t) == PHAX_OK, "%s", phax_error());
    cr_assert(strstr(phax_niah_unknown_words(t), "'magic'"));
    phax_niah_free(t);
    phax_vocab_free(v);
    // Too few keys for n_multi 4 (five needed).
    text = strdup(HAND_TEXT);
    memcpy(strstr(text, "tiger"), "tigre", 5);
    v = word_vocab_of(text);
    cr_assert(phax_niah_new(v, NULL, 0, NULL, &t) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "only 4 of the"), "%s", phax_error());
    phax_niah_opts o = {.n_multi = 3};
    cr_assert(phax_niah_new(v, NULL, 0, &o, &t) == PHAX_OK, "%s", phax_error());
    phax_niah_free(t);
    o.n_multi = 1;
    cr_assert(phax_niah_new(v, NULL, 0, &o, &t) == PHAX_ERR && strstr(phax_error(), "n_multi"));
    phax_vocab_free(v);
    free(text);
}

// --- WikiText-2 -------------------------------------------------------------------------------

static const char *wt2_dir(void) {
    static char buf[4096];
    const char *e = getenv("PHAX_DATA_DIR"), *root = getenv("PHAX_SOURCE_ROOT");
    if (e && *e) snprintf(buf, sizeof buf, "%s/wikitext-2", e);
    else snprintf(buf, sizeof buf, "%s/../shared/data/wikitext-2", root && *root ? root : ".");
    return buf;
}

Test(niah, wikitext2_prompts) {
    char train[4200], valid[4200];
    snprintf(train, sizeof train, "%s/train.txt.xz", wt2_dir());
    snprintf(valid, sizeof valid, "%s/valid.txt", wt2_dir());
    struct stat sb;
    const char *root = getenv("PHAX_SOURCE_ROOT");
    if (stat(train, &sb) != 0 && !getenv("PHAX_DATA_DIR") && root && *root) {
        // No ../shared: the repository's own copy (data/, xz-compressed).
        snprintf(train, sizeof train, "%s/data/wikitext-2/train.txt.xz", root);
        snprintf(valid, sizeof valid, "%s/data/wikitext-2/valid.txt.xz", root);
    }
    if (stat(train, &sb) != 0 || stat(valid, &sb) != 0)
        cr_skip_test("shared data not found (%s); set PHAX_DATA_DIR to the folder of "
                     "shared/data/README.md", train);
    phax_vocab *v;
    cr_assert(phax_vocab_build_file(train, &v) == PHAX_OK, "%s", phax_error());
    int32_t *ids;
    size_t n;
    cr_assert(phax_encode_file(v, valid, &ids, &n) == PHAX_OK, "%s", phax_error());
    phax_niah *t = task(v, ids, n, 0);
    cr_assert_str_eq(phax_niah_unknown_words(t), "", "WikiText-2 lacks %s", phax_niah_unknown_words(t));
    cr_assert(phax_niah_n_keys(t) >= 60, "%d keys", phax_niah_n_keys(t));
    const int lens[2] = {512, 4096};
    for (int li = 0; li < 2; li++)
        for (int h = 0; h < PHAX_NIAH_N_HAYSTACKS; h++)
            for (int var = 0; var < PHAX_NIAH_N_VARIANTS; var++) {
                phax_niah_prompt p;
                build(t, (phax_niah_variant)var, (phax_niah_haystack)h, lens[li], 0.5, 100 + var, &p);
                char *text = decode(v, p.tokens, p.n_tokens);
                const char *d = p.values[0];
                char needle[160];
                snprintf(needle, sizeof needle,
                         "One of the special magic numbers for %s is : %c %c %c %c %c %c %c .",
                         p.keys[0], d[0], d[1], d[2], d[3], d[4], d[5], d[6]);
                cr_assert(strstr(text, needle), "no '%s' in %s", needle, text);
                cr_assert(starts_with(text, "Some special magic numbers are hidden within the "
                                            "following text . Make sure to remember it ."));
                cr_assert(ends_with(text, var <= PHAX_NIAH_MULTIKEY
                                              ? "mentioned in the provided text is"
                                              : "mentioned in the provided text are"));
                double s;
                cr_assert(phax_niah_score(v, p.answer, p.n_answer, &p, &s) == PHAX_OK && s == 1.0);
                if (li == 0 && h == PHAX_NIAH_TEXT && var == PHAX_NIAH_SINGLE) {
                    char *ans = decode(v, p.answer, p.n_answer);
                    printf("WikiText-2, 512 tokens, text haystack, depth 0.5, needle at token %zu:\n"
                           "%s\n[expected continuation: %s]\n", p.needle_at, text, ans);
                    free(ans);
                }
                free(text);
                phax_niah_prompt_free(&p);
            }
    phax_niah_free(t);
    free(ids);
    phax_vocab_free(v);
}

// --- passkey ----------------------------------------------------------------------------------
// "The pass key is D D ." in a haystack, asked as "What is the pass key ? The pass key
// is"; D digits (default 2), exact match, and the graded score (teacher-forced log p).

// HAND_TEXT plus the passkey words it lacks.
static const char PK_TEXT[] =
    "Some special magic numbers are hidden within the following text . Make sure to remember it "
    ". I will quiz you about the numbers afterwards . One of for is : What mentioned in provided "
    "? The number are all , and grass green sky blue sun yellow Here we go There back again\n"
    "0 1 2 3 4 5 6 7 8 9 apple river garden window tiger a pass key You be asked at end\n";

static const char PK_HEADER_WORDS[] =
    "There is a pass key hidden within the following text . You will be asked about it at the "
    "end .\n";

static phax_niah *pk_task(const phax_vocab *v, const int32_t *text, size_t n, int no_header,
                          int digits, unsigned train) {
    phax_niah_opts o = {.no_header = no_header, .passkey_digits = digits, .train_variants = train};
    phax_niah *t;
    cr_assert(phax_niah_new(v, text, n, &o, &t) == PHAX_OK, "%s", phax_error());
    return t;
}

// "d1 d2 ... dD" as words.
static void spaced_digits(const char *value, char *out, size_t cap) {
    out[0] = 0;
    for (const char *c = value; *c; c++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%c", c == value ? "" : " ", *c);
}

// Word vocabulary, header, noise haystack of 51 tokens (as word_single_noise_exact):
// depth 0 → filler position 0, 0.5 → 24, 1 → 51. Every token, the needle index, the
// length, the answer and its digit mask, for 1, 2 (default), 3 and 7 digits.
Test(niah, passkey_word_exact) {
    phax_vocab *v = word_vocab_of(PK_TEXT);
    const int digit_counts[4] = {1, 0, 3, 7};
    const double depths[3] = {0.0, 0.5, 1.0};
    const int at[3] = {0, 24, 51};
    for (int ci = 0; ci < 4; ci++) {
        int D = digit_counts[ci] ? digit_counts[ci] : PHAX_NIAH_PASSKEY_DIGITS;
        phax_niah *t = pk_task(v, NULL, 0, 0, digit_counts[ci], 0);
        cr_assert_str_eq(phax_niah_unknown_words(t), "");
        int min;
        cr_assert(phax_niah_min_length(t, PHAX_NIAH_PASSKEY, &min) == PHAX_OK, "%s", phax_error());
        cr_assert(min == 22 + (5 + D) + 11, "min length %d with %d digits", min, D);
        for (int di = 0; di < 3; di++) {
            int len = min + 51;
            phax_niah_prompt p;
            build(t, PHAX_NIAH_PASSKEY, PHAX_NIAH_NOISE, len, depths[di], 100 + (uint64_t)ci, &p);
            cr_assert(p.variant == PHAX_NIAH_PASSKEY && p.n_values == 1 && p.n_keys == 0);
            cr_assert(strlen(p.values[0]) == (size_t)D, "value '%s', %d digits", p.values[0], D);
            char dig[32], needle[128], ans[64];
            spaced_digits(p.values[0], dig, sizeof dig);
            snprintf(needle, sizeof needle, "The pass key is %s .", dig);
            snprintf(ans, sizeof ans, "%s .", dig);
            char a[512] = "", b[512] = "";
            const char *w = NOISE_WORDS;
            for (int i = 0; i < 51; i++) {
                size_t l = strcspn(w, " ");
                char *dst = i < at[di] ? a : b;
                snprintf(dst + strlen(dst), 512 - strlen(dst), "%.*s ", (int)l, w);
                w += l;
                w = *w ? w + 1 : NOISE_WORDS;
            }
            char *want = cat((const char *[]){PK_HEADER_WORDS, a, needle, " ", b,
                                              "\nWhat is the pass key ? The pass key is"}, 6);
            assert_prompt(v, &p, want);
            cr_assert(p.needle_at == 22 + (size_t)at[di], "needle at %zu, expected %d", p.needle_at,
                      22 + at[di]);
            cr_assert(p.haystack_at == 22 && p.haystack_len == 51 + 5 + (size_t)D);
            cr_assert(p.distance == (size_t)len - 1 - p.needle_at);
            char *got = decode(v, p.answer, p.n_answer);
            cr_assert_str_eq(got, ans);
            cr_assert(p.n_answer == (size_t)D + 1 && p.n_answer_digits == D);
            for (int i = 0; i < D; i++) cr_assert(p.answer_digit[i] == 1);
            cr_assert(p.answer_digit[D] == 0, "'.' is not a digit of the answer");
            cr_assert(p.n_gen == D + 1 + PHAX_NIAH_GEN_SLACK);
            double s;
            cr_assert(phax_niah_score(v, p.answer, p.n_answer, &p, &s) == PHAX_OK && s == 1.0);
            free(got), free(want);
            phax_niah_prompt_free(&p);
        }
        phax_niah_free(t);
    }
    phax_vocab_free(v);
}

// Byte vocabulary, no header: "The pass key is 05. " in 100 bytes of noise, the
// question "\nWhat is the pass key? The pass key is", the answer " 05.".
Test(niah, passkey_byte_exact) {
    phax_vocab *v = byte_vocab();
    phax_niah *t = pk_task(v, NULL, 0, 1, 0, 0);
    static const char tail[] = "\nWhat is the pass key? The pass key is";
    const double depths[3] = {0.0, 0.5, 1.0};
    const size_t at[3] = {0, 56, 100};
    for (int di = 0; di < 3; di++) {
        phax_niah_prompt p;
        build(t, PHAX_NIAH_PASSKEY, PHAX_NIAH_NOISE, 100 + 20 + (int)strlen(tail), depths[di], 5, &p);
        char needle[64], a[101], b[101], want_ans[16];
        snprintf(needle, sizeof needle, "The pass key is %s. ", p.values[0]);
        cr_assert(strlen(needle) == 20, "needle '%s'", needle);
        char *filler = cycle(NOISE_BYTES, 100);
        snprintf(a, sizeof a, "%.*s", (int)at[di], filler);
        snprintf(b, sizeof b, "%s", filler + at[di]);
        char *want = cat((const char *[]){a, needle, b, tail}, 4);
        assert_prompt(v, &p, want);
        cr_assert(p.needle_at == at[di]);
        char *ans = decode(v, p.answer, p.n_answer);
        snprintf(want_ans, sizeof want_ans, " %s.", p.values[0]);
        cr_assert_str_eq(ans, want_ans);
        cr_assert(p.n_answer_digits == 2 && !p.answer_digit[0] && p.answer_digit[1] &&
                  p.answer_digit[2] && !p.answer_digit[3]);
        free(ans), free(want), free(filler);
        phax_niah_prompt_free(&p);
    }
    phax_niah_free(t);
    phax_vocab_free(v);
}

// The needle goes where the depth says, in a text haystack too: within one
// sentence of round(depth · F) and at a sentence start, moving forward with depth;
// every value of 1 and 2 digits occurs (leading zeros included).
Test(niah, passkey_depth_and_values) {
    phax_vocab *v = word_vocab_of(PK_TEXT);
    static const char SENT[] = "The sky is blue . The grass is green . Here we go .\n";
    size_t n;
    int32_t *ids = cyclic_ids(v, SENT, 100 * strlen(SENT), &n);
    phax_niah *t = pk_task(v, ids, n, 1, 0, 0);
    int32_t dot = phax_vocab_id(v, ".", 1), eos = phax_vocab_eos(v);
    for (int h = 0; h < 2; h++)
        for (uint64_t seed = 0; seed < 40; seed++) {
            double depth = (double)seed / 39.0;
            phax_niah_prompt p;
            build(t, PHAX_NIAH_PASSKEY, h ? PHAX_NIAH_TEXT : PHAX_NIAH_NOISE, 300, depth, seed, &p);
            size_t F = p.haystack_len - 7, at = p.needle_at - p.haystack_at;
            double want = depth * (double)F;
            cr_assert((double)at >= want - 6 && (double)at <= want + 6,
                      "needle at filler %zu, depth %.3f of %zu", at, depth, F);
            cr_assert(at == 0 || at == F || p.tokens[p.needle_at - 1] == dot ||
                      p.tokens[p.needle_at - 1] == eos);
            phax_niah_prompt_free(&p);
        }
    int seen1[10] = {0}, seen2[100] = {0};
    phax_niah *t1 = pk_task(v, NULL, 0, 1, 1, 0);
    for (uint64_t seed = 0; seed < 2000; seed++) {
        phax_niah_prompt p;
        build(t1, PHAX_NIAH_PASSKEY, PHAX_NIAH_NOISE, 60, 0.5, seed, &p);
        seen1[p.values[0][0] - '0']++;
        phax_niah_prompt_free(&p);
        build(t, PHAX_NIAH_PASSKEY, PHAX_NIAH_NOISE, 60, 0.5, seed, &p);
        seen2[atoi(p.values[0])]++;
        phax_niah_prompt_free(&p);
    }
    for (int i = 0; i < 10; i++) cr_assert(seen1[i] > 100, "1 digit: %d drawn %d times", i, seen1[i]);
    for (int i = 0; i < 100; i++) cr_assert(seen2[i] > 0, "2 digits: %02d never drawn", i);
    phax_niah_free(t1), phax_niah_free(t);
    free(ids);
    phax_vocab_free(v);
}

static int is_digit_token(const phax_vocab *v, int32_t id) {
    for (char c = '0'; c <= '9'; c++)
        if (phax_vocab_id(v, &c, 1) == id) return 1;
    return 0;
}

// Positions where "pass key is" starts.
static int trigger_at(const phax_vocab *v, const int32_t *x, size_t n, size_t *pos, int max) {
    int32_t pa = phax_vocab_id(v, "pass", 4), ke = phax_vocab_id(v, "key", 3), is = phax_vocab_id(v, "is", 2);
    int k = 0;
    for (size_t i = 0; i + 2 < n; i++)
        if (x[i] == pa && x[i + 1] == ke && x[i + 2] == is) {
            if (k < max) pos[k] = i;
            k++;
        }
    return k;
}

// No leak: in a noise haystack (no digits of its own) the only digit tokens of the
// prompt are the needle's, right after its trigger; "pass key is" occurs twice, in
// the needle and as the prompt's last three tokens; the header names no value.
Test(niah, passkey_no_leak) {
    phax_vocab *v = word_vocab_of(PK_TEXT);
    for (int hdr = 0; hdr < 2; hdr++)
        for (int D = 1; D <= 7; D += 3) {
            phax_niah *t = pk_task(v, NULL, 0, !hdr, D, 0);
            for (uint64_t seed = 0; seed < 50; seed++) {
                phax_niah_prompt p;
                build(t, PHAX_NIAH_PASSKEY, PHAX_NIAH_NOISE, 120 + (int)seed, (double)seed / 49.0,
                      seed, &p);
                size_t pos[4];
                int k = trigger_at(v, p.tokens, p.n_tokens, pos, 4);
                cr_assert(k == 2 && pos[0] == p.needle_at + 1 && pos[1] == p.n_tokens - 3,
                          "%d triggers, first at %zu (needle %zu)", k, pos[0], p.needle_at);
                for (size_t i = 0; i < p.n_tokens; i++) {
                    int in_value = i >= p.needle_at + 4 && i < p.needle_at + 4 + (size_t)D;
                    cr_assert(is_digit_token(v, p.tokens[i]) == in_value,
                              "token %zu (needle at %zu) %s a digit", i, p.needle_at,
                              in_value ? "is not" : "is");
                    if (in_value) cr_assert(p.tokens[i] == p.answer[i - p.needle_at - 4]);
                }
                phax_niah_prompt_free(&p);
            }
            phax_niah_free(t);
        }
    phax_vocab_free(v);
}

// Training rows of the passkey mix: every row is passkey, on noise or text (never
// distractor needles); the targets after the answer prefix are exactly the needle's
// digits, then ".", then NL; the needle sits at the drawn depth; the rows of the
// default mix are the same as before passkey existed (mask 0 = RULER's four).
Test(niah, passkey_train_rows) {
    phax_vocab *v = word_vocab_of(PK_TEXT);
    static const char SENT[] = "The sky is blue . The grass is green . Here we go 1 2 3 .\n";
    size_t n;
    int32_t *ids = cyclic_ids(v, SENT, 150 * strlen(SENT), &n);
    const int T = 128;
    int32_t x[200], y[200];  // rows of 128 here, of 200 in the mix below
    int32_t dot = phax_vocab_id(v, ".", 1), eos = phax_vocab_eos(v);
    for (int D = 1; D <= 3; D++) {
        phax_niah *t = pk_task(v, ids, n, 0, D, 1u << PHAX_NIAH_PASSKEY);
        int hay_seen[PHAX_NIAH_N_HAYSTACKS] = {0};
        double lo = 1, hi = 0;
        for (uint64_t i = 0; i < 300; i++) {
            phax_niah_sample_info info;
            cr_assert(phax_niah_train_sample(t, 5, i, T, x, y, &info) == PHAX_OK, "%s", phax_error());
            cr_assert(info.variant == PHAX_NIAH_PASSKEY);
            hay_seen[info.haystack]++;
            cr_assert(info.n == info.prompt_len + D + 2 && info.n <= T && info.n >= T / 2);
            // The needle at info.needle_at: "The pass key is" + D digits + ".".
            const int32_t *nd = x + info.needle_at;
            size_t pos[2];
            cr_assert(trigger_at(v, nd, 4, pos, 2) == 1 && pos[0] == 1, "no needle at %d", info.needle_at);
            for (int k = 0; k < D; k++) {
                cr_assert(is_digit_token(v, nd[4 + k]));
                // The answer's targets: the last prompt token predicts the first digit.
                cr_assert(y[info.prompt_len - 1 + k] == nd[4 + k], "target %d is not digit %d", info.prompt_len - 1 + k, k);
                cr_assert(x[info.prompt_len + k] == nd[4 + k]);
            }
            cr_assert(nd[4 + D] == dot && y[info.prompt_len - 1 + D] == dot);
            cr_assert(y[info.prompt_len + D] == eos && y[info.n - 1] == -1);
            for (int k = 0; k + 1 < info.n; k++) cr_assert(y[k] == x[k + 1]);
            for (int k = info.n; k < T; k++) cr_assert(x[k] == 0 && y[k] == -1);
            // The prompt ends with the trigger; the only triggers are the needle's and that one.
            cr_assert(trigger_at(v, x, (size_t)info.prompt_len, pos, 2) == 2 &&
                      pos[1] == (size_t)info.prompt_len - 3);
            // Depth: the needle within 6 tokens (one sentence) of depth · filler, at a
            // sentence start.
            size_t hs = 22, F = (size_t)info.prompt_len - 22 - (size_t)(5 + D) - 11;
            double want = info.depth * (double)F, at = (double)(info.needle_at - (int)hs);
            cr_assert(at >= want - 6 && at <= want + 6, "needle at %g, depth %.3f of %zu", at, info.depth, F);
            cr_assert(at == 0 || at == (double)F || x[info.needle_at - 1] == dot ||
                      x[info.needle_at - 1] == eos);
            lo = info.depth < lo ? info.depth : lo, hi = info.depth > hi ? info.depth : hi;
        }
        cr_assert(hay_seen[PHAX_NIAH_NOISE] > 100 && hay_seen[PHAX_NIAH_TEXT] > 100 &&
                  !hay_seen[PHAX_NIAH_NEEDLES], "noise %d, text %d, needles %d",
                  hay_seen[0], hay_seen[1], hay_seen[2]);
        cr_assert(lo < 0.02 && hi > 0.98);
        phax_niah_free(t);
    }
    // A mix of single and passkey draws both; train_variants 0 is RULER's four, row for row.
    phax_niah *mix = pk_task(v, ids, n, 1, 0, (1u << PHAX_NIAH_SINGLE) | (1u << PHAX_NIAH_PASSKEY));
    phax_niah *def = pk_task(v, ids, n, 1, 0, 0), *four = pk_task(v, ids, n, 1, 0, 0xF);
    int seen[PHAX_NIAH_N_ALL_VARIANTS] = {0};
    for (uint64_t i = 0; i < 64; i++) {
        phax_niah_sample_info info;
        cr_assert(phax_niah_train_sample(mix, 9, i, 200, x, y, &info) == PHAX_OK, "%s", phax_error());
        seen[info.variant]++;
        int32_t bx[200], by[200], cx[200], cy[200];
        cr_assert(phax_niah_train_sample(def, 9, i, 200, bx, by, NULL) == PHAX_OK);
        cr_assert(phax_niah_train_sample(four, 9, i, 200, cx, cy, NULL) == PHAX_OK);
        cr_assert(!memcmp(bx, cx, sizeof bx) && !memcmp(by, cy, sizeof by));
    }
    cr_assert(seen[PHAX_NIAH_SINGLE] > 16 && seen[PHAX_NIAH_PASSKEY] > 16 &&
              seen[PHAX_NIAH_SINGLE] + seen[PHAX_NIAH_PASSKEY] == 64);
    phax_niah_free(mix), phax_niah_free(def), phax_niah_free(four);
    free(ids);
    phax_vocab_free(v);
}

// Exact match: the continuation starts with the value's digits (spaces between
// word tokens do not count) and no digit follows; a substring is not enough.
Test(niah, passkey_score_exact) {
    const phax_tok_kind W = PHAX_TOK_WORD, B = PHAX_TOK_BYTE;
#define X(kind, s, val) phax_niah_match_exact(kind, s, strlen(s), val)
    cr_assert(X(W, "4 7 .", "47") == 1.0);
    cr_assert(X(W, "4 7", "47") == 1.0);
    cr_assert(X(W, "\n 4 7 . The", "47") == 1.0);
    cr_assert(X(W, "0 5 .", "05") == 1.0);
    cr_assert(X(W, "4 7 3 .", "47") == 0.0, "a longer number is not the value");
    cr_assert(X(W, "1 4 7 .", "47") == 0.0, "the value inside a longer number");
    cr_assert(X(W, "the 4 7 .", "47") == 0.0, "a word before the value");
    cr_assert(X(W, "7 4 .", "47") == 0.0);
    cr_assert(X(W, "4 .", "47") == 0.0);
    cr_assert(X(W, "", "4") == 0.0);
    cr_assert(X(B, " 47.", "47") == 1.0);
    cr_assert(X(B, " 4 7.", "47") == 0.0, "bytes: the digits adjacent");
    cr_assert(X(B, " 470.", "47") == 0.0);
    cr_assert(X(B, " 4.", "4") == 1.0);
#undef X
    // phax_niah_score uses it for a passkey prompt (string_match_all would find "47" in "1 4 7 3").
    phax_vocab *v = word_vocab_of(PK_TEXT);
    phax_niah *t = pk_task(v, NULL, 0, 1, 0, 0);
    phax_niah_prompt p;
    build(t, PHAX_NIAH_PASSKEY, PHAX_NIAH_NOISE, 60, 0.5, 3, &p);
    char wrong[64], dig[16];
    spaced_digits(p.values[0], dig, sizeof dig);
    snprintf(wrong, sizeof wrong, "1 %s 3 .", dig);
    size_t n;
    int32_t *ids = encode(v, wrong, &n);
    double s;
    cr_assert(phax_niah_score(v, ids, n, &p, &s) == PHAX_OK && s == 0.0, "'%s' scored %g", wrong, s);
    free(ids);
    ids = encode(v, dig, &n);
    cr_assert(phax_niah_score(v, ids, n, &p, &s) == PHAX_OK && s == 1.0);
    free(ids);
    phax_niah_prompt_free(&p);
    phax_niah_free(t);
    phax_vocab_free(v);
}

// The graded score on crafted logits, against log-probabilities worked out by hand:
// only the answer's digit tokens count (not "." nor "," / "and"), row i scores answer[i].
Test(niah, graded_hand) {
    // log softmax([1, 2, 3]) = [1, 2, 3] − 3 − ln(1 + e^−1 + e^−2).
    const float l3[3] = {1, 2, 3};
    const double ls3[3] = {-2.4076059644443806, -1.4076059644443804, -0.4076059644443804};
    for (int i = 0; i < 3; i++)
        cr_assert(fabs(phax_niah_logprob(l3, 3, i) - ls3[i]) < 1e-12, "%d: %.17g", i,
                  phax_niah_logprob(l3, 3, i));
    const float big[2] = {1000, 0};  // max-shifted: no overflow
    cr_assert(fabs(phax_niah_logprob(big, 2, 1) + 1000) < 1e-9);
    cr_assert(isnan(phax_niah_logprob(l3, 3, 3)) && isnan(phax_niah_logprob(l3, 3, -1)));

    phax_vocab *v = word_vocab_of(PK_TEXT);
    const int V = (int)phax_vocab_size(v);
    phax_niah *t = pk_task(v, NULL, 0, 1, 0, 0);
    phax_niah_prompt p;
    build(t, PHAX_NIAH_PASSKEY, PHAX_NIAH_NOISE, 60, 0.5, 21, &p);
    cr_assert(p.n_answer == 3 && p.n_answer_digits == 2);
    float *rows = calloc((size_t)3 * V, sizeof *rows);
    // Row 0: the first digit has logit ln 3, the other V − 1 tokens 0: p = 3 / (V + 2).
    rows[p.answer[0]] = logf(3.0f);
    // Row 1: the second digit 0, one other token ln 5, the rest 0: p = 1 / (V + 4).
    int32_t other = p.answer[1] == 0 ? 1 : 0;
    rows[(size_t)V + (size_t)other] = logf(5.0f);
    // Row 2 ("."): certain; it must not count.
    rows[2 * (size_t)V + (size_t)p.answer[2]] = 100.0f;
    double g, want = (log(3.0 / (V + 2)) + log(1.0 / (V + 4))) / 2;
    cr_assert(phax_niah_graded(&p, rows, V, &g) == PHAX_OK, "%s", phax_error());
    cr_assert(fabs(g - want) < 1e-6, "graded %.9g, by hand %.9g", g, want);
    cr_assert(phax_niah_graded(&p, rows, 0, &g) == PHAX_ERR);
    phax_niah_prompt_free(&p);
    free(rows);
    // A RULER prompt: the graded score averages the 7 value digits of " 4019273." (bytes),
    // not the space or the ".".
    phax_vocab *b = byte_vocab();
    phax_niah *tb = pk_task(b, NULL, 0, 1, 0, 0);
    build(tb, PHAX_NIAH_MULTIKEY, PHAX_NIAH_NOISE, 800, 0.5, 4, &p);
    cr_assert(p.n_answer == 9 && p.n_answer_digits == 7 && !p.answer_digit[0] && !p.answer_digit[8]);
    float *br = calloc((size_t)9 * 256, sizeof *br);
    for (int i = 0; i < 9; i++) br[i * 256 + p.answer[i]] = i == 0 || i == 8 ? -50.0f : logf(2.0f);
    cr_assert(phax_niah_graded(&p, br, 256, &g) == PHAX_OK);
    cr_assert(fabs(g - log(2.0 / 257)) < 1e-6, "graded %.9g, by hand %.9g", g, log(2.0 / 257));
    free(br);
    phax_niah_prompt_free(&p);
    phax_niah_free(tb);
    phax_vocab_free(b);
    phax_niah_free(t);
    phax_vocab_free(v);
}

// Refusals, each one line: digit counts outside 1..7, a vocabulary without digits
// (the existing message, also for a passkey task), one without the passkey words,
// the needles haystack, bad variant lists, a row or prompt too short.
Test(niah, passkey_errors) {
    int d;
    const char *bad[] = {"0", "8", "", "x", "2x", "-1", "100"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert(phax_niah_digits_parse(bad[i], &d) == PHAX_ERR, "'%s' accepted", bad[i]);
        cr_assert(strstr(phax_error(), "is not a whole number in [1, 7]") && !strchr(phax_error(), '\n'),
                  "%s", phax_error());
    }
    cr_assert(phax_niah_digits_parse("1", &d) == PHAX_OK && d == 1);
    cr_assert(phax_niah_digits_parse("7", &d) == PHAX_OK && d == 7);
    phax_vocab *v = word_vocab_of(PK_TEXT);
    phax_niah *t;
    phax_niah_opts o = {.passkey_digits = 8};
    cr_assert(phax_niah_new(v, NULL, 0, &o, &t) == PHAX_ERR && strstr(phax_error(), "passkey digits 8"),
              "%s", phax_error());
    o.passkey_digits = -1;
    cr_assert(phax_niah_new(v, NULL, 0, &o, &t) == PHAX_ERR && strstr(phax_error(), "passkey digits -1"));
    o = (phax_niah_opts){.train_variants = 1u << 5};
    cr_assert(phax_niah_new(v, NULL, 0, &o, &t) == PHAX_ERR && strstr(phax_error(), "train_variants"));
    // Passkey and the needles haystack; a length too short.
    t = pk_task(v, NULL, 0, 0, 0, 0);
    phax_niah_prompt p;
    phax_niah_spec sp = {PHAX_NIAH_PASSKEY, PHAX_NIAH_NEEDLES, 200, 0.5, 1};
    cr_assert(phax_niah_build(t, &sp, &p) == PHAX_ERR && strstr(phax_error(), "no needles haystack"),
              "%s", phax_error());
    sp.haystack = PHAX_NIAH_NOISE, sp.length = 39;
    cr_assert(phax_niah_build(t, &sp, &p) == PHAX_ERR &&
                  strstr(phax_error(), "context length 39 is too short for a passkey prompt"),
              "%s", phax_error());
    sp.length = 40;
    cr_assert(phax_niah_build(t, &sp, &p) == PHAX_OK, "%s", phax_error());
    phax_niah_prompt_free(&p);
    int32_t x[40], y[40];
    phax_niah_free(t);
    t = pk_task(v, NULL, 0, 0, 0, 1u << PHAX_NIAH_PASSKEY);
    cr_assert(phax_niah_train_sample(t, 1, 0, 40, x, y, NULL) == PHAX_ERR &&
                  strstr(phax_error(), "cannot hold a passkey example"), "%s", phax_error());
    phax_niah_free(t);
    phax_vocab_free(v);
    // No passkey words: RULER's variants still work, passkey prompts and a passkey mix do not.
    v = word_vocab_of(HAND_TEXT);
    t = task(v, NULL, 0, 0);
    sp = (phax_niah_spec){PHAX_NIAH_PASSKEY, PHAX_NIAH_NOISE, 200, 0.5, 1};
    cr_assert(phax_niah_build(t, &sp, &p) == PHAX_ERR &&
                  strstr(phax_error(), "lacks the passkey words 'a', 'pass', 'key', 'You', 'be', "
                                       "'asked', 'at', 'end'"), "%s", phax_error());
    int min;
    cr_assert(phax_niah_min_length(t, PHAX_NIAH_PASSKEY, &min) == PHAX_ERR);
    phax_niah_free(t);
    o = (phax_niah_opts){.train_variants = 1u << PHAX_NIAH_PASSKEY};
    cr_assert(phax_niah_new(v, NULL, 0, &o, &t) == PHAX_ERR && strstr(phax_error(), "passkey words"));
    phax_vocab_free(v);
    // No digits (PTB writes numbers as N): refused with the existing message.
    char *text = strdup(PK_TEXT);
    *strchr(text, '0') = 'N';
    v = word_vocab_of(text);
    o = (phax_niah_opts){.train_variants = 1u << PHAX_NIAH_PASSKEY, .passkey_digits = 1};
    cr_assert(phax_niah_new(v, NULL, 0, &o, &t) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "the word vocabulary has no token '0'"), "%s", phax_error());
    phax_vocab_free(v);
    free(text);
    // Variant lists.
    unsigned m;
    cr_assert(phax_niah_variant_list_parse("passkey", &m) == PHAX_OK && m == 1u << PHAX_NIAH_PASSKEY);
    cr_assert(phax_niah_variant_list_parse("single,passkey", &m) == PHAX_OK && m == 0x11);
    cr_assert(phax_niah_variant_list_parse("passkey,pass", &m) == PHAX_ERR &&
              strstr(phax_error(), "unknown variant 'pass'"));
    cr_assert(phax_niah_variant_list_parse("passkey,passkey", &m) == PHAX_ERR &&
              strstr(phax_error(), "twice"));
    cr_assert(phax_niah_variant_list_parse("", &m) == PHAX_ERR);
    cr_assert(phax_niah_variant_list_parse("single,", &m) == PHAX_ERR);
    phax_niah_variant var;
    cr_assert(phax_niah_variant_parse("passkey", &var) == PHAX_OK && var == PHAX_NIAH_PASSKEY);
    cr_assert_str_eq(phax_niah_variant_name(PHAX_NIAH_PASSKEY), "passkey");
}

// PTB (when the repository's copy is there): its vocabulary has no digits, so a passkey
// task is refused with the existing one-line message.
Test(niah, passkey_ptb_refused) {
    const char *root = getenv("PHAX_SOURCE_ROOT");
    char path[4200];
    snprintf(path, sizeof path, "%s/data/ptb/ptb.train.txt.xz", root && *root ? root : ".");
    struct stat sb;
    if (stat(path, &sb) != 0) cr_skip_test("no %s", path);
    phax_vocab *v;
    cr_assert(phax_vocab_build_file(path, &v) == PHAX_OK, "%s", phax_error());
    phax_niah_opts o = {.train_variants = 1u << PHAX_NIAH_PASSKEY};
    phax_niah *t;
    cr_assert(phax_niah_new(v, NULL, 0, &o, &t) == PHAX_ERR);
    cr_assert(strstr(phax_error(), "the word vocabulary has no token '") && !strchr(phax_error(), '\n'),
              "%s", phax_error());
    phax_vocab_free(v);
}

// WikiText-2 (when present): the passkey words are all in its vocabulary, capped at
// 8192 words too (as the evals train), and a 2-digit passkey prompt reads back.
Test(niah, passkey_wikitext2) {
    const char *root = getenv("PHAX_SOURCE_ROOT");
    char path[4200];
    snprintf(path, sizeof path, "%s/data/wikitext-2/train.txt.xz", root && *root ? root : ".");
    struct stat sb;
    if (stat(path, &sb) != 0) cr_skip_test("no %s", path);
    phax_vocab *v;
    cr_assert(phax_vocab_build_file_max(path, 8192, &v) == PHAX_OK, "%s", phax_error());
    phax_niah *t = pk_task(v, NULL, 0, 0, 0, 1u << PHAX_NIAH_PASSKEY);
    phax_niah_prompt p;
    build(t, PHAX_NIAH_PASSKEY, PHAX_NIAH_NOISE, 256, 0.5, 1, &p);
    char *text = decode(v, p.tokens, p.n_tokens), needle[64], dig[16];
    spaced_digits(p.values[0], dig, sizeof dig);
    snprintf(needle, sizeof needle, "The pass key is %s .", dig);
    cr_assert(strstr(text, needle) && !strstr(text, "<unk>"), "%s", text);
    cr_assert(ends_with(text, "What is the pass key ? The pass key is"));
    free(text);
    phax_niah_prompt_free(&p);
    phax_niah_free(t);
    phax_vocab_free(v);
}
