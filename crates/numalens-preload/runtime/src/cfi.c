/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file cfi.c
 * @brief A stack walker for x86-64 that caches each return address's call-frame rule.
 *
 * Why: libgcc's _Unwind_Backtrace finds and interprets every frame's CFI program on every walk,
 * about 150 ns a frame. A program making many small tracked allocations from one place walks the
 * same few return addresses over and over, so the rule that takes one frame to its caller (where
 * the CFA is, where the return address and the caller's rbp are saved) is worked out once per
 * return address from the same .eh_frame data libgcc reads, found with libgcc's own
 * _Unwind_Find_FDE, and kept in a lock-free table. A walk is then a table look-up and two loads
 * per frame.
 *
 * Only the rules compilers emit for ordinary code are understood: the CFA is rsp or rbp plus an
 * offset, the return address and rbp are saved at offsets from it; or, in a frame that realigned
 * its stack through a copy of the incoming stack pointer (gcc's way when a frame has both an
 * over-aligned local and a variable-size one, and in some main functions), the CFA is loaded from
 * a slot at rbp minus an offset and rbp is saved at rbp. Anything else (signal frames, other CFA
 * expressions, code without an FDE) makes nl_stack_fast() fail, and the caller walks with libgcc
 * instead, which gives the same frames. Every load stays between the
 * frame's stack pointer and the top of the thread's stack, so even a wrong rule (code unloaded and
 * other code mapped at its address) cannot make the walk fault; a walk that does not start on the
 * thread's own stack is left to libgcc.
 */
#include <string.h>

#include "nl_internal.h"

/* libgcc's FDE search (exported from libgcc_s since GCC 3.0; the struct is its dwarf_eh_bases). */
struct nl_eh_bases {
    void *tbase, *dbase, *func;
};
extern const void *_Unwind_Find_FDE(void *pc, struct nl_eh_bases *bases);

#define NL_RULE_SLOTS 4096u
#define NL_RULE_PROBES 8u
#define NL_SLOT_BUSY (1ull << 63)

static struct {
    _Atomic uint64_t ip;   /* 0 free, ip | NL_SLOT_BUSY while being filled, then ip */
    _Atomic uint64_t rule; /* nl_rule_pack() */
} nl_rules[NL_RULE_SLOTS];

/* This thread's stack, [lo, top); top 0: unknown. */
NL_TLS uint64_t nl_stack_lo, nl_stack_top;

void nl_stack_set_bounds(uint64_t lo, uint64_t top)
{
    nl_stack_lo = lo;
    nl_stack_top = top;
}

void nl_rules_flush(void)
{
    for (unsigned i = 0; i < NL_RULE_SLOTS; i++)
        if (atomic_load_explicit(&nl_rules[i].ip, memory_order_relaxed))
            atomic_store_explicit(&nl_rules[i].ip, 0, memory_order_relaxed);
}

/* ---- packing: kind in bits 0-1, rbp-based CFA in bit 2, loaded CFA in bit 3, rbp saved off rbp
 * in bit 4, rbp and RA offsets, CFA offset ---- */

static uint64_t nl_rule_pack(const struct nl_frame_rule *r)
{
    return (uint64_t)r->kind | (uint64_t)(r->cfa_is_rbp != 0) << 2 |
           (uint64_t)(r->cfa_deref != 0) << 3 | (uint64_t)(r->rbp_at_rbp != 0) << 4 |
           (uint64_t)(uint16_t)r->rbp_off << 8 | (uint64_t)(uint8_t)r->ra_off << 24 |
           (uint64_t)(uint32_t)r->cfa_off << 32;
}

static void nl_rule_unpack(uint64_t v, struct nl_frame_rule *r)
{
    r->kind = (int)(v & 3);
    r->cfa_is_rbp = (int)(v >> 2 & 1);
    r->cfa_deref = (int)(v >> 3 & 1);
    r->rbp_at_rbp = (int)(v >> 4 & 1);
    r->rbp_off = (int16_t)(uint16_t)(v >> 8);
    r->ra_off = (int8_t)(uint8_t)(v >> 24);
    r->cfa_off = (int32_t)(uint32_t)(v >> 32);
}

/* ---- the rule of one return address ---- */

/* The rule for the frame that returns to @p ip, from libgcc's FDE look-up (not cached). */
static void nl_rule_for_ip(uint64_t ip, struct nl_frame_rule *out)
{
    struct nl_eh_bases bases = {0, 0, 0};
    memset(out, 0, sizeof *out);
    /* ip is a return address: the call that pushed it ends just before it. */
    const void *fde = _Unwind_Find_FDE((void *)(ip - 1), &bases);
    if (!fde || nl_cfi_rule(fde, (uint64_t)bases.func, ip - 1, out) != 0)
        out->kind = NL_RULE_UNKNOWN;
}

static uint64_t nl_slot_of(uint64_t ip)
{
    return (ip * 0x9e3779b97f4a7c15ull) >> 52; /* 12 bits: NL_RULE_SLOTS */
}

static uint64_t nl_rule_lookup(uint64_t ip)
{
    uint64_t i = nl_slot_of(ip);
    for (unsigned probe = 0; probe < NL_RULE_PROBES; probe++, i = (i + 1) % NL_RULE_SLOTS) {
        uint64_t k = atomic_load_explicit(&nl_rules[i].ip, memory_order_acquire);
        if (k == ip) {
            uint64_t v = atomic_load_explicit(&nl_rules[i].rule, memory_order_acquire);
            /* A flush may have emptied the slot and another ip taken it since the first load. */
            if (atomic_load_explicit(&nl_rules[i].ip, memory_order_relaxed) == ip)
                return v;
            break;
        }
        if (k == 0)
            break;
    }
    struct nl_frame_rule r;
    nl_rule_for_ip(ip, &r);
    uint64_t v = nl_rule_pack(&r);
    i = nl_slot_of(ip);
    for (unsigned probe = 0; probe < NL_RULE_PROBES; probe++, i = (i + 1) % NL_RULE_SLOTS) {
        uint64_t expect = 0;
        if (atomic_compare_exchange_strong(&nl_rules[i].ip, &expect, ip | NL_SLOT_BUSY)) {
            atomic_store_explicit(&nl_rules[i].rule, v, memory_order_relaxed);
            atomic_store_explicit(&nl_rules[i].ip, ip, memory_order_release);
            break;
        }
        if ((expect & ~NL_SLOT_BUSY) == ip)
            break; /* another thread is adding the same rule */
    }
    return v; /* a crowded table only costs the next walk the same work again */
}

/* ---- the walk ---- */

/* Loads the word at @p at into @p out if it lies in [lo, hi) and is aligned; else -1, no load. */
static inline int nl_load_slot(uint64_t at, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (at < lo || at + 8 > hi || (at & 7))
        return -1;
    *out = *(const uint64_t *)at;
    return 0;
}

__attribute__((noinline)) int nl_stack_fast(uint64_t *frames, unsigned max, uint64_t skip_lo,
                                            uint64_t skip_hi)
{
    uint64_t top = nl_stack_top;
    /* Asking for this function's frame address gives it a frame pointer: rbp points at the saved
     * caller rbp, with the return address above it and the caller's stack pointer above that. */
    const uint64_t *fp = __builtin_frame_address(0);
    uint64_t ip = fp[1], sp = (uint64_t)(fp + 2), rbp = fp[0];
    unsigned n = 0, skipped = 0;
    /* On another stack (a signal's alternate stack, a coroutine's) the range up to top could
     * hold unmapped gaps: libgcc walks those. */
    if (!top || sp >= top || sp < nl_stack_lo)
        return -1;
    while (ip && n < max) {
        if (n == 0 && nl_ip_skipped(ip, skip_lo, skip_hi)) {
            if (++skipped > 64)
                break;
        } else {
            frames[n++] = ip;
            if (n >= max)
                break;
        }
        struct nl_frame_rule r;
        nl_rule_unpack(nl_rule_lookup(ip), &r);
        if (r.kind == NL_RULE_END)
            break;
        if (r.kind != NL_RULE_OK)
            return -1;
        uint64_t cfa = (r.cfa_is_rbp ? rbp : sp) + (uint64_t)(int64_t)r.cfa_off;
        /* A realigned frame keeps its CFA in a slot of its own, at rbp + cfa_off. */
        if (r.cfa_deref && nl_load_slot(rbp + (uint64_t)(int64_t)r.cfa_off, sp, top, &cfa) != 0)
            return -1;
        /* The CFA is above this frame and inside the stack; the saved slots lie between. */
        if (cfa <= sp || cfa > top || (cfa & 7) || cfa + (uint64_t)(int64_t)r.ra_off < sp ||
            (r.rbp_off && !r.rbp_at_rbp && cfa + (uint64_t)(int64_t)r.rbp_off < sp))
            return -1;
        ip = *(const uint64_t *)(cfa + (uint64_t)(int64_t)r.ra_off);
        if (r.rbp_at_rbp) {
            /* Saved inside the frame, below the CFA. */
            if (nl_load_slot(rbp + (uint64_t)(int64_t)r.rbp_off, sp, cfa, &rbp) != 0)
                return -1;
        } else if (r.rbp_off) {
            rbp = *(const uint64_t *)(cfa + (uint64_t)(int64_t)r.rbp_off);
        }
        sp = cfa;
    }
    return (int)n;
}
