/* Objects that come and go while two threads sample for MS milliseconds (argv[1]): each thread
 * allocates blocks of 16 KiB to 2 MiB, writes and reads them a few times and frees them, so
 * the samples fall on many objects, each live for a short while, and on the same addresses
 * reused by later objects. Each thread sleeps 1 ms after each block, which leaves the recorder
 * idle time. Prints a sum so that the work is not left out. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long ms;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(long)arg;
    double end = now_ms() + ms, sum = 0;
    while (now_ms() < end) {
        size_t n = ((size_t)16 << 10 << (rand_r(&seed) % 8)) / sizeof(double);
        double *a = malloc(n * sizeof(double));
        if (!a)
            break;
        for (int pass = 0; pass < 4; pass++)
            for (size_t i = 0; i < n; i++)
                a[i] = pass ? a[i] + a[(i * 7) % n] : (double)i;
        sum += a[n / 2];
        free(a);
        usleep(1000);
    }
    return (void *)(long)(sum > 0);
}

int main(int argc, char **argv)
{
    ms = argc > 1 ? atol(argv[1]) : 1000;
    pthread_t other;
    pthread_create(&other, NULL, churn, (void *)2L);
    long mine = (long)churn((void *)1L);
    void *theirs;
    pthread_join(other, &theirs);
    printf("%ld\n", mine + (long)theirs);
    return 0;
}
