/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file nl_internal.h
 * @brief The core's internal API, shared by the shims and the core's modules.
 *
 * Everything here is hidden (the .so is built with -fvisibility=hidden); only the interposed libc
 * symbols in shims*.c are exported. The core (core.c, config.c, unwind.c, modules.c, maps.c,
 * pages.c, signals.c) links into a plain test program too: it never depends on the shims.
 */
#ifndef NL_INTERNAL_H
#define NL_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "numalens_events.h"

/* Everything declared from here on is internal to the .so: no GOT indirection on hot paths. */
#pragma GCC visibility push(hidden)

#define NL_EXPORT __attribute__((visibility("default")))
#define NL_TLS __thread __attribute__((tls_model("initial-exec")))
#define nl_likely(x) __builtin_expect(!!(x), 1)
#define nl_unlikely(x) __builtin_expect(!!(x), 0)

/** Records per thread buffer: 1024 x 64 bytes = 64 KiB. */
#define NL_BUF_RECORDS 1024u
/* An allocation or mapping this large writes out every thread's records at once, so that a
 * program killed later (SIGKILL, the OOM killer) still has the sites of its large objects and
 * everything recorded before them. Such an allocation costs a system call and hundreds of page
 * faults anyway; one write(2) more is noise beside them. */
#define NL_FLUSH_AT_BYTES (1u << 20)

/* ---- config.c: the environment-variable table, parsed once ---- */

struct nl_config {
    char dir[512];        /* NUMALENS_DIR; empty = runtime inert */
    uint64_t min_object;  /* NUMALENS_MIN_OBJECT */
    uint64_t page_nodes;  /* NUMALENS_PAGE_NODES */
    uint64_t exec_count;  /* NUMALENS_EXEC_COUNT */
    uint64_t frames;      /* NUMALENS_FRAMES, 1..NL_MAX_FRAMES */
    uint64_t signals;     /* NUMALENS_SIGNALS */
    uint64_t debug;       /* NUMALENS_DEBUG */
    char plan[512];       /* NUMALENS_PLAN: rules file of `numalens run --plan` */
    uint64_t plan_parent; /* NUMALENS_PLAN_PARENT: the plan is for the process this pid started */
};

/** Fills @p cfg from @p get (getenv in the runtime; a fake in tests). Returns 1 if tracing is on. */
int nl_config_load(struct nl_config *cfg, char *(*get)(const char *));
/** Name, default and description of the i-th variable; 0 past the end. For docs and tests. */
int nl_config_describe(unsigned i, const char **name, const char **deflt, const char **doc);
/** Parses a decimal number with an optional k/m/g (binary) suffix; -1 if malformed. */
int nl_parse_u64(const char *s, uint64_t *out);

/* ---- core.c: the event log, thread buffers and their registry ---- */

/** One thread's buffer. Only the owner appends (n); whoever holds `lock` writes records out. */
struct nl_tbuf {
    _Atomic uint32_t n;        /* records committed by the owner */
    uint32_t flushed;          /* records [0, flushed) already written; changed under lock */
    atomic_int lock;           /* 1 while someone writes this buffer out */
    atomic_int state;          /* 0 free, 1 owned by a live thread */
    struct nl_tbuf *next;      /* registry: a list that only grows */
    uint64_t pad[5];
    struct nl_record rec[NL_BUF_RECORDS];
};

/** Per-thread state, in initial-exec TLS so that reaching it never allocates. */
struct nl_thread {
    uint64_t small_n;                      /* allocations below min_object, cumulative */
    struct nl_tbuf *buf;                   /* (keeps the two counters apart: see shims.c) */
    uint64_t small_bytes;                  /* their bytes, cumulative */
    uint64_t small_n_out, small_bytes_out; /* the part already written as SMALL_ALLOCS */
    int32_t logical;                       /* logical thread id, -1 until known */
    int32_t tid;                           /* kernel tid, 0 until known */
    int guard;                             /* >0 while inside the runtime: no tracing */
    int dead;                              /* the thread finished: record nothing more */
    int resolving;                         /* inside dlsym: allocate from the bootstrap pool */
};

extern NL_TLS struct nl_thread nl_self;

/* ---- owned_fd.c: a file whose descriptor the program cannot take over ---- */

struct nl_owned {
    atomic_int fd;       /* -1: none (reopened by path at the next write) */
    atomic_int lock;     /* tid of the writer or mover holding it; 0 when free */
    int reopen_flags;
    uint64_t dev, ino;   /* what the descriptor must name */
    uint64_t reopens;    /* times the file was reopened after the program took the number */
    uint64_t size;       /* bytes written: the file's size, checked against RLIMIT_FSIZE */
    int named;           /* its link count was above 0 at creation (some FUSE file systems
                            report 0 for every file): only then does 0 later mean removed */
    char path[640];
};

/** Opens @p path above the program's reach; 0, or -1 (errno set). */
int nl_owned_create(struct nl_owned *o, const char *path, int flags, int mode);
/** Writes all of @p len bytes, reopening the file if its number was taken; 0 or -1 (errno set).
 * A signal handler that interrupted this thread's own write writes after it, unchecked. */
int nl_owned_write(struct nl_owned *o, const void *p, size_t len);
/** Writes @p len bytes in place at offset @p at (a header field), when writing at the end
 * fails. */
void nl_owned_note(struct nl_owned *o, const void *p, size_t len, uint64_t at);
/** 1 if @p fd is @p o's descriptor. */
int nl_owned_is(struct nl_owned *o, int fd);
/** If @p fd is @p o's descriptor, moves it to another number (the program is about to use fd). */
void nl_owned_step_aside(struct nl_owned *o, int fd);
/** Closes the file (fork child: the parent's file). */
void nl_owned_close(struct nl_owned *o);

struct nl_global {
    atomic_int on;                 /* tracing enabled */
    struct nl_owned log;           /* the event file, O_APPEND */
    uint32_t pid;
    uint64_t start_ns;
    uint64_t min_object;           /* UINT64_MAX while tracing is off */
    atomic_int next_logical;
    struct nl_tbuf *_Atomic head;  /* registry of buffers */
    struct nl_config cfg;
};

extern struct nl_global nl_g;

uint64_t nl_now(void);
int32_t nl_gettid(void);
/** Opens the event file in cfg->dir, writes the header, attaches the calling thread as logical 0
 * and turns tracing on. Returns 0, or -1 (tracing stays off). */
int nl_core_start(const struct nl_config *cfg, uint32_t ppid);
/** Turns tracing off for good after an internal error; never aborts the host. */
void nl_disable(const char *why);
/** Room for @p count contiguous records in the calling thread's buffer, or NULL (tracing off). */
struct nl_record *nl_reserve(unsigned count);
/** Publishes the @p count records obtained from the last nl_reserve(). */
void nl_commit(unsigned count);
/** Appends one record with no payload. */
void nl_emit(uint16_t kind, uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e, uint64_t f);
/** Appends one record stamped with @p t (taken before the operation it describes). */
void nl_emit_at(uint64_t t, uint16_t kind, uint64_t a, uint64_t b, uint64_t c, uint64_t d,
                uint64_t e, uint64_t f);
/** Appends one record followed by @p len bytes of payload, NUL-padded to whole records. */
void nl_emit_bytes(uint16_t kind, uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e,
                   uint64_t f, const void *payload, size_t len);
/** Appends SMALL_ALLOCS for the small allocations not yet reported, if any. */
void nl_small_emit(void);
/** Writes out the calling thread's buffer. */
void nl_flush_self(void);
/** Writes out every registered buffer whose lock can be taken (all threads). Signal-safe. */
void nl_flush_all(void);
/** nl_flush_all() when an object of @p bytes was just recorded and is large (errno kept). */
void nl_flush_if_large(uint64_t bytes);
/** Gives the calling thread a buffer and a logical id (assigned from the counter if < 0). */
int nl_thread_attach(int32_t logical);
/** Hands out the logical id of a thread about to be created by the calling thread and records
 * THREAD_CREATE in the calling thread's buffer (before any record of the new thread). */
int32_t nl_thread_create_note(void);
/** Records that the thread announced by nl_thread_create_note(@p logical) was not created. */
void nl_thread_create_failed(int32_t logical, int err);
/** Flushes and releases the calling thread's buffer; the thread records nothing after this. */
void nl_thread_detach(void);
/** In a fork child: new file, empty buffers, logical ids restart at 0 for the calling thread. */
int nl_core_after_fork(void);
/** Sets what a fork child runs to make the runtime's state its own (nl_core_after_fork and the
 * records every process starts with); @p known is 0 for a fork no handler saw. */
void nl_core_on_fork(void (*child)(int known));
/** In a fork child (@p known: a pthread_atfork handler says so; otherwise the wiped fork mark
 * tells), runs the handler of nl_core_on_fork once. Every record, flush and direct write checks
 * the mark first, so a child of a fork no handler saw writes neither into its parent's log nor
 * waits on locks held by its parent's threads. */
void nl_core_fork_seen(int known);
/** Writes one record straight to the file (signal handlers). */
void nl_write_direct(const struct nl_record *r);
/** Writes one record of @p kind, stamped now, straight to the file; errno is kept. */
void nl_write_now(uint16_t kind, uint64_t a, uint64_t b, uint64_t c);
/** Emits END and flushes everything: the normal-exit path. */
void nl_core_finish(void);

/* ---- unwind.c: call sites ---- */

/** Frames inside [lo, hi) are skipped (the runtime itself). */
void nl_unwind_set_skip(uint64_t lo, uint64_t hi);
/** Captures the caller's stack, writes a SITE record the first time it is seen, returns its id. */
uint64_t nl_site_capture(void);
/** The walk of nl_stack_fast(), by libgcc's unwinder (never refuses). */
unsigned nl_stack_libgcc(uint64_t *frames, unsigned max, uint64_t skip_lo, uint64_t skip_hi);
/** Whether a walk leaves out a leading frame at @p ip: inside [lo, hi), an empty range when hi 0. */
static inline int nl_ip_skipped(uint64_t ip, uint64_t lo, uint64_t hi)
{
    return hi && ip >= lo && ip < hi;
}
/** Id of a site from its frames (never 0). */
uint64_t nl_site_hash(const uint64_t *frames, unsigned n);
/** Records the site if new (returns 1 if this call wrote the SITE record). */
int nl_site_note(uint64_t id, const uint64_t *frames, unsigned n);
/** Forgets all sites (fork child). */
void nl_sites_reset(void);

/* ---- cfi.c, cfi_rules.c: the cached stack walker ---- */

enum { NL_RULE_UNKNOWN = 0, NL_RULE_OK = 1, NL_RULE_END = 2 };

/** How a frame whose return address is known finds its caller's frame. */
struct nl_frame_rule {
    int kind;        /* NL_RULE_* */
    int cfa_is_rbp;  /* CFA = (rbp or rsp) + cfa_off */
    int cfa_deref;   /* CFA = *(rbp + cfa_off): a frame that realigned its stack */
    int rbp_at_rbp;  /* the caller's rbp is saved at rbp + rbp_off (realigned frames) */
    int32_t cfa_off;
    int16_t rbp_off; /* else at CFA + rbp_off; 0: rbp unchanged */
    int8_t ra_off;   /* the return address is saved at CFA + ra_off */
};

/** The rule at @p pc from the FDE at @p fde covering code from @p func; 0, or -1 if unknown. */
int nl_cfi_rule(const void *fde, uint64_t func, uint64_t pc, struct nl_frame_rule *out);
/** Records the calling thread's stack [lo, top): the walker only walks a stack that starts in it
 * and never reads at or above top. */
void nl_stack_set_bounds(uint64_t lo, uint64_t top);
/** Forgets every cached rule (a module was loaded where another may have been). */
void nl_rules_flush(void);
/**
 * Up to @p max return addresses of the caller's stack, the caller's own first, leading frames in
 * [skip_lo, skip_hi) left out. Returns how many, or -1 if a frame's rule is beyond the walker or
 * the stack top is unknown: then walk with libgcc.
 */
int nl_stack_fast(uint64_t *frames, unsigned max, uint64_t skip_lo, uint64_t skip_hi);

/* ---- modules.c: loaded modules, build ids, TLS blocks ---- */

/** Emits MODULE records for modules not yet reported in this process. */
void nl_modules_emit_new(void);
/** Forgets reported modules (fork child). */
void nl_modules_reset(void);
/** Emits TLS records for the calling thread's static TLS blocks. */
void nl_tls_emit(int32_t logical);
/** The address range of the module containing @p addr; 0 on success. */
int nl_module_range(const void *addr, uint64_t *lo, uint64_t *hi);
/** Parses a PT_NOTE segment for NT_GNU_BUILD_ID; returns its length (0 if none), copies up to cap. */
size_t nl_note_build_id(const void *note, size_t size, uint8_t *out, size_t cap);

/* ---- maps.c: /proc/self/maps with read(2) ---- */

struct nl_map {
    uint64_t lo, hi;
    char perms[5];
    const char *path; /* NUL-terminated, "" for anonymous; valid during the callback only */
};

/** Calls @p cb for each line of @p path (a maps file) until it returns non-zero. 0 or -1. */
int nl_maps_foreach(const char *path, int (*cb)(const struct nl_map *m, void *ctx), void *ctx);
/** Parses one maps line (no newline needed); 0 on success. */
int nl_maps_parse_line(char *line, struct nl_map *m);
/** The main thread's stack from [stack] in /proc/self/maps; 0 on success. */
int nl_main_stack(uint64_t *lo, uint64_t *size);

/* ---- pages.c: page-node runs at exit ---- */

/** Run-length encoder of page statuses into PAGE_NODES records. */
struct nl_run {
    uint64_t first, count, page_size;
    int64_t node;
};
void nl_run_feed(struct nl_run *r, uint64_t page, int64_t node);
void nl_run_end(struct nl_run *r);
/** Queries every writable private mapping with move_pages and emits PAGE_NODES runs. */
void nl_pages_emit(const char *maps_path);

/* ---- plan.c: the rules of `numalens run --plan` ---- */

/** Maps the rules file and places static objects and the calling (main) thread. */
void nl_plan_start(const char *path);
/** 1 while a plan is loaded. */
int nl_plan_active(void);
/** Remembers the plan's action for the site being captured by this thread. */
void nl_plan_note_site(uint64_t id, const uint64_t *frames, unsigned n);
/** Applies the action remembered by nl_plan_note_site to the object just recorded. */
void nl_plan_allocated(uint64_t start, uint64_t size);
/** Places the calling thread by the rule of @p logical, if any. */
void nl_plan_thread(int32_t logical);
/** A fork child: the plan's rules are the first process's. */
void nl_plan_forget(void);
/** The site key the recorder computes for @p frames. */
uint64_t nl_plan_site_key(const uint64_t *frames, unsigned n);

/* ---- signals.c ---- */

/** Installs the flush-and-re-raise handler for fatal signals still at their default action. */
void nl_signals_install(void);

#pragma GCC visibility pop

#endif
