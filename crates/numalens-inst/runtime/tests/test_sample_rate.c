/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/* The rate cap of sample_rate.h on a simulated clock: a thread whose accesses come at a steady
 * rate takes samples at its share of the process's cap, whatever its base rate, and its free
 * samples first; threads that stop sampling leave their share to the others. Prints one line
 * per case; exits 1 if any failed. */
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

/* Samples per second of thread 0 in the last simulated second: @p threads threads make 2 G
 * accesses a second each, counted in and judged by the activity words as the hooks do; all but
 * thread 0 stop (wait, without ending) after @p others_stop seconds of @p seconds. */
static double shared_rate(uint32_t threads, double others_stop, int seconds)
{
    nl_ig.every = 1024;
    nl_ig.max_rate = 100000;
    struct nl_rate_activity activity = {{0, 0}};
    struct nl_sample_rate r[8] = {{0}};
    double next[8], end = seconds * 1e9, stop = others_stop * 1e9, last_second = 0;
    /* Far from zero, so that the periods' numbers are as large as a real clock's. */
    const double boot = 3600e9;
    for (uint32_t i = 0; i < threads; i++) {
        nl_rate_start(&r[i], (uint64_t)boot);
        next[i] = boot + r[i].every / 2e9 * 1e9 * (i + 1) / threads;
    }
    for (;;) {
        uint32_t i = 0;
        for (uint32_t j = 1; j < threads; j++)
            if (next[j] < next[i])
                i = j;
        double t = next[i];
        if (t >= boot + end)
            break;
        if (i == 0 && t >= boot + end - 1e9)
            last_second++;
        nl_rate_mark(&activity, &r[i], (uint64_t)t);
        nl_rate_step(&r[i], (uint64_t)t, nl_rate_active(&activity, (uint64_t)t));
        next[i] = i && t >= boot + stop ? 1e300 : t + r[i].every / 2e9 * 1e9;
    }
    return last_second;
}

/* The activity words counted directly: marks once per period, the larger of two periods, a
 * late mark that does not clobber a later period. */
static int check(const char *what, double value, double lo, double hi);

static int activity_counts(void)
{
    struct nl_rate_activity a = {{0, 0}};
    struct nl_sample_rate r[4] = {{0}};
    const uint64_t p = NL_RATE_ACTIVE_NS, t0 = 1000 * p;
    int ok = 1;
    ok &= check("no thread counted yet", nl_rate_active(&a, t0), 1, 1);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 3; i++)
            nl_rate_mark(&a, &r[i], t0 + (uint64_t)round * 1000 + (uint64_t)i);
    ok &= check("three threads, each counted once in its period", nl_rate_active(&a, t0), 3, 3);
    /* Two periods on, nobody has sampled: both words are older than the previous period. */
    ok &= check("a stale word two periods on", nl_rate_active(&a, t0 + 3 * p), 1, 1);
    nl_rate_mark(&a, &r[0], t0 + p);
    ok &= check("one of them in the next period", nl_rate_active(&a, t0 + p), 3, 3);
    nl_rate_mark(&a, &r[0], t0 + 2 * p);
    ok &= check("two periods later", nl_rate_active(&a, t0 + 2 * p), 1, 1);
    nl_rate_mark(&a, &r[1], t0 + 2 * p + 1);
    nl_rate_mark(&a, &r[2], t0 + 2 * p + 2);
    ok &= check("three again", nl_rate_active(&a, t0 + 2 * p + 3), 3, 3);
    /* A thread whose clock read is two periods old: the word of that parity is a later
     * period's now, and stays so. */
    nl_rate_mark(&a, &r[3], t0);
    ok &= check("after a late mark of an old period", nl_rate_active(&a, t0 + 2 * p + 3), 3, 3);
    /* A full count stays full, and does not carry into the period's number. */
    struct nl_rate_activity full = {{0, 0}};
    struct nl_sample_rate late = {0};
    const uint64_t t9 = 9 * p;
    full.period[9 & 1] = (9ull << NL_RATE_COUNT_BITS) | NL_RATE_COUNT_MASK;
    nl_rate_mark(&full, &late, t9);
    ok &= check("a full count", nl_rate_active(&full, t9), NL_RATE_COUNT_MASK, NL_RATE_COUNT_MASK);
    /* The period in seconds: a thread that sampled 0.2 s ago (in the period before) still
     * counts, one that sampled 0.6 s ago no longer does. */
    struct nl_rate_activity b = {{0, 0}};
    struct nl_sample_rate s[2] = {{0}};
    const uint64_t second = 1000000000ull, t1 = 3600 * second + second / 10;
    nl_rate_mark(&b, &s[0], t1);
    nl_rate_mark(&b, &s[1], t1);
    nl_rate_mark(&b, &s[0], t1 + second / 5);
    ok &= check("a thread that sampled 0.2 s ago", nl_rate_active(&b, t1 + second / 5), 2, 2);
    nl_rate_mark(&b, &s[0], t1 + 3 * second / 5);
    ok &= check("a thread that sampled 0.6 s ago", nl_rate_active(&b, t1 + 3 * second / 5), 1, 1);
    return ok;
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
    ok &= activity_counts();
    /* Eight busy threads counted by their samples: each takes its eighth. */
    double busy = shared_rate(8, 1e9, 6);
    ok &= check("one of eight sampling threads, counted by activity", busy, 100000 / 8 / 2.0,
                100000 / 8);
    /* When seven of them wait (without ending), the eighth's share is the whole cap again: its
     * interval halves while it takes under a quarter of it, so it climbs back to a quarter or
     * more. */
    double alone = shared_rate(8, 3, 12);
    ok &= check("the one of eight still sampling", alone, 100000 / 4.0, 100000);
    return ok ? 0 : 1;
}
