/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file inst.h
 * @brief Internals of the instrumentation runtime: per-thread state and the access fast path.
 *
 * The hot path of every hook is nl_access(): one thread-local load says what the thread does;
 * then a countdown for sampling, and for exact counts a lookup in a small direct-mapped cache of
 * page entries (the "TLB") and one counter increment. Everything else (new pages, new chunks,
 * file growth, samples) is out of line.
 */
#ifndef NL_INST_H
#define NL_INST_H

#include <stddef.h>
#include <stdint.h>

#include "fast_path.h"
#include "numalens_inst.h"

#pragma GCC visibility push(hidden)

#define NL_EXPORT __attribute__((visibility("default")))
/* The access hooks. Built as LLVM bitcode for clang's link-time optimisation (NL_INLINE_HOOKS,
 * see src/inst/inline.rs), each is inlined into the instrumented code at every call: its slow
 * paths, which stay native code in state.c, are then called from the instrumented code itself,
 * so a sample's instruction address is the slow path's own return address and the hooks pass
 * none (NL_HOOK_IP). Built natively, a hook is a function, and one that makes more than one access
 * passes its return address. */
#ifdef NL_INLINE_HOOKS
#define NL_HOOK NL_EXPORT __attribute__((always_inline))
#define NL_HOOK_IP() NULL
#else
#define NL_HOOK NL_EXPORT
#define NL_HOOK_IP() __builtin_return_address(0)
#endif
#define nl_likely(x) __builtin_expect(!!(x), 1)
#define nl_unlikely(x) __builtin_expect(!!(x), 0)

/** Default mean sampling interval (accesses per sample) when NUMALENS_INST_EVERY is unset. */
#define NL_INST_DEFAULT_EVERY 1024u

struct nl_tlb_slot {
    uint64_t page;              /* page number cached, or ~0 */
    struct nl_inst_page *entry; /* its counters */
};

/** A file that grows by mapped segments; records never move once placed. */
struct nl_grow_file {
    int fd;                     /* above the program's reach; -1 when taken (reopened by path) */
    uint32_t record_size;
    uint32_t step;              /* fewest records whose bytes are a whole number of pages */
    uint64_t used;              /* records handed out */
    uint64_t mapped;            /* records covered by the segments */
    unsigned nseg;
    int full;                   /* could not grow: nothing more is written */
    struct { char *base; uint64_t first, count; size_t bytes; } seg[96];
    uint64_t dev, ino;          /* what fd must name */
    char path[600];
};

/** Whether the file was made (the thread counts into it); its fd may be -1 for a while. */
static inline int nl_grow_on(const struct nl_grow_file *f)
{
    return f->record_size != 0;
}

/** Chunk index: region number (page >> 6) -> chunk, open addressing, anonymous memory. */
struct nl_chunk_index {
    uint64_t *keys;             /* region + 1; 0 = empty */
    struct nl_inst_chunk **vals;
    uint64_t cap, n;
};

/** A thread's sampling interval: the mean it draws its countdowns from now, and the mean each
 * countdown was drawn from, which is the weight of the sample it ends in. */
struct nl_sample_rate {
    uint32_t every;             /* mean interval now, nl_ig.every or a power-of-two multiple */
    uint32_t drawn_every[2];    /* of the read and write countdowns */
    uint32_t taken;             /* samples taken, counted up to NL_RATE_FREE */
    uint32_t window_samples;    /* samples since window_ns */
    uint64_t window_ns;         /* when the current rate window began */
    uint64_t active_period;     /* the last activity period it counted itself in, plus one */
};

struct nl_ithread {
    struct nl_tlb_slot tlb[NL_TLB_SLOTS];
    uint64_t rng;
    struct nl_inst_page sink;   /* where counts go while inactive */
    int busy;                   /* inside a slow path: a signal handler's access is dropped */
    int shared;                 /* 1 for the one inactive state all threads start with */
    uint32_t pid, tid;
    uint64_t dropped;           /* accesses not counted (signal handler inside a slow path) */
    struct nl_chunk_index index;
    struct nl_grow_file pages;  /* exact counts: nl_grow_on while the thread counts pages */
    struct nl_grow_file samples; /* sampled accesses: nl_grow_on while the thread samples */
    int own;                    /* 1 where this state was set up: its pages are emptied in a fork
                                   child (MADV_WIPEONFORK), so 0 there says no fork handler ran */
    uint64_t marked_ns;         /* when this thread last had the event log marked (sampled mode) */
    struct nl_sample_rate rate; /* its sampling interval under the rate cap (sample_rate.h) */
};

struct nl_iglobal {
    int initialised;
    int on;                     /* 1 when recording: NUMALENS_DIR and NUMALENS_INST are set */
    int keyed;                  /* the thread-exit key and the fork handler are installed */
    unsigned mode;              /* NL_INST_EXACT | NL_INST_SAMPLED */
    uint32_t every;             /* mean sampling interval a thread starts with (accesses) */
    uint32_t max_rate;          /* samples per second the process's sampling threads take at
                                   most together; 0: no cap */
    char dir[512];
    uint64_t copy_id;
};

/* The gcc plugin's copy of the fast path addresses these by offset. */
_Static_assert(offsetof(struct nl_ithread, tlb) == NL_ITHREAD_TLB_OFFSET, "fast_path.h");
_Static_assert(sizeof(struct nl_tlb_slot) == NL_TLB_SLOT_BYTES, "fast_path.h");
_Static_assert(offsetof(struct nl_tlb_slot, page) == NL_TLB_SLOT_PAGE_OFFSET, "fast_path.h");
_Static_assert(offsetof(struct nl_tlb_slot, entry) == NL_TLB_SLOT_ENTRY_OFFSET, "fast_path.h");
_Static_assert(offsetof(struct nl_inst_page, counts) == NL_PAGE_COUNTS_OFFSET, "fast_path.h");
_Static_assert(sizeof(((struct nl_inst_page *)0)->counts[0]) == 8, "fast_path.h");
_Static_assert((NL_TLB_SLOTS & (NL_TLB_SLOTS - 1)) == 0, "a power of two");

extern struct nl_iglobal nl_ig;
extern struct nl_ithread nl_inactive;
extern __thread struct nl_ithread *nl_ith __attribute__((tls_model("initial-exec")));
/* The fast path's own state lives in thread-local storage, not behind nl_ith: a thread that is
 * not recorded then pays one load and a branch per access. */
extern __thread unsigned nl_fast __attribute__((tls_model("initial-exec")));
/** Reads and writes left before the thread's next sample of each. Two countdowns rather than one:
 * each is a load, subtract and store to memory at every access, and a loop that reads and writes
 * runs two such chains side by side instead of one (docs/INST.md gives what that gained). Each
 * still samples one access in `every` of its kind, with the same weight. */
extern __thread int64_t nl_countdown_read __attribute__((tls_model("initial-exec")));
extern __thread int64_t nl_countdown_write __attribute__((tls_model("initial-exec")));

static inline __attribute__((always_inline)) int64_t *nl_countdown_of(unsigned is_write)
{
    return is_write ? &nl_countdown_write : &nl_countdown_read;
}

void nl_inst_init(void);
/** Slow path of a counted access: page not in the cache (or thread not set up yet). */
void nl_inst_miss(struct nl_ithread *t, uintptr_t addr, unsigned is_write, uint64_t count);
/** Slow path of the sampling countdown: takes a sample when due, then counts the access. A NULL
 * @p ip means the hook tail-called this function (a hook whose one access is its last act, which
 * gcc and clang compile to a jump at -O2): its own return address is then the instrumented code's,
 * so the fast path need not load the return address from the stack. */
void nl_inst_sample(struct nl_ithread *t, uintptr_t addr, unsigned is_write, unsigned size,
                    void *ip);
/** Sampling of a read-modify-write whose read countdown ran out, before the operation: samples its
 * read and its write (setting the thread up at its first access). Returns the thread's mode word
 * as it now is. */
unsigned nl_inst_rmw_sample(uintptr_t addr, unsigned size, void *ip);
/** Sets up the calling thread's state if it has none yet (or only a raw fork's copy of its
 * parent's): called by gcc's plugin on the entry edge of a loop laid out for one mode, so that
 * the thread's mode word says how it counts before the loop chooses its copy
 * (gcc_plugin_versions.h). Counts nothing. */
void nl_inst_prepare(void);
/** Exact counts of a read-modify-write whose page is not in the cache. */
void nl_inst_rmw_miss(uintptr_t addr, unsigned size);
/** Counts a range access of @p size bytes as one access per 8-byte word, page by page. */
void nl_inst_range(uintptr_t addr, uint64_t size, unsigned is_write, void *ip);
uint64_t nl_inst_now(void);

static inline unsigned nl_tlb_index(uint64_t page)
{
    /* Multiplicative hashing: arrays whose sizes are multiples of the cache span would collide
     * for their whole length under low bits; here two streams share a slot for one page only,
     * with probability 1/NL_TLB_SLOTS. */
    return (unsigned)((page * NL_TLB_HASH) >> NL_TLB_HASH_SHIFT) & (NL_TLB_SLOTS - 1);
}

/* Whether slot @p s caches @p page; its counters are then in @p *e. A signal handler may refill the slot
 * at any instruction of the interrupted access. The entry is loaded first, and the acquire keeps
 * the compiler from loading the page number before it: a refill between the two loads changes the
 * page number, so the access misses. Compared first, the page number could match and the entry
 * loaded after it be the handler's page's, which would take the count. (On x86 both loads are
 * plain moves.) */
static inline int nl_tlb_lookup(const struct nl_tlb_slot *s, uint64_t page,
                                struct nl_inst_page **e)
{
    *e = __atomic_load_n(&s->entry, __ATOMIC_ACQUIRE);
    return __atomic_load_n(&s->page, __ATOMIC_RELAXED) == page;
}

/* Counts @p n accesses in the page of @p addr: in its cached counters, else by the slow path. */
static inline __attribute__((always_inline)) void nl_count(struct nl_ithread *t, uintptr_t addr,
                                                           unsigned is_write, uint64_t n)
{
    uint64_t page = addr >> NL_INST_PAGE_SHIFT;
    struct nl_inst_page *e;
    if (nl_likely(nl_tlb_lookup(&t->tlb[nl_tlb_index(page)], page, &e)))
        e->counts[is_write] += n;
    else
        nl_inst_miss(t, addr, is_write, n);
}

/* What an access of @p size bytes counts as. A 16-byte access (a vectorised or paired load)
 * counts as the two 8-byte words it moves, in the sampling countdown as in the page counts, so
 * neither depends on whether the compiler vectorised the loop. A constant in every hook. */
static inline uint64_t nl_words(unsigned size)
{
    return size > 8 ? size / 8 : 1;
}

/* The sampling countdown is checked first so that both slow paths are tail calls: the fast path
 * then saves no registers. nl_inst_sample counts the access too. Threads start sampling with
 * their countdown spent and the shared inactive state, so their first access sets up their own
 * state and nl_fast. */
static inline __attribute__((always_inline)) void nl_access(uintptr_t addr, unsigned is_write,
                                                            unsigned size, void *ip)
{
    uint64_t words = nl_words(size);
    unsigned fast = nl_fast;
    if ((fast & NL_FAST_SAMPLE) && nl_unlikely((*nl_countdown_of(is_write) -= (int64_t)words) <= 0)) {
        nl_inst_sample(nl_ith, addr, is_write, size, ip);
        return;
    }
    if (fast & NL_FAST_EXACT)
        nl_count(nl_ith, addr, is_write, words);
}

/* A read-modify-write (an atomic exchange or fetch_op) is a read then a write of the same bytes.
 * Its sampling is one step of the read countdown, taken before the operation; when a sample falls
 * due, both the read and the write are sampled (nl_inst_rmw_sample), each with the usual weight:
 * RMWs are then sampled at the reads' rate, so the written counts they stand for stay unbiased.
 * After the locked instruction, a sampling thread makes no memory access at all: loads after a
 * `lock` wait for it, and stores before the next one must drain first; stepping both countdowns
 * after the operation cost hotspot's atomic increments (docs/INST.md). Exact counting, with one
 * cache lookup for both, comes after the operation. */
static inline __attribute__((always_inline)) int nl_rmw_sample_due(unsigned fast, unsigned size)
{
    return (fast & NL_FAST_SAMPLE) &&
           nl_unlikely((nl_countdown_read -= (int64_t)nl_words(size)) <= 0);
}

/* Adds to a page counter in one instruction, so that a signal handler counting on the same page
 * cannot land between a load and a store and have its count lost. A plain += compiles to one
 * add to memory too, but two of them side by side were merged into a 16-byte load, add and
 * store. */
static inline __attribute__((always_inline)) void nl_count_add(uint64_t *counter, uint64_t n)
{
#if defined(__x86_64__)
    __asm__("addq %1, %0" : "+m"(*counter) : "er"(n));
#else
    *counter += n;
#endif
}

/* Counts the read and the write of a read-modify-write after it, when the thread counts exactly
 * (@p fast: the mode word read before the operation). A page not in the cache is one out-of-line call. */
static inline __attribute__((always_inline)) void nl_rmw_after(unsigned fast, uintptr_t addr,
                                                               unsigned size)
{
    if (!(fast & NL_FAST_EXACT))
        return;
    uint64_t words = nl_words(size), page = addr >> NL_INST_PAGE_SHIFT;
    struct nl_inst_page *e;
    if (nl_likely(nl_tlb_lookup(&nl_ith->tlb[nl_tlb_index(page)], page, &e))) {
        nl_count_add(&e->counts[0], words);
        nl_count_add(&e->counts[1], words);
    } else {
        nl_inst_rmw_miss(addr, size);
    }
}

/* Defines hook @p fn (with attributes @p hook, and @p target for both functions), a
 * read-modify-write of @p size bytes whose operation @p expr (of `a` and `v`) returns the old
 * value, and its rare path: when a sample falls due the hook jumps to a function of its
 * own that samples, operates and counts. The fast path then keeps every value in the registers
 * it came in (no register saved, no stack) and, being a tail call, the rare path's return address
 * is the instrumented code's. */
#define NL_RMW_HOOK(hook, target, T, fn, size, expr)                                               \
    static __attribute__((noinline, cold)) target T nl_due_##fn(volatile T *a, T v)                \
    {                                                                                              \
        unsigned fast = nl_inst_rmw_sample((uintptr_t)a, (size), __builtin_return_address(0));     \
        T old = (expr);                                                                            \
        nl_rmw_after(fast, (uintptr_t)a, (size));                                                  \
        return old;                                                                                \
    }                                                                                              \
    hook target T fn(volatile T *a, T v, int mo)                                                   \
    {                                                                                              \
        (void)mo;                                                                                  \
        unsigned fast = nl_fast;                                                                   \
        if (nl_rmw_sample_due(fast, (size)))                                                       \
            return nl_due_##fn(a, v);                                                              \
        T old = (expr);                                                                            \
        nl_rmw_after(fast, (uintptr_t)a, (size));                                                  \
        return old;                                                                                \
    }

#pragma GCC visibility pop

#endif
