/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The rate cap of sample_rate.h on a simulated clock: a thread whose accesses come at a steady
 * rate takes samples at its share of the process's cap, whatever its base rate, and its free
 * samples first. Prints one line per case; exits 1 on the first failure. */
#include <stdio.h>
#include <stdlib.h>

#include "sample_rate.h"

struct nl_iglobal nl_ig;

/* Samples per second that one thread takes in its last simulated second, when it makes
 * @p accesses_per_s accesses a second for @p seconds under a cap of @p cap, as one of @p first
 * sampling threads for the first half of the time and of @p then for the second. */
static double steady_rate(uint32_t cap, uint32_t first, uint32_t then, double accesses_per_s,
                          int seconds, uint32_t *free_taken)
{
    nl_ig.every = 1024;
    nl_ig.max_rate = cap;
    struct nl_sample_rate r = {0};
    double t = 0, end = seconds * 1e9;
    nl_rate_start(&r, 0);
    uint64_t last_second = 0;
    *free_taken = 0;
    while (t < end) {
        t += r.every / accesses_per_s * 1e9;
        if (r.every == nl_ig.every && r.taken < NL_RATE_FREE)
            (*free_taken)++;
        if (t >= end - 1e9)
            last_second++;
        nl_rate_step(&r, (uint64_t)t, t < end / 2 ? first : then);
    }
    return (double)last_second;
}

static int check(const char *what, double value, double lo, double hi)
{
    int ok = value >= lo && value <= hi;
    printf("%s %s: %.0f (expected %.0f to %.0f)\n", ok ? "ok" : "FAILED", what, value, lo, hi);
    return ok;
}

int main(void)
{
    uint32_t free_taken;
    int ok = 1;
    /* 2 G accesses a second: 2 M samples a second at the base interval. Doubling stops at the
     * first interval under the share, so a steady thread takes between half its share and all. */
    double one = steady_rate(100000, 1, 1, 2e9, 6, &free_taken);
    ok &= check("one thread, cap 100000", one, 100000 / 2.0, 100000);
    ok &= check("its free samples", free_taken, NL_RATE_FREE, NL_RATE_FREE);
    double eight = steady_rate(100000, 8, 8, 2e9, 6, &free_taken);
    ok &= check("one of eight threads, cap 100000", eight, 100000 / 8 / 2.0, 100000 / 8);
    /* When the seven others end, the interval halves while the thread takes under a quarter of
     * its share, which is now the whole cap. */
    double left = steady_rate(100000, 8, 1, 2e9, 12, &free_taken);
    ok &= check("the last of eight threads", left, 100000 / 4.0, 100000);
    /* A thread slower than its share is not held back. */
    double slow = steady_rate(100000, 2, 2, 1024e4, 6, &free_taken);
    ok &= check("a thread under its share", slow, 10000 * 0.99, 10000 * 1.01);
    /* No count (a state from before any thread counted itself) is a share of one. */
    double none = steady_rate(100000, 0, 0, 2e9, 6, &free_taken);
    ok &= check("no sampling thread counted", none, 100000 / 2.0, 100000);
    return ok ? 0 : 1;
}
