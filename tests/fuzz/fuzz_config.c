// Harness: the model config reader (JSON text, as in CONFIG.json files and the
// "config" metadata of checkpoints and oracle inputs). An accepted config must
// survive serialise → parse unchanged, and its parameter layout must build
// (a config that resolves but has no layout is a reader that accepts too much).
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "phax/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *json = malloc(size + 1);
    if (!json) return 0;
    memcpy(json, data, size);
    json[size] = '\0';
    phax_model_cfg c;
    if (phax_model_cfg_from_json_str(&c, json, "<fuzz>") == PHAX_OK) {
        fz_accepted("config");
        char *again = phax_model_cfg_to_json(&c);
        phax_model_cfg d;
        if (!again) fz_fail("an accepted config does not serialise", phax_error());
        if (phax_model_cfg_from_json_str(&d, again, "<again>")) fz_fail("a serialised config is refused", phax_error());
        char *third = phax_model_cfg_to_json(&d);
        if (!third || strcmp(again, third)) fz_fail("config changed on a round trip", again);
        free(third);
        free(again);
        phax_layout L = {0};
        if (phax_layout_build(&L, &c)) fz_fail("an accepted config has no layout", phax_error());
        fz_check_layout(&L);
        phax_layout_free(&L);
    }
    free(json);
    return 0;
}
