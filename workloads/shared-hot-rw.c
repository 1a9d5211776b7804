/* shared-hot-rw: every thread reads and writes every page of the points at the same time (the
 * Streamcluster pattern). Threads own cache lines cyclically, so no line is written by two
 * threads (no false sharing) yet every page is: there is no locality to win, only bandwidth. */
#include <sys/mman.h>

#include "wl_threads.h"

#define LINE 8 /* uint64_t per 64-byte cache line */

struct job {
    uint64_t *points;
    uint64_t n, threads, iters;
};

static void *worker(void *arg)
{
    struct wl_worker *w = arg;
    const struct job *job = w->shared;
    uint64_t *p = job->points, stride = job->threads * LINE, sum = 0;
    for (uint64_t it = 0; it < job->iters; it++)
        for (uint64_t line = w->id * LINE; line < job->n; line += stride)
            for (uint64_t i = line; i < line + LINE; i++)
                p[i] = p[i] * 5 + it;
    for (uint64_t line = w->id * LINE; line < job->n; line += stride)
        for (uint64_t i = line; i < line + LINE; i++)
            sum += p[i];
    w->result = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    uint64_t n = 262144, threads = 4, iters = 8;
    const struct wl_arg args[] = {
        {"n", &n, 1, 1ULL << 32}, {"threads", &threads, 1, 256}, {"iters", &iters, 1, 1000}};
    wl_parse(argc, argv, args, WL_COUNT(args));
    wl_require(n % (512 * threads) == 0, argv[0], args, WL_COUNT(args),
               "--n must be a multiple of 512 * --threads (whole pages, the same lines per thread)");

    uint64_t *points = mmap(NULL, n * 8, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); /* @object points */
    if (points == MAP_FAILED)
        wl_oom(n * 8);
    for (uint64_t i = 0; i < n; i++)
        points[i] = wl_mix(i);

    struct job job = {.points = points, .n = n, .threads = threads, .iters = iters};
    uint64_t checksum = wl_run_threads(threads, &job, worker);
    wl_result("shared-hot-rw", checksum, args, WL_COUNT(args));
    munmap(points, n * 8);
    return 0;
}
