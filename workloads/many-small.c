/* many-small: the main thread allocates many small records, handing them out to the threads in
 * turn, so each page holds records of every thread; then each thread works only on its own (the
 * Psearchy pattern). Each record is private, but its page is shared by all threads and was
 * placed near the main thread: per-thread allocation would give each thread pages of its own. */
#include "wl_threads.h"

/* 256 bytes, allocated 64-byte aligned: four whole cache lines, shared with no other record. */
struct record {
    struct record *next;
    uint64_t v[31];
};

struct job {
    struct record **lists;
    uint64_t iters;
};

static void *worker(void *arg)
{
    struct wl_worker *w = arg;
    const struct job *job = w->shared;
    struct record *head = job->lists[w->id];
    for (uint64_t it = 0; it < job->iters; it++)
        for (struct record *r = head; r; r = r->next)
            for (uint64_t j = 0; j < 31; j++)
                r->v[j] = r->v[j] * 3 + it;
    uint64_t sum = 0;
    for (struct record *r = head; r; r = r->next)
        for (uint64_t j = 0; j < 31; j++)
            sum += r->v[j];
    w->result = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    uint64_t records = 8192, threads = 4, iters = 4;
    const struct wl_arg args[] = {{"records", &records, 1, 1ULL << 26},
                                  {"threads", &threads, 1, 256},
                                  {"iters", &iters, 1, 1000}};
    wl_parse(argc, argv, args, WL_COUNT(args));
    wl_require(records % threads == 0, argv[0], args, WL_COUNT(args),
               "--records must be a multiple of --threads (the same number each)");

    struct record *lists[256] = {0};
    for (uint64_t i = 0; i < records; i++) {
        struct record *r = aligned_alloc(64, sizeof *r); /* @object record */
        if (!r)
            wl_oom(sizeof *r);
        r->next = lists[i % threads];
        for (uint64_t j = 0; j < 31; j++)
            r->v[j] = wl_mix(i * 31 + j);
        lists[i % threads] = r;
    }
    struct job job = {.lists = lists, .iters = iters};
    uint64_t checksum = wl_run_threads(threads, &job, worker);
    wl_result("many-small", checksum, args, WL_COUNT(args));
    /* The records are left to the process exit: freeing them here would read every record's
     * link from thread 0 and make it a user of all of them. */
    return 0;
}
