/* First-touches argv[1] pages of 4 KiB at a steady pace over argv[2] milliseconds (in 100 steps),
 * after a pause of 200 ms, from one thread held on the CPU it started on: every sample goes to
 * that CPU's ring, however many CPUs the machine has. Prints `pages N`; exits 0. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "out.h"

static void pause_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(int argc, char **argv)
{
    take_output(&argc, &argv);
    long pages = argc > 1 ? atol(argv[1]) : 30000;
    long ms = argc > 2 ? atol(argv[2]) : 3000;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0)
        return 3;
    size_t bytes = (size_t)pages * 4096;
    char *block = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED)
        return 4;
    /* One fault per 4 KiB page whatever the THP setting. */
    madvise(block, bytes, MADV_NOHUGEPAGE);
    pause_ms(200);
    long steps = 100, done = 0;
    for (long s = 1; s <= steps; s++) {
        for (; done < pages * s / steps; done++)
            block[done * 4096] = 1;
        pause_ms(ms / steps);
    }
    printf("pages %ld\n", done);
    return 0;
}
