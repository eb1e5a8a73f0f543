// Harness: a run folder as the readers resolve it (phax eval, info, generate, and resume's
// first step): phax_ckpt_model_path, phax_ckpt_load and phax_ckpt_state_load on a folder built
// from the input. Input: records [kind u8][name: u8 length + bytes][payload: u32 length + bytes],
// kind 0 a file (payload: its bytes), 1 a symbolic link (payload: its target, any string),
// 2 a folder. Names are sanitised to [a-z0-9._-] segments joined by '/' ("." and ".." segments
// dropped), so every entry lies inside the folder; link targets are not (a planted link may
// point anywhere). Properties: no crash, bounded memory and time (the replay's limits); a
// loaded checkpoint has a consistent layout and finite parameters; the model path resolves
// inside the folder or along its links; loading twice gives the same parameters.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "phax/checkpoint.h"
#include "phax/core.h"

static void clean_name(const uint8_t *p, size_t n, char *out, size_t cap) {
    size_t k = 0, seg = 0;
    for (size_t i = 0; i < n && k + 2 < cap; i++) {
        char c = (char)p[i];
        if (c == '/') {
            // drop an empty, "." or ".." segment
            if (seg == 0 || (seg == 1 && out[k - 1] == '.') || (seg == 2 && out[k - 1] == '.' && out[k - 2] == '.')) {
                k -= seg, seg = 0;
                continue;
            }
            out[k++] = '/', seg = 0;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) c = '_';
        out[k++] = c, seg++;
    }
    if ((seg == 1 && out[k - 1] == '.') || (seg == 2 && out[k - 1] == '.' && out[k - 2] == '.')) k -= seg;
    while (k && out[k - 1] == '/') k--;
    out[k] = 0;
}

// The parent folders of path, made inside the harness's folder. 0 when a parent is not a real
// folder (an earlier record's link or file): the record is skipped, so that nothing the harness
// writes goes through a link to somewhere outside.
static int mkparents(const char *path) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + strlen(fz_dir()) + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            struct stat sb;
            if (lstat(tmp, &sb) != 0) mkdir(tmp, 0777);
            if (lstat(tmp, &sb) != 0 || !S_ISDIR(sb.st_mode)) return 0;
            *p = '/';
        }
    struct stat sb;  // the entry itself must not exist already (a link there would be written through)
    return lstat(path, &sb) != 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *root = fz_path(0, "run");
    mkdir(root, 0777);
    size_t p = 0;
    for (int rec = 0; rec < 32 && p + 2 <= size; rec++) {
        int kind = data[p++] % 3;
        size_t nl = data[p++];
        if (p + nl + 4 > size) break;
        char name[512], full[1024];
        clean_name(data + p, nl, name, sizeof name);
        p += nl;
        size_t pl = fz_u32(data + p);
        p += 4;
        if (pl > size - p) pl = size - p;
        if (!name[0]) {
            p += pl;
            continue;
        }
        snprintf(full, sizeof full, "%s/%s", root, name);
        if (!mkparents(full)) {
            p += pl;
            continue;
        }
        if (kind == 0) {
            fz_write(full, data + p, pl);
        } else if (kind == 1) {
            char target[1024];
            size_t tl = pl < sizeof target - 1 ? pl : sizeof target - 1;
            memcpy(target, data + p, tl), target[tl] = 0;
            if (tl && !memchr(target, 0, tl)) (void)symlink(target, full);
        } else {
            mkdir(full, 0777);
        }
        p += pl;
    }
    char *model = phax_ckpt_model_path(root);
    free(model);
    phax_ckpt ck;
    if (phax_ckpt_load(root, -1, &ck) == PHAX_OK) {
        fz_accepted("run folder");
        fz_check_layout(&ck.layout);
        for (size_t i = 0; i < ck.layout.numel; i++)
            if (!isfinite(ck.params[i])) fz_fail("a loaded parameter is not finite", ck.path);
        phax_ckpt again;
        if (phax_ckpt_load(root, -1, &again) != PHAX_OK) fz_fail("a run folder loaded once and not twice", phax_error());
        if (again.layout.numel != ck.layout.numel ||
            memcmp(again.params, ck.params, ck.layout.numel * sizeof *ck.params))
            fz_fail("a run folder loaded twice gave other parameters", NULL);
        char *sp = phax_ckpt_state_path(ck.path);
        phax_ckpt_state st;
        if (sp && phax_ckpt_state_load(sp, &ck.layout, &st) == PHAX_OK) phax_ckpt_state_free(&st);
        free(sp);
        phax_ckpt_free(&again);
        phax_ckpt_free(&ck);
    }
    fz_clean();
    return 0;
}
