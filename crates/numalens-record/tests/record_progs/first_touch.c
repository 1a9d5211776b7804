/* Known first touchers: `by_main` is initialised by the main thread, each half of `by_halves`
 * by one of two worker threads. Prints the addresses and the tids. Exits with status 5, or
 * crashes / kills itself when asked (argv[1] = "segv" or "kill") after touching. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BYTES (8 << 20)
static char *by_halves;

static void *worker(void *arg)
{
    long half = (long)arg;
    memset(by_halves + half * (BYTES / 2), 1, BYTES / 2);
    printf("worker %ld %d\n", half, gettid());
    return NULL;
}

int main(int argc, char **argv)
{
    char *by_main = malloc(BYTES);
    by_halves = malloc(BYTES);
    memset(by_main, 1, BYTES);
    printf("main %d\nby_main %p\nby_halves %p\n", gettid(), (void *)by_main, (void *)by_halves);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "segv") == 0)
        *(volatile int *)8 = 1;
    if (argc > 1 && strcmp(argv[1], "kill") == 0)
        raise(SIGKILL);
    return 5;
}
