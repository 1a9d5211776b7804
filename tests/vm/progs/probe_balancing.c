/*
 * NUMA balancing: a buffer first touched on one node and then read only from another must be
 * migrated there by the kernel, and the NUMA hinting faults that drive it must show up in the
 * perf software page-faults counter (what numalens' fault-based sampling relies on).
 */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probe.h"

#define BUF_SIZE (16UL << 20)
#define MAX_SECONDS 60.0
#define DONE_FRACTION 0.9

static long vmstat(const char *key)
{
    char name[128];
    long value, found = -1;
    FILE *f = fopen("/proc/vmstat", "r");
    if (!f)
        return -1;
    while (fscanf(f, "%127s %ld", name, &value) == 2)
        if (strcmp(name, key) == 0)
            found = value;
    fclose(f);
    return found;
}

/* Counting-mode page-faults counter for this thread, user and kernel side. */
static int open_fault_counter(void)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_PAGE_FAULTS;
    attr.disabled = 1;
    return (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
}

static int position_of(int node)
{
    for (int i = 0; i < node_count; i++)
        if (nodes[i] == node)
            return i;
    return -1;
}

/* Default pair: the first and last nodes with CPUs. */
static void default_pair(int *from, int *to)
{
    for (int i = 0; i < node_count; i++)
        if (node_cpu[i] >= 0) {
            if (*from < 0)
                *from = nodes[i];
            *to = nodes[i];
        }
}

/* Reads the buffer from `to`'s CPU until most pages are there or time runs out. */
static double read_until_moved(char *buf, int to, long *on)
{
    double start = now_seconds(), next_check = start;
    volatile unsigned long sum = 0;
    int other;
    long want = BUF_SIZE / page_size;
    *on = 0;
    while (now_seconds() - start < MAX_SECONDS) {
        for (size_t k = 0; k < BUF_SIZE; k += 64)
            sum += (unsigned char)buf[k];
        if (now_seconds() >= next_check) {
            *on = pages_on(buf, BUF_SIZE, to, &other);
            if (*on >= want * DONE_FRACTION)
                break;
            next_check = now_seconds() + 0.2;
        }
    }
    return now_seconds() - start;
}

void check_balancing(int from, int to)
{
    long want = BUF_SIZE / page_size, on;
    int other;
    char *buf = alloc_aligned(BUF_SIZE);
    if (from < 0 || to < 0)
        default_pair(&from, &to);
    int pf = position_of(from), pt = position_of(to);
    if (pf < 0 || pt < 0 || node_cpu[pf] < 0 || node_cpu[pt] < 0 || from == to) {
        report(0, "balancing", "nodes %d and %d are not two distinct nodes with CPUs", from, to);
        return;
    }
    pin(node_cpu[pf]);
    memset(buf, 1, BUF_SIZE);
    long first = pages_on(buf, BUF_SIZE, from, &other);
    report(first == want, "balancing-first-touch", " (%ld/%ld pages on node %d)", first, want,
           from);

    int fd = open_fault_counter();
    if (fd < 0) {
        report(0, "perf-page-faults", "perf_event_open: %m");
        return;
    }
    long hints0 = vmstat("numa_hint_faults"), migrated0 = vmstat("numa_pages_migrated");
    pin(node_cpu[pt]);
    ioctl(fd, PERF_EVENT_IOC_RESET, 0);
    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
    double took = read_until_moved(buf, to, &on);
    ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    long long faults = 0;
    if (read(fd, &faults, sizeof faults) != sizeof faults)
        faults = -1;
    long hints = vmstat("numa_hint_faults") - hints0;
    long migrated = vmstat("numa_pages_migrated") - migrated0;

    report(on >= want * DONE_FRACTION, "balancing-migrates",
           " (%ld/%ld pages moved from node %d to node %d in %.1f s, numa_pages_migrated +%ld)",
           on, want, from, to, took, migrated);
    /* Every hinting fault is a page fault of this thread; the other page faults in the window
     * are few (the reads touch no new memory), and other tasks are idle. */
    int counted = hints > 0 && faults >= hints * 9 / 10 && faults <= hints + hints / 10 + 64;
    report(counted, "perf-page-faults-count-hinting-faults",
           " (perf page-faults %lld, /proc/vmstat numa_hint_faults +%ld)", faults, hints);
    close(fd);
}
