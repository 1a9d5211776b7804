/* A program for a plan's timed moves: the main thread writes a grid, keeps itself to CPU 0, and
 * waits while a worker uses the grid for a while (argv[1] seconds, default 2); it then prints
 * how many CPUs it could run on before and after, which a timed thread move changes. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const size_t grid_bytes = 64 * 4096;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *work(void *arg)
{
    char *grid = arg;
    extern double seconds;
    double end = now() + seconds;
    while (now() < end)
        for (size_t i = 0; i < grid_bytes; i += 4096)
            grid[i]++;
    return NULL;
}

double seconds = 2.0;

static int cpus(void)
{
    cpu_set_t s;
    return sched_getaffinity(0, sizeof s, &s) == 0 ? CPU_COUNT(&s) : -1;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        seconds = atof(argv[1]);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    sched_setaffinity(0, sizeof one, &one);
    int before = cpus();
    char *grid = malloc(grid_bytes);
    memset(grid, 1, grid_bytes);
    pthread_t t;
    pthread_create(&t, NULL, work, grid);
    pthread_join(t, NULL);
    printf("cpus-before %d cpus-after %d grid %d\n", before, cpus(), grid[4096] != 0);
    free(grid);
    return 0;
}
