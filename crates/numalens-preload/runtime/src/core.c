/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file core.c
 * @brief The event log: per-thread record buffers, their registry, and writing them out.
 *
 * Each thread appends fixed-size records to its own mmap'd 64 KiB buffer with no lock: it writes
 * the record, then publishes the count with a release store. Writing a buffer out takes the
 * buffer's lock (an atomic flag) and writes the published records [flushed, n) with one write(2)
 * to the O_APPEND event file, so the file only ever holds whole records from whole chunks. The
 * owner takes the same lock when its buffer is full; a signal handler or the exit path takes it
 * to flush other threads' buffers. Buffers are never unmapped: a finished thread's buffer goes
 * back to the registry for the next thread, so a flusher never touches freed memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "nl_internal.h"
#include "numalens_fd.h"

NL_TLS struct nl_thread nl_self = {.logical = -1};
struct nl_global nl_g = {.log = {.fd = -1}, .min_object = UINT64_MAX};

/* A word on a page the kernel empties in a fork child (MADV_WIPEONFORK) but not in a vfork child,
 * which shares it: 0 says the runtime's state was copied by a fork that ran no handler of ours
 * (a raw fork system call, _Fork), and still names the parent's log, its locks and its tids.
 * 1 once the state is this process's own, 2 while it is being made so. NULL when the kernel has
 * no MADV_WIPEONFORK (before 4.14): then only forks that run pthread_atfork handlers are seen. */
static _Atomic uint32_t *nl_fork_mark;
static void (*nl_fork_child)(int known);

/* The inst runtime, linked into the program, counts here (a weak reference) its threads that
 * could not make their count files; the count goes into the header, in place, when it changes. */
NL_EXPORT _Atomic uint32_t numalens_inst_uncounted;
static uint32_t nl_inst_uncounted_noted;

static void nl_note_inst_uncounted(void)
{
    uint32_t n = atomic_load_explicit(&numalens_inst_uncounted, memory_order_relaxed);
    if (nl_likely(n == nl_inst_uncounted_noted) || !atomic_load(&nl_g.on))
        return;
    nl_inst_uncounted_noted = n;
    nl_owned_note(&nl_g.log, &n, sizeof n, offsetof(struct nl_file_header, inst_uncounted));
}

uint64_t nl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int32_t nl_gettid(void)
{
    if (nl_unlikely(nl_self.tid == 0))
        nl_self.tid = (int32_t)syscall(SYS_gettid);
    return nl_self.tid;
}

/* What descriptor 2 was when tracing started: a program that closed its stderr and opened a
 * file of its own there must not find our messages in it. */
static uint64_t nl_stderr_dev, nl_stderr_ino;
static int nl_stderr_known;

static void nl_say(const char *a, const char *b)
{
    if (!nl_g.cfg.debug || !nl_stderr_known || !nl_fd_still(2, nl_stderr_dev, nl_stderr_ino))
        return;
    static const char pre[] = "numalens: ";
    ssize_t r = write(2, pre, sizeof pre - 1);
    r = write(2, a, strlen(a));
    if (b) {
        r = write(2, ": ", 2);
        r = write(2, b, strlen(b));
    }
    r = write(2, "\n", 1);
    (void)r;
}

void nl_disable(const char *why)
{
    int was = atomic_exchange(&nl_g.on, 0);
    nl_g.min_object = UINT64_MAX;
    if (was)
        nl_say("tracing turned off", why);
}

static void nl_u64_to_dec(uint64_t v, char *out)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *out++ = tmp[--n];
    *out = '\0';
}

/** The log cannot be written any more: the header says so (so the profile says what is
 * missing, not that the process never ran its exit path) and tracing stops. */
static void nl_stop_writing(int err)
{
    if (atomic_load(&nl_g.on)) {
        uint32_t e = err > 0 ? (uint32_t)err : EIO;
        nl_owned_note(&nl_g.log, &e, sizeof e, offsetof(struct nl_file_header, write_errno));
    }
    nl_disable("cannot write the event file");
}

/** Creates <dir>/events-<pid>[-e<exec>][.<k>].bin exclusively as @p log; 0 or -1. */
static int nl_open_log(struct nl_owned *log, const char *dir, uint32_t pid, uint64_t exec_count)
{
    char path[640], num[24];
    size_t dl = strlen(dir);
    if (dl + 80 > sizeof path)
        return -1;
    for (unsigned k = 0; k < 1000; k++) {
        char *p = path;
        memcpy(p, dir, dl);
        p += dl;
        memcpy(p, "/events-", 8);
        p += 8;
        nl_u64_to_dec(pid, num);
        p = stpcpy(p, num);
        if (exec_count) {
            p = stpcpy(p, "-e");
            nl_u64_to_dec(exec_count, num);
            p = stpcpy(p, num);
        }
        if (k) {
            *p++ = '.';
            nl_u64_to_dec(k, num);
            p = stpcpy(p, num);
        }
        stpcpy(p, ".bin");
        if (nl_owned_create(log, path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0644) == 0)
            return 0;
        if (errno != EEXIST)
            return -1;
    }
    return -1;
}

static int nl_open_and_header(uint32_t ppid)
{
    nl_g.pid = (uint32_t)getpid();
    nl_g.start_ns = nl_now();
    if (nl_open_log(&nl_g.log, nl_g.cfg.dir, nl_g.pid, nl_g.cfg.exec_count) != 0) {
        nl_say("cannot create the event file in", nl_g.cfg.dir);
        return -1;
    }
    struct nl_file_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, NL_EVENTS_MAGIC, 8);
    h.version = NL_EVENTS_VERSION;
    h.record_size = NL_RECORD_SIZE;
    h.pid = nl_g.pid;
    h.ppid = ppid;
    h.start_ns = nl_g.start_ns;
    h.page_size = (uint32_t)sysconf(_SC_PAGESIZE);
    h.min_object = (uint32_t)(nl_g.cfg.min_object > UINT32_MAX ? UINT32_MAX : nl_g.cfg.min_object);
    h.exec_count = nl_g.cfg.exec_count;
    if (nl_owned_write(&nl_g.log, &h, sizeof h) != 0) {
        nl_owned_close(&nl_g.log);
        return -1;
    }
    return 0;
}

static void nl_fork_mark_map(void)
{
    long page = sysconf(_SC_PAGESIZE);
    void *m = (void *)syscall(SYS_mmap, NULL, page, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (m == MAP_FAILED)
        return;
    if (syscall(SYS_madvise, m, page, MADV_WIPEONFORK) != 0) {
        syscall(SYS_munmap, m, page);
        return;
    }
    nl_fork_mark = m;
    atomic_store(nl_fork_mark, 1);
}

void nl_core_on_fork(void (*child)(int known))
{
    nl_fork_child = child;
}

void nl_core_fork_seen(int known)
{
    if (!atomic_load(&nl_g.on) || !nl_fork_child)
        return;
    uint32_t forked = 0;
    if (nl_fork_mark ? atomic_compare_exchange_strong(nl_fork_mark, &forked, 2) : known)
        nl_fork_child(known);
}

int nl_core_start(const struct nl_config *cfg, uint32_t ppid)
{
    nl_g.cfg = *cfg;
    nl_fork_mark_map();
    if (cfg->debug)
        nl_stderr_known = nl_fd_identity(2, &nl_stderr_dev, &nl_stderr_ino) == 0;
    if (!cfg->dir[0] || nl_open_and_header(ppid) != 0)
        return -1;
    atomic_store(&nl_g.next_logical, 1);
    atomic_store(&nl_g.on, 1);
    if (nl_thread_attach(0) != 0) {
        nl_disable("cannot map a thread buffer");
        return -1;
    }
    nl_g.min_object = cfg->min_object;
    return 0;
}

/** Takes the buffer's lock; with @p wait, spins (yielding) until it can. */
static int nl_buf_lock(struct nl_tbuf *b, int wait)
{
    for (;;) {
        int z = 0;
        if (atomic_compare_exchange_weak_explicit(&b->lock, &z, 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return 1;
        if (!wait)
            return 0;
        sched_yield();
    }
}

/** Writes out [flushed, n) of @p b; the caller holds its lock. */
static void nl_buf_write(struct nl_tbuf *b)
{
    uint32_t n = atomic_load_explicit(&b->n, memory_order_acquire);
    if (n > b->flushed) {
        size_t bytes = (size_t)(n - b->flushed) * NL_RECORD_SIZE;
        if (nl_owned_write(&nl_g.log, &b->rec[b->flushed], bytes) == -1)
            nl_stop_writing(errno);
    }
    b->flushed = n;
}

/** The owner writes its buffer out and starts it over. */
static void nl_buf_drain(struct nl_tbuf *b)
{
    nl_note_inst_uncounted();
    nl_buf_lock(b, 1);
    nl_buf_write(b);
    b->flushed = 0;
    atomic_store_explicit(&b->n, 0, memory_order_relaxed);
    atomic_store_explicit(&b->lock, 0, memory_order_release);
}

static struct nl_tbuf *nl_buf_acquire(void)
{
    for (struct nl_tbuf *b = atomic_load(&nl_g.head); b; b = b->next) {
        int z = 0;
        if (atomic_load_explicit(&b->state, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&b->state, &z, 1))
            return b;
    }
    /* MAP_POPULATE: the kernel fills the pages in now, inside the system call, where the page-fault
     * sampler does not see it; left to fault in as records are written, the runtime's own buffer
     * would show up as first touches of the program. */
    void *m = (void *)syscall(SYS_mmap, NULL, sizeof(struct nl_tbuf), PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    struct nl_tbuf *b = m;
    atomic_store(&b->state, 1);
    struct nl_tbuf *h = atomic_load(&nl_g.head);
    do {
        b->next = h;
    } while (!atomic_compare_exchange_weak(&nl_g.head, &h, b));
    return b;
}

int nl_thread_attach(int32_t logical)
{
    if (nl_self.buf)
        return 0;
    struct nl_tbuf *b = nl_buf_acquire();
    if (!b)
        return -1;
    b->flushed = 0;
    atomic_store(&b->n, 0);
    nl_self.buf = b;
    nl_self.tid = 0;
    nl_self.logical = logical >= 0 ? logical : atomic_fetch_add(&nl_g.next_logical, 1);
    return 0;
}

/* A flush mark writes out only the marking thread's buffer, so the creator's logged time can pass
 * a new thread's first records while they still sit in the new thread's buffer. This record, in
 * the creator's buffer and so logged no later than anything the creator did after it, tells the
 * recorder that such a thread exists from this time on until its own records reach the log. */
int32_t nl_thread_create_note(void)
{
    int32_t logical = atomic_fetch_add(&nl_g.next_logical, 1);
    nl_emit(NL_REC_THREAD_CREATE, (uint64_t)logical, 0, 0, 0, 0, 0);
    return logical;
}

void nl_thread_create_failed(int32_t logical, int err)
{
    nl_emit(NL_REC_THREAD_CREATE, (uint64_t)logical, (uint64_t)err, 0, 0, 0, 0);
}

void nl_thread_detach(void)
{
    struct nl_tbuf *b = nl_self.buf;
    nl_self.dead = 1;
    if (!b)
        return;
    nl_small_emit();
    nl_buf_drain(b);
    nl_self.buf = NULL;
    atomic_store(&b->state, 0);
}

static inline void nl_fork_check(void)
{
    if (nl_unlikely(nl_fork_mark && !atomic_load_explicit(nl_fork_mark, memory_order_relaxed)))
        nl_core_fork_seen(0);
}

struct nl_record *nl_reserve(unsigned count)
{
    if (!atomic_load_explicit(&nl_g.on, memory_order_relaxed) || nl_self.dead)
        return NULL;
    nl_fork_check();
    if (nl_unlikely(!nl_self.buf)) {
        /* A thread we did not see start (created before the runtime, or by clone(2)). */
        if (nl_thread_attach(-1) != 0)
            return NULL;
    }
    struct nl_tbuf *b = nl_self.buf;
    uint32_t n = atomic_load_explicit(&b->n, memory_order_relaxed);
    if (n + count > NL_BUF_RECORDS) {
        nl_buf_drain(b);
        n = 0;
    }
    return &b->rec[n];
}

void nl_commit(unsigned count)
{
    struct nl_tbuf *b = nl_self.buf;
    uint32_t n = atomic_load_explicit(&b->n, memory_order_relaxed);
    atomic_store_explicit(&b->n, n + count, memory_order_release);
}

static void nl_fill(struct nl_record *r, uint16_t kind, uint16_t payload, uint64_t a, uint64_t b,
                    uint64_t c, uint64_t d, uint64_t e, uint64_t f)
{
    r->kind = kind;
    r->payload = payload;
    r->tid = (uint32_t)nl_gettid();
    r->time_ns = nl_now();
    r->a = a;
    r->b = b;
    r->c = c;
    r->d = d;
    r->e = e;
    r->f = f;
}

void nl_emit(uint16_t kind, uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e, uint64_t f)
{
    struct nl_record *r = nl_reserve(1);
    if (!r)
        return;
    nl_fill(r, kind, 0, a, b, c, d, e, f);
    nl_commit(1);
}

void nl_emit_at(uint64_t t, uint16_t kind, uint64_t a, uint64_t b, uint64_t c, uint64_t d,
                uint64_t e, uint64_t f)
{
    struct nl_record *r = nl_reserve(1);
    if (!r)
        return;
    nl_fill(r, kind, 0, a, b, c, d, e, f);
    r->time_ns = t;
    nl_commit(1);
}

void nl_emit_bytes(uint16_t kind, uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e,
                   uint64_t f, const void *payload, size_t len)
{
    unsigned extra = (unsigned)((len + NL_RECORD_SIZE - 1) / NL_RECORD_SIZE);
    if (extra > 32) {
        extra = 32;
        len = 32 * NL_RECORD_SIZE;
    }
    struct nl_record *r = nl_reserve(1 + extra);
    if (!r)
        return;
    nl_fill(r, kind, (uint16_t)extra, a, b, c, d, e, f);
    memset(r + 1, 0, (size_t)extra * NL_RECORD_SIZE);
    if (len)
        memcpy(r + 1, payload, len);
    nl_commit(1 + extra);
}

void nl_small_emit(void)
{
    uint64_t n = nl_self.small_n - nl_self.small_n_out;
    if (!n)
        return;
    uint64_t bytes = nl_self.small_bytes - nl_self.small_bytes_out;
    nl_self.small_n_out = nl_self.small_n;
    nl_self.small_bytes_out = nl_self.small_bytes;
    nl_emit(NL_REC_SMALL_ALLOCS, n, bytes, 0, 0, 0, 0);
}

void nl_flush_self(void)
{
    nl_fork_check();
    if (nl_self.buf)
        nl_buf_drain(nl_self.buf);
}

void nl_flush_all(void)
{
    nl_fork_check();
    nl_note_inst_uncounted();
    for (struct nl_tbuf *b = atomic_load(&nl_g.head); b; b = b->next) {
        if (!nl_buf_lock(b, 0))
            continue; /* its owner is writing it (or we interrupted ourselves doing so) */
        nl_buf_write(b);
        atomic_store_explicit(&b->lock, 0, memory_order_release);
    }
}

/* Called by the inst hooks' sample path (a weak reference) at most every 100 ms of a sampling
 * thread: the mark written last tells the recorder that the log holds every record of this thread
 * up to its time, which an idle thread's buffer otherwise tells only at the end. A thread inside
 * the runtime (a signal handler that interrupted a record) or already detached writes nothing. */
NL_EXPORT void numalens_flush_mark(void)
{
    if (!atomic_load_explicit(&nl_g.on, memory_order_relaxed) || nl_self.guard || nl_self.dead)
        return;
    int e = errno;
    nl_self.guard++;
    nl_emit(NL_REC_FLUSH_MARK, 0, 0, 0, 0, 0, 0);
    nl_flush_self();
    nl_self.guard--;
    errno = e;
}

void nl_flush_if_large(uint64_t bytes)
{
    if (nl_likely(bytes < NL_FLUSH_AT_BYTES))
        return;
    int e = errno;
    nl_flush_all();
    errno = e;
}

void nl_write_direct(const struct nl_record *r)
{
    nl_fork_check();
    (void)nl_owned_write(&nl_g.log, r, sizeof *r);
}

void nl_write_now(uint16_t kind, uint64_t a, uint64_t b, uint64_t c)
{
    int e = errno;
    struct nl_record r;
    memset(&r, 0, sizeof r);
    r.kind = kind;
    r.tid = (uint32_t)nl_gettid();
    r.time_ns = nl_now();
    r.a = a;
    r.b = b;
    r.c = c;
    nl_write_direct(&r);
    errno = e;
}

int nl_core_after_fork(void)
{
    /* Only this thread survives; every buffer holds the parent's records, which it writes. */
    for (struct nl_tbuf *b = atomic_load(&nl_g.head); b; b = b->next) {
        atomic_store(&b->n, 0);
        b->flushed = 0;
        atomic_store(&b->lock, 0);
        atomic_store(&b->state, b == nl_self.buf);
    }
    uint32_t ppid = nl_g.pid;
    /* The parent's file is closed only once the child holds its own: without rings, the recorder
     * tells a running process by the log it holds, and the parent may already have exited. */
    struct nl_owned parents = nl_g.log;
    atomic_store(&nl_g.log.fd, -1);
    atomic_store(&nl_g.log.lock, 0); /* it may have been held at the fork */
    nl_self.tid = 0;
    nl_self.logical = 0;
    nl_self.small_n_out = nl_self.small_n;
    nl_self.small_bytes_out = nl_self.small_bytes;
    atomic_store(&nl_g.next_logical, 1);
    atomic_store(&numalens_inst_uncounted, 0); /* the parent's threads */
    nl_inst_uncounted_noted = 0;
    int opened = nl_open_and_header(ppid);
    atomic_store(&parents.lock, 0);
    nl_owned_close(&parents);
    if (nl_fork_mark)
        atomic_store(nl_fork_mark, 1);
    if (opened != 0) {
        nl_disable("cannot create the fork child's event file");
        return -1;
    }
    return 0;
}

void nl_core_finish(void)
{
    nl_small_emit();
    nl_emit(NL_REC_END, 0, 0, 0, 0, 0, 0);
    nl_flush_self();
    nl_flush_all();
}
