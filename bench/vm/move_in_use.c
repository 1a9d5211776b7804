/* move_in_use [PAGES_PER_CALL] [clear|quiet|movers=K]...: how long move_pages(2) takes on pages their threads are
 * writing. Four threads, thread t pinned to CPU t (one per node in a test-bed guest with one
 * vCPU per node), each keep writing their own 8 MiB block of one array that thread 0 first
 * touched; after a second the process moves the blocks of threads 1-3 to those threads' nodes
 * itself (block t to node t), PAGES_PER_CALL pages (default 1024) per call, and prints each
 * call's time and the kernel's answers. With `clear`, a fifth thread clears the process's
 * soft-dirty bits every 200 ms meanwhile (as the online engine does). The last line sums the
 * calls up (pages placed per second of calls, median and slowest call); with `quiet` only it is
 * printed. Calls stop after 10 s of them (small calls: the first pages only). With movers=K, K
 * threads make the calls, each the next call not taken, so that K calls are made at once. Run it in a guest with numalens-vm --preset machine-b --bin bench/vm/move_in_use
 * (built -static); bench/move-calls sweeps PAGES_PER_CALL. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGES 8192 /* 4 blocks of 2048 pages: 32 MiB */
#define PAGE 4096
#define MOVED (PAGES - PAGES / 4)

static char *grid;
static volatile int stop;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void *clear_soft_dirty(void *arg)
{
    (void)arg;
    while (!stop) {
        FILE *f = fopen("/proc/self/clear_refs", "w");
        if (f) {
            fputs("4", f);
            fclose(f);
        }
        usleep(200000);
    }
    return NULL;
}

static void *work(void *arg)
{
    long t = (long)arg;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(t, &s);
    sched_setaffinity(0, sizeof s, &s);
    while (!stop)
        for (long p = t * PAGES / 4; p < (t + 1) * PAGES / 4; p++)
            grid[p * PAGE]++;
    return NULL;
}

static void *pages[MOVED];
static int nodes[MOVED], status[MOVED], placed_in[MOVED];
static double took[MOVED], started;
static int per_call, quiet, next_call;

/* One mover: the next call not taken, until every page is asked for or 10 s have passed (small
 * calls are many: the pages placed are counted). */
static void *mover(void *arg)
{
    (void)arg;
    for (;;) {
        int call = __atomic_fetch_add(&next_call, 1, __ATOMIC_RELAXED), at = call * per_call;
        if (at >= MOVED || now() - started >= 10.0)
            return NULL;
        int n = at + per_call > MOVED ? MOVED - at : per_call, placed = 0, refused = 0;
        double t0 = now();
        long r = syscall(SYS_move_pages, 0, n, pages + at, nodes + at, status + at, 2);
        int e = errno;
        for (int i = at; i < at + n; i++) {
            placed += status[i] == nodes[i];
            refused += status[i] < 0;
        }
        took[call] = now() - t0;
        placed_in[call] = placed;
        if (!quiet)
            printf("pages %d-%d to node %d: %.2f s, %d placed, %d refused, returned %ld %s\n", at,
                   at + n - 1, nodes[at], took[call], placed, refused, r, r < 0 ? strerror(e) : "");
    }
}

int main(int argc, char **argv)
{
    per_call = argc > 1 ? atoi(argv[1]) : 1024;
    int clear = 0, movers = 1;
    for (int i = 2; i < argc; i++) {
        clear |= strcmp(argv[i], "clear") == 0;
        quiet |= strcmp(argv[i], "quiet") == 0;
        if (strncmp(argv[i], "movers=", 7) == 0)
            movers = atoi(argv[i] + 7);
    }
    if (per_call < 1 || per_call > MOVED || movers < 1 || movers > 16 ||
        posix_memalign((void **)&grid, PAGE, (size_t)PAGES * PAGE))
        return 2;
    memset(grid, 1, (size_t)PAGES * PAGE);
    pthread_t threads[5], movers_t[16];
    for (long t = 0; t < 4; t++)
        pthread_create(&threads[t], NULL, work, (void *)t);
    if (clear)
        pthread_create(&threads[4], NULL, clear_soft_dirty, NULL);
    sleep(1);
    for (int i = 0; i < MOVED; i++) {
        pages[i] = grid + (size_t)(PAGES / 4 + i) * PAGE;
        nodes[i] = 1 + i / (PAGES / 4);
    }
    started = now();
    for (int m = 0; m < movers; m++)
        pthread_create(&movers_t[m], NULL, mover, NULL);
    for (int m = 0; m < movers; m++)
        pthread_join(movers_t[m], NULL);
    double wall = now() - started;
    int calls = next_call < (MOVED + per_call - 1) / per_call ? next_call : (MOVED + per_call - 1) / per_call;
    /* Calls taken after the 10 s were not made. */
    int made = 0, placed_all = 0;
    for (int c = 0; c < calls; c++)
        if (took[c] > 0) {
            took[made++] = took[c];
            placed_all += placed_in[c];
        }
    qsort(took, made, sizeof took[0], by_value);
    printf("pages per call %d, movers %d: %d calls, %.3f s, %d of %d placed, %.0f pages/s, call "
           "median %.4f s, slowest %.4f s\n", per_call, movers, made, wall, placed_all, MOVED,
           placed_all / wall, took[made / 2], took[made - 1]);
    stop = 1;
    for (int t = 0; t < 4; t++)
        pthread_join(threads[t], NULL);
    if (clear)
        pthread_join(threads[4], NULL);
    return 0;
}
