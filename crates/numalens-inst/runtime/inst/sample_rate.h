/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file sample_rate.h
 * @brief The cap on how many samples a process's threads take per second (NUMALENS_INST_MAX_RATE).
 *
 * One sample per NUMALENS_INST_EVERY accesses gives a short program enough samples, and a long,
 * busy one far more than its findings need: jacobi-2d, a second of two threads, took 4.7 M, whose
 * writing was most of the recorder's work after the program's end and a fifth of the program's
 * own slowdown. A thread's first NL_RATE_FREE samples are never capped: a short program's
 * findings rest on all of them (the stencil workload's four threads take 2,000 each in 10 ms,
 * over 200,000 a second, and its neighbour sharing needs them; no ground-truth workload's
 * thread takes more than 4,100). Every free sample is written after the program's end, in
 * every thread: at 65,536 they were a third of a two-thread heat-3d's samples. After those, a
 * thread counts its samples in windows of NL_RATE_WINDOW: when a window came faster than its
 * share of the cap (the cap over the threads that took a sample in an activity period: the
 * larger count of the current period and the one before), its mean interval doubles; when it
 * came at under a quarter of it, the interval halves again, never below NUMALENS_INST_EVERY. A thread that waits (a pool's idle
 * thread, a server's main thread in its event loop) leaves its share to the others after one or
 * two periods, and counts itself in again at its next sample.
 * The cap is the process's because the samples are written after the end by the recorder
 * alone: a cap per thread let eight threads take eight times the samples. A countdown keeps
 * the mean it was drawn from, and its sample carries that mean as its weight, so weighted
 * counts stay unbiased across changes. Included by state.c, and by the test of
 * runtime/tests/test_sample_rate.c.
 */
#ifndef NL_SAMPLE_RATE_H
#define NL_SAMPLE_RATE_H

#include <stdint.h>

#include "inst.h"

/** Samples a thread takes before the cap applies. */
#define NL_RATE_FREE 8192u
/** Samples per window: at a two-thread share of the default cap (50,000 a second) a window
 * lasts about 20 ms. */
#define NL_RATE_WINDOW 1024u
/** The longest mean interval: weights stay 32-bit. */
#define NL_RATE_MAX_EVERY (1u << 30)
/** An activity period: a thread counts among those sharing the cap while it took a sample in
 * the current period or the one before. Longer than a window at a small share (1,024 samples at
 * an eighth of the default cap take 80 ms), short enough that a thread blocked in a poll hands
 * its share back within half a second. */
#define NL_RATE_ACTIVE_NS 250000000ull
/** A period's word: the period's number above NL_RATE_COUNT_BITS, its threads below. */
#define NL_RATE_COUNT_BITS 24
#define NL_RATE_COUNT_MASK ((1ull << NL_RATE_COUNT_BITS) - 1)

/** The threads that took a sample in each of the last two activity periods (by the period's
 * parity): one atomic word each, so that a thread counts itself in with one compare-and-swap
 * per period and never waits for another. */
struct nl_rate_activity {
    uint64_t period[2];
};

/** Counts the thread of @p r in the activity period of @p now, once per period. */
static void nl_rate_mark(struct nl_rate_activity *a, struct nl_sample_rate *r, uint64_t now)
{
    uint64_t p = now / NL_RATE_ACTIVE_NS;
    if (r->active_period == p + 1)
        return;
    r->active_period = p + 1;
    uint64_t *word = &a->period[p & 1];
    uint64_t w = __atomic_load_n(word, __ATOMIC_RELAXED), next;
    do {
        uint64_t of = w >> NL_RATE_COUNT_BITS;
        if (of > p)
            return; /* a later period has the word: this thread's clock read came late */
        if (of == p && (w & NL_RATE_COUNT_MASK) == NL_RATE_COUNT_MASK)
            return;
        next = of == p ? w + 1 : (p << NL_RATE_COUNT_BITS) | 1;
    } while (!__atomic_compare_exchange_n(word, &w, next, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

/** The threads sharing the cap at @p now: the larger count of the current and the previous
 * period (the current one fills as its threads sample), at least one. */
static uint32_t nl_rate_active(const struct nl_rate_activity *a, uint64_t now)
{
    uint64_t p = now / NL_RATE_ACTIVE_NS, n = 0;
    for (uint64_t q = p ? p - 1 : 0; q <= p; q++) {
        uint64_t w = __atomic_load_n(&a->period[q & 1], __ATOMIC_RELAXED);
        if (w >> NL_RATE_COUNT_BITS == q && (w & NL_RATE_COUNT_MASK) > n)
            n = w & NL_RATE_COUNT_MASK;
    }
    return n ? (uint32_t)n : 1;
}

/** A thread starts at the base interval, its window at @p now. */
static void nl_rate_start(struct nl_sample_rate *r, uint64_t now)
{
    r->every = nl_ig.every ? nl_ig.every : 1;
    r->drawn_every[0] = r->drawn_every[1] = r->every;
    r->window_samples = 0;
    r->window_ns = now;
    r->taken = 0;
}

/** After a sample taken at @p now: at the end of a window, the interval for the next one. The
 * cap is the process's: a thread is allowed its share among @p sampling threads
 * (nl_rate_active). */
static void nl_rate_step(struct nl_sample_rate *r, uint64_t now, uint32_t sampling)
{
    if (!nl_ig.max_rate)
        return;
    if (r->taken < NL_RATE_FREE) {
        /* The first window under the cap starts at the last free sample. */
        if (++r->taken == NL_RATE_FREE)
            r->window_ns = now;
        return;
    }
    if (++r->window_samples < NL_RATE_WINDOW)
        return;
    uint64_t elapsed = now > r->window_ns ? now - r->window_ns : 0;
    /* The samples the thread's share of the cap allows in the window, without overflow for any
     * window length. */
    uint64_t per_second = 1000000000ull * (sampling ? sampling : 1);
    unsigned __int128 allowed = (unsigned __int128)elapsed * nl_ig.max_rate / per_second;
    if (r->window_samples > allowed && r->every <= NL_RATE_MAX_EVERY / 2)
        r->every *= 2;
    else if ((unsigned __int128)r->window_samples * 4 < allowed && r->every / 2 >= nl_ig.every)
        r->every /= 2;
    r->window_samples = 0;
    r->window_ns = now;
}

#endif
