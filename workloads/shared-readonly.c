/* shared-readonly: the main thread fills a database once, then every thread scans all of it
 * for its share of the queries (the FaceRec pattern). Every node reads every page, and none
 * writes after the start: a copy per node would make all those reads local. */
#include "wl_threads.h"

struct job {
    const uint64_t *db;
    uint64_t n, queries, threads;
};

/* One query's score: a full scan of the database. */
static uint64_t score(const uint64_t *db, uint64_t n, uint64_t q)
{
    uint64_t key = wl_mix(q), best = 0, hits = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t d = db[i] ^ key;
        hits += (d & 0xff) == 0;
        best = d < best || i == 0 ? d : best;
        hits += d >> 40;
    }
    return best + hits;
}

static void *worker(void *arg)
{
    struct wl_worker *w = arg;
    const struct job *job = w->shared;
    uint64_t per = job->queries / job->threads, sum = 0;
    for (uint64_t q = w->id * per; q < (w->id + 1) * per; q++)
        sum += score(job->db, job->n, q) * (q + 1);
    w->result = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    uint64_t n = 262144, threads = 4, queries = 8;
    const struct wl_arg args[] = {
        {"n", &n, 1, 1ULL << 32}, {"threads", &threads, 1, 256}, {"queries", &queries, 1, 1 << 20}};
    wl_parse(argc, argv, args, WL_COUNT(args));
    wl_require(queries % threads == 0, argv[0], args, WL_COUNT(args),
               "--queries must be a multiple of --threads (the same share of queries each)");

    uint64_t *db;
    if (posix_memalign((void **)&db, 4096, n * 8)) /* @object db */
        wl_oom(n * 8);
    for (uint64_t i = 0; i < n; i++)
        db[i] = wl_mix(i);

    struct job job = {.db = db, .n = n, .queries = queries, .threads = threads};
    uint64_t checksum = wl_run_threads(threads, &job, worker);
    wl_result("shared-readonly", checksum, args, WL_COUNT(args));
    free(db);
    return 0;
}
