/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file test_pages.c
 * @brief The exit page query with its shortcuts (mincore, numa_maps) against move_pages alone.
 *
 * Linked with the runtime's core (no preloading). Makes mappings with written, read-only (zero
 * page), untouched and partly unmapped pages, then emits the page-node runs twice: the way the
 * exit path does, and asking move_pages about every page; a FORK record (a = 1, then 2) precedes
 * each. The Rust side compares the two over the test's mappings. Prints the mappings as
 * `name=address` lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nl_internal.h"

void nl_pages_emit_with(const char *maps_path, int cheap);

/** @p pages of fresh memory followed by an inaccessible page, so that no two merge. */
static char *map(size_t pages)
{
    char *p = mmap(NULL, (pages + 1) * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED || mprotect(p + pages * 4096, 4096, PROT_NONE) != 0)
        exit(3);
    madvise(p, pages * 4096, MADV_NOHUGEPAGE);
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_pages DIR\n");
        return 2;
    }
    static char dir_env[600];
    snprintf(dir_env, sizeof dir_env, "NUMALENS_DIR=%s", argv[1]);
    putenv(dir_env);
    struct nl_config cfg;
    if (!nl_config_load(&cfg, getenv) || nl_core_start(&cfg, (uint32_t)getppid()) != 0)
        return 4;
    /* All written: numa_maps and mincore agree, no move_pages needed. */
    char *written = map(300);
    memset(written, 1, 300 * 4096);
    /* Written, read (the shared zero page: resident, yet not a normal page) and untouched. */
    char *mixed = map(400);
    volatile char sink = 0;
    for (int i = 0; i < 400; i++) {
        if (i % 3 == 0)
            mixed[i * 4096] = 1;
        else if (i % 3 == 1)
            sink += mixed[i * 4096];
    }
    /* Never touched at all. */
    char *untouched = map(200);
    /* Written, then a hole punched in the middle: two mappings. */
    char *split = map(64);
    memset(split, 1, 64 * 4096);
    munmap(split + 16 * 4096, 16 * 4096);
    (void)sink;
    printf("written=%lu\nmixed=%lu\nuntouched=%lu\nsplit=%lu\n", (unsigned long)written,
           (unsigned long)mixed, (unsigned long)untouched, (unsigned long)split);
    /* Warm up both ways first: their static arrays become resident pages of their own. */
    nl_pages_emit_with("/proc/self/maps", 1);
    nl_pages_emit_with("/proc/self/maps", 0);
    nl_emit(NL_REC_FORK, 1, 0, 0, 0, 0, 0);
    nl_pages_emit_with("/proc/self/maps", 1);
    nl_emit(NL_REC_FORK, 2, 0, 0, 0, 0, 0);
    nl_pages_emit_with("/proc/self/maps", 0);
    nl_core_finish();
    return 0;
}
