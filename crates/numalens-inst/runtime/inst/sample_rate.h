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
 * share of the cap (the cap over the threads that have sampled and not ended: a waiting thread
 * keeps its share), its mean interval doubles; when it came at under a quarter of it, the
 * interval halves again, never below NUMALENS_INST_EVERY.
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
 * cap is the process's: a thread is allowed its share among @p sampling threads. */
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
