/* private-blocks: both arrays are initialised in parallel with the same block distribution as
 * the compute loop, so every page is placed near its only user. Already ideal: no findings. */
#include <omp.h>

#include "wl.h"

int main(int argc, char **argv)
{
    uint64_t n = 524288, threads = 4, iters = 4;
    const struct wl_arg args[] = {
        {"n", &n, 1, 1ULL << 32}, {"threads", &threads, 1, 256}, {"iters", &iters, 1, 1000}};
    wl_parse(argc, argv, args, WL_COUNT(args));
    wl_require(n % (512 * threads) == 0, argv[0], args, WL_COUNT(args),
               "--n must be a multiple of 512 * --threads (whole pages per thread)");

    uint64_t *a, *b;
    if (posix_memalign((void **)&a, 4096, n * 8)) /* @object a */
        wl_oom(n * 8);
    if (posix_memalign((void **)&b, 4096, n * 8)) /* @object b */
        wl_oom(n * 8);

    struct wl_slot part[256];
    int team = 0;
#pragma omp parallel num_threads(threads)
    {
        uint64_t t = omp_get_thread_num(), block = n / threads, lo = t * block;
        if (t == 0)
            team = omp_get_num_threads();
        /* The fix of master-init: first touch by the thread that computes on the block. */
        for (uint64_t i = lo; i < lo + block; i++) {
            a[i] = wl_mix(i);
            b[i] = i;
        }
        for (uint64_t it = 0; it < iters; it++)
            for (uint64_t i = lo; i < lo + block; i++)
                b[i] = b[i] + 3 * a[i];
        uint64_t sum = 0;
        for (uint64_t i = lo; i < lo + block; i++)
            sum += b[i];
        part[t].value = sum;
    }
    if ((uint64_t)team != threads) {
        fprintf(stderr, "private-blocks: got %d OpenMP threads, asked for %" PRIu64 "\n", team,
                threads);
        return 1;
    }
    uint64_t checksum = 0;
    for (uint64_t t = 0; t < threads; t++)
        checksum += part[t].value;
    wl_result("private-blocks", checksum, args, WL_COUNT(args));
    free(a);
    free(b);
    return 0;
}
