/* The exec'd end of the chain: allocates one array (argv[1] MiB) and has two threads first-touch
 * one half each. Prints its pid, the array, and the tids; exits with status 7. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "out.h"

static char *array;
static size_t bytes;

__attribute__((noinline)) static char *make_array(size_t n)
{
    return malloc(n); /* site: array */
}

static void *fill_half(void *arg)
{
    long half = (long)arg;
    memset(array + half * (bytes / 2), (int)half + 1, bytes / 2);
    printf("half%ld %d\n", half, gettid());
    return NULL;
}

int main(int argc, char **argv)
{
    take_output(&argc, &argv);
    bytes = (size_t)(argc > 1 ? atol(argv[1]) : 8) << 20;
    array = make_array(bytes);
    if (!array)
        return 1;
    printf("exec_pid %d\nmain %d\narray %p\nbytes %zu\n", getpid(), gettid(), (void *)array, bytes);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, fill_half, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    long sum = 0;
    for (size_t i = 0; i < bytes; i += 4096)
        sum += array[i];
    printf("sum %ld\n", sum);
    free(array);
    return 7;
}
