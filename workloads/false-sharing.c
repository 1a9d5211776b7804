/* false-sharing: one counter per thread, packed side by side in one 64-byte cache line; each
 * thread increments only its own, yet every increment invalidates the line in the other
 * threads' caches. The counters are volatile so each increment is a real load and store. */
#include "wl_threads.h"

/* A page of its own (4096 bytes, page aligned), of which the first cache line is used. */
static volatile uint64_t counters[512] __attribute__((aligned(4096)));

struct job {
    uint64_t per_thread;
};

static void *worker(void *arg)
{
    struct wl_worker *w = arg;
    const struct job *job = w->shared;
    for (uint64_t i = 0; i < job->per_thread; i++)
        counters[w->id]++;
    return NULL;
}

int main(int argc, char **argv)
{
    uint64_t n = 4194304, threads = 4;
    const struct wl_arg args[] = {{"n", &n, 1, 1ULL << 40}, {"threads", &threads, 1, 8}};
    wl_parse(argc, argv, args, WL_COUNT(args));
    wl_require(n % threads == 0, argv[0], args, WL_COUNT(args),
               "--n (total increments) must be a multiple of --threads");

    /* The main thread resets the counters, so it is the page's first toucher. */
    for (uint64_t t = 0; t < threads; t++)
        counters[t] = 0;
    struct job job = {.per_thread = n / threads};
    wl_run_threads(threads, &job, worker);
    uint64_t checksum = 0;
    for (uint64_t t = 0; t < threads; t++)
        checksum += counters[t];
    wl_result("false-sharing", checksum, args, WL_COUNT(args));
    return 0;
}
