// Harness: corpora — plain or .xz (an input starting with the xz magic is
// written as train.txt.xz) — read, tokenized and cached as `phax train/eval` do.
// Properties: the cache is written on the first load and hit on the second,
// and both give the tokens phax_encode gives for the decoded text.
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "phax/data.h"
#include "phax/tokenizer.h"

static void via_cache(const phax_vocab *v, const char *path, const uint8_t *text, size_t n) {
    int32_t *want = NULL, *a = NULL, *b = NULL;
    size_t nw = 0, na = 0, nb = 0;
    int enc = phax_encode(v, text, n, path, &want, &nw);
    const char *cache = fz_path(2, "cache");
    phax_cache_result r1 = PHAX_CACHE_HIT, r2 = PHAX_CACHE_MISSING;
    int rc1 = phax_tokens_load_cached_ex(v, path, cache, &a, &na, &r1, NULL);
    if (rc1 != enc) fz_fail("the cached load and phax_encode disagree on accepting the text", phax_error());
    if (rc1 == PHAX_OK) {
        if (r1 != PHAX_CACHE_MISSING) fz_fail("first load did not build the cache", NULL);
        if (phax_tokens_load_cached_ex(v, path, cache, &b, &nb, &r2, NULL))
            fz_fail("second cached load failed", phax_error());
        if (r2 != PHAX_CACHE_HIT) fz_fail("second load did not hit the cache", NULL);
        if (na != nw || nb != nw || memcmp(a, want, nw * 4) || memcmp(b, want, nw * 4))
            fz_fail("cached tokens differ from phax_encode", NULL);
    }
    free(want), free(a), free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const uint8_t xz_magic[6] = {0xFD, '7', 'z', 'X', 'Z', 0};
    int xz = size >= 6 && !memcmp(data, xz_magic, 6);
    const char *path = fz_path(0, xz ? "train.txt.xz" : "train.txt");
    fz_write(path, data, size);
    uint8_t *text = NULL;
    size_t n = 0;
    if (phax_data_read(path, &text, &n) == PHAX_OK) {
        fz_accepted("corpus");
        phax_vocab *byte = NULL, *word = NULL;
        if (phax_vocab_byte(&byte) == PHAX_OK) via_cache(byte, path, text, n);
        if (phax_vocab_build_text(text, n, path, &word) == PHAX_OK) via_cache(word, path, text, n);
        phax_vocab_free(byte);
        phax_vocab_free(word);
    }
    free(text);
    fz_clean();
    return 0;
}
