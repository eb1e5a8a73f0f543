// Name maps (`--names MAP.json` of phax oracle and phax check): a user's tensor names
// (a Hugging Face or xLSTM layout) onto phax's, so nobody has to rename files.
//
// MAP.json is one JSON object, "their name": "phax name", e.g.
//   {"model.layers.{i}.self_attn.q_proj.weight": "blocks.{i}.attn.wq", "lm_head.weight": "head.weight"}
// "{i}" (at most once in a key, and then exactly once in its value) stands for a layer
// number (decimal, no sign, no leading zero). An exact key wins over a pattern; a gradient
// "grad.<name>" follows <name>'s entry unless "grad.<name>" has its own. Names no entry
// matches pass unchanged. Refused, one line naming MAP.json: not an object, a value that is
// not a string, two keys giving the same phax name or the same key twice, a key or value over
// 255 bytes, more than 65,536 entries or 1,024 patterns, a file over 8 MiB.
#ifndef PHAX_NAMES_H
#define PHAX_NAMES_H

#include <stddef.h>

#include "phax/safetensors.h"

typedef struct phax_names phax_names;

#define PHAX_NAMES_MAX_LEN 255
#define PHAX_NAMES_MAX_ENTRIES 65536
#define PHAX_NAMES_MAX_BYTES ((size_t)8 << 20)
#define PHAX_NAMES_MAX_PATTERNS 1024  // "{i}" entries (scanned per name; a layout has dozens)

// Parse MAP.json (a file, or len bytes of text labelled `label` in messages). NULL on error.
phax_names *phax_names_load(const char *path);
phax_names *phax_names_parse(const char *text, size_t len, const char *label);
void phax_names_free(phax_names *m);

// Their name → phax's (to_phax) or phax's → theirs (to_theirs) into out (n bytes, at least
// PHAX_NAMES_MAX_LEN + 6); returns 1 when an entry applied, 0 when the name passes unchanged
// (out holds it too), PHAX_ERR when the result does not fit.
int phax_names_to_phax(const phax_names *m, const char *name, char *out, size_t n);
int phax_names_to_theirs(const phax_names *m, const char *name, char *out, size_t n);

// Rename every tensor of a read file to phax's names. Two tensors ending with one name is an
// error naming both (the file unchanged).
int phax_names_apply(const phax_names *m, phax_st_file *f);

#endif
