// Atomic file replacement; see include/phax/atomic_file.h.
#define _GNU_SOURCE  // O_NOFOLLOW, O_CLOEXEC, O_DIRECTORY
#include "phax/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "phax/core.h"

void phax_random_name(char out[13]) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    static atomic_uint_fast64_t counter;
    uint64_t r[2] = {0, 0};
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        // No kernel randomness (very early boot): the name is then only unique;
        // O_EXCL still refuses anything planted under it.
        r[0] = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^ (uint64_t)(phax_clock() * 1e9);
        r[1] = atomic_fetch_add(&counter, 1) * 0xBF58476D1CE4E5B9ull;
    }
    for (int i = 0; i < 12; i++) {
        uint64_t *w = &r[i & 1];
        out[i] = al[*w % 36];
        *w /= 36;
    }
    out[12] = '\0';
}

int phax_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return phax_fail("%s: cannot open the folder to sync it: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    // Some file systems cannot sync a folder (EINVAL): nothing more can be done there.
    if (rc != 0 && e != EINVAL) return phax_fail("%s: fsync of the folder failed: %s", dir, strerror(e));
    return PHAX_OK;
}

int phax_fsync_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return phax_fail("%s: out of memory", path);
    int rc = phax_fsync_dir(dir);
    free(dir);
    return rc;
}

static void release(phax_atomic_file *f) {
    free(f->path), free(f->tmp);
    f->path = f->tmp = NULL;
    f->fd = -1;
}

void phax_atomic_abort(phax_atomic_file *f) {
    if (!f) return;
    if (f->fd >= 0) {
        close(f->fd);
        if (f->tmp) unlink(f->tmp);
    }
    release(f);
}

int phax_atomic_begin(phax_atomic_file *f, const char *path) {
    if (!f) return phax_fail("phax_atomic_begin: NULL argument");
    f->fd = -1, f->path = f->tmp = NULL;
    if (!path || !*path) return phax_fail("phax_atomic_begin: empty path");
    size_t n = strlen(path) + 48;
    f->path = strdup(path), f->tmp = malloc(n);
    if (!f->path || !f->tmp) {
        release(f);
        return phax_fail("%s: out of memory", path);
    }
    int e = EEXIST;
    for (int tries = 0; tries < 100 && f->fd < 0 && e == EEXIST; tries++) {
        char r[13];
        phax_random_name(r);
        // The writer's pid in the name lets phax_atomic_sweep tell a dead writer's leftover from
        // a live writer's file in a shared folder; the random part keeps it unpredictable.
        snprintf(f->tmp, n, "%s.tmp-%ld-%s", path, (long)getpid(), r);
        // 0666: the kernel applies the umask, as for any file a program creates.
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        e = errno;
    }
    if (f->fd < 0) {
        phax_fail("%s: cannot create a temporary file beside it: %s", path, strerror(e));
        release(f);
        return PHAX_ERR;
    }
    return PHAX_OK;
}

int phax_atomic_write(phax_atomic_file *f, const void *p, size_t n) {
    if (!f || f->fd < 0) return phax_fail("phax_atomic_write: file not open");
    const uint8_t *b = p;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(f->fd, b + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            phax_fail("%s: write error (%s): %s", f->path, f->tmp, strerror(e));
            phax_atomic_abort(f);
            return PHAX_ERR;
        }
        done += (size_t)w;
    }
    return PHAX_OK;
}

void phax_fault_point(const char *name) {
    static const char *want;  // PHAX_FAULT_KILL=NAME[:N], read once
    static long nth = 1, seen;
    static int read_env;
    if (!read_env) {
        read_env = 1;
        const char *e = getenv("PHAX_FAULT_KILL");
        if (e && *e) {
            static char buf[128];
            snprintf(buf, sizeof buf, "%s", e);
            char *colon = strrchr(buf, ':');
            if (colon && colon[1] >= '0' && colon[1] <= '9') nth = strtol(colon + 1, NULL, 10), *colon = 0;
            want = buf;
        }
    }
    if (want && !strcmp(want, name) && ++seen == nth) raise(SIGKILL);
}

int phax_atomic_commit(phax_atomic_file *f) {
    if (!f || f->fd < 0) {
        if (f) release(f);
        return phax_fail("phax_atomic_commit: file not open (an earlier write failed)");
    }
    if (fsync(f->fd) != 0) {
        phax_fail("%s: fsync of %s failed: %s", f->path, f->tmp, strerror(errno));
        phax_atomic_abort(f);
        return PHAX_ERR;
    }
    int rc = close(f->fd);
    f->fd = -1;
    if (rc != 0) {
        phax_fail("%s: closing %s failed: %s", f->path, f->tmp, strerror(errno));
        unlink(f->tmp);
        release(f);
        return PHAX_ERR;
    }
    phax_fault_point("atomic:before-rename");
    if (rename(f->tmp, f->path) != 0) {
        phax_fail("%s: cannot rename %s into place: %s", f->path, f->tmp, strerror(errno));
        unlink(f->tmp);
        release(f);
        return PHAX_ERR;
    }
    phax_fault_point("atomic:after-rename");
    // The file is in place; a folder that cannot be synced only weakens durability.
    (void)phax_fsync_parent(f->path);
    release(f);
    return PHAX_OK;
}

int phax_write_file_atomic(const char *path, const void *data, size_t n) {
    if (!path || (!data && n)) return phax_fail("phax_write_file_atomic: NULL argument");
    phax_atomic_file f;
    if (phax_atomic_begin(&f, path) || phax_atomic_write(&f, data, n)) return PHAX_ERR;
    return phax_atomic_commit(&f);
}

// "<anything>.tmp-<pid>-" + 12 of [a-z0-9]: the names phax_atomic_begin makes (and
// "<anything>.tmp-" + 12, an earlier phax's, pid 0: unknown). Returns 1 and the pid, or 0.
static int is_temp_name(const char *name, long *pid) {
    size_t n = strlen(name);
    if (n < 5 + 12 + 1) return 0;
    const char *r = name + n - 12;
    for (int i = 0; i < 12; i++)
        if (!((r[i] >= 'a' && r[i] <= 'z') || (r[i] >= '0' && r[i] <= '9'))) return 0;
    if (!memcmp(r - 5, ".tmp-", 5)) {
        *pid = 0;
        return 1;
    }
    if (r[-1] != '-') return 0;
    const char *d = r - 1;  // digits of the pid before it, then ".tmp-"
    while (d > name && d[-1] >= '0' && d[-1] <= '9') d--;
    if (d == r - 1 || d - name < 5 || memcmp(d - 5, ".tmp-", 5)) return 0;
    *pid = strtol(d, NULL, 10);
    return 1;
}

int phax_atomic_sweep(const char *dir, double min_age_s) {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return 0;  // no folder (or a link to one): nothing of ours to sweep
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return 0;
    }
    int removed = 0;
    time_t now = time(NULL);
    for (struct dirent *e; (e = readdir(d));) {
        long pid;
        if (!is_temp_name(e->d_name, &pid)) continue;
        struct stat sb;
        if (fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) || !S_ISREG(sb.st_mode)) continue;
        // Young enough that a live writer may own it: kept, unless its writer is gone.
        int writer_gone = pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
        if (min_age_s > 0 && difftime(now, sb.st_mtime) < min_age_s && !writer_gone) continue;
        removed += unlinkat(dfd, e->d_name, 0) == 0;
    }
    closedir(d);
    if (removed) phax_fsync_dir(dir);
    return removed;
}
