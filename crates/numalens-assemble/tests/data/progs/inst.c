/* Built with `numalens cc` and recorded with the inst backend: a heap array written once and read
 * twice by the main thread, and a static array written by a worker, so the exact counts are
 * known. Small on purpose: its recording is stored with the tests. */
#include <pthread.h>
#include <stdlib.h>

#define N (64 * 1024)
static long table[4096];
static volatile long sink;

static void *fill_table(void *arg)
{
    (void)arg;
    for (int i = 0; i < 4096; i++)
        table[i] = i;
    return NULL;
}

int main(void)
{
    long *values = malloc(N * sizeof *values);
    for (int i = 0; i < N; i++)
        values[i] = i;
    long sum = 0;
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N; i++)
            sum += values[i];
    sink = sum;
    pthread_t t;
    pthread_create(&t, NULL, fill_table, NULL);
    pthread_join(t, NULL);
    free(values);
    return 0;
}
