/* Shared by the numa_probe checks: node discovery, pinning, page placement queries. */
#ifndef PROBE_H
#define PROBE_H

#include <stddef.h>

#define MAX_NODES 64
#define HUGE_SIZE (2UL << 20)
#define MPOL_MF_MOVE (1 << 1)

extern long page_size;
extern int failures;
extern int nodes[MAX_NODES], node_count; /* online nodes with memory, ascending */
extern int node_cpu[MAX_NODES];          /* first CPU of nodes[i], -1 for memory-only */

void report(int ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void pin(int cpu);
char *alloc_aligned(size_t size);
long move_pages(unsigned long count, void **pages, const int *dst, int *status);
long pages_on(char *buf, size_t size, int node, int *first_other);
double now_seconds(void);

void check_first_touch(void);
void check_move_pages(void);
void check_balancing(int from, int to);

#endif
