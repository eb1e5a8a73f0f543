// Harness: the safetensors reader (phax_st_read) on any bytes. A file it accepts
// must convert tensor by tensor, and written back through the writer it must
// read again with the same tensors and metadata (the reader's and the writer's
// ideas of a valid file agree).
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "phax/safetensors.h"

static void roundtrip(const phax_st_file *f) {
    phax_st_writer *w = phax_st_writer_new();
    if (!w) return;
    int rc = PHAX_OK;
    for (int i = 0; i < f->nmeta && !rc; i++) rc = phax_st_add_meta(w, f->meta_key[i], f->meta_val[i]);
    for (int i = 0; i < f->n && !rc; i++) {
        const phax_st_tensor *t = &f->t[i];
        rc = phax_st_add_raw(w, t->name, t->dtype, t->ndim, t->shape, t->data);
    }
    const char *out = fz_path(1, "copy.safetensors");
    if (!rc && phax_st_write(w, out)) fz_fail("a file the reader accepted cannot be written back", phax_error());
    phax_st_writer_free(w);
    if (rc) return;  // the writer may be stricter (e.g. names), not a finding
    phax_st_file g = {0};
    if (phax_st_read(&g, out)) fz_fail("the writer's output is not readable", phax_error());
    if (g.n != f->n || g.nmeta != f->nmeta) fz_fail("round trip changed the counts", NULL);
    for (int i = 0; i < f->n; i++) {
        const phax_st_tensor *a = &f->t[i], *b = phax_st_find(&g, a->name);
        if (!b || b->dtype != a->dtype || b->nbytes != a->nbytes || memcmp(a->data, b->data, a->nbytes))
            fz_fail("round trip changed a tensor", a->name);
    }
    for (int i = 0; i < f->nmeta; i++) {
        const char *v = phax_st_meta(&g, f->meta_key[i]);
        if (!v || strcmp(v, f->meta_val[i])) fz_fail("round trip changed metadata", f->meta_key[i]);
    }
    phax_st_free(&g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_path(0, "in.safetensors");
    fz_write(path, data, size);
    phax_st_file f = {0};
    if (phax_st_read(&f, path) == PHAX_OK) {
        fz_accepted("safetensors file");
        for (int i = 0; i < f.n; i++) {
            const phax_st_tensor *t = &f.t[i];
            if (t->numel > (1u << 20)) continue;  // the reader checked the bytes exist; skip big copies
            void *buf = malloc((t->numel ? t->numel : 1) * 8);
            if (!buf) continue;
            if (phax_st_to_f64(t, buf)) phax_st_to_i64(t, buf);
            phax_st_to_i32(t, buf);
            free(buf);
        }
        roundtrip(&f);
    }
    phax_st_free(&f);
    fz_clean();
    return 0;
}
