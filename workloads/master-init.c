/* master-init: thread 0 initialises the whole grid, then each thread updates its own block
 * (the Ondes3D pattern). Under first touch every page lands on thread 0's node while the
 * compute loops use it from every thread. */
#include <omp.h>

#include "wl.h"

int main(int argc, char **argv)
{
    uint64_t n = 1048576, threads = 4, iters = 4;
    const struct wl_arg args[] = {
        {"n", &n, 1, 1ULL << 32}, {"threads", &threads, 1, 256}, {"iters", &iters, 1, 1000}};
    wl_parse(argc, argv, args, WL_COUNT(args));
    /* Whole pages per thread: each page has exactly one user in the compute loops. */
    wl_require(n % (512 * threads) == 0, argv[0], args, WL_COUNT(args),
               "--n must be a multiple of 512 * --threads (whole pages per thread)");

    uint64_t *grid;
    if (posix_memalign((void **)&grid, 4096, n * 8)) /* @object grid */
        wl_oom(n * 8);
    /* The bug: a serial initialisation places every page near thread 0. */
    for (uint64_t i = 0; i < n; i++)
        grid[i] = wl_mix(i);

    struct wl_slot part[256];
    int team = 0;
#pragma omp parallel num_threads(threads)
    {
        uint64_t t = omp_get_thread_num(), block = n / threads;
        uint64_t *mine = grid + t * block;
        if (t == 0)
            team = omp_get_num_threads();
        for (uint64_t it = 0; it < iters; it++)
            for (uint64_t i = 0; i < block; i++)
                mine[i] = mine[i] * 3 + it;
        uint64_t sum = 0;
        for (uint64_t i = 0; i < block; i++)
            sum += mine[i];
        part[t].value = sum;
    }
    if ((uint64_t)team != threads) {
        fprintf(stderr, "master-init: got %d OpenMP threads, asked for %" PRIu64 "\n", team,
                threads);
        return 1;
    }
    uint64_t checksum = 0;
    for (uint64_t t = 0; t < threads; t++)
        checksum += part[t].value;
    wl_result("master-init", checksum, args, WL_COUNT(args));
    free(grid);
    return 0;
}
