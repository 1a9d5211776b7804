/* Loops that clang vectorises: each iteration's loads and stores are 16-byte accesses, which
 * count as two 8-byte words, in one run of accesses per block. Argument: sweeps (default 40). */
#include <stdio.h>
#include <stdlib.h>

#define N (1 << 16)

int main(int argc, char **argv)
{
    int sweeps = argc > 1 ? atoi(argv[1]) : 40;
    double *a = malloc(N * sizeof(double)); /* @object a */
    double *b = malloc(N * sizeof(double)); /* @object b */
    double *c = malloc(N * sizeof(double)); /* @object c */
    for (int i = 0; i < N; i++) {
        a[i] = i;
        b[i] = 2 * i;
    }
    for (int s = 0; s < sweeps; s++)
        for (int i = 0; i < N; i++)
            c[i] = a[i] * 0.5 + b[i];
    printf("%f\n", c[N / 3]);
    return 0;
}
