/* A burst of page faults: argv[1] threads each allocate argv[2] MiB and first-touch all of it as
 * fast as memset goes, all at once (a barrier releases them together). Prints each thread's
 * tid and block; exits 0. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "out.h"

static pthread_barrier_t start;
static size_t bytes;
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;

static void *burst(void *arg)
{
    char *block = malloc(bytes); /* site: burst */
    if (!block)
        exit(1);
    pthread_barrier_wait(&start);
    memset(block, 1, bytes);
    pthread_mutex_lock(&out);
    printf("block%ld %d %p\n", (long)arg, gettid(), (void *)block);
    pthread_mutex_unlock(&out);
    return NULL;
}

int main(int argc, char **argv)
{
    take_output(&argc, &argv);
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    bytes = (size_t)(argc > 2 ? atol(argv[2]) : 128) << 20;
    if (threads < 1 || threads > 64)
        return 2;
    printf("bytes %zu\n", bytes);
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    pthread_t t[64];
    for (long i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, burst, (void *)i);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    return 0;
}
