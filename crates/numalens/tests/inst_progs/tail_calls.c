/* Two functions that each sum a small array in a loop and then tail-call each other, argv[1]
 * times in all: natively gcc makes the calls jumps, so the depth needs no stack. */
#include <stdio.h>
#include <stdlib.h>

static long table[16];
long other(long n, long acc);

__attribute__((noinline)) long walk(long n, long acc)
{
    if (n == 0)
        return acc;
    for (int i = 0; i < 16; i++)
        acc += table[i];
    return other(n - 1, acc);
}

__attribute__((noinline)) long other(long n, long acc)
{
    if (n == 0)
        return acc;
    for (int i = 0; i < 16; i += 2)
        acc -= table[i];
    return walk(n - 1, acc);
}

int main(int argc, char **argv)
{
    for (int i = 0; i < 16; i++)
        table[i] = i;
    printf("%ld\n", walk(argc > 1 ? atol(argv[1]) : 1000, 0));
    return 0;
}
