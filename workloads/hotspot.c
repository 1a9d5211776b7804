/* hotspot: a histogram of Gaussian keys, key_buff1[key_buff2[k]]++ (the NPB IS ranking loop).
 * Both arrays are initialised in parallel by blocks, so first touch is right for the linear
 * loops; but the histogram's accesses concentrate on the middle pages of key_buff1, which
 * every thread hits: the node holding that band serves most of the traffic. */
#include <omp.h>

#include "wl.h"

/* A key in [0, range): the mean of four uniform values, so keys follow a bell curve centred on
 * range / 2 (as NPB IS generates them), computed from k alone so any thread gets the same. */
static uint64_t key_of(uint64_t k, uint64_t range)
{
    uint64_t sum = 0;
    for (uint64_t j = 0; j < 4; j++)
        sum += wl_mix(4 * k + j) % range;
    return sum / 4;
}

int main(int argc, char **argv)
{
    uint64_t keys = 262144, range = 262144, threads = 4, iters = 4;
    const struct wl_arg args[] = {{"keys", &keys, 1, 1ULL << 32},
                                  {"range", &range, 1, 1ULL << 32},
                                  {"threads", &threads, 1, 256},
                                  {"iters", &iters, 1, 1000}};
    wl_parse(argc, argv, args, WL_COUNT(args));
    wl_require(keys % (512 * threads) == 0 && range % (512 * threads) == 0, argv[0], args,
               WL_COUNT(args),
               "--keys and --range must be multiples of 512 * --threads (whole pages per thread)");

    uint64_t *key_buff1, *key_buff2;
    if (posix_memalign((void **)&key_buff1, 4096, range * 8)) /* @object key_buff1 */
        wl_oom(range * 8);
    if (posix_memalign((void **)&key_buff2, 4096, keys * 8)) /* @object key_buff2 */
        wl_oom(keys * 8);

    struct wl_slot part[256];
    int team = 0;
#pragma omp parallel num_threads(threads)
    {
        uint64_t t = omp_get_thread_num();
        uint64_t kb = keys / threads, k0 = t * kb, rb = range / threads, r0 = t * rb;
        if (t == 0)
            team = omp_get_num_threads();
        for (uint64_t k = k0; k < k0 + kb; k++)
            key_buff2[k] = key_of(k, range);
        for (uint64_t r = r0; r < r0 + rb; r++)
            key_buff1[r] = 0;
#pragma omp barrier
        /* The hot loop: the index depends on the key, so every thread hits the middle band. */
        for (uint64_t it = 0; it < iters; it++)
            for (uint64_t k = k0; k < k0 + kb; k++)
                __atomic_fetch_add(&key_buff1[key_buff2[k]], 1, __ATOMIC_RELAXED);
#pragma omp barrier
        uint64_t sum = 0;
        for (uint64_t r = r0; r < r0 + rb; r++)
            sum += key_buff1[r] * (r + 1);
        part[t].value = sum;
    }
    if ((uint64_t)team != threads) {
        fprintf(stderr, "hotspot: got %d OpenMP threads, asked for %" PRIu64 "\n", team, threads);
        return 1;
    }
    uint64_t checksum = 0;
    for (uint64_t t = 0; t < threads; t++)
        checksum += part[t].value;
    wl_result("hotspot", checksum, args, WL_COUNT(args));
    free(key_buff1);
    free(key_buff2);
    return 0;
}
