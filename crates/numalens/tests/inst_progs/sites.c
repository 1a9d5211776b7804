/* Loop shapes whose exact counts gcc's plugin keeps in registers per access site: more sites
 * than it keeps, loops left by break, goto and return, random pages, short loops called many
 * times, loops beside calls, and a signal handler that counts in the same page cache meanwhile.
 * The program counts its own accesses of each array in local variables (which are not
 * instrumented) and prints them: "NAME READS WRITES". argv[1], when given, multiplies the
 * sweeps of the twelve-site loop (3 by default). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define N (1 << 20)
typedef struct {
    long reads, writes;
} tally;

static double *wide, *early, *scattered, *small, *beside, *found, *handled;
static double *mixed_a, *mixed_b, *mixed_c;
static volatile sig_atomic_t alarms;

/* Counts in the same thread's page cache while the loops below hold counts in registers. */
static void on_alarm(int sig)
{
    (void)sig;
    handled[(alarms * 4099) % N] += 1;
    alarms = alarms + 1;
}

/* Twelve access sites in one loop: more than the plugin keeps in registers. */
static void many_sites(tally *t, int reps)
{
    for (int rep = 0; rep < reps; rep++)
        for (long i = 8; i < N - 8; i++) {
            wide[i] = wide[i - 8] + wide[i - 7] + wide[i - 6] + wide[i - 5] + wide[i - 4] +
                      wide[i - 3] + wide[i - 2] + wide[i - 1] + wide[i + 1] + wide[i + 2] +
                      wide[i + 8];
            t->reads += 11;
            t->writes += 1;
        }
}

/* Nested loops left by break and by goto, on data-dependent conditions. */
static void left_early(tally *t)
{
    long r = 0, w = 0;
    for (long i = 0; i < 512; i++) {
        for (long j = 0; j < 2048; j++) {
            double v = early[i * 2048 + j];
            r++;
            if (v > 1.5)
                break;
            early[i * 2048 + j] = v + 0.25;
            w++;
            if (i == 400 && j == 1000)
                goto out;
        }
    }
out:
    t->reads += r;
    t->writes += w;
}

/* A new page at nearly every access. */
static void random_pages(tally *t)
{
    unsigned long x = 12345;
    long r = 0, w = 0;
    double sum = 0;
    for (long k = 0; k < 4 * N; k++) {
        x = x * 6364136223846793005ul + 1442695040888963407ul;
        long at = (long)((x >> 33) % N);
        if (x & (1ul << 20)) {
            scattered[at] += 1;
            w++;
        } else {
            sum += scattered[at];
        }
        r++;
    }
    t->reads += r + (sum < 0);
    t->writes += w;
}

/* A loop of three iterations in a function called many times: its sites start and end on
 * the same pages at each call. */
__attribute__((noinline)) static double three(long base, long *r, long *w)
{
    double s = 0;
    for (long k = 0; k < 3; k++) {
        s += small[base + k];
        small[base + k + 3] = s;
    }
    *r += 3;
    *w += 3;
    return s;
}

/* The outer loop calls a function; the inner one does not. */
__attribute__((noinline)) static void step(long *r) { *r += 0; }

static void loops_beside_calls(tally *t)
{
    long r = 0, w = 0, calls = 0;
    for (long i = 0; i < 256; i++) {
        step(&calls);
        for (long j = 0; j < 4096; j++) {
            beside[i * 4096 + j] = beside[i * 4096 + (j ^ 1)] * 0.5;
            r++;
            w++;
        }
    }
    t->reads += r;
    t->writes += w;
}

/* Returns from inside the loop. */
__attribute__((noinline)) static long find(double key, long *r)
{
    for (long i = 0; i < N; i++) {
        ++*r;
        if (found[i] == key)
            return i;
    }
    return -1;
}

/* Three arrays in one block, read and written in different numbers: a sample must fall on the
 * access whose step ran the countdown out, not on the block's first. */
static void mixed(tally *a, tally *b, tally *c)
{
    for (long k = 0; k < 4 * N; k++) {
        long i = k & (N - 1), j = (k * 7) & (N - 1);
        mixed_a[i] = mixed_b[i] + mixed_b[j] + mixed_c[j];
        b->reads += 2;
        c->reads += 1;
        a->writes += 1;
    }
}

static void print(const char *name, tally t) { printf("%s %ld %ld\n", name, t.reads, t.writes); }

int main(int argc, char **argv)
{
    int reps = 3 * (argc > 1 ? atoi(argv[1]) : 1);
    wide = calloc(N, sizeof(double));      /* @object wide */
    early = calloc(N, sizeof(double));     /* @object early */
    scattered = calloc(N, sizeof(double)); /* @object scattered */
    small = calloc(N, sizeof(double));     /* @object small */
    beside = calloc(N, sizeof(double));    /* @object beside */
    found = calloc(N, sizeof(double));     /* @object found */
    handled = calloc(N, sizeof(double));   /* @object handled */
    mixed_a = calloc(N, sizeof(double));   /* @object mixed_a */
    mixed_b = calloc(N, sizeof(double));   /* @object mixed_b */
    mixed_c = calloc(N, sizeof(double));   /* @object mixed_c */
    tally t_a = {0, 0}, t_b = {0, 0}, t_c = {0, 0};
    tally t_wide = {0, 0}, t_early = {0, 0}, t_scattered = {0, 0}, t_small = {0, 0},
          t_beside = {0, 0}, t_found = {0, 0};
    /* Fills and checks below go through memset and memcmp: not counted, not in the tallies. */
    for (long i = 0; i < N; i += 997)
        early[i] = 2.0;
    t_early.writes += (N + 996) / 997;

    signal(SIGALRM, on_alarm);
    struct itimerval every = {{0, 500}, {0, 500}};
    setitimer(ITIMER_REAL, &every, NULL);

    many_sites(&t_wide, reps);
    left_early(&t_early);
    random_pages(&t_scattered);
    double s = 0;
    for (long c = 0; c < 200000; c++)
        s += three((c * 6) % (N - 8), &t_small.reads, &t_small.writes);
    loops_beside_calls(&t_beside);
    for (long i = 0; i < N; i += 4096)
        found[i] = (double)i;
    t_found.writes += N / 4096;
    long at = find((double)(N / 2), &t_found.reads) + find(-1.0, &t_found.reads);
    mixed(&t_a, &t_b, &t_c);

    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    print("wide", t_wide);
    print("early", t_early);
    print("scattered", t_scattered);
    print("small", t_small);
    print("beside", t_beside);
    print("found", t_found);
    print("mixed_a", t_a);
    print("mixed_b", t_b);
    print("mixed_c", t_c);
    printf("result %g %ld\n", s, at);
    return 0;
}
