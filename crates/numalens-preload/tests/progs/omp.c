/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file omp.c
 * @brief OpenMP threads (libgomp's pthread_create) under the runtime.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    int n = 0;
#pragma omp parallel num_threads(3)
    {
        char *p = malloc(100000);
        p[0] = 1;
#pragma omp atomic
        n++;
        free(p);
    }
    printf("threads %d\n", n);
    return n == 3 ? 0 : 1;
}
