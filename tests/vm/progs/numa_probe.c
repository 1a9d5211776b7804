/*
 * numa_probe: placement checks run inside the test-bed guest.
 *
 *   numa_probe first-touch       threads pinned to each node's CPU first-touch their own region;
 *                                every page must land on the toucher's node (move_pages query
 *                                and /proc/self/numa_maps must agree)
 *   numa_probe move-pages        move_pages moves a buffer between every ordered pair of nodes
 *                                (memory-only nodes included); the query must confirm each move
 *   numa_probe balancing [A B]   first touch on node A, then read from node B with NUMA balancing
 *                                on: the pages must move to B, and the perf software page-faults
 *                                counter must count the NUMA hinting faults (/proc/vmstat)
 *
 * Each check prints `PASS name` or `FAIL name: why` lines; the exit status is the failure count.
 * Raw syscalls instead of libnuma keep the binary static and the guest free of libraries.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

long page_size;
int failures;
int nodes[MAX_NODES], node_count;
int node_cpu[MAX_NODES];

void report(int ok, const char *name, const char *fmt, ...)
{
    va_list ap;
    if (ok) {
        printf("PASS %s", name);
    } else {
        printf("FAIL %s: ", name);
        failures++;
    }
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* Parses a Linux cpulist/nodelist ("0-3,5") into ids; returns the count. */
static int parse_list(const char *text, int *out, int max)
{
    int n = 0;
    const char *p = text;
    while (*p && *p != '\n') {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p)
            break;
        if (*end == '-')
            hi = strtol(end + 1, &end, 10);
        for (long i = lo; i <= hi && n < max; i++)
            out[n++] = (int)i;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

static int read_list(const char *path, int *out, int max)
{
    char buf[4096] = "";
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (!fgets(buf, sizeof buf, f))
        buf[0] = 0;
    fclose(f);
    return parse_list(buf, out, max);
}

static void discover_nodes(void)
{
    char path[128];
    int cpus[1024];
    node_count = read_list("/sys/devices/system/node/has_memory", nodes, MAX_NODES);
    for (int i = 0; i < node_count; i++) {
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", nodes[i]);
        node_cpu[i] = read_list(path, cpus, 1024) > 0 ? cpus[0] : -1;
    }
}

void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("sched_setaffinity");
        exit(2);
    }
}

/*
 * A region aligned to the huge page size, so THP on/off only changes the page size used, and
 * fenced by inaccessible pages so that it is a mapping (a numa_maps line) of its own: the
 * kernel would otherwise merge it with neighbouring anonymous memory.
 */
char *alloc_aligned(size_t size)
{
    char *raw = mmap(NULL, size + 2 * HUGE_SIZE, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    char *buf = (char *)(((uintptr_t)raw + page_size + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1));
    if (mprotect(buf - page_size, page_size, PROT_NONE) != 0 ||
        mprotect(buf + size, page_size, PROT_NONE) != 0) {
        perror("mprotect");
        exit(2);
    }
    return buf;
}

long move_pages(unsigned long count, void **pages, const int *dst, int *status)
{
    return syscall(SYS_move_pages, 0, count, pages, dst, status, MPOL_MF_MOVE);
}

/* Counts pages of [buf, buf+size) per node with a move_pages query; returns pages on `node`. */
long pages_on(char *buf, size_t size, int node, int *first_other)
{
    unsigned long n = size / page_size;
    void **pages = malloc(n * sizeof *pages);
    int *status = malloc(n * sizeof *status);
    long on = 0;
    *first_other = 0;
    for (unsigned long i = 0; i < n; i++)
        pages[i] = buf + i * page_size;
    if (move_pages(n, pages, NULL, status) != 0) {
        perror("move_pages query");
        exit(2);
    }
    for (unsigned long i = 0; i < n; i++) {
        if (status[i] == node)
            on++;
        else if (*first_other == 0)
            *first_other = status[i] < 0 ? status[i] : status[i] + 1000;
    }
    free(pages);
    free(status);
    return on;
}


int main(int argc, char **argv)
{
    page_size = sysconf(_SC_PAGESIZE);
    discover_nodes();
    if (node_count < 2) {
        report(0, "nodes", "only %d node(s) with memory", node_count);
        return failures;
    }
    if (argc >= 2 && strcmp(argv[1], "first-touch") == 0)
        check_first_touch();
    else if (argc >= 2 && strcmp(argv[1], "move-pages") == 0)
        check_move_pages();
    else if (argc >= 2 && strcmp(argv[1], "balancing") == 0)
        check_balancing(argc >= 4 ? atoi(argv[2]) : -1, argc >= 4 ? atoi(argv[3]) : -1);
    else {
        fprintf(stderr, "usage: %s first-touch | move-pages | balancing [FROM TO]\n", argv[0]);
        return 2;
    }
    return failures;
}

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}
