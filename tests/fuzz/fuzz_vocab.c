// Harness: the vocabulary file reader and the tokenizer. Input: fz_split into
// (vocab file, text). An accepted vocabulary saves to a file that loads with the
// same hash; the text encodes (or is refused) and what encodes decodes; a word
// vocabulary built from the text encodes that text and the ids decode.
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "phax/tokenizer.h"

static void encode_decode(const phax_vocab *v, const uint8_t *text, size_t n) {
    int32_t *ids = NULL;
    size_t nid = 0;
    if (phax_encode(v, text, n, "text", &ids, &nid) == PHAX_OK) {
        for (size_t i = 0; i < nid; i++)
            if (ids[i] < 0 || (size_t)ids[i] >= phax_vocab_size(v)) fz_fail("encode gave an id outside the vocabulary", NULL);
        char *s = NULL;
        size_t slen = 0;
        if (phax_decode(v, ids, nid, &s, &slen)) fz_fail("encoded ids do not decode", phax_error());
        if (phax_vocab_kind(v) == PHAX_TOK_BYTE && (slen != n || memcmp(s, text, n)))
            fz_fail("byte tokens do not decode to their text", NULL);
        free(s);
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[2];
    size_t len[2];
    fz_split(data, size, 2, part, len);
    const char *path = fz_path(0, "in.vocab");
    fz_write(path, part[0], len[0]);
    phax_vocab *v = NULL;
    if (phax_vocab_load(path, &v) == PHAX_OK) {
        fz_accepted("vocabulary");
        const char *again = fz_path(1, "again.vocab");
        if (phax_vocab_save(v, again)) fz_fail("an accepted vocabulary cannot be saved", phax_error());
        phax_vocab *w = NULL;
        if (phax_vocab_load(again, &w)) fz_fail("a saved vocabulary is refused", phax_error());
        if (phax_vocab_hash(w) != phax_vocab_hash(v) || phax_vocab_size(w) != phax_vocab_size(v))
            fz_fail("a vocabulary changed on save and load", NULL);
        phax_vocab_free(w);
        encode_decode(v, part[1], len[1]);
        phax_vocab_free(v);
    }
    phax_vocab *b = NULL;
    if (phax_vocab_build_text(part[1], len[1], "text", &b) == PHAX_OK) {
        int32_t *ids = NULL;
        size_t nid = 0;
        if (phax_encode(b, part[1], len[1], "text", &ids, &nid))
            fz_fail("a text does not encode with its own vocabulary", phax_error());
        free(ids);
        encode_decode(b, part[1], len[1]);
        phax_vocab_free(b);
    }
    fz_clean();
    return 0;
}
