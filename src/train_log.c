// phax train's log on --resume: cut back to the checkpoint's step (src/train.h).
#define _GNU_SOURCE  // getline, O_NOFOLLOW, O_CLOEXEC
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "phax/atomic_file.h"
#include "train.h"

// The log's lines of steps ≤ keep_step, the rest dropped (a resume continues after them).
// Streamed line by line into an atomic replacement, so a log of any length resumes (a long
// run logs hundreds of MB; reading it whole under the corpus-file limit refused runs past
// ~200k logged steps). The log is opened without following a link and must be a regular
// file: a symlink planted at OUT/log.jsonl is refused, not read through. A line longer than
// LOG_LINE_MAX (no line phax writes comes near it) is dropped like any line that is not a
// step's record.
#define LOG_LINE_MAX (1 << 20)
void train_log_truncate(const char *path, long keep_step) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return;
        if (errno == ELOOP) die("%s: is a symbolic link, not the run's log (remove it to resume)", path);
        die("%s: cannot open the log: %s", path, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        close(fd);
        die("%s: is not a regular file, not the run's log (remove it to resume)", path);
    }
    FILE *in = fdopen(fd, "r");
    if (!in) {
        close(fd);
        die("out of memory");
    }
    phax_atomic_file out;
    if (phax_atomic_begin(&out, path)) {
        fclose(in);
        die_lib();
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int failed = 0;
    while (!failed && (len = getline(&line, &cap, in)) >= 0) {
        size_t n = (size_t)len;
        if (n && line[n - 1] == '\n') n--;
        if (n > LOG_LINE_MAX) continue;
        json_t *j = json_loadb(line, n, 0, NULL);
        json_t *st = j ? json_object_get(j, "step") : NULL;
        if (st && json_is_integer(st) && json_integer_value(st) <= keep_step) {
            line[n] = '\n';
            failed = phax_atomic_write(&out, line, n + 1) != PHAX_OK;
        }
        json_decref(j);
    }
    int read_error = ferror(in);
    free(line);
    fclose(in);
    if (failed) die_lib();
    if (read_error) {
        phax_atomic_abort(&out);
        die("%s: cannot read the log", path);
    }
    if (phax_atomic_commit(&out)) die_lib();
}

