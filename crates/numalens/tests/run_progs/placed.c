/* A program that says how its memory is placed: the kernel's policy for a heap array and a
 * static array (get_mempolicy with MPOL_F_ADDR), and the CPUs it may run on. `numalens run
 * --plan` must change these and nothing else. */
#define _GNU_SOURCE
#include <sched.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static double table[1 << 17]; /* 1 MiB static */

static int mode_of(void *p)
{
    int mode = -1;
    unsigned long mask[16] = {0};
    if (syscall(SYS_get_mempolicy, &mode, mask, 1024, p, 2 /* MPOL_F_ADDR */))
        return -1;
    return mode;
}

static void *work(void *arg)
{
    double *a = arg;
    for (size_t i = 0; i < (8u << 20) / 8; i += 512)
        a[i] += 1;
    return NULL;
}

int main(void)
{
    double *grid = malloc(8u << 20);
    memset(grid, 0, 8u << 20);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        table[i] = (double)i;
    pthread_t t;
    pthread_create(&t, NULL, work, grid);
    pthread_join(t, NULL);
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    printf("grid-mode %d table-mode %d cpus %d\n", mode_of(grid + 4096), mode_of(table + 8192), CPU_COUNT(&set));
    free(grid);
    return 0;
}
