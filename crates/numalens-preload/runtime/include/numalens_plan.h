/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file numalens_plan.h
 * @brief The rules file of `numalens run --plan`: a plan compiled by the recorder into fixed
 * records the runtime maps read-only and applies without parsing or allocating.
 *
 * Mirrored in crates/numalens-apply/src/rules.rs (a test writes a file there and reads it here).
 * Layout: the header, then site rules, static rules, thread rules, actions and ranges, each an
 * array of the structs below, in that order, all little-endian and 8-byte aligned.
 */
#ifndef NUMALENS_PLAN_H
#define NUMALENS_PLAN_H

#include <stdint.h>

#define NL_PLAN_MAGIC "NLRULES1"
#define NL_PLAN_VERSION 1u
/** Nodes a rule may name: one 64-bit mask. */
#define NL_PLAN_MAX_NODES 64u
/** CPUs a thread rule may name. */
#define NL_PLAN_CPU_WORDS 16u
/** Longest module name of a static rule (a library's file name; empty: the executable). */
#define NL_PLAN_MODULE_NAME 48u

struct nl_plan_header {
    char magic[8];
    uint32_t version;
    uint32_t sites, statics, threads, actions, ranges;
    uint32_t exe_build_id_len; /* static rules apply only in an executable with this build id */
    uint8_t exe_build_id[40];
    uint32_t reserved;     /* keeps the records after the header 8-byte aligned */
};

enum nl_plan_action_kind {
    NL_PLAN_BIND = 1,       /* every page on `node` */
    NL_PLAN_INTERLEAVE = 2, /* MPOL_INTERLEAVE over `nodes` */
    NL_PLAN_RANGES = 3,     /* ranges[first_range, +range_count): page offsets on a node each */
    NL_PLAN_PATTERN = 4,    /* page p on the node of ranges[first_range + p % range_count] */
};

struct nl_plan_action {
    uint32_t kind;
    uint32_t rule;          /* index of the rule in the plan's objects[] or threads[] */
    uint32_t first_range, range_count;
    uint64_t nodes;         /* mask of the nodes used */
    uint32_t node;          /* BIND */
    uint32_t pad;
};

struct nl_plan_range {
    uint64_t first_page, last_page; /* offsets from the object's first page, both included */
    uint32_t node, pad;
};

struct nl_plan_site {
    uint64_t key;           /* the profile's site key (see nl_plan_site_key) */
    uint32_t action, pad;
};

struct nl_plan_static {
    uint64_t offset;        /* symbol value minus the module's first PT_LOAD vaddr bias */
    uint64_t size;
    uint32_t action, pad;
    char module[NL_PLAN_MODULE_NAME];
};

struct nl_plan_thread {
    uint32_t logical, rule;
    uint64_t cpus[NL_PLAN_CPU_WORDS];
};

/** What the runtime did with a rule (NL_REC_PLACE's f field). */
enum nl_place_what {
    NL_PLACE_OBJECT = 0,
    NL_PLACE_STATIC = 1,
    NL_PLACE_THREAD = 2,
    /* Or'ed in: the pages were spread over the rule's nodes (interleave, weighted pattern); the
     * record's node is the lowest of them. */
    NL_PLACE_SPREAD = 0x100,
};

#endif
