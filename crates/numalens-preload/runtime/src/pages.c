/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file pages.c
 * @brief At exit: the node of every page of writable private mappings, as PAGE_NODES runs.
 *
 * move_pages(2) with nodes == NULL only reports where each page is (-ENOENT: never touched,
 * -EFAULT: the shared zero page) and moves nothing. Pages are queried at the base page size, so a
 * transparent huge page shows up as 512 pages on one node and needs no special case. Arrays are
 * static: this runs once, at exit, on the exiting thread.
 *
 * move_pages costs about 150 ns per page (a page-table walk and a lock per page), which made the
 * query of a program with 4 GiB resident take 0.16 s. Two cheaper sources give the same answers
 * for most pages, and move_pages is asked only about the rest:
 * - mincore(2): a page it does not report resident has no page-table entry (or a swapped-out
 *   one), which is exactly what move_pages answers -ENOENT for.
 * - /proc/self/numa_maps: per mapping, how many normal pages are mapped on each node. Those pages
 *   are a subset of what mincore reports resident (the zero page, migration and device entries
 *   are resident but not counted), so when the two counts agree every resident page of the
 *   mapping is a normal page, and when the count is on one node it is that node's answer.
 * Both are used only when a first move_pages call works at all: when it is refused (seccomp, no
 * NUMA support) every page gets its error, as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nl_internal.h"
#include "numalens_fd.h"

#define NL_PAGE_BATCH 1024u
/** Pages queried at most per process (64 GiB of 4 KiB pages), to bound the time spent at exit. */
#define NL_PAGE_LIMIT (1ull << 24)
/** Mappings whose numa_maps summary is kept; the others are asked with move_pages. */
#define NL_NUMA_MAPS_MAX 4096u

static void *nl_pq_pages[NL_PAGE_BATCH];
static int nl_pq_status[NL_PAGE_BATCH];
static unsigned char nl_pq_core[NL_PAGE_BATCH];

/** An anonymous mapping of numa_maps: start, mapped pages, their node (-1: several, -2: none). */
struct nl_numa_map {
    uint64_t lo, pages;
    int64_t node;
};
static struct nl_numa_map nl_numa[NL_NUMA_MAPS_MAX];
static unsigned nl_numa_n;
static char nl_numa_buf[16384];

void nl_run_end(struct nl_run *r)
{
    if (r->count)
        nl_emit(NL_REC_PAGE_NODES, r->first, r->count, (uint64_t)r->node, r->page_size, 0, 0);
    r->count = 0;
}

void nl_run_feed(struct nl_run *r, uint64_t page, int64_t node)
{
    if (r->count && node == r->node && page == r->first + r->count * r->page_size) {
        r->count++;
        return;
    }
    nl_run_end(r);
    r->first = page;
    r->count = 1;
    r->node = node;
}

static uint64_t nl_number(const char **p, unsigned base)
{
    uint64_t v = 0;
    for (const char *s = *p;; s++) {
        unsigned d;
        if (*s >= '0' && *s <= '9')
            d = (unsigned)(*s - '0');
        else if (base == 16 && *s >= 'a' && *s <= 'f')
            d = (unsigned)(*s - 'a' + 10);
        else {
            *p = s;
            return v;
        }
        v = v * base + d;
    }
}

/**
 * One numa_maps line: `START POLICY [file=PATH | heap | stack] [huge] [anon=N] … [Nk=PAGES]…
 * kernelpagesize_kB=K`. File mappings are left out (a path may contain anything, including text
 * that looks like a node count), and so are hugetlb ones (counted per huge page).
 */
static void nl_numa_line(const char *line, uint64_t page_kb)
{
    const char *p = line;
    struct nl_numa_map m = {nl_number(&p, 16), 0, -2};
    if (*p != ' ' || nl_numa_n == NL_NUMA_MAPS_MAX)
        return;
    while (*p == ' ')
        p++;
    while (*p && *p != ' ')
        p++; /* the policy */
    while (*p) {
        while (*p == ' ')
            p++;
        if (!strncmp(p, "file=", 5) || !strncmp(p, "huge", 4))
            return;
        if (!strncmp(p, "kernelpagesize_kB=", 18)) {
            p += 18;
            if (nl_number(&p, 10) != page_kb)
                return;
        } else if (p[0] == 'N' && p[1] >= '0' && p[1] <= '9') {
            p++;
            int64_t node = (int64_t)nl_number(&p, 10);
            if (*p++ != '=')
                return;
            m.pages += nl_number(&p, 10);
            m.node = m.node == -2 || m.node == node ? node : -1;
        }
        while (*p && *p != ' ')
            p++;
    }
    nl_numa[nl_numa_n++] = m;
}

/** Reads the anonymous mappings of /proc/self/numa_maps into nl_numa (none if unreadable). */
static void nl_numa_read(uint64_t page_size)
{
    nl_numa_n = 0;
    /* Under the raised limit, as in maps.c. */
    int fd = nl_fd_open_high("/proc/self/numa_maps", O_RDONLY, 0, 1);
    if (fd < 0)
        return;
    size_t have = 0;
    for (;;) {
        ssize_t r = read(fd, nl_numa_buf + have, sizeof nl_numa_buf - 1 - have);
        if (r <= 0)
            break;
        have += (size_t)r;
        size_t start = 0;
        for (size_t i = 0; i < have; i++) {
            if (nl_numa_buf[i] != '\n')
                continue;
            nl_numa_buf[i] = '\0';
            nl_numa_line(nl_numa_buf + start, page_size / 1024);
            start = i + 1;
        }
        memmove(nl_numa_buf, nl_numa_buf + start, have - start);
        have -= start;
        if (have == sizeof nl_numa_buf - 1)
            have = 0; /* a line longer than the buffer: drop it */
    }
    nl_fd_sys(SYS_close, fd, 0, 0, 0);
}

struct nl_pages_ctx {
    uint64_t page_size, budget;
    int cheap; /* move_pages works: mincore and numa_maps may stand in for it */
};

/** Resident pages of [lo, hi) by mincore, or UINT64_MAX if it fails. */
static uint64_t nl_resident(uint64_t lo, uint64_t hi, uint64_t page_size)
{
    uint64_t count = 0;
    for (uint64_t p = lo; p < hi;) {
        uint64_t n = (hi - p) / page_size;
        n = n < NL_PAGE_BATCH ? n : NL_PAGE_BATCH;
        if (mincore((void *)p, n * page_size, nl_pq_core) != 0)
            return UINT64_MAX;
        for (uint64_t i = 0; i < n; i++)
            count += nl_pq_core[i] & 1;
        p += n * page_size;
    }
    return count;
}

/** The node of every resident page of the mapping at [lo, hi), or -1 if numa_maps cannot say. */
static int64_t nl_single_node(uint64_t lo, uint64_t hi, const struct nl_pages_ctx *c)
{
    unsigned a = 0, b = nl_numa_n;
    while (a < b) { /* numa_maps lists mappings in address order */
        unsigned mid = a + (b - a) / 2;
        if (nl_numa[mid].lo < lo)
            a = mid + 1;
        else
            b = mid;
    }
    /* A mapping with nothing resident needs no node: mincore alone answers for it. */
    if (a == nl_numa_n || nl_numa[a].lo != lo || nl_numa[a].node < 0)
        return -1;
    return nl_resident(lo, hi, c->page_size) == nl_numa[a].pages ? nl_numa[a].node : -1;
}

/** Feeds the answers for the @p n pages from @p first into @p run. */
static void nl_query_batch(uint64_t first, unsigned n, int64_t node_of_all, struct nl_pages_ctx *c,
                           struct nl_run *run)
{
    uint64_t ps = c->page_size;
    int core = c->cheap && mincore((void *)first, n * ps, nl_pq_core) == 0;
    unsigned asked = 0;
    for (unsigned i = 0; i < n; i++)
        if (!core || (nl_pq_core[i] & 1))
            nl_pq_pages[asked++] = (void *)(first + i * ps);
    long rc = 0;
    int err = 0;
    if (asked && (!core || node_of_all < 0)) {
        rc = syscall(SYS_move_pages, 0, (unsigned long)asked, nl_pq_pages, NULL, nl_pq_status, 0);
        err = errno;
    }
    for (unsigned i = 0, k = 0; i < n; i++) {
        int64_t node;
        if (core && !(nl_pq_core[i] & 1))
            node = -ENOENT;
        else if (core && node_of_all >= 0)
            node = node_of_all;
        else
            node = rc < 0 ? -(int64_t)err : (int64_t)nl_pq_status[k++];
        nl_run_feed(run, first + i * ps, node);
    }
}

static void nl_query_range(uint64_t lo, uint64_t hi, struct nl_pages_ctx *c)
{
    struct nl_run run = {0, 0, c->page_size, 0};
    int64_t node_of_all = c->cheap ? nl_single_node(lo, hi, c) : -1;
    for (uint64_t p = lo; p < hi && c->budget;) {
        uint64_t n = (hi - p) / c->page_size;
        n = n < NL_PAGE_BATCH ? n : NL_PAGE_BATCH;
        n = n < c->budget ? n : c->budget;
        nl_query_batch(p, (unsigned)n, node_of_all, c, &run);
        p += n * c->page_size;
        c->budget -= n;
    }
    nl_run_end(&run);
}

static int nl_pages_cb(const struct nl_map *m, void *ctx)
{
    struct nl_pages_ctx *c = ctx;
    if (m->perms[0] != 'r' || m->perms[1] != 'w' || m->perms[3] != 'p')
        return 0;
    if (strcmp(m->path, "[vvar]") == 0 || strcmp(m->path, "[vsyscall]") == 0)
        return 0;
    nl_query_range(m->lo, m->hi, c);
    return c->budget == 0;
}

/** Emits the runs; @p cheap = 0 asks move_pages about every page (tests compare the two). */
__attribute__((visibility("hidden"))) void nl_pages_emit_with(const char *maps_path, int cheap)
{
    struct nl_pages_ctx c = {(uint64_t)sysconf(_SC_PAGESIZE), NL_PAGE_LIMIT, 0};
    if (cheap) {
        /* A page of our own, certainly mapped: does move_pages answer at all? */
        void *probe = (void *)((uintptr_t)nl_pq_pages & ~(uintptr_t)(c.page_size - 1));
        int status;
        c.cheap = syscall(SYS_move_pages, 0, 1ul, &probe, NULL, &status, 0) == 0;
        if (c.cheap)
            nl_numa_read(c.page_size);
    }
    nl_maps_foreach(maps_path, nl_pages_cb, &c);
}

void nl_pages_emit(const char *maps_path)
{
    nl_pages_emit_with(maps_path, 1);
}
