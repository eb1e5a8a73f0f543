// Harness: name maps (`--names MAP.json`, core/names.c). Input: fz_split into (map JSON,
// newline-separated names). An accepted map: every name maps both ways without overflowing
// out (PHAX_NAMES_MAX_LEN + 6 bytes); a name an entry mapped to phax's maps back to itself
// (phax_names_to_theirs ∘ phax_names_to_phax is the identity on mapped names: the map is
// one-to-one, duplicates refused). The file reader agrees with the in-memory parser.
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "phax/core.h"
#include "phax/names.h"

#define OUT_N (PHAX_NAMES_MAX_LEN + 6)

static void probe(const phax_names *m, const char *name) {
    char a[OUT_N], b[OUT_N];
    int r = phax_names_to_phax(m, name, a, sizeof a);
    if (r == PHAX_ERR) return;  // the result does not fit: refused, fine
    if (r == 0 && strcmp(a, name)) fz_fail("an unmapped name changed", name);
    if (r == 1) {
        int q = phax_names_to_theirs(m, a, b, sizeof b);
        if (q == 1 && strcmp(b, name) && strncmp(name, "grad.", 5))
            fz_fail("a mapped name does not map back to itself", name);
    }
    (void)phax_names_to_theirs(m, name, b, sizeof b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[2];
    size_t len[2];
    fz_split(data, size, 2, part, len);
    phax_names *m = phax_names_parse((const char *)part[0], len[0], "map.json");
    const char *path = fz_path(0, "map.json");
    fz_write(path, part[0], len[0]);
    phax_names *f = phax_names_load(path);
    if (!m != !f) fz_fail("the file reader and the parser disagree", phax_error());
    if (m) {
        fz_accepted("name map");
        // Names: the second part's lines (bounded), and a few of phax's own.
        static const char *own[] = {"blocks.0.attn.wq.weight", "blocks.12.ffn.w_up.weight", "embed.weight",
                                    "grad.blocks.3.attn.wk.weight", "head.weight", "x", ""};
        for (size_t i = 0; i < sizeof own / sizeof *own; i++) probe(m, own[i]);
        char line[2 * OUT_N];
        size_t p = 0;
        for (int k = 0; k < 64 && p < len[1]; k++) {
            size_t e = p;
            while (e < len[1] && part[1][e] != '\n') e++;
            size_t n = e - p < sizeof line - 1 ? e - p : sizeof line - 1;
            memcpy(line, part[1] + p, n);
            line[n] = 0;
            probe(m, line);
            p = e + 1;
        }
    }
    phax_names_free(m);
    phax_names_free(f);
    fz_clean();
    return 0;
}
