/* Allocates a large grid in a function of its own, works on it, then is killed (SIGKILL, as by
 * the OOM killer or `kill -9`): no exit path runs, nothing of the runtime's gets a last word. */
#include <signal.h>
#include <stdio.h>

#include "hostile.h"

__attribute__((noinline)) static double *make_grid(size_t n)
{
    return malloc(n * sizeof(double));
}

int main(void)
{
    size_t n = 1 << 20; /* 8 MiB */
    double *grid = make_grid(n);
    if (!grid)
        return 1;
    for (size_t i = 0; i < n; i++)
        grid[i] = (double)i;
    double sum = 0;
    for (size_t i = 0; i < n; i += 7)
        sum += grid[i];
    printf("%.0f\n", sum);
    fflush(stdout);
    raise(SIGKILL);
    return 0;
}
