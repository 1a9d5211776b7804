/* stencil: each thread sweeps its own block of rows of u, reading the row above and below; at
 * block edges those rows belong to the neighbouring thread (the NPB SP pattern). One row is one
 * page by default, so each thread shares exactly its first and last page with a neighbour. */
#include <omp.h>

#include "wl.h"

int main(int argc, char **argv)
{
    uint64_t rows = 512, cols = 512, threads = 4, iters = 4;
    const struct wl_arg args[] = {{"rows", &rows, 1, 1ULL << 24},
                                  {"cols", &cols, 1, 1ULL << 24},
                                  {"threads", &threads, 1, 256},
                                  {"iters", &iters, 1, 1000}};
    wl_parse(argc, argv, args, WL_COUNT(args));
    wl_require(cols % 512 == 0, argv[0], args, WL_COUNT(args),
               "--cols must be a multiple of 512 (each row whole pages)");
    wl_require(rows % threads == 0 && rows / threads >= 2, argv[0], args, WL_COUNT(args),
               "--rows must be a multiple of --threads, at least 2 rows per thread");

    uint64_t *u, *v;
    if (posix_memalign((void **)&u, 4096, rows * cols * 8)) /* @object u */
        wl_oom(rows * cols * 8);
    if (posix_memalign((void **)&v, 4096, rows * cols * 8)) /* @object v */
        wl_oom(rows * cols * 8);

    struct wl_slot part[256];
    int team = 0;
#pragma omp parallel num_threads(threads)
    {
        uint64_t t = omp_get_thread_num(), r0 = t * (rows / threads), r1 = r0 + rows / threads;
        if (t == 0)
            team = omp_get_num_threads();
        for (uint64_t i = r0 * cols; i < r1 * cols; i++)
            u[i] = wl_mix(i);
        for (uint64_t it = 0; it < iters; it++) {
#pragma omp barrier
            for (uint64_t r = r0; r < r1; r++) {
                uint64_t *out = v + r * cols, *mid = u + r * cols;
                if (r > 0 && r + 1 < rows)
                    for (uint64_t c = 0; c < cols; c++)
                        out[c] = mid[c - cols] + mid[c] + mid[c + cols];
                else if (r > 0)
                    for (uint64_t c = 0; c < cols; c++)
                        out[c] = mid[c - cols] + mid[c];
                else
                    for (uint64_t c = 0; c < cols; c++)
                        out[c] = mid[c] + mid[c + cols];
            }
            /* Every thread has read its neighbours' edge rows before anyone overwrites u. */
#pragma omp barrier
            for (uint64_t i = r0 * cols; i < r1 * cols; i++)
                u[i] = (v[i] >> 1) + it;
        }
        uint64_t sum = 0;
        for (uint64_t i = r0 * cols; i < r1 * cols; i++)
            sum += u[i];
        part[t].value = sum;
    }
    if ((uint64_t)team != threads) {
        fprintf(stderr, "stencil: got %d OpenMP threads, asked for %" PRIu64 "\n", team, threads);
        return 1;
    }
    uint64_t checksum = 0;
    for (uint64_t t = 0; t < threads; t++)
        checksum += part[t].value;
    wl_result("stencil", checksum, args, WL_COUNT(args));
    free(u);
    free(v);
    return 0;
}
