// Temporary files for the fuzz harnesses; see fuzz.h.
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "phax/backend.h"
#include "phax/model.h"

int fz_must_refuse;

static char dir[4096];

static void remove_dir(void) {
    if (!dir[0]) return;
    fz_clean();
    rmdir(dir);
}

const char *fz_dir(void) {
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/phax-fuzz.XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(dir)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(remove_dir);
    }
    return dir;
}

const char *fz_path(int slot, const char *name) {
    static char buf[8][4200];
    snprintf(buf[slot & 7], sizeof buf[0], "%s/%s", fz_dir(), name);
    return buf[slot & 7];
}

void fz_write(const char *path, const void *data, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const char *p = data;
    while (fd >= 0 && n) {
        ssize_t k = write(fd, p, n);
        if (k <= 0) break;
        p += k, n -= (size_t)k;
    }
    if (fd < 0 || n || close(fd)) {
        perror(path);
        abort();
    }
}

// Files only, one level below (cache folders get their own subdirectory, removed too).
static void clean_in(const char *d) {
    DIR *D = opendir(d);
    if (!D) return;
    struct dirent *e;
    char p[4600];
    while ((e = readdir(D))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", d, e->d_name);
        if (unlink(p) && rmdir(p)) {
            clean_in(p);
            rmdir(p);
        }
    }
    closedir(D);
}

void fz_clean(void) {
    if (dir[0]) clean_in(dir);
}

void fz_fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz: property violated: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

void fz_split(const uint8_t *data, size_t size, int nparts, const uint8_t **part, size_t *len) {
    size_t hdr = 4 * (size_t)(nparts - 1), pos = hdr < size ? hdr : size;
    for (int i = 0; i < nparts; i++) {
        size_t want = size - pos;
        if (i < nparts - 1 && 4 * (size_t)i + 4 <= size) {
            size_t l = fz_u32(data + 4 * i);
            if (l < want) want = l;
        } else if (i < nparts - 1) {
            want = 0;
        }
        part[i] = data + pos;
        len[i] = want;
        pos += want;
    }
}

void fz_accepted(const char *what) {
    if (fz_must_refuse) fz_fail("an input that must be refused was accepted", what);
}

void fz_check_layout(const void *layout) {
    const phax_layout *L = layout;
    size_t total = 0;
    for (int i = 0; i < L->n; i++) {
        const phax_param_info *p = &L->p[i];
        size_t n = 1;
        for (int k = 0; k < p->ndim; k++) {
            if (p->shape[k] < 1) fz_fail("a layout has a dimension < 1", p->name);
            if (__builtin_mul_overflow(n, (size_t)p->shape[k], &n)) fz_fail("a layout size overflows", p->name);
        }
        if (n != p->numel || p->offset != total) fz_fail("a layout's numel or offset is inconsistent", p->name);
        if (__builtin_add_overflow(total, n, &total)) fz_fail("a layout's total overflows", p->name);
    }
    if (total != L->numel) fz_fail("a layout's total is not the sum of its parameters", NULL);
}

// The backends phax's readers may name (phax train's options: --backend; a run's state). No
// harness links a backend's code, and train_check_numbers only looks a name up, so a pointer
// stands in. Weak: a harness that links src/backend.c gets the real table.
__attribute__((weak)) const phax_backend_ops *phax_backend_find(const char *name) {
    static const phax_backend_ops dummy;
    if (!strcmp(name, "cpu") || !strcmp(name, "ref") || !strcmp(name, "cpu_bf16") || !strcmp(name, "cuda_emu"))
        return &dummy;
    phax_fail("'%s' is not a backend", name);
    return NULL;
}
