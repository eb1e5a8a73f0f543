// Harness: the checkpoint loader — model file, vocabulary and training state,
// as `phax info/eval/generate/niah` and `train --resume` read them.
// Input: fz_split into 3 parts (model .safetensors, .vocab, .state.safetensors),
// written as checkpoint.* in the temporary directory. Properties of an accepted
// checkpoint: every parameter is finite (issue 11 item 9), and saving it again
// and loading that gives the same parameters.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "phax/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[3];
    size_t len[3];
    fz_split(data, size, 3, part, len);
    const char *model = fz_path(0, "checkpoint.safetensors");
    fz_write(model, part[0], len[0]);
    fz_write(fz_path(1, "checkpoint.vocab"), part[1], len[1]);
    const char *state = fz_path(2, "checkpoint.state.safetensors");
    fz_write(state, part[2], len[2]);

    phax_ckpt ck;
    if (phax_ckpt_load(model, -1, &ck) == PHAX_OK) {
        fz_accepted("checkpoint");
        fz_check_layout(&ck.layout);
        for (size_t i = 0; i < ck.layout.numel; i++)
            if (!isfinite(ck.params[i])) fz_fail("a checkpoint with a non-finite parameter was accepted", ck.path);
        phax_ckpt_state s;
        if (phax_ckpt_state_load(state, &ck.layout, &s) == PHAX_OK) {
            phax_ckpt_state_check(state, &s, ck.step);
            phax_ckpt_state_free(&s);
        }
        // Save under another stem and load back: the same parameters.
        phax_ckpt out = ck;
        const char *copy = fz_path(3, "copy.safetensors");
        if (phax_ckpt_save(copy, &out)) fz_fail("an accepted checkpoint cannot be saved", phax_error());
        phax_ckpt back;
        if (phax_ckpt_load(copy, -1, &back)) fz_fail("a saved checkpoint cannot be loaded", phax_error());
        if (back.layout.numel != ck.layout.numel ||
            memcmp(back.params, ck.params, ck.layout.numel * sizeof(float)) || back.step != ck.step)
            fz_fail("a checkpoint changed on save and load", ck.path);
        phax_ckpt_free(&back);
        phax_ckpt_free(&ck);
    }
    fz_clean();
    return 0;
}
