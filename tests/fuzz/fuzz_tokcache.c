// Harness: the token cache reader on a damaged or crafted cache file.
// Input: fz_split into (source text, cache image). The source is cached once
// (a valid cache), then the cache file is replaced by the image and loaded
// again. The image's first byte holds flags: bit 0 — write the real source
// and vocabulary identity into its header, bit 1 — also its real payload hash,
// so that mutations reach the checks behind those hashes. Properties: the load
// succeeds; every id is inside the vocabulary; it gives exactly the source's
// tokens (a damaged cache is rebuilt, never trusted) unless the image is a
// self-consistent cache of other tokens: its payload hash right (bit 1, or
// forged by the fuzzer, which learns compared values) and, for this plain byte
// source, exactly one token per source byte. The payload hash detects damage,
// not forgery: whoever can write the cache folder can feed phax other tokens,
// as whoever can write the data can (docs/train.md, token caches).
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "phax/data.h"
#include "phax/tokenizer.h"

static void put64(uint8_t *p, uint64_t x) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(x >> (8 * i));
}
static uint64_t get64(const uint8_t *p) {
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) x |= (uint64_t)p[i] << (8 * i);
    return x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[2];
    size_t len[2];
    fz_split(data, size, 2, part, len);
    if (!len[0] || !len[1]) return 0;
    const char *src = fz_path(0, "src.txt"), *cache = fz_path(1, "cache");
    fz_write(src, part[0], len[0]);
    phax_vocab *v = NULL;
    if (phax_vocab_byte(&v)) return 0;
    int32_t *want = NULL, *got = NULL;
    size_t nw = 0, ng = 0;
    char *cpath = NULL;
    if (phax_tokens_load_cached_ex(v, src, cache, &want, &nw, NULL, &cpath))
        fz_fail("a byte text does not tokenize", phax_error());
    int flags = part[1][0];
    size_t cn = len[1] - 1;
    uint8_t *img = malloc(cn ? cn : 1);
    if (!img) goto out;
    memcpy(img, part[1] + 1, cn);
    if ((flags & 1) && cn >= 80) {
        uint64_t src_hash = phax_fnv1a64(PHAX_FNV_INIT, part[0], len[0]);
        put64(img + 16, phax_vocab_hash(v));
        put64(img + 24, phax_vocab_size(v));
        put64(img + 32, len[0]);
        put64(img + 56, src_hash);
    }
    if ((flags & 2) && cn >= 80) {
        uint64_t count = get64(img + 64), h = PHAX_FNV_INIT;
        if (count <= (cn - 80) / 4) h = phax_fnv1a64(h, img + 80, 4 * count);
        put64(img + 72, h);
    }
    // Self-consistent: what cache_read can check holds, so trusting it is no defect.
    int consistent = 0;
    if (cn >= 80) {
        uint64_t count = get64(img + 64);
        consistent = count == len[0] && count == (cn - 80) / 4 && (cn - 80) % 4 == 0 &&
                     phax_fnv1a64(PHAX_FNV_INIT, img + 80, 4 * count) == get64(img + 72);
    }
    fz_write(cpath, img, cn);
    free(img);
    if (phax_tokens_load_cached_ex(v, src, cache, &got, &ng, NULL, NULL))
        fz_fail("loading through a damaged cache failed", phax_error());
    for (size_t i = 0; i < ng; i++)
        if (got[i] < 0 || (size_t)got[i] >= phax_vocab_size(v)) fz_fail("a cached id is outside the vocabulary", NULL);
    if (!consistent && (ng != nw || memcmp(got, want, 4 * nw))) fz_fail("a damaged cache was trusted", cpath);
out:
    free(want), free(got), free(cpath);
    phax_vocab_free(v);
    fz_clean();
    return 0;
}
