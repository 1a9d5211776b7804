/* A worker allocates a block below the size at which the runtime writes every thread's records
 * out (1 MiB), then blocks without touching memory, while the main thread computes for MS
 * milliseconds (argv[1]) and so writes flush marks: the worker's allocation stays in its own
 * buffer until it exits, behind the main thread's logged records. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define N (1 << 20) /* doubles: 8 MiB */
static int ready[2], go[2];

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The descriptors come in the argument itself: the worker reads no instrumented memory, so it
 * takes no sample and writes no flush mark; the block goes to the kernel only (its bytes are
 * the ones written and read), which keeps the compiler from leaving out the allocation. */
static void *idle(void *arg)
{
    int tell = (int)((long)arg & 0xffff), wait = (int)((long)arg >> 16);
    char *block = malloc(64 << 10);
    if (!block || write(tell, block, 1) != 1 || read(wait, block, 1) != 1)
        return NULL;
    free(block);
    return NULL;
}

int main(int argc, char **argv)
{
    long ms = argc > 1 ? atol(argv[1]) : 1000;
    double *a = calloc(N, sizeof(double)), sum = 0;
    if (!a || pipe(ready) || pipe(go))
        return 1;
    pthread_t worker;
    pthread_create(&worker, NULL, idle, (void *)(long)(ready[1] | go[0] << 16));
    char c;
    if (read(ready[0], &c, 1) != 1)
        return 1;
    double end = now_ms() + ms;
    while (now_ms() < end)
        for (long i = 0; i < N; i += 8) {
            a[i] += 1;
            sum += a[(i * 7) % N];
        }
    if (write(go[1], &c, 1) != 1)
        return 1;
    pthread_join(worker, NULL);
    printf("%d\n", sum > 0);
    return 0;
}
