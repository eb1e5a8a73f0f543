// Atomic file replacement: the one way phax writes an output file.
//
// A temporary file is created beside the target (same folder, so rename() is
// atomic) under an unpredictable name, exclusively and without following a
// symlink (O_CREAT|O_EXCL|O_NOFOLLOW), so whoever can create entries in the
// folder cannot redirect the write. It is written, fsync'd and renamed over
// the target, then the folder is fsync'd so the rename itself is durable.
// Readers see the old file or the complete new one; on any error the temporary
// file is removed and the target is untouched. The file is created with mode
// 0666 minus the umask, like any file a program creates.
//
// Every function returns PHAX_OK or PHAX_ERR with a one-line message that
// starts with the target's path.
#ifndef PHAX_ATOMIC_FILE_H
#define PHAX_ATOMIC_FILE_H

#include <stddef.h>

typedef struct {
    int fd;       // the temporary file, -1 when closed
    char *path;   // the target
    char *tmp;    // the temporary file's path
} phax_atomic_file;

// Create the temporary file for path.
int phax_atomic_begin(phax_atomic_file *f, const char *path);
// Append n bytes (retries short writes and EINTR). On error the file is
// aborted (phax_atomic_commit then only reports it).
int phax_atomic_write(phax_atomic_file *f, const void *p, size_t n);
// fsync, close, rename into place, fsync the folder. Always releases f.
int phax_atomic_commit(phax_atomic_file *f);
// Remove the temporary file and release f (safe on a released f).
void phax_atomic_abort(phax_atomic_file *f);

// The whole file in one call.
int phax_write_file_atomic(const char *path, const void *data, size_t n);

// fsync a folder (so that renames and unlinks in it are durable).
int phax_fsync_dir(const char *dir);
// fsync the folder that holds path.
int phax_fsync_parent(const char *path);

// Fault injection for the kill tests (tests/test_durable.c, kill_at_each_commit_point): with
// PHAX_FAULT_KILL=NAME[:N] in the environment, the N-th (default 1st) time the commit point
// NAME is reached the process kills itself with SIGKILL. Without the variable: nothing. The
// points: atomic:before-rename, atomic:after-rename (every atomic file: logs, caches,
// checkpoint files), gen:files-written, gen:folder-renamed, gen:link-made, gen:current
// (a checkpoint generation, core/checkpoint.c).
void phax_fault_point(const char *name);

// Removes the temporary files a killed writer left in dir (regular files named like
// phax_atomic_begin's, "<name>.tmp-<pid>-" + 12 of [a-z0-9], or an earlier phax's without the
// pid; links and other names are left alone): those whose writer process is gone, and those
// at least min_age_s old (0: all). For a folder only its caller writes (a run folder under its
// lock) min_age_s is 0; a shared one (a cache) keeps a young file of a live writer. The count
// removed.
int phax_atomic_sweep(const char *dir, double min_age_s);

// 12 characters of [a-z0-9] from the kernel's random source, NUL-terminated
// (a temporary name nobody can predict).
void phax_random_name(char out[13]);

#endif
