/* A function whose last accesses form a run that ends at its return: the samples of its stores
 * must name it, not its caller. Argument: calls (default 3,000,000). */
#include <stdio.h>
#include <stdlib.h>

long *cells;

__attribute__((noinline)) void store_pair(long x, long i)
{
    cells[i & 1023] = x;
    cells[(i + 1) & 1023] = x;
}

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 3000000;
    cells = calloc(1024, sizeof(long)); /* @object cells */
    for (long i = 0; i < calls; i++)
        store_pair(i, i);
    printf("%ld\n", cells[5]);
    return 0;
}
