/* Static arrays with one-letter names (STREAM's `a`, `b`, `c`, and `d`, which spell C++ builtin
 * types in the Itanium mangling), one of them a function's own, each on a line of its own. Prints
 * their addresses. */
#include "out.h"

#define N (1 << 18)
double a[N];                 /* defines: a */
double b[N] = {1};           /* defines: b */
static double c[N];          /* defines: c */

static double *fill(long i)
{
    static double d[N];      /* defines: d */
    d[i] = c[i];
    return d;
}

int main(int argc, char **argv)
{
    take_output(&argc, &argv);
    double *d = 0;
    for (long i = 0; i < N; i++) {
        a[i] = 1;
        c[i] = a[i] + b[i];
        d = fill(i);
    }
    printf("a %p\nb %p\nc %p\nd %p\n", (void *)a, (void *)b, (void *)c, (void *)d);
    return 0;
}
