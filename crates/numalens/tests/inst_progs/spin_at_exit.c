/* A worker updates one page in a loop without calls until main ends the process with exit():
 * what the worker had counted must reach its page's counters all the same. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static long *hist;

static void *worker(void *arg)
{
    long n = (long)arg, s = 0;
    for (long k = 0; k < n; k++)
        s += hist[k & 511] += k;
    return (void *)s;
}

int main(void)
{
    hist = aligned_alloc(4096, 4096); /* @object hist */
    for (int i = 0; i < 512; i++)
        hist[i] = 0;
    pthread_t t;
    pthread_create(&t, NULL, worker, (void *)(1L << 40));
    usleep(300000);
    exit(0);
}
