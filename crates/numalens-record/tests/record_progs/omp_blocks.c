/* OpenMP first touch by block: argv[1] MiB of doubles initialised by argv[2] threads in a
 * parallel loop with a static schedule, so each thread first-touches one contiguous block. Each
 * thread prints its tid and the byte range of its block; exits 8. */
#define _GNU_SOURCE
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "out.h"

int main(int argc, char **argv)
{
    take_output(&argc, &argv);
    size_t n = ((size_t)(argc > 1 ? atol(argv[1]) : 32) << 20) / sizeof(double);
    if (argc > 2)
        omp_set_num_threads(atoi(argv[2]));
    double *a = malloc(n * sizeof(double)); /* site: omp */
    if (!a)
        return 1;
    printf("array %p\nbytes %zu\n", (void *)a, n * sizeof(double));
#pragma omp parallel
    {
        size_t lo = (size_t)-1, hi = 0;
#pragma omp for schedule(static)
        for (size_t i = 0; i < n; i++) {
            a[i] = (double)i;
            if (lo == (size_t)-1)
                lo = i;
            hi = i + 1;
        }
#pragma omp critical
        printf("block%d %d %zu %zu\n", omp_get_thread_num(), gettid(), lo * sizeof(double),
               hi * sizeof(double));
    }
    double sum = 0;
    for (size_t i = 0; i < n; i += 512)
        sum += a[i];
    printf("sum %.0f\nthreads %d\n", sum, omp_get_max_threads());
    free(a);
    return 8;
}
