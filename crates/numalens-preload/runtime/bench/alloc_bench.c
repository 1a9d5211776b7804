/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file alloc_bench.c
 * @brief Small malloc/free pairs over threads: the runtime's fast-path cost.
 *
 * Usage: alloc_bench [PAIRS_TOTAL] [THREADS] [SIZE_MAX]; prints the wall time in seconds.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long pairs_per_thread;
static unsigned size_max;

static void *work(void *arg)
{
    unsigned x = (unsigned)(size_t)arg * 2654435761u + 1;
    void *volatile sink;
    for (long i = 0; i < pairs_per_thread; i++) {
        x = x * 1103515245u + 12345u;
        void *p = malloc(16 + (x >> 16) % size_max);
        sink = p;
        free(p);
    }
    (void)sink;
    return NULL;
}

int main(int argc, char **argv)
{
    long total = argc > 1 ? atol(argv[1]) : 10000000;
    int threads = argc > 2 ? atoi(argv[2]) : 2;
    size_max = argc > 3 ? (unsigned)atoi(argv[3]) : 256;
    if (threads < 1 || threads > 64 || size_max < 1)
        return 2;
    pairs_per_thread = total / threads;
    pthread_t t[64];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, work, (void *)(size_t)i);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.4f\n", (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
    return 0;
}
