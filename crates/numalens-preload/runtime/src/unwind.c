/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file unwind.c
 * @brief Allocation call sites: capture with the libgcc unwinder, deduplicate, write once.
 *
 * Why _Unwind_Backtrace rather than frame pointers: Debian builds its libraries (libstdc++,
 * libgomp, ...) and most programs are built without frame pointers, so a frame-pointer walk
 * would stop early or follow garbage. The DWARF unwinder reads .eh_frame, which every module has
 * for C++ exceptions. libgcc_s is a link-time dependency of the runtime, so it is loaded with the
 * program, never dlopen'ed lazily from inside malloc (glibc's backtrace() does that). GCC 12's
 * libgcc finds each frame's FDE with glibc's _dl_find_object (glibc >= 2.35), which takes no lock
 * and does not allocate, so unwinding from a malloc called under the loader lock cannot deadlock;
 * with older libraries it falls back to dl_iterate_phdr, whose lock is recursive. Any allocation
 * the unwinder makes lands in our malloc under the recursion guard and is not traced.
 *
 * Most walks never reach libgcc: nl_stack_fast() (cfi.c) follows rules it caches per return
 * address and only hands over when a frame is beyond it.
 *
 * Sites are deduplicated by a 64-bit hash of the frames in a lock-free open-addressing table:
 * the thread whose compare-and-swap claims a slot writes the SITE record.
 */
#include <string.h>
#include <unwind.h>

#include "nl_internal.h"

#define NL_SITE_SLOTS 16384u

static _Atomic uint64_t nl_sites[NL_SITE_SLOTS];
static uint64_t nl_skip_lo, nl_skip_hi;

void nl_unwind_set_skip(uint64_t lo, uint64_t hi)
{
    nl_skip_lo = lo;
    nl_skip_hi = hi;
}

uint64_t nl_site_hash(const uint64_t *frames, unsigned n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (unsigned i = 0; i < n; i++) {
        h ^= frames[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
    }
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return h ? h : 1;
}

int nl_site_note(uint64_t id, const uint64_t *frames, unsigned n)
{
    uint64_t payload[NL_MAX_FRAMES] = {0};
    unsigned i = (unsigned)(id % NL_SITE_SLOTS);
    for (unsigned probe = 0; probe < 64; probe++, i = (i + 1) % NL_SITE_SLOTS) {
        uint64_t cur = atomic_load_explicit(&nl_sites[i], memory_order_relaxed);
        if (cur == id)
            return 0;
        if (cur == 0) {
            if (atomic_compare_exchange_strong(&nl_sites[i], &cur, id))
                break;
            if (cur == id)
                return 0;
        }
    }
    /* New (or the table is crowded: writing the site again is harmless, readers dedupe). */
    memcpy(payload, frames, (size_t)n * sizeof(uint64_t));
    nl_emit_bytes(NL_REC_SITE, id, n, 0, 0, 0, 0, payload, sizeof payload);
    return 1;
}

void nl_sites_reset(void)
{
    /* Only used slots are cleared: in a fork child every write copies a page of the 128 KiB table,
     * and those copies would be the child's first touches, not the program's. */
    for (unsigned i = 0; i < NL_SITE_SLOTS; i++)
        if (atomic_load_explicit(&nl_sites[i], memory_order_relaxed))
            atomic_store_explicit(&nl_sites[i], 0, memory_order_relaxed);
}

struct nl_walk {
    uint64_t *frames;
    unsigned n, max, skipped;
    uint64_t skip_lo, skip_hi;
};

static _Unwind_Reason_Code nl_walk_cb(struct _Unwind_Context *ctx, void *arg)
{
    struct nl_walk *w = arg;
    uint64_t ip = (uint64_t)_Unwind_GetIP(ctx);
    if (!ip)
        return _URC_END_OF_STACK;
    /* The first frame is nl_stack_libgcc's own; then the leading frames inside the runtime. */
    if (w->n == 0 && (w->skipped == 0 || nl_ip_skipped(ip, w->skip_lo, w->skip_hi))) {
        w->skipped++;
        return w->skipped > 64 ? _URC_END_OF_STACK : _URC_NO_REASON;
    }
    w->frames[w->n++] = ip;
    return w->n >= w->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

__attribute__((noinline)) unsigned nl_stack_libgcc(uint64_t *frames, unsigned max,
                                                   uint64_t skip_lo, uint64_t skip_hi)
{
    struct nl_walk w = {frames, 0, max, 0, skip_lo, skip_hi};
    _Unwind_Backtrace(nl_walk_cb, &w);
    return w.n;
}

__attribute__((noinline)) uint64_t nl_site_capture(void)
{
    uint64_t buf[NL_MAX_FRAMES + 1];
    unsigned max = (unsigned)nl_g.cfg.frames;
    if (max < 1 || max > NL_MAX_FRAMES)
        max = NL_MAX_FRAMES;
    /* Both walkers start at this function's frame; the skip range, when known, drops it (the
     * runtime's own frames), otherwise it is dropped here. */
    unsigned own = nl_skip_hi ? 0 : 1;
    int n = nl_stack_fast(buf, max + own, nl_skip_lo, nl_skip_hi);
    if (n < 0)
        n = (int)nl_stack_libgcc(buf, max + own, nl_skip_lo, nl_skip_hi);
    if (n <= (int)own)
        return 0;
    uint64_t id = nl_site_hash(buf + own, (unsigned)n - own);
    nl_site_note(id, buf + own, (unsigned)n - own);
    if (nl_unlikely(nl_plan_active()))
        nl_plan_note_site(id, buf + own, (unsigned)n - own);
    return id;
}
