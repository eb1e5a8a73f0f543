// The CUDA execution-model emulator (fast/cuda/emu/cuda_emu.h; docs/cuda.md).
//
// Scheduler. A launch runs its blocks one after another. A block's threads are fibers
// whose stacks are allocated once (mmap, a guard page below each) and reused by every
// block of every launch. A switch is ucontext's swapcontext, or on x86-64 by default a
// twelve-instruction switch of the callee-saved registers (below): glibc's swapcontext
// makes a sigprocmask system call per switch, which made the rmsnorm tests ~50x slower
// (PHAX_CUDA_EMU_SWITCH=ucontext selects it anyway).
//
// The threads of a block are ranked by an order (forward 0, 1, ...: the default; reverse;
// a seeded shuffle, drawn again at every barrier), and the runnable thread ranked first
// always runs, until it yields:
//   * at __syncthreads: it waits; when no thread is runnable and every thread of the block
//     waits at the same __syncthreads (file and line), all are released. Anything else (a
//     thread exited, or waits at another __syncthreads or at a warp operation) is an error.
//   * at a warp operation (shuffle, vote, __syncwarp): it records its operation, mask and
//     value; when the last lane named in the mask arrives, the scheduler computes every
//     lane's result at once (so no lane can overwrite its value before the others read
//     it) and releases them. A lane named in the mask that exited or does not exist, lanes
//     naming different masks or operations: an error.
// So between barriers the first-ranked warp runs as far ahead as it can (through all of its
// shuffles) before a later one moves. With no barrier between a write and a read, the read
// sees the old value (or the poison) when the reader is ranked before the writer: forward
// order exposes "thread t reads what t + s writes" (tree and shuffle-down reductions, warp
// partials read by warp 0), and a warp that runs ahead into the next use of a shared buffer
// while later warps still have to read it (a missing barrier before the reuse); reverse
// order exposes "t reads t − s" (scans); the shuffle both, with high probability. Reverse
// alone hides a missing barrier inside a tree reduction's loop (the higher threads, which
// the lower ones read, finish their loop first). The tests run the kernels in all three
// orders and require identical bits.
// Shared memory is filled with 0xFF bytes before every block (static: the whole section
// phax_emu_smem; dynamic: the launch's buffer), device memory when cudaMalloc'd.
#include "cuda_emu.h"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "phax/fcuda.h"

#if defined(__SANITIZE_ADDRESS__)
#define PHAX_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PHAX_EMU_ASAN 1
#endif
#endif
#ifdef PHAX_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// The static shared arrays' section: its bounds come from the linker. One byte of it here,
// so the section exists in every binary that links the emulator.
__attribute__((section("phax_emu_smem"), used)) static char smem_anchor[16];
extern "C" char __start_phax_emu_smem[] __attribute__((weak));
extern "C" char __stop_phax_emu_smem[] __attribute__((weak));

namespace phax_emu {

uint3 cur_threadIdx, cur_blockIdx;
dim3 cur_blockDim, cur_gridDim;

namespace {

constexpr int MAX_THREADS = 1024;
#ifdef PHAX_EMU_ASAN
constexpr size_t STACK_BYTES = 1u << 20;  // ASan's redzones make frames larger
#else
constexpr size_t STACK_BYTES = 256u << 10;
#endif
constexpr size_t MAX_DYN_SMEM = 48u << 10;  // without cudaFuncSetAttribute's opt-in

enum fstate { F_RUN, F_SYNC, F_WARP, F_DONE };

struct fiber {
    ucontext_t ctx;  // the ucontext switch
    void *sp;        // the x86-64 switch: the saved stack pointer
    char *stack;  // STACK_BYTES usable, a guard page below
    fstate st;
    uint3 tid;
    // the barrier or warp operation it waits at
    const char *file;
    int line;
    warp_kind wk;
    unsigned mask;
    uint64_t val, result;
    int arg, width;
    void *fake_stack;  // ASan's
};

struct launch_state {
    const char *name;
    dim3 grid, block;
    void (*thunk)(void *);
    void *ctx;
    int nthreads;
    uint3 bid;
    void *dyn;
    size_t dyn_bytes;
    bool failed;
};

fiber fibers[MAX_THREADS];
int nstacks;  // stacks allocated so far (fibers[0 .. nstacks))
ucontext_t sched_ctx;
void *sched_sp;
bool use_ucontext = true;
fiber *running;
launch_state L;
bool in_launch;
int order_mode = PHAX_CUDA_EMU_FORWARD;
uint64_t order_seed = 1;
int order_env_read;
int switch_env_read;
#ifdef PHAX_EMU_ASAN
void *sched_fake;
const void *main_stack_bottom;
size_t main_stack_size;
#endif

cudaError_t last_error = cudaSuccess;
char last_detail[512];
cudaError_t detail_code = cudaSuccess;  // the code last_detail describes

cudaError_t record(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cudaError_t record(cudaError_t e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_detail, sizeof last_detail, fmt, ap);
    va_end(ap);
    last_error = detail_code = e;
    fprintf(stderr, "cuda-emu: %s\n", last_detail);
    return e;
}

// A kernel error: recorded once per launch, the block abandoned.
void kernel_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void kernel_error(const char *fmt, ...) {
    if (L.failed) return;
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    record(cudaErrorLaunchFailure, "kernel %s, block (%u,%u,%u): %s", L.name, L.bid.x, L.bid.y,
           L.bid.z, msg);
    L.failed = true;
}

// --- fibers --------------------------------------------------------------------------------------
bool ensure_stacks(int n) {
    long pg = sysconf(_SC_PAGESIZE);
    for (; nstacks < n; nstacks++) {
        size_t total = STACK_BYTES + (size_t)pg;
        void *m = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (m == MAP_FAILED) return false;
        mprotect(m, (size_t)pg, PROT_NONE);  // overflow faults instead of corrupting a neighbour
        fibers[nstacks].stack = static_cast<char *>(m) + pg;
    }
    return true;
}

#if defined(__x86_64__)
// phax_emu_switch(save, to): saves the callee-saved registers, MXCSR and the x87 control word
// on the current stack, stores the stack pointer in *save, and resumes the stack `to`
// (saved the same way, or laid out so by new_stack).
extern "C" void phax_emu_switch(void **save, void *to);
__asm__(
    ".text\n"
    ".p2align 4\n"
    ".hidden phax_emu_switch\n"
    ".globl phax_emu_switch\n"
    ".type phax_emu_switch, @function\n"
    "phax_emu_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    fnstcw 4(%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    ldmxcsr (%rsp)\n"
    "    fldcw 4(%rsp)\n"
    "    addq $8, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size phax_emu_switch, .-phax_emu_switch\n");
constexpr bool have_fast_switch = true;
#else
constexpr bool have_fast_switch = false;
#endif

void fiber_main();

// The x86-64 switch's first resume of a fiber pops these and "returns" into fiber_main with
// the stack aligned as after a call: [csr][r15 r14 r13 r12 rbx rbp][fiber_main][0] below top.
void *new_stack(char *stack) {
    uintptr_t top = ((uintptr_t)stack + STACK_BYTES) & ~(uintptr_t)15;
    uint64_t *p = reinterpret_cast<uint64_t *>(top - 72);
    uint32_t csr[2] = {0, 0};
#if defined(__x86_64__)
    __asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(csr[0]), "=m"(csr[1]));
#endif
    std::memcpy(&p[0], csr, sizeof csr);
    for (int k = 1; k <= 6; k++) p[k] = 0;
    p[7] = (uint64_t)(uintptr_t)&fiber_main;
    p[8] = 0;
    return p;
}

void read_switch_env() {
    if (switch_env_read) return;
    switch_env_read = 1;
    const char *e = getenv("PHAX_CUDA_EMU_SWITCH");
    use_ucontext = !have_fast_switch || (e && !strcmp(e, "ucontext"));
}

void set_builtins(const fiber *f) {
    cur_threadIdx = f->tid;
    cur_blockIdx = L.bid;
}

// Into the fiber (scheduler side) and back out (fiber side).
__attribute__((noinline)) void switch_to(fiber *f) {
    running = f;
    set_builtins(f);
#ifdef PHAX_EMU_ASAN
    __sanitizer_start_switch_fiber(&sched_fake, f->stack, STACK_BYTES);
#endif
#if defined(__x86_64__)
    if (!use_ucontext)
        phax_emu_switch(&sched_sp, f->sp);
    else
#endif
        swapcontext(&sched_ctx, &f->ctx);
#ifdef PHAX_EMU_ASAN
    __sanitizer_finish_switch_fiber(sched_fake, nullptr, nullptr);
#endif
    running = nullptr;
}

void fiber_entered(fiber *f) {
#ifdef PHAX_EMU_ASAN
    __sanitizer_finish_switch_fiber(f->fake_stack, &main_stack_bottom, &main_stack_size);
#else
    (void)f;
#endif
}

__attribute__((noinline)) void yield_to_scheduler(fiber *f) {
#ifdef PHAX_EMU_ASAN
    __sanitizer_start_switch_fiber(&f->fake_stack, main_stack_bottom, main_stack_size);
#endif
#if defined(__x86_64__)
    if (!use_ucontext)
        phax_emu_switch(&f->sp, sched_sp);
    else
#endif
        swapcontext(&f->ctx, &sched_ctx);
    fiber_entered(f);
}

void fiber_main() {
    fiber *f = running;
    fiber_entered(f);
    L.thunk(L.ctx);
    f->st = F_DONE;
#ifdef PHAX_EMU_ASAN
    __sanitizer_start_switch_fiber(nullptr, main_stack_bottom, main_stack_size);  // this fiber ends
#endif
#if defined(__x86_64__)
    if (!use_ucontext) {
        phax_emu_switch(&f->sp, sched_sp);  // never resumed
        __builtin_unreachable();
    }
#endif
    // returns to uc_link (the scheduler)
}

fiber *current(const char *what) {
    if (!running) {
        record(cudaErrorLaunchFailure, "%s called outside a kernel", what);
        abort();  // a programming error of the emulated code itself, not a kernel's
    }
    return running;
}

// --- order ---------------------------------------------------------------------------------------
uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void read_order_env() {
    if (order_env_read) return;
    order_env_read = 1;
    const char *e = getenv("PHAX_CUDA_EMU_ORDER");
    if (!e || !*e) return;
    if (!strcmp(e, "forward")) order_mode = PHAX_CUDA_EMU_FORWARD;
    else if (!strcmp(e, "reverse")) order_mode = PHAX_CUDA_EMU_REVERSE;
    else if (!strncmp(e, "shuffle", 7)) {
        order_mode = PHAX_CUDA_EMU_SHUFFLE;
        if (e[7] == ':') order_seed = strtoull(e + 8, nullptr, 10);
    } else
        fprintf(stderr, "cuda-emu: PHAX_CUDA_EMU_ORDER=%s not known (forward, reverse, shuffle[:seed]); forward\n", e);
}

void make_order(int *ord, int n, uint64_t *rng) {
    for (int i = 0; i < n; i++) ord[i] = order_mode == PHAX_CUDA_EMU_REVERSE ? n - 1 - i : i;
    if (order_mode == PHAX_CUDA_EMU_SHUFFLE)
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(splitmix(rng) % (uint64_t)(i + 1));
            int t = ord[i];
            ord[i] = ord[j];
            ord[j] = t;
        }
}

// --- warps ---------------------------------------------------------------------------------------
const char *warp_name(warp_kind k) {
    static const char *n[] = {"__syncwarp", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                              "__shfl_xor_sync", "__ballot_sync", "__any_sync", "__all_sync"};
    return n[k];
}

// The warp of fiber index i: fibers [w0, w0 + nl).
void warp_of(int i, int *w0, int *nl) {
    *w0 = i & ~31;
    *nl = L.nthreads - *w0 < 32 ? L.nthreads - *w0 : 32;
}

// Called when fiber i arrived at a warp operation: completes it if every lane is there
// (true: the lanes of the mask are runnable again).
bool try_complete_warp(int i) {
    fiber *f = &fibers[i];
    int w0, nl;
    warp_of(i, &w0, &nl);
    unsigned mask = f->mask;
    int lane_i = i - w0;
    if (!(mask >> lane_i & 1u)) {
        kernel_error("thread %d calls %s (line %d) with a mask 0x%08x that does not name its own lane %d",
                     i, warp_name(f->wk), f->line, mask, lane_i);
        return false;
    }
    for (int l = 0; l < 32; l++) {
        if (!(mask >> l & 1u)) continue;
        if (l >= nl) {
            kernel_error("thread %d: %s (line %d) mask 0x%08x names lane %d, which does not exist (%d threads in the block)",
                         i, warp_name(f->wk), f->line, mask, l, L.nthreads);
            return false;
        }
        fiber *g = &fibers[w0 + l];
        if (g->st == F_DONE) {
            kernel_error("thread %d: %s (line %d) mask 0x%08x names lane %d, which has exited",
                         i, warp_name(f->wk), f->line, mask, l);
            return false;
        }
        if (g->st != F_WARP) return false;  // not yet arrived
        if (g->mask != mask || g->wk != f->wk || g->line != f->line || g->file != f->file ||
            g->width != f->width) {
            kernel_error("lanes %d and %d of warp %d meet at different warp operations: %s mask 0x%08x (line %d) and %s mask 0x%08x (line %d)",
                         lane_i, l, w0 / 32, warp_name(f->wk), mask, f->line, warp_name(g->wk),
                         g->mask, g->line);
            return false;
        }
    }
    // Everyone is here: every lane's result, then release.
    uint64_t vote = 0;
    for (int l = 0; l < 32; l++)
        if (mask >> l & 1u) vote |= (fibers[w0 + l].val ? 1ull : 0ull) << l;
    int width = f->width;
    if (width < 1 || width > 32 || (width & (width - 1))) {
        kernel_error("%s (line %d): width %d is not a power of 2 in [1, 32]", warp_name(f->wk), f->line, width);
        return false;
    }
    for (int l = 0; l < 32; l++) {
        if (!(mask >> l & 1u)) continue;
        fiber *g = &fibers[w0 + l];
        int base = l & ~(width - 1), src = l;
        switch (f->wk) {
            case W_SHFL: src = base + ((g->arg % width + width) % width); break;
            case W_SHFL_UP: src = l - g->arg >= base ? l - g->arg : l; break;
            case W_SHFL_DOWN: src = l + g->arg < base + width ? l + g->arg : l; break;
            case W_SHFL_XOR: src = (l ^ g->arg) < base + width ? (l ^ g->arg) : l; break;
            default: break;
        }
        switch (f->wk) {
            case W_SYNC: g->result = 0; break;
            case W_BALLOT: g->result = vote; break;
            case W_ANY: g->result = vote != 0; break;
            case W_ALL: g->result = vote == (uint64_t)mask; break;
            default:
                // A source lane outside the mask (or missing) gives an undefined value: poison.
                g->result = (src >= 0 && src < 32 && (mask >> src & 1u)) ? fibers[w0 + src].val
                                                                          : ~(uint64_t)0;
                break;
        }
    }
    for (int l = 0; l < 32; l++)
        if (mask >> l & 1u) fibers[w0 + l].st = F_RUN;
    return true;
}

// --- one block -----------------------------------------------------------------------------------
void poison_smem() {
    uintptr_t a = (uintptr_t)__start_phax_emu_smem, b = (uintptr_t)__stop_phax_emu_smem;
    if (a && b > a) memset(__start_phax_emu_smem, 0xFF, b - a);
    if (L.dyn) memset(L.dyn, 0xFF, L.dyn_bytes);
}

// Nothing runnable and not every thread done: release a barrier or report why not.
void release_or_fail() {
    int nsync = 0, nwarp = 0, ndone = 0, first_sync = -1, first_warp = -1, first_done = -1;
    for (int i = 0; i < L.nthreads; i++) {
        fiber *f = &fibers[i];
        if (f->st == F_SYNC) nsync++, first_sync = first_sync < 0 ? i : first_sync;
        if (f->st == F_WARP) nwarp++, first_warp = first_warp < 0 ? i : first_warp;
        if (f->st == F_DONE) ndone++, first_done = first_done < 0 ? i : first_done;
    }
    if (nsync == L.nthreads) {
        const fiber *a = &fibers[first_sync];
        for (int i = 0; i < L.nthreads; i++) {
            const fiber *f = &fibers[i];
            if (f->line != a->line || f->file != a->file) {
                kernel_error("__syncthreads divergence: thread %d waits at line %d, thread %d at line %d",
                             first_sync, a->line, i, f->line);
                return;
            }
        }
        for (int i = 0; i < L.nthreads; i++) fibers[i].st = F_RUN;
        return;
    }
    if (nsync && ndone)
        kernel_error("__syncthreads (line %d) not reached by every thread of the block: %d wait, %d exited (thread %d first)",
                     fibers[first_sync].line, nsync, ndone, first_done);
    else if (nsync && nwarp)
        kernel_error("__syncthreads (line %d) reached by %d threads while %d wait at %s (line %d, thread %d)",
                     fibers[first_sync].line, nsync, nwarp, warp_name(fibers[first_warp].wk),
                     fibers[first_warp].line, first_warp);
    else
        kernel_error("deadlock: %d threads wait at warp operations (thread %d at %s, line %d, mask 0x%08x) whose lanes never arrive",
                     nwarp, first_warp, warp_name(fibers[first_warp].wk), fibers[first_warp].line,
                     fibers[first_warp].mask);
}

// (apart: getcontext returns twice, which would make every local of the caller suspect)
__attribute__((noinline)) void init_ucontext(fiber *f) {
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = f->stack;
    f->ctx.uc_stack.ss_size = STACK_BYTES;
    f->ctx.uc_link = &sched_ctx;
    makecontext(&f->ctx, fiber_main, 0);
}

void run_block(uint64_t *rng) {
    static int ord[MAX_THREADS];
    poison_smem();
    int n = L.nthreads;
    for (int i = 0; i < n; i++) {
        fiber *f = &fibers[i];
        f->st = F_RUN;
        f->tid = uint3{(unsigned)i % L.block.x, (unsigned)i / L.block.x % L.block.y,
                       (unsigned)i / (L.block.x * L.block.y)};
        f->fake_stack = nullptr;
        if (use_ucontext)
            init_ucontext(f);
        else
            f->sp = new_stack(f->stack);
    }
    // The runnable thread first in the order runs; no runnable thread comes before ord[k].
    static int pos[MAX_THREADS];
    make_order(ord, n, rng);
    for (int k = 0; k < n; k++) pos[ord[k]] = k;
    int k = 0;
    while (!L.failed) {
        while (k < n && fibers[ord[k]].st != F_RUN) k++;
        if (k < n) {
            int i = ord[k];
            switch_to(&fibers[i]);
#ifdef PHAX_EMU_ASAN
            // A finished fiber's last frames (fiber_main, the switch) never return, so ASan
            // still holds their redzones: clear them before the stack is used again.
            if (fibers[i].st == F_DONE && !use_ucontext) {
                char *lo = static_cast<char *>(fibers[i].sp) - 256, *top = fibers[i].stack + STACK_BYTES;
                __asan_unpoison_memory_region(lo, (size_t)(top - lo));
            }
#endif
            if (fibers[i].st == F_WARP && try_complete_warp(i)) {
                int w0 = i & ~31;  // its lanes run again, the first of them before anyone later
                for (int l = 0; l < 32; l++)
                    if (fibers[i].mask >> l & 1u) k = pos[w0 + l] < k ? pos[w0 + l] : k;
            }
            continue;
        }
        bool all_done = true;
        for (int j = 0; j < n; j++) all_done = all_done && fibers[j].st == F_DONE;
        if (all_done) return;
        release_or_fail();  // a barrier: every thread runnable again, or the launch failed
        if (order_mode == PHAX_CUDA_EMU_SHUFFLE) {
            make_order(ord, n, rng);
            for (int j = 0; j < n; j++) pos[ord[j]] = j;
        }
        k = 0;
    }
    // Abandoned fibers: their stacks are reused as they are; ASan must forget their frames.
#ifdef PHAX_EMU_ASAN
    for (int i = 0; i < n; i++)
        if (fibers[i].st != F_DONE) __asan_unpoison_memory_region(fibers[i].stack, STACK_BYTES);
#endif
}

// --- device memory -------------------------------------------------------------------------------
std::map<uintptr_t, size_t> &allocations() {
    static std::map<uintptr_t, size_t> m;
    return m;
}

// The allocation holding [p, p + n), or false.
bool on_device(const void *p, size_t n) {
    auto &m = allocations();
    uintptr_t a = (uintptr_t)p;
    auto it = m.upper_bound(a);
    if (it == m.begin()) return false;
    --it;
    return a >= it->first && a - it->first <= it->second && n <= it->second - (a - it->first);
}

cudaError_t check_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, const char *fn) {
    if (bytes == 0) return cudaSuccess;
    if (!dst || !src) return record(cudaErrorInvalidValue, "%s: null pointer", fn);
    bool dd = on_device(dst, bytes), sd = on_device(src, bytes);
    switch (kind) {
        case cudaMemcpyHostToDevice:
            if (!dd) return record(cudaErrorInvalidValue, "%s host to device: %zu bytes at the destination are not inside one cudaMalloc allocation", fn, bytes);
            break;
        case cudaMemcpyDeviceToHost:
            if (!sd) return record(cudaErrorInvalidValue, "%s device to host: %zu bytes at the source are not inside one cudaMalloc allocation", fn, bytes);
            break;
        case cudaMemcpyDeviceToDevice:
            if (!dd || !sd) return record(cudaErrorInvalidValue, "%s device to device: %zu bytes at the %s are not inside one cudaMalloc allocation", fn, bytes, dd ? "source" : "destination");
            break;
        case cudaMemcpyHostToHost:
        case cudaMemcpyDefault:
            break;
        default:
            return record(cudaErrorInvalidMemcpyDirection, "%s: direction %d", fn, (int)kind);
    }
    return cudaSuccess;
}

}  // namespace

// --- for the emulated libraries ------------------------------------------------------------------
bool device_range(const void *p, size_t bytes) { return p && on_device(p, bytes); }

cudaError_t record_error(cudaError_t e, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return record(e, "%s", msg);
}

// --- runtime -------------------------------------------------------------------------------------
cudaError_t cudaMalloc(void **p, size_t bytes) {
    if (!p) return record(cudaErrorInvalidValue, "cudaMalloc: null result pointer");
    *p = nullptr;
    if (bytes == 0) return cudaSuccess;
    void *m = malloc(bytes);
    if (!m) return record(cudaErrorMemoryAllocation, "cudaMalloc: %zu bytes: out of memory", bytes);
    memset(m, 0xFF, bytes);  // uninitialised device memory reads as NaN
    allocations()[(uintptr_t)m] = bytes;
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    auto &m = allocations();
    auto it = m.find((uintptr_t)p);
    if (it == m.end()) return record(cudaErrorInvalidDevicePointer, "cudaFree: %p was not returned by cudaMalloc", p);
    m.erase(it);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    cudaError_t e = check_copy(dst, src, bytes, kind, "cudaMemcpy");
    if (e == cudaSuccess && bytes) memmove(dst, src, bytes);
    return e;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
    cudaError_t e = check_copy(dst, src, bytes, kind, "cudaMemcpyAsync");
    if (e == cudaSuccess && bytes) memmove(dst, src, bytes);
    return e;
}

cudaError_t cudaMemset(void *p, int value, size_t bytes) {
    if (bytes == 0) return cudaSuccess;
    if (!on_device(p, bytes))
        return record(cudaErrorInvalidValue, "cudaMemset: %zu bytes at %p are not inside one cudaMalloc allocation", bytes, p);
    memset(p, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t) {
    return cudaMemset(p, value, bytes);
}

struct emu_stream {
    int unused;
};
cudaError_t cudaStreamCreate(cudaStream_t *s) {
    if (!s) return record(cudaErrorInvalidValue, "cudaStreamCreate: null result pointer");
    *s = new emu_stream{0};
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
        case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
        case cudaErrorNoDevice: return "cudaErrorNoDevice";
        case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
        case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e) {
    if (e == cudaSuccess) return "no error";
    // The detail of the error last recorded (the emulator names kernel, block and thread).
    return e == detail_code && last_detail[0] ? last_detail : cudaGetErrorName(e);
}

cudaError_t cudaGetDeviceCount(int *n) {
    if (n) *n = 1;  // the emulated device
    return cudaSuccess;
}

// --- the execution model -------------------------------------------------------------------------
void *dyn_smem(void) {
    current("dynamic shared memory");
    return L.dyn;
}

void syncthreads(const char *file, int line) {
    fiber *f = current("__syncthreads");
    f->st = F_SYNC;
    f->file = file;
    f->line = line;
    yield_to_scheduler(f);
}

uint64_t warp_op(warp_kind k, unsigned mask, uint64_t bits, int arg, int width, const char *file, int line) {
    fiber *f = current(k == W_SYNC ? "__syncwarp" : "a warp operation");
    f->st = F_WARP;
    f->wk = k;
    f->mask = mask;
    f->val = bits;
    f->arg = arg;
    f->width = width;
    f->file = file;
    f->line = line;
    yield_to_scheduler(f);
    return f->result;
}

cudaError_t launch(const char *name, dim3 grid, dim3 block, size_t smem, void (*thunk)(void *), void *ctx) {
    read_order_env();
    read_switch_env();
    if (in_launch || running)
        return record(cudaErrorLaunchFailure, "kernel %s launched from inside a kernel (dynamic parallelism is not emulated)", name);
    uint64_t nt = (uint64_t)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z || nt > MAX_THREADS ||
        block.z > 64 || grid.y > 65535 || grid.z > 65535 || grid.x > 0x7fffffffu)
        return record(cudaErrorInvalidConfiguration, "kernel %s: launch configuration grid (%u,%u,%u) block (%u,%u,%u)",
                      name, grid.x, grid.y, grid.z, block.x, block.y, block.z);
    if (smem > MAX_DYN_SMEM)
        return record(cudaErrorInvalidValue, "kernel %s: %zu bytes of dynamic shared memory (over %zu)", name, smem, MAX_DYN_SMEM);
    if (!ensure_stacks((int)nt)) return record(cudaErrorMemoryAllocation, "kernel %s: no memory for fiber stacks", name);
    L = launch_state{};
    L.name = name, L.grid = grid, L.block = block, L.thunk = thunk, L.ctx = ctx, L.nthreads = (int)nt;
    L.dyn_bytes = smem;
    L.dyn = smem ? malloc(smem) : nullptr;
    if (smem && !L.dyn) return record(cudaErrorMemoryAllocation, "kernel %s: no memory for shared memory", name);
    in_launch = true;
    cur_blockDim = block, cur_gridDim = grid;
    static uint64_t launches;
    uint64_t rng = order_seed * 0x9E3779B97F4A7C15ull + ++launches;
    for (unsigned z = 0; z < grid.z && !L.failed; z++)
        for (unsigned y = 0; y < grid.y && !L.failed; y++)
            for (unsigned x = 0; x < grid.x && !L.failed; x++) {
                L.bid = uint3{x, y, z};
                run_block(&rng);
            }
    free(L.dyn);
    in_launch = false;
    return L.failed ? cudaErrorLaunchFailure : cudaSuccess;
}

}  // namespace phax_emu

// --- C controls (phax/fcuda.h) ---------------------------------------------------------------------
extern "C" void phax_cuda_emu_set_order(int mode, uint64_t seed) {
    phax_emu::read_order_env();
    phax_emu::order_mode = mode;
    phax_emu::order_seed = seed;
}
extern "C" int phax_cuda_emu_use_ucontext(int on) {
    phax_emu::read_switch_env();
    if (phax_emu::in_launch) return -1;
    phax_emu::use_ucontext = on || !phax_emu::have_fast_switch;
    return phax_emu::use_ucontext;
}
extern "C" int phax_cuda_emu_order(void) {
    phax_emu::read_order_env();
    return phax_emu::order_mode;
}
