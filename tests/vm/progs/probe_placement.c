/* First-touch placement and move_pages between every pair of nodes. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

#define REGION_SIZE (2 * HUGE_SIZE)
#define MOVE_SIZE HUGE_SIZE

static int touched_regions(void)
{
    int n = 0;
    for (int i = 0; i < node_count; i++)
        n += node_cpu[i] >= 0;
    return n;
}

struct toucher {
    char *region;
    int cpu;
};

static void *touch(void *arg)
{
    struct toucher *t = arg;
    pin(t->cpu);
    memset(t->region, 0x5a, REGION_SIZE);
    return NULL;
}

/* Pages per node of the mapping containing `addr`, from /proc/self/numa_maps ("N2=512"). */
static void numa_maps_counts(char *addr, long counts[MAX_NODES])
{
    char line[4096], best[4096] = "";
    unsigned long best_start = 0;
    FILE *f = fopen("/proc/self/numa_maps", "r");
    memset(counts, 0, MAX_NODES * sizeof counts[0]);
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        unsigned long start = strtoul(line, NULL, 16);
        if (start <= (unsigned long)addr && start >= best_start) {
            best_start = start;
            strcpy(best, line);
        }
    }
    fclose(f);
    for (char *tok = strtok(best, " \n"); tok; tok = strtok(NULL, " \n")) {
        int node;
        long pages;
        if (sscanf(tok, "N%d=%ld", &node, &pages) == 2 && node >= 0 && node < MAX_NODES)
            counts[node] = pages;
    }
}

/* AnonHugePages (kB) of the mapping containing `addr`, from /proc/self/smaps. */
static long anon_huge_kb(char *addr)
{
    char line[512];
    int inside = 0;
    long kb = -1;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            inside = lo <= (unsigned long)addr && (unsigned long)addr < hi;
        else if (inside && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb;
}

/* With THP "always" the touched regions must be backed by huge pages, with "never" not at all:
 * otherwise the THP on/off runs would test the same thing twice. */
static void check_thp_backing(char *buf, size_t size)
{
    const char *thp = getenv("NLVM_THP");
    long kb = anon_huge_kb(buf);
    if (!thp || strcmp(thp, "madvise") == 0)
        return;
    int want_huge = strcmp(thp, "always") == 0;
    int ok = want_huge ? kb == (long)(size >> 10) : kb == 0;
    report(ok, "first-touch-thp-backing", " (THP %s: AnonHugePages %ld kB of %zu kB)", thp, kb,
           size >> 10);
}

void check_first_touch(void)
{
    pthread_t threads[MAX_NODES];
    struct toucher t[MAX_NODES];
    long counts[MAX_NODES], want = REGION_SIZE / page_size;
    char *buf = alloc_aligned(REGION_SIZE * node_count);
    char name[64];

    for (int i = 0; i < node_count; i++) {
        t[i] = (struct toucher){buf + i * REGION_SIZE, node_cpu[i]};
        if (node_cpu[i] >= 0)
            pthread_create(&threads[i], NULL, touch, &t[i]);
    }
    for (int i = 0; i < node_count; i++)
        if (node_cpu[i] >= 0)
            pthread_join(threads[i], NULL);
    numa_maps_counts(buf, counts);
    check_thp_backing(buf, REGION_SIZE * (size_t)touched_regions());
    for (int i = 0; i < node_count; i++) {
        int other;
        if (node_cpu[i] < 0)
            continue; /* a memory-only node has no CPU to touch from */
        long on = pages_on(t[i].region, REGION_SIZE, nodes[i], &other);
        snprintf(name, sizeof name, "first-touch-node%d", nodes[i]);
        report(on == want && counts[nodes[i]] == want, name,
               " (cpu %d: %ld/%ld pages by move_pages, numa_maps N%d=%ld; first other %d)",
               node_cpu[i], on, want, nodes[i], counts[nodes[i]], other);
    }
}

/* Moves the whole buffer to `node`; returns pages the query finds there. */
static long move_all(char *buf, int node, long *not_moved)
{
    unsigned long n = MOVE_SIZE / page_size;
    void **pages = malloc(n * sizeof *pages);
    int *dst = malloc(n * sizeof *dst), *status = malloc(n * sizeof *status), other;
    for (unsigned long i = 0; i < n; i++) {
        pages[i] = buf + i * page_size;
        dst[i] = node;
    }
    *not_moved = move_pages(n, pages, dst, status);
    free(pages);
    free(dst);
    free(status);
    return pages_on(buf, MOVE_SIZE, node, &other);
}

void check_move_pages(void)
{
    long want = MOVE_SIZE / page_size;
    char *buf = alloc_aligned(MOVE_SIZE);
    char name[64];
    memset(buf, 0xa5, MOVE_SIZE);
    for (int j = 0; j < node_count; j++) {
        int ok = 1, bad_from = -1;
        long on = 0, not_moved = 0;
        for (int i = 0; i < node_count && ok; i++) {
            if (i == j)
                continue;
            on = move_all(buf, nodes[i], &not_moved);
            if (on == want && not_moved == 0)
                on = move_all(buf, nodes[j], &not_moved);
            ok = on == want && not_moved == 0;
            bad_from = nodes[i];
        }
        snprintf(name, sizeof name, "move-pages-to-node%d", nodes[j]);
        if (ok)
            report(1, name, " (from each of the %d other nodes, %ld pages)", node_count - 1,
                   want);
        else
            report(0, name, "via node %d: %ld/%ld pages in place, move_pages returned %ld",
                   bad_from, on, want, not_moved);
    }
    /* The buffer must also keep its contents through all those moves. */
    for (size_t k = 0; k < MOVE_SIZE; k++)
        if ((unsigned char)buf[k] != 0xa5) {
            report(0, "move-pages-keeps-data", "byte %zu changed", k);
            return;
        }
    report(1, "move-pages-keeps-data", "%s", "");
}
