/* phases: in the first phase thread t updates block t of the field; in the second phase the
 * blocks are shifted, thread t updating block t+1 (mod threads). Each page has one user per
 * phase, but a different one after the boundary: the placement right for phase one is wrong
 * for phase two. */
#include <omp.h>

#include "wl.h"

/* One phase: `iters` sweeps by each thread over block (t + shift) mod threads. */
static void sweep(uint64_t *field, uint64_t block, uint64_t threads, uint64_t t,
                  uint64_t shift, uint64_t iters)
{
    uint64_t *mine = field + ((t + shift) % threads) * block;
    for (uint64_t it = 0; it < iters; it++)
        for (uint64_t i = 0; i < block; i++)
            mine[i] = mine[i] * 7 + it + shift;
}

int main(int argc, char **argv)
{
    uint64_t n = 262144, threads = 4, iters = 4;
    const struct wl_arg args[] = {
        {"n", &n, 1, 1ULL << 32}, {"threads", &threads, 1, 256}, {"iters", &iters, 1, 1000}};
    wl_parse(argc, argv, args, WL_COUNT(args));
    wl_require(n % (512 * threads) == 0, argv[0], args, WL_COUNT(args),
               "--n must be a multiple of 512 * --threads (whole pages per thread)");

    uint64_t *field;
    if (posix_memalign((void **)&field, 4096, n * 8)) /* @object field */
        wl_oom(n * 8);

    struct wl_slot part[256];
    int team = 0;
#pragma omp parallel num_threads(threads)
    {
        uint64_t t = omp_get_thread_num(), block = n / threads;
        if (t == 0)
            team = omp_get_num_threads();
        /* Initialised in parallel as phase one uses it: right for phase one only. */
        for (uint64_t i = t * block; i < (t + 1) * block; i++)
            field[i] = wl_mix(i);
        sweep(field, block, threads, t, 0, iters);
#pragma omp barrier
        sweep(field, block, threads, t, 1, iters);
        uint64_t sum = 0, *mine = field + ((t + 1) % threads) * block;
        for (uint64_t i = 0; i < block; i++)
            sum += mine[i];
        part[t].value = sum;
    }
    if ((uint64_t)team != threads) {
        fprintf(stderr, "phases: got %d OpenMP threads, asked for %" PRIu64 "\n", team, threads);
        return 1;
    }
    uint64_t checksum = 0;
    for (uint64_t t = 0; t < threads; t++)
        checksum += part[t].value;
    wl_result("phases", checksum, args, WL_COUNT(args));
    free(field);
    return 0;
}
