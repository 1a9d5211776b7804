/* Running a pthreads workload: the main thread is logical thread 0 and works too; workers
 * 1..threads-1 are created in that order, so logical ids follow creation order. */
#ifndef NUMALENS_WL_THREADS_H
#define NUMALENS_WL_THREADS_H

#include <pthread.h>

#include "wl.h"

struct wl_worker {
    uint64_t id;
    void *shared;
    uint64_t result;
} __attribute__((aligned(64)));

/* Runs body(worker) on `threads` threads and returns the sum of their results. */
static uint64_t wl_run_threads(uint64_t threads, void *shared, void *(*body)(void *))
{
    struct wl_worker workers[256];
    pthread_t handles[256];
    for (uint64_t t = 0; t < threads; t++)
        workers[t] = (struct wl_worker){.id = t, .shared = shared, .result = 0};
    for (uint64_t t = 1; t < threads; t++)
        if (pthread_create(&handles[t], NULL, body, &workers[t]) != 0) {
            perror("pthread_create");
            exit(1);
        }
    body(&workers[0]);
    uint64_t sum = workers[0].result;
    for (uint64_t t = 1; t < threads; t++) {
        pthread_join(handles[t], NULL);
        sum += workers[t].result;
    }
    return sum;
}

#endif
