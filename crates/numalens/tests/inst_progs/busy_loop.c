/* Allocates its arrays first, then only computes for MS milliseconds (argv[1]) in two threads:
 * after the allocations its threads write no record of their own, like a stencil code. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N (1 << 20) /* doubles per thread: 8 MiB */
static double *data[2];
static long ms;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *work(void *arg)
{
    double *a = data[(long)arg], sum = 0;
    double end = now_ms() + ms;
    while (now_ms() < end)
        for (long i = 0; i < N; i += 8) {
            a[i] += 1;
            sum += a[(i * 7) % N];
        }
    return (void *)(long)(sum > 0);
}

int main(int argc, char **argv)
{
    ms = argc > 1 ? atol(argv[1]) : 1000;
    for (int t = 0; t < 2; t++)
        data[t] = calloc(N, sizeof(double));
    pthread_t other;
    pthread_create(&other, NULL, work, (void *)1L);
    work((void *)0L);
    pthread_join(other, NULL);
    printf("done\n");
    return 0;
}
