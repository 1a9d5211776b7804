/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file pages.c
 * @brief At exit: the node of every page of writable private mappings, as PAGE_NODES runs.
 *
 * move_pages(2) with nodes == NULL only reports where each page is (-ENOENT: never touched) and
 * moves nothing. Pages are queried at the base page size, so a transparent huge page shows up as
 * 512 pages on one node and needs no special case. Arrays are static: this runs once, at exit,
 * on the exiting thread.
 */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nl_internal.h"

#define NL_PAGE_BATCH 1024u
/** Pages queried at most per process (64 GiB of 4 KiB pages), to bound the time spent at exit. */
#define NL_PAGE_LIMIT (1ull << 24)

static void *nl_pq_pages[NL_PAGE_BATCH];
static int nl_pq_status[NL_PAGE_BATCH];

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

struct nl_pages_ctx {
    uint64_t page_size, budget;
};

static void nl_query_range(uint64_t lo, uint64_t hi, struct nl_pages_ctx *c)
{
    struct nl_run run = {0, 0, c->page_size, 0};
    for (uint64_t p = lo; p < hi && c->budget;) {
        unsigned n = 0;
        for (; n < NL_PAGE_BATCH && p < hi && c->budget; n++, p += c->page_size, c->budget--)
            nl_pq_pages[n] = (void *)p;
        long rc = syscall(SYS_move_pages, 0, (unsigned long)n, nl_pq_pages, NULL, nl_pq_status, 0);
        for (unsigned i = 0; i < n; i++) {
            int64_t node = rc < 0 ? -(int64_t)errno : (int64_t)nl_pq_status[i];
            nl_run_feed(&run, (uint64_t)nl_pq_pages[i], node);
        }
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

void nl_pages_emit(const char *maps_path)
{
    struct nl_pages_ctx c = {(uint64_t)sysconf(_SC_PAGESIZE), NL_PAGE_LIMIT};
    nl_maps_foreach(maps_path, nl_pages_cb, &c);
}
