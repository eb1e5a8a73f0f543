// Replay driver: runs one harness (linked in: LLVMFuzzerTestOneInput) over
// files and directories, each input in its own child process, and prints one
// line per input with its verdict:
//   ok    the harness returned and the process exited cleanly
//   FAIL  crash (a signal), error report (ASan or UBSan: exit status 1), leak (LeakSanitizer),
//         cpu (more than PHAX_FUZZ_CPU_S seconds of CPU, default 5),
//         memory (live heap above the bound, or peak RSS above bound + 256 MB).
// The memory bound is issue 11's: an input may use PHAX_FUZZ_HEAP_MB (default
// 100) MB of heap beyond 16 bytes per input byte (its valid contents). Under
// AddressSanitizer the live heap is tracked exactly with its malloc/free hooks
// (so an over-large allocation fails at once, before it is touched); without
// it, RLIMIT_AS holds the child to the bound plus a margin.
// Exit status 0 when every input is ok; 1 otherwise (the failing inputs are
// listed again at the end); 2 on a usage error or an unreadable path.
// --expect-fail (the replay's own tests): exit 0 only when every input FAILs.
#define _DEFAULT_SOURCE
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <ftw.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

#if defined(__SANITIZE_ADDRESS__)
#define REPLAY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REPLAY_ASAN 1
#endif
#endif

#define MAX_LISTED 4096
#define EXIT_MEMORY 86  // the child's exit status when its heap went over the bound

#ifdef REPLAY_ASAN
// From the sanitizer runtime's allocator interface (gcc ships no header for it).
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));
size_t __sanitizer_get_allocated_size(const volatile void *p);

// Match a normal malloc, which returns NULL for an impossible size (the code
// under test must handle it), and keep ASan's quarantine small so that the
// RSS reflects what the code holds.
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "allocator_may_return_null=1:detect_leaks=1:quarantine_size_mb=16";
}
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "halt_on_error=1:print_stacktrace=1"; }

// Signed: a block allocated before the fork and freed after it makes the
// count dip below zero, which is harmless.
static long long heap_live, heap_peak, heap_bound;
static long long *heap_peak_shared;  // the child's peak, read by the parent

static void on_malloc(const volatile void *p, size_t n) {
    (void)p;
    heap_live += (long long)n;
    if (heap_live > heap_peak) heap_peak = *heap_peak_shared = heap_live;
    if (heap_bound && heap_live > heap_bound) {
        char msg[200];
        int k = snprintf(msg, sizeof msg,
                         "replay: live heap %.1f MB after an allocation of %.1f MB exceeds the bound %.1f MB\n",
                         (double)heap_live / 1e6, (double)n / 1e6, (double)heap_bound / 1e6);
        if (write(2, msg, (size_t)k) < 0) {}
        _exit(EXIT_MEMORY);
    }
}
static void on_free(const volatile void *p) {
    if (p) heap_live -= (long long)__sanitizer_get_allocated_size(p);
}
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static double env_num(const char *name, double def) {
    const char *s = getenv(name);
    char *end;
    double x = s && *s ? strtod(s, &end) : def;
    return s && *s && *end ? def : x;
}

static const char *harness, *root;
// The children's TMPDIR, emptied after each input: a child that crashes cannot
// clean up its temporary files itself.
static char child_tmp[4096];

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag;
    if (ftw->level > 0) remove(p);
    return 0;
}
static char **failed;
static int nfailed, ninputs;

// Path as printed: relative to PHAX_SOURCE_ROOT when under it.
static const char *shown(const char *p) {
    size_t n = root ? strlen(root) : 0;
    if (n && !strncmp(p, root, n) && p[n] == '/') return p + n + 1;
    return p;
}

static int read_all(const char *path, uint8_t **out, size_t *n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    size_t cap = (size_t)sb.st_size + 1, len = 0;
    uint8_t *b = malloc(cap);
    ssize_t k = 1;
    while (b && len < cap && (k = read(fd, b + len, cap - len)) > 0) len += (size_t)k;
    close(fd);
    if (!b || k < 0) {
        free(b);
        return -1;
    }
    *out = b, *n = len;
    return 0;
}

static void run_one(const char *path) {
    uint8_t *data;
    size_t n;
    ninputs++;
    if (read_all(path, &data, &n)) {
        printf("FAIL  %-11s %s: cannot read (%s)\n", harness, shown(path), strerror(errno));
        if (nfailed < MAX_LISTED) failed[nfailed] = strdup(path);
        nfailed++;
        return;
    }
    double cpu_s = env_num("PHAX_FUZZ_CPU_S", 5);
    size_t bound = (size_t)(env_num("PHAX_FUZZ_HEAP_MB", 100) * 1e6) + 16 * n;
    fflush(stdout);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("replay: fork");
        exit(2);
    }
    if (pid == 0) {
        struct rlimit cpu = {(rlim_t)(cpu_s + 0.999), (rlim_t)(cpu_s + 2)};
        setrlimit(RLIMIT_CPU, &cpu);
        alarm((unsigned)(4 * cpu_s + 10));  // blocked, not computing
#ifdef REPLAY_ASAN
        heap_live = heap_peak = *heap_peak_shared = 0;
        heap_bound = (long long)bound;
        __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
#else
        // Address space: the bound, plus room for the program and its libraries.
        struct rlimit as = {bound + (256u << 20), bound + (256u << 20)};
        setrlimit(RLIMIT_AS, &as);
#endif
        setenv("TMPDIR", child_tmp, 1);
        const char *base = strrchr(path, '/');
        fz_must_refuse = strstr(base ? base + 1 : path, ".refuse") != NULL;
        LLVMFuzzerTestOneInput(data, n);
        exit(0);  // atexit: the harness's temporary directory; LeakSanitizer's check
    }
    free(data);
    int st;
    struct rusage ru;
    while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR) {}
    nftw(child_tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    double cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                 (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    double rss_mb = (double)ru.ru_maxrss / 1e3;  // kB
    char heap[40] = "";
#ifdef REPLAY_ASAN
    snprintf(heap, sizeof heap, ", heap peak %.1f MB", (double)*heap_peak_shared / 1e6);
#endif
    char why[160] = "";
    if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        if (sig == SIGXCPU || (sig == SIGKILL && cpu >= cpu_s)) snprintf(why, sizeof why, "cpu: over %.0f s", cpu_s);
        else if (sig == SIGALRM) snprintf(why, sizeof why, "time: blocked for %.0f s", wall);
        else if (sig == SIGABRT) snprintf(why, sizeof why, "abort (a report or a violated property above)");
        else snprintf(why, sizeof why, "crash: signal %d (%s)", sig, strsignal(sig));
    } else if (WEXITSTATUS(st) == EXIT_MEMORY) {
        snprintf(why, sizeof why, "memory: heap over %.0f MB", bound / 1e6);
    } else if (WEXITSTATUS(st) == 23) {
        snprintf(why, sizeof why, "leak (LeakSanitizer)");
    } else if (WEXITSTATUS(st) == 1) {
        snprintf(why, sizeof why, "error report (see above)");
    } else if (WEXITSTATUS(st)) {
        snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(st));
    } else if (cpu > cpu_s) {  // RLIMIT_CPU counts whole seconds
        snprintf(why, sizeof why, "cpu: %.2f s over %.2f s", cpu, cpu_s);
    } else if (rss_mb > bound / 1e6 + 256) {
        snprintf(why, sizeof why, "memory: peak RSS %.0f MB over %.0f MB", rss_mb, bound / 1e6 + 256);
    }
    printf("%-4s  %-11s %s  (%.2f s cpu, %.0f MB rss%s)%s%s\n", why[0] ? "FAIL" : "ok", harness, shown(path), cpu,
           rss_mb, heap, why[0] ? "  " : "", why);
    if (why[0]) {
        if (nfailed < MAX_LISTED) failed[nfailed] = strdup(path);
        nfailed++;
    }
}

static int skip_name(const char *name) {
    return name[0] == '.' || !strcmp(name, "README.md");
}

static int run_path(const char *path) {
    struct stat sb;
    if (stat(path, &sb)) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        run_one(path);
        return 0;
    }
    struct dirent **ents;
    int k = scandir(path, &ents, NULL, alphasort);
    if (k < 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < k; i++) {
        if (!skip_name(ents[i]->d_name)) {
            size_t len = strlen(path) + strlen(ents[i]->d_name) + 2;
            char *p = malloc(len);
            if (!p) exit(2);
            size_t k0 = strlen(path);
            snprintf(p, len, "%.*s/%s", (int)(k0 > 1 && path[k0 - 1] == '/' ? k0 - 1 : k0), path, ents[i]->d_name);
            if (run_path(p)) rc = -1;
            free(p);
        }
        free(ents[i]);
    }
    free(ents);
    return rc;
}

int main(int argc, char **argv) {
    // Meson's should_fail would do, but tests/run.sh counts only "OK" results as passed.
    int expect_fail = argc > 1 && !strcmp(argv[1], "--expect-fail");
    if (expect_fail) argc--, argv++;
    if (argc < 3) {
        fprintf(stderr, "usage: %s [--expect-fail] HARNESS-NAME FILE|DIR...\n", argv[0]);
        return 2;
    }
    harness = argv[1];
    root = getenv("PHAX_SOURCE_ROOT");
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
#ifdef REPLAY_ASAN
    heap_peak_shared = mmap(NULL, sizeof *heap_peak_shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (heap_peak_shared == MAP_FAILED) {
        perror("replay: mmap");
        return 2;
    }
#endif
    failed = calloc(MAX_LISTED, sizeof *failed);
    const char *t = getenv("TMPDIR");
    snprintf(child_tmp, sizeof child_tmp, "%s/phax-replay.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(child_tmp)) {
        perror("replay: mkdtemp");
        return 2;
    }
    int rc = 0;
    for (int i = 2; i < argc; i++)
        if (run_path(argv[i])) rc = 2;
    rmdir(child_tmp);
    printf("replay %s: %d inputs, %d failed\n", harness, ninputs, nfailed);
    for (int i = 0; i < nfailed && i < MAX_LISTED; i++) printf("  failed: %s\n", shown(failed[i]));
    if (ninputs == 0) {
        fprintf(stderr, "replay: no inputs found\n");
        rc = 2;
    }
    if (expect_fail && !rc) {
        printf("replay %s: expected every input to fail: %s\n", harness,
               nfailed == ninputs ? "they did" : "some did not");
        return nfailed == ninputs ? 0 : 1;
    }
    return rc ? rc : nfailed ? 1 : 0;
}
