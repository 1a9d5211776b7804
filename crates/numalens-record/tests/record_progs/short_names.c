/* Arrays and a function with one-letter names, as numerical codes name them (STREAM's `a`, `b`,
 * `c`): a C symbol is its name, though `a`, `b`, `c` and `f` also spell C++ builtin types in the
 * Itanium mangling (signed char, bool, char, float). Prints the arrays' and the block's
 * addresses. */
#include <string.h>

#include "out.h"

#define N (1 << 19)
double a[N], b[N], c[N];

/* Not inlined, so that the block's call site is in `f`. */
__attribute__((noinline)) double *f(size_t n)
{
    return malloc(n * sizeof(double));
}

int main(int argc, char **argv)
{
    take_output(&argc, &argv);
    double *d = f(N);
    for (long i = 0; i < N; i++) {
        a[i] = 1;
        b[i] = 2;
        c[i] = a[i] + b[i];
        d[i] = c[i];
    }
    printf("a %p\nb %p\nc %p\nd %p\n", (void *)a, (void *)b, (void *)c, (void *)d);
    printf("sum %g\n", d[N - 1]);
    free(d);
    return 0;
}
