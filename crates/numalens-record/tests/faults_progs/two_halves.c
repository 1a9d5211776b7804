/* Two threads first-touch one half each of a buffer; prints the buffer's range and the tids. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char *buffer;
static size_t half;

static void *touch(void *arg)
{
    char *start = buffer + (size_t)arg * half;
    for (size_t i = 0; i < half; i += 4096)
        start[i] = 1;
    printf("tid %d half %zu\n", gettid(), (size_t)arg);
    return NULL;
}

int main(int argc, char **argv)
{
    size_t bytes = (argc > 1 ? strtoull(argv[1], NULL, 0) : 16) << 20;
    half = bytes / 2;
    buffer = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buffer == MAP_FAILED)
        return 2;
    madvise(buffer, bytes, MADV_NOHUGEPAGE);
    printf("buffer %p %zu\n", (void *)buffer, bytes);
    fflush(stdout);
    pthread_t threads[2];
    for (long t = 0; t < 2; t++)
        pthread_create(&threads[t], NULL, touch, (void *)t);
    for (int t = 0; t < 2; t++)
        pthread_join(threads[t], NULL);
    return 3;
}
