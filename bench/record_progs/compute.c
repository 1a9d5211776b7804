/* A compute program: OpenMP threads initialise 256 MiB in parallel, then sweep it repeatedly. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = 32L << 20; /* doubles: 256 MiB */
    int sweeps = argc > 1 ? atoi(argv[1]) : 40;
    double *a = malloc(n * sizeof *a);
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        a[i] = (double)i;
    double sum = 0;
    for (int s = 0; s < sweeps; s++) {
        #pragma omp parallel for schedule(static) reduction(+ : sum)
        for (long i = 0; i < n; i++) {
            a[i] = a[i] * 0.999 + 1.0;
            sum += a[i];
        }
    }
    printf("%g\n", sum);
    free(a);
    return 0;
}
