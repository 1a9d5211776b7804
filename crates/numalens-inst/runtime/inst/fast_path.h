/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file fast_path.h
 * @brief What the access fast path relies on, in one place for its two writers: nl_access() in
 * inst.h, compiled into the hooks, and the gcc plugin (gcc_plugin.cc), which writes the same fast
 * path into gcc's instrumented code. inst.h checks every layout figure against its structures.
 */
#ifndef NL_FAST_PATH_H
#define NL_FAST_PATH_H

/** Bits of nl_fast: what a thread's fast path does. */
#define NL_FAST_SAMPLE 1u /* run the countdown (also set while the thread has no state yet) */
#define NL_FAST_EXACT 2u  /* count the access in its page */

/** Slots of the per-thread page cache: 4096 (64 KiB), so that a thread's random updates over a
 * few thousand pages (a hot band, a hash table) mostly hit: on the hotspot workload's 1024-page
 * band exact mode took 15 % less time than with 1024 slots, 30 % less than with 256. A
 * streaming thread uses a few slots. */
#define NL_TLB_BITS 12
#define NL_TLB_SLOTS (1u << NL_TLB_BITS)
/** Slot of page p: the top NL_TLB_BITS bits of p * NL_TLB_HASH (Fibonacci hashing), masked. */
#define NL_TLB_HASH 0x9E3779B97F4A7C15ull
#define NL_TLB_HASH_SHIFT (64 - NL_TLB_BITS)

/** Byte offsets: the cache is the first member of a thread's state (struct nl_ithread); a slot
 * is a page number then a pointer to the page's counters (struct nl_inst_page), whose read and
 * write counts are its first two 8-byte words. */
#define NL_ITHREAD_TLB_OFFSET 0
#define NL_TLB_SLOT_BYTES 16
#define NL_TLB_SLOT_PAGE_OFFSET 0
#define NL_TLB_SLOT_ENTRY_OFFSET 8
#define NL_PAGE_COUNTS_OFFSET 0

#endif
