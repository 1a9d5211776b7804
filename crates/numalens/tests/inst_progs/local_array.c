/* Each worker fills and reads a 2 MiB array on its own stack that never leaves its function:
 * the compiler does not instrument it, so the counts cannot see it; the shared heap array is
 * counted. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define N (1 << 18) /* doubles: 2 MiB */
static double *shared;

static void *work(void *arg)
{
    double local[N];
    long id = (long)arg;
    for (long i = 0; i < N; i++)
        local[i] = (double)(i + id);
    double sum = 0;
    for (long i = 0; i < N; i++)
        sum += local[(i * 7) % N];
    for (long i = id * N; i < (id + 1) * N; i++)
        shared[i] = sum;
    return NULL;
}

int main(void)
{
    shared = malloc(2 * N * sizeof *shared); /* @object shared */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 16 << 20);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], &attr, work, (void *)i);
    for (long i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("%.0f\n", shared[3] + shared[N + 3]);
    return 0;
}
