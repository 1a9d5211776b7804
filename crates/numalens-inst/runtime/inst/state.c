/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file state.c
 * @brief Setting up the instrumentation runtime and its per-thread state; the slow paths.
 *
 * Every thread starts on one shared, inactive state; its first access gives it its own state.
 * When recording (NUMALENS_DIR and NUMALENS_INST set) that state has files; otherwise it only
 * stops the hooks early, so an instrumented program run on its own pays about the hooks' floor
 * cost, and its threads share no cache line. Nothing here calls
 * malloc or stdio: memory comes from mmap, so hooks are safe inside the allocator and before
 * libc is fully set up.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "inst.h"
#include "numalens_fd.h"
#include "sample_rate.h"

/* The runtime's globals live in a section of their own, outside .data and .bss: numalens lists
 * a program's statics as its data objects, and these are numalens' own (the program's small
 * statics beside them would be counted to them). */
#define NL_INST_STATE __attribute__((section("numalens_inst_state")))
NL_INST_STATE struct nl_iglobal nl_ig;
/* The limits lock of numalens_fd.h: the preload runtime's when it is loaded (a weak reference, so
 * that the program runs without it), else this runtime's own. */
extern _Atomic int numalens_limits_holder __attribute__((weak, visibility("default")));
/* Threads that could not make their files, counted where the preload runtime reads it. */
extern uint32_t numalens_inst_uncounted __attribute__((weak, visibility("default")));
/* The preload runtime's flush mark (core.c), when it is loaded. */
extern void numalens_flush_mark(void) __attribute__((weak, visibility("default")));
/* A sampling thread has its event log marked at most this often: the recorder can then attribute
 * its samples while the program runs, about this far behind. */
#define NL_MARK_EVERY_NS 100000000ull
NL_INST_STATE static _Atomic int nl_limits_holder_alone;

_Atomic int *nl_fd_limits_word(void)
{
    return &numalens_limits_holder ? &numalens_limits_holder : &nl_limits_holder_alone;
}
/* With the countdown spent, a thread's first access takes the slow path and gets its own state. */
NL_INST_STATE struct nl_ithread nl_inactive = {.shared = 1};
__thread struct nl_ithread *nl_ith __attribute__((tls_model("initial-exec"))) = &nl_inactive;
__thread unsigned nl_fast __attribute__((tls_model("initial-exec"))) = NL_FAST_SAMPLE;
__thread int64_t nl_countdown_read __attribute__((tls_model("initial-exec")));
__thread int64_t nl_countdown_write __attribute__((tls_model("initial-exec")));

static void nl_countdowns_set(int64_t v)
{
    nl_countdown_read = v;
    nl_countdown_write = v;
}

/* Back to the state every thread starts with (after its exit, or in a forked child). */
static void nl_fast_reset(void)
{
    nl_ith = &nl_inactive;
    nl_countdowns_set(0);
    nl_fast = NL_FAST_SAMPLE;
}
/* Set once the thread's state was released at its exit: later accesses go to the sink. */
static __thread int nl_ith_done __attribute__((tls_model("initial-exec")));
NL_INST_STATE static pthread_key_t nl_exit_key;
NL_INST_STATE static uint32_t nl_seq;
/* The threads that sampled lately: the rate cap is shared among them (sample_rate.h). */
NL_INST_STATE static struct nl_rate_activity nl_activity;

/* Memory comes straight from the kernel: the preloaded allocation runtime interposes mmap, and
 * the hooks' own tables are not the program's objects. */
static void *nl_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    return (r < 0 && r > -4096) ? MAP_FAILED : (void *)r;
}

static void nl_sys_munmap(void *addr, size_t len) { syscall(SYS_munmap, addr, len); }

/* Marks the binary as built for this runtime; `numalens record` looks for the section. */
__attribute__((used, section("numalens_inst"))) static const char nl_abi_marker[16] =
    "numalens-inst-1";

uint64_t nl_inst_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nl_tlb_clear(struct nl_ithread *t)
{
    for (unsigned i = 0; i < NL_TLB_SLOTS; i++) {
        t->tlb[i].page = ~0ull;
        t->tlb[i].entry = &t->sink;
    }
}

static unsigned nl_parse_mode(const char *s)
{
    if (!s)
        return 0;
    if (!strcmp(s, "exact"))
        return NL_INST_EXACT;
    if (!strcmp(s, "sampled"))
        return NL_INST_SAMPLED;
    if (!strcmp(s, "both"))
        return NL_INST_EXACT | NL_INST_SAMPLED;
    return 0;
}

/* A decimal number in [min, max], else @p otherwise (also when unset or empty). */
static uint64_t nl_parse_decimal(const char *s, uint64_t min, uint64_t max, uint64_t otherwise)
{
    uint64_t v = 0;
    if (!s || !*s)
        return otherwise;
    for (; *s >= '0' && *s <= '9' && v <= max; s++)
        v = v * 10 + (uint64_t)(*s - '0');
    return (v >= min && v <= max && !*s) ? v : otherwise;
}

static void nl_thread_exit(void *arg);
static void nl_before_fork(void);
static void nl_after_fork_parent(void);
static void nl_after_fork_child(void);

NL_INST_STATE static pthread_once_t nl_once = PTHREAD_ONCE_INIT;

/* Runs at a thread's first slow path, not in __tsan_init: that one can run from the
 * executable's .preinit_array, before libc has set up the environment. */
static void nl_inst_init_once(void)
{
    nl_tlb_clear(&nl_inactive);
    /* Tells apart copies of this runtime linked into several modules of one process. */
    nl_ig.copy_id = ((uint64_t)(uintptr_t)&nl_ig >> 4) & 0xffffffu;
    if (pthread_key_create(&nl_exit_key, nl_thread_exit) != 0)
        return;
    pthread_atfork(nl_before_fork, nl_after_fork_parent, nl_after_fork_child);
    nl_ig.keyed = 1;
    /* The recorder names a directory in memory for these files when it can (see
     * src/inst/staging.rs): the stores into them stay plain memory writes. */
    const char *dir = getenv("NUMALENS_INST_DIR");
    if (!dir || !*dir)
        dir = getenv("NUMALENS_DIR");
    unsigned mode = nl_parse_mode(getenv("NUMALENS_INST"));
    if (!dir || !*dir || !mode || strlen(dir) >= sizeof nl_ig.dir - 64)
        return;
    strcpy(nl_ig.dir, dir);
    nl_ig.mode = mode;
    nl_ig.every = (uint32_t)nl_parse_decimal(getenv("NUMALENS_INST_EVERY"), 1, 0x7fffffffu,
                                             NL_INST_DEFAULT_EVERY);
    /* Samples per second a thread takes at most; unset, empty or not a number: no cap. */
    nl_ig.max_rate =
        (uint32_t)nl_parse_decimal(getenv("NUMALENS_INST_MAX_RATE"), 0, 0xffffffffu, 0);
    __atomic_store_n(&nl_ig.on, 1, __ATOMIC_RELEASE);
}

void nl_inst_init(void)
{
    pthread_once(&nl_once, nl_inst_init_once);
    __atomic_store_n(&nl_ig.initialised, 1, __ATOMIC_RELEASE);
}

/* ---- files that grow by segments ---- */

static char *nl_fmt_u64(char *p, uint64_t v, int hex)
{
    char tmp[24];
    int n = 0;
    do {
        unsigned d = (unsigned)(hex ? v % 16 : v % 10);
        tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
        v = hex ? v / 16 : v / 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

/** Fewest records that fill whole 4096-byte pages: 4096 / gcd(record_size, 4096), where the gcd
 * with a power of two is the record size's lowest set bit. 64 chunks (25 pages) or 128 samples. */
static uint32_t nl_page_step(uint32_t record_size)
{
    uint32_t low = record_size & -record_size;
    return NL_INST_HEADER_SIZE / (low < NL_INST_HEADER_SIZE ? low : NL_INST_HEADER_SIZE);
}

/* True when a file reaching @p end bytes would pass the program's RLIMIT_FSIZE: growing it there
 * would send the program SIGXFSZ, which kills it by default. The limit is only read, never
 * raised (another thread of the program would see it raised). */
static int nl_past_fsize(uint64_t end)
{
    struct rlimit r;
    if (nl_fd_sys(SYS_prlimit64, 0, RLIMIT_FSIZE, 0, (long)&r) != 0)
        return 0;
    return r.rlim_cur != RLIM_INFINITY && end > r.rlim_cur;
}

static int nl_grow_open(struct nl_grow_file *f, struct nl_ithread *t, uint32_t seq,
                        const char *suffix, const char *magic, uint32_t record_size)
{
    char path[600];
    char *p = path;
    size_t dl = strlen(nl_ig.dir);
    memcpy(p, nl_ig.dir, dl);
    p += dl;
    memcpy(p, "/inst-", 6);
    p = nl_fmt_u64(p + 6, t->pid, 0);
    *p++ = '-';
    p = nl_fmt_u64(p, t->tid, 0);
    *p++ = '-';
    p = nl_fmt_u64(p, nl_ig.copy_id, 1);
    *p++ = '-';
    p = nl_fmt_u64(p, seq, 0);
    size_t sl = strlen(suffix);
    memcpy(p, suffix, sl + 1);
    /* Above the program's reach, so that a program closing or reusing low descriptors neither
     * loses these files nor gets its own written (numalens_fd.h). */
    int fd = nl_fd_open_high(path, O_RDWR | O_CREAT | O_EXCL, 0644, 0);
    if (fd < 0)
        return -1;
    struct nl_inst_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, magic, 8);
    h.version = NL_INST_VERSION;
    h.pid = t->pid;
    h.tid = t->tid;
    h.page_shift = NL_INST_PAGE_SHIFT;
    h.start_ns = nl_inst_now();
    h.sample_every = nl_ig.every;
    h.mode = nl_ig.mode;
    h.chunk_pages = NL_INST_CHUNK_PAGES;
    h.record_size = record_size;
    h.copy_id = nl_ig.copy_id;
    struct nl_limits_hold hold;
    nl_fd_limits_lock(&hold);
    int sized = !nl_past_fsize(NL_INST_HEADER_SIZE) && ftruncate(fd, NL_INST_HEADER_SIZE) == 0 &&
                pwrite(fd, &h, sizeof h, 0) == sizeof h;
    nl_fd_limits_unlock(&hold);
    if (!sized) {
        nl_fd_sys(SYS_close, fd, 0, 0, 0);
        return -1;
    }
    memset(f, 0, sizeof *f);
    f->fd = fd;
    if (nl_fd_identity(fd, &f->dev, &f->ino) != 0)
        f->dev = f->ino = 0;
    memcpy(f->path, path, (size_t)(p - path) + sl + 1);
    f->record_size = record_size;
    f->step = nl_page_step(record_size);
    return 0;
}

/* The file's descriptor, reopened by its path if the program took the number (a raw close_range
 * or dup2 that nothing could intercept); -1 if the file cannot be had. */
static int nl_grow_fd(struct nl_grow_file *f)
{
    if (f->fd >= 0 && nl_fd_still(f->fd, f->dev, f->ino))
        return f->fd;
    int fd = nl_fd_open_high(f->path, O_RDWR, 0, 0);
    uint64_t dev, ino;
    if (fd >= 0 && (nl_fd_identity(fd, &dev, &ino) != 0 || dev != f->dev || ino != f->ino)) {
        nl_fd_sys(SYS_close, fd, 0, 0, 0);
        fd = -1;
    }
    f->fd = fd;
    return fd;
}

#ifdef MADV_POPULATE_WRITE
#define NL_MADV_POPULATE_WRITE MADV_POPULATE_WRITE
#else
#define NL_MADV_POPULATE_WRITE 23
#endif

/* Says in the file's header, once, that it stopped growing: the recorder then reports the
 * profile incomplete instead of silently short. */
static void nl_grow_mark_full(struct nl_grow_file *f)
{
    if (f->full)
        return;
    f->full = 1;
    uint32_t one = 1;
    int fd = nl_grow_fd(f);
    uint64_t at = offsetof(struct nl_inst_header, full);
    /* A write past RLIMIT_FSIZE raises SIGXFSZ even inside the file: under the lock, and only
     * below the limit (a limit that low leaves the file unmarked; its size tells). */
    struct nl_limits_hold hold;
    nl_fd_limits_lock(&hold);
    if (fd >= 0 && !nl_past_fsize(at + sizeof one)) {
        ssize_t w = pwrite(fd, &one, sizeof one, (off_t)at);
        (void)w;
    }
    nl_fd_limits_unlock(&hold);
}

/* Maps one more segment: a quarter of what is mapped, in steps of f->step records, so that every
 * segment starts at a multiple of the system page and at most a quarter of the file (or one step,
 * 100 KiB of page records) is ahead of its use. The step is small because a thread that touches a
 * few thousand pages would otherwise pay for a first segment several times its size. */
static int nl_grow_more(struct nl_grow_file *f)
{
    if (f->full)
        return -1;
    if (f->nseg == sizeof f->seg / sizeof f->seg[0]) {
        nl_grow_mark_full(f);
        return -1;
    }
    uint64_t steps = f->mapped / f->step / 4;
    uint64_t count = (uint64_t)f->step * (steps ? steps : 1);
    size_t bytes = (size_t)(count * f->record_size);
    off_t off = (off_t)(NL_INST_HEADER_SIZE + f->mapped * f->record_size);
    int fd = nl_grow_fd(f);
    if (fd < 0) {
        f->full = 1; /* nowhere to say so: the file is gone */
        return -1;
    }
    /* The space is allocated now: a store into a mapped page the file system has no room for
     * would kill the program with SIGBUS. A file system without fallocate gets the old way. A
     * raw system call, as for mmap: an import from libc adds a PLT entry, which moves all of
     * the program's code by 16 bytes (docs/INST.md says what that alone can do to a loop). */
    /* Under the limits lock: the program cannot lower its limit between the check and the
     * growth, which past the limit would send it SIGXFSZ. */
    struct nl_limits_hold hold;
    nl_fd_limits_lock(&hold);
    int grown = !nl_past_fsize((uint64_t)off + bytes) &&
                (syscall(SYS_fallocate, fd, 0, off, (off_t)bytes) == 0 ||
                 (errno == EOPNOTSUPP && ftruncate(fd, off + (off_t)bytes) == 0));
    nl_fd_limits_unlock(&hold);
    if (!grown) {
        nl_grow_mark_full(f);
        return -1;
    }
    /* Populated now, so that the program's page faults (sampled by the recorder) are its own.
     * On a disk file system the first store into each page would still fault (to mark it
     * dirty, 2-3 us each), which MADV_POPULATE_WRITE (Linux 5.14) does here instead, in one
     * call; an older kernel refuses it and the stores fault. */
    void *m = nl_sys_mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, off);
    if (m == MAP_FAILED) {
        nl_grow_mark_full(f);
        return -1;
    }
    syscall(SYS_madvise, m, bytes, NL_MADV_POPULATE_WRITE);
    f->seg[f->nseg].base = m;
    f->seg[f->nseg].first = f->mapped;
    f->seg[f->nseg].count = count;
    f->seg[f->nseg].bytes = bytes;
    f->nseg++;
    f->mapped += count;
    return 0;
}

/** The next unused record, or NULL when the file cannot grow. */
static void *nl_grow_next(struct nl_grow_file *f)
{
    if (f->used == f->mapped && nl_grow_more(f) != 0)
        return NULL;
    unsigned s = f->nseg - 1;
    uint64_t i = f->used++ - f->seg[s].first;
    return f->seg[s].base + i * f->record_size;
}

static void nl_grow_close(struct nl_grow_file *f)
{
    for (unsigned i = 0; i < f->nseg; i++)
        nl_sys_munmap(f->seg[i].base, f->seg[i].bytes);
    if (nl_grow_on(f) && f->fd >= 0 && nl_fd_still(f->fd, f->dev, f->ino))
        nl_fd_sys(SYS_close, f->fd, 0, 0, 0);
    memset(f, 0, sizeof *f);
}

/* ---- the chunk index ---- */

static void *nl_anon(size_t bytes)
{
    void *m = nl_sys_mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

static uint64_t nl_slot_of(uint64_t key, uint64_t cap)
{
    return (key * 0x9E3779B97F4A7C15ull) >> (64 - __builtin_ctzll(cap));
}

static int nl_index_grow(struct nl_chunk_index *ix)
{
    uint64_t cap = ix->cap ? ix->cap * 2 : 1024;
    uint64_t *keys = nl_anon(cap * sizeof *keys);
    struct nl_inst_chunk **vals = nl_anon(cap * sizeof *vals);
    if (!keys || !vals)
        return -1;
    for (uint64_t i = 0; i < ix->cap; i++) {
        if (!ix->keys[i])
            continue;
        uint64_t s = nl_slot_of(ix->keys[i], cap);
        while (keys[s])
            s = (s + 1) & (cap - 1);
        keys[s] = ix->keys[i];
        vals[s] = ix->vals[i];
    }
    if (ix->cap) {
        nl_sys_munmap(ix->keys, ix->cap * sizeof *keys);
        nl_sys_munmap(ix->vals, ix->cap * sizeof *vals);
    }
    ix->keys = keys;
    ix->vals = vals;
    ix->cap = cap;
    return 0;
}

static struct nl_inst_chunk *nl_chunk_for(struct nl_ithread *t, uint64_t page)
{
    struct nl_chunk_index *ix = &t->index;
    uint64_t key = (page / NL_INST_CHUNK_PAGES) + 1;
    if (ix->cap) {
        for (uint64_t s = nl_slot_of(key, ix->cap);; s = (s + 1) & (ix->cap - 1)) {
            if (ix->keys[s] == key)
                return ix->vals[s];
            if (!ix->keys[s])
                break;
        }
    }
    if ((ix->n + 1) * 4 > ix->cap * 3 && nl_index_grow(ix) != 0)
        return NULL;
    struct nl_inst_chunk *c = nl_grow_next(&t->pages);
    if (!c)
        return NULL;
    c->base_page = page & ~(uint64_t)(NL_INST_CHUNK_PAGES - 1);
    __atomic_store_n(&c->valid, NL_INST_CHUNK_VALID, __ATOMIC_RELEASE);
    uint64_t s = nl_slot_of(key, ix->cap);
    while (ix->keys[s])
        s = (s + 1) & (ix->cap - 1);
    ix->keys[s] = key;
    ix->vals[s] = c;
    ix->n++;
    return c;
}

/* ---- threads ---- */

static uint64_t nl_next_interval(struct nl_ithread *t)
{
    /* Uniform in [every/2, 3*every/2): mean `every` (the thread's, see sample_rate.h), and no
     * aliasing with loops whose body makes a number of accesses that divides the interval. */
    t->rng ^= t->rng << 13;
    t->rng ^= t->rng >> 7;
    t->rng ^= t->rng << 17;
    uint64_t e = t->rate.every;
    return e / 2 + 1 + (t->rng % (e ? e : 1));
}

/* The files of a recording thread; a thread whose files cannot be made counts nothing. */
static void nl_thread_files(struct nl_ithread *t)
{
    t->pid = (uint32_t)getpid();
    t->tid = (uint32_t)syscall(SYS_gettid);
    t->rng = ((uint64_t)t->tid << 32) ^ nl_inst_now() ^ 0x2545F4914F6CDD1Dull;
    uint32_t seq = __atomic_fetch_add(&nl_seq, 1, __ATOMIC_RELAXED);
    int ok = 1;
    if (nl_ig.mode & NL_INST_EXACT)
        ok &= nl_grow_open(&t->pages, t, seq, ".pages", NL_INST_MAGIC_PAGES,
                           sizeof(struct nl_inst_chunk)) == 0;
    if (nl_ig.mode & NL_INST_SAMPLED)
        ok &= nl_grow_open(&t->samples, t, seq, ".samples", NL_INST_MAGIC_SAMPLES,
                           sizeof(struct nl_inst_sample)) == 0;
    if (!ok) {
        nl_grow_close(&t->pages);
        nl_grow_close(&t->samples);
        /* The profile says so: the preload runtime puts the count in its log's header. */
        if (&numalens_inst_uncounted)
            __atomic_fetch_add(&numalens_inst_uncounted, 1, __ATOMIC_RELAXED);
        return;
    }
    if (nl_grow_on(&t->samples)) {
        nl_rate_start(&t->rate, nl_inst_now());
        nl_countdown_read = (int64_t)nl_next_interval(t);
        nl_countdown_write = (int64_t)nl_next_interval(t);
    }
}

/** The calling thread's own state (with files while recording), or NULL after its exit. */
static struct nl_ithread *nl_thread_setup(void)
{
    if (!nl_ig.initialised)
        nl_inst_init();
    if (nl_ith_done || !nl_ig.keyed)
        return NULL;
    struct nl_ithread *t = nl_anon(sizeof *t);
    if (!t)
        return NULL;
    /* Without it (before Linux 4.14) a child of a raw fork counts into its parent's files. */
    syscall(SYS_madvise, t, sizeof *t, MADV_WIPEONFORK);
    t->own = 1;
    nl_tlb_clear(t);
    nl_countdowns_set(INT64_MAX);
    t->busy = 1;
    nl_ith = t;
    if (__atomic_load_n(&nl_ig.on, __ATOMIC_ACQUIRE))
        nl_thread_files(t);
    nl_fast = (nl_grow_on(&t->samples) ? NL_FAST_SAMPLE : 0) |
              (nl_grow_on(&t->pages) ? NL_FAST_EXACT : 0);
    pthread_setspecific(nl_exit_key, t);
    t->busy = 0;
    return t;
}

static void nl_thread_release(struct nl_ithread *t)
{
    nl_grow_close(&t->pages);
    nl_grow_close(&t->samples);
    if (t->index.cap) {
        nl_sys_munmap(t->index.keys, t->index.cap * sizeof *t->index.keys);
        nl_sys_munmap(t->index.vals, t->index.cap * sizeof *t->index.vals);
    }
    nl_sys_munmap(t, sizeof *t);
}

static void nl_thread_exit(void *arg)
{
    /* Pthread key destructors run after C++ thread_local destructors: nothing instrumented
     * of the program's runs in this thread after this. The files keep the counts. */
    nl_ith_done = 1;
    nl_fast_reset();
    nl_thread_release(arg);
}

/* A thread's state is emptied in a fork child (MADV_WIPEONFORK) so that a fork no handler sees is
 * caught; across a fork that runs these handlers the forking thread's state is kept, for the
 * child to release what it holds (its mappings of the parent's files, their descriptors). From
 * the prepare handler to the parent's or child's handler the thread counts nothing (its state is
 * put aside, and a first access there makes none): the child's instrumented code that runs
 * before its handler (other fork handlers) must not count into the parent's files. */
static __thread struct {
    struct nl_ithread *t;
    unsigned fast;
    int64_t read, write;
    int done;
} nl_fork_aside __attribute__((tls_model("initial-exec")));

static void nl_before_fork(void)
{
    struct nl_ithread *t = nl_ith;
    nl_fork_aside.t = NULL;
    if (t->shared)
        return;
    syscall(SYS_madvise, t, sizeof *t, MADV_KEEPONFORK);
    nl_fork_aside.t = t;
    nl_fork_aside.fast = nl_fast;
    nl_fork_aside.read = nl_countdown_read;
    nl_fork_aside.write = nl_countdown_write;
    nl_fork_aside.done = nl_ith_done;
    nl_fast_reset();
    nl_ith_done = 1;
}

static void nl_after_fork_parent(void)
{
    struct nl_ithread *t = nl_fork_aside.t;
    if (!t)
        return;
    nl_ith_done = nl_fork_aside.done;
    nl_countdown_read = nl_fork_aside.read;
    nl_countdown_write = nl_fork_aside.write;
    nl_fast = nl_fork_aside.fast;
    nl_ith = t;
    syscall(SYS_madvise, t, sizeof *t, MADV_WIPEONFORK);
}

static void nl_after_fork_child(void)
{
    /* The parent's files are shared mappings: the child must not count into them. Its own
     * state and files are made at its next access. */
    struct nl_ithread *t = nl_fork_aside.t;
    nl_fast_reset();
    if (t) {
        nl_ith_done = nl_fork_aside.done;
        nl_thread_release(t);
    }
    /* The child has this one thread, which counts itself in when it samples. (A fork no handler
     * sees keeps the parent's counts for at most two activity periods: its thread samples less
     * than its share meanwhile, never with wrong weights.) */
    __atomic_store_n(&nl_activity.period[0], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&nl_activity.period[1], 0, __ATOMIC_RELAXED);
}

/* ---- slow paths ---- */

/* A signal handler running between these stores sees an invalid slot, never a torn one: its
 * lookup (nl_tlb_lookup) misses on the invalid page number whatever entry it loaded. */
static void nl_tlb_fill(struct nl_tlb_slot *s, uint64_t page, struct nl_inst_page *e)
{
    __atomic_store_n(&s->page, ~0ull, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&s->entry, e, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&s->page, page, __ATOMIC_RELAXED);
}

/* The state a slow path works on: @p t, or at the thread's first access its own new state; NULL
 * once the thread has exited (nothing more is counted). */
static struct nl_ithread *nl_own_state(struct nl_ithread *t)
{
    if (!t->shared) {
        if (t->own)
            return t;
        /* A child of a fork that ran no handler (a raw fork system call, _Fork): its copy of the
         * state is emptied, every lookup missed, and the parent's files are not its own. */
        nl_fast_reset();
        pthread_setspecific(nl_exit_key, NULL);
        nl_sys_munmap(t, sizeof *t);
    }
    return nl_ith_done ? NULL : nl_thread_setup();
}

__attribute__((noinline)) void nl_inst_prepare(void)
{
    struct nl_ithread *t = nl_ith;
    if (t->shared || !t->own)
        (void)nl_own_state(t);
}

void nl_inst_miss(struct nl_ithread *t, uintptr_t addr, unsigned is_write, uint64_t count)
{
    uint64_t page = addr >> NL_INST_PAGE_SHIFT;
    t = nl_own_state(t);
    if (!t)
        return;
    if (t->busy || !(nl_ig.mode & NL_INST_EXACT) || !nl_grow_on(&t->pages)) {
        /* A thread that counts no pages gets here from range accesses only (the fast path
         * stops before the cache): the slot points at the sink, so the next range is cheap. */
        if (t->busy) {
            t->dropped += count;
            return;
        }
        nl_tlb_fill(&t->tlb[nl_tlb_index(page)], page, &t->sink);
        return;
    }
    t->busy = 1;
    struct nl_inst_chunk *c = nl_chunk_for(t, page);
    if (!c) {
        t->dropped += count;
        t->busy = 0;
        return;
    }
    struct nl_inst_page *e = &c->pages[page % NL_INST_CHUNK_PAGES];
    if (!e->first_ns)
        e->first_ns = nl_inst_now();
    e->counts[is_write] += count;
    nl_tlb_fill(&t->tlb[nl_tlb_index(page)], page, e);
    t->busy = 0;
}

/* Writes one sample standing for @p weight accesses; returns its time, or 0 when the file
 * could take no more. */
static uint64_t nl_sample_write(struct nl_ithread *t, uintptr_t addr, unsigned is_write,
                                unsigned size, void *ip, uint32_t weight)
{
    struct nl_inst_sample *r = nl_grow_next(&t->samples);
    if (!r)
        return 0;
    /* Marked before the clock is read, the fence keeping the two in that order: a reader that
     * read its own clock and then found this slot still 0 knows the time taken here is no older
     * than its reading, so a running thread does not hold back the recorder's live merge at its
     * last sample (docs/RECORD.md). */
    __atomic_store_n(&r->valid, NL_INST_SAMPLE_WRITING, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    r->time_ns = nl_inst_now();
    r->addr = addr;
    r->ip = (uint64_t)(uintptr_t)ip;
    r->weight = weight;
    r->size = (uint16_t)size;
    r->is_write = (uint8_t)is_write;
    __atomic_store_n(&r->valid, 1, __ATOMIC_RELEASE);
    uint64_t now = r->time_ns;
    if (now - t->marked_ns >= NL_MARK_EVERY_NS && numalens_flush_mark) {
        t->marked_ns = now;
        numalens_flush_mark();
    }
    return now;
}

/* Takes the sample due at this access (if the thread samples) and resets the countdown. */
static void nl_sample_due(struct nl_ithread *t, uintptr_t addr, unsigned is_write, unsigned size,
                          void *ip)
{
    if (t->shared)
        return;
    if (!nl_grow_on(&t->samples)) {
        nl_countdowns_set(INT64_MAX);
        return;
    }
    int64_t *countdown = nl_countdown_of(is_write);
    if (t->busy) {
        *countdown = 1;
        return;
    }
    t->busy = 1;
    uint64_t now = nl_sample_write(t, addr, is_write, size, ip, t->rate.drawn_every[is_write]);
    if (now) {
        nl_rate_mark(&nl_activity, &t->rate, now);
        nl_rate_step(&t->rate, now, nl_rate_active(&nl_activity, now));
    }
    *countdown = (int64_t)nl_next_interval(t);
    t->rate.drawn_every[is_write] = t->rate.every;
    t->busy = 0;
}

__attribute__((noinline)) void nl_inst_sample(struct nl_ithread *t, uintptr_t addr,
                                              unsigned is_write, unsigned size, void *ip)
{
    if (!ip)
        ip = __builtin_return_address(0);
    t = nl_own_state(t);
    if (!t)
        return;
    nl_sample_due(t, addr, is_write, size, ip);
    if (nl_grow_on(&t->pages))
        nl_count(t, addr, is_write, nl_words(size));
}

__attribute__((noinline)) unsigned nl_inst_rmw_sample(uintptr_t addr, unsigned size, void *ip)
{
    struct nl_ithread *t = nl_own_state(nl_ith);
    if (!t)
        return nl_fast;
    /* The write is sampled when the read is: nl_sample_due takes the read's sample unless the
     * thread samples nothing or a signal handler interrupted a slow path. */
    int both = nl_grow_on(&t->samples) && !t->busy;
    /* Both stand for as many accesses as the read countdown that ran out. */
    uint32_t weight = t->rate.drawn_every[0];
    nl_sample_due(t, addr, 0, size, ip);
    if (both) {
        t->busy = 1;
        nl_sample_write(t, addr, 1, size, ip, weight);
        t->busy = 0;
    }
    return nl_fast;
}

__attribute__((noinline)) void nl_inst_rmw_miss(uintptr_t addr, unsigned size)
{
    uint64_t words = nl_words(size);
    nl_inst_miss(nl_ith, addr, 0, words);
    nl_inst_miss(nl_ith, addr, 1, words);
}

void nl_inst_range(uintptr_t addr, uint64_t size, unsigned is_write, void *ip)
{
    if (!size)
        return;
    uint64_t first_word = addr >> 3, last_word = (addr + size - 1) >> 3;
    uint64_t words_per_page = 1ull << (NL_INST_PAGE_SHIFT - 3);
    for (uint64_t w = first_word; w <= last_word;) {
        uint64_t page_end = (w / words_per_page + 1) * words_per_page;
        uint64_t n = (last_word + 1 < page_end ? last_word + 1 : page_end) - w;
        uintptr_t a = (uintptr_t)(w << 3);
        nl_count(nl_ith, a, is_write, n);
        /* Samples fall on the words where the countdown runs out, as if word by word. */
        struct nl_ithread *t = nl_ith;
        int64_t *countdown = nl_countdown_of(is_write);
        uint64_t left = n;
        while (*countdown > 0 && (uint64_t)*countdown <= left) {
            uint64_t k = (uint64_t)*countdown;
            uintptr_t at = a + (k - 1) * 8;
            left -= k;
            a += k * 8;
            *countdown = 0;
            nl_sample_due(t, at < addr ? addr : at, is_write, 8, ip);
        }
        *countdown -= (int64_t)left;
        w += n;
    }
}
