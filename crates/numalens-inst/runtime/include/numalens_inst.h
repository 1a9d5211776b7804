/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file numalens_inst.h
 * @brief The files written by the instrumentation runtime (`libnumalens_inst.a`): the one
 * definition of their binary layout.
 *
 * Each instrumented thread writes, in the directory named by NUMALENS_INST_DIR (else NUMALENS_DIR):
 * - `inst-<pid>-<tid>-<copy>-<seq>.pages` (exact mode): a 4096-byte header, then chunks of
 *   NL_INST_CHUNK_PAGES consecutive pages, each page with its read and write counts and the time
 *   of the thread's first access to it;
 * - `inst-<pid>-<tid>-<copy>-<seq>.samples` (sampled mode): a 4096-byte header, then 32-byte
 *   sample records.
 * `copy` tells apart copies of the runtime linked into several modules of one process; `seq`
 * tells apart threads that reused a tid. Counts are additive: a reader sums every file of a
 * (pid, tid). The files are shared mappings of the writer's memory, so they hold everything
 * counted up to the moment the process ended, even when it was killed. All little-endian. The Rust
 * mirror is crates/numalens-inst/src/files.rs; a round-trip test keeps the two equal.
 */
#ifndef NUMALENS_INST_H
#define NUMALENS_INST_H

#include <stdint.h>

#define NL_INST_MAGIC_PAGES "NLIPAGES"   /* 8 bytes, no terminator in the file */
#define NL_INST_MAGIC_SAMPLES "NLISAMPL"
#define NL_INST_VERSION 1u
#define NL_INST_HEADER_SIZE 4096u
/** Pages per chunk; a chunk covers an aligned run of this many 4 KiB pages. */
#define NL_INST_CHUNK_PAGES 64u
#define NL_INST_PAGE_SHIFT 12u
/** `valid` of a chunk whose base page is set. */
#define NL_INST_CHUNK_VALID 0x4b4e554843494c4eull /* "NLICHUNK" */

/** Modes, as bits of nl_inst_header.mode and of NUMALENS_INST. */
#define NL_INST_EXACT 1u
#define NL_INST_SAMPLED 2u

/** Header at offset 0 of both files (the rest of the first 4096 bytes is zero). */
struct nl_inst_header {
    char magic[8];          /* NL_INST_MAGIC_PAGES or NL_INST_MAGIC_SAMPLES */
    uint32_t version;       /* NL_INST_VERSION */
    uint32_t pid;
    uint32_t tid;
    uint32_t page_shift;    /* NL_INST_PAGE_SHIFT */
    uint64_t start_ns;      /* CLOCK_MONOTONIC when the thread's files were created */
    uint32_t sample_every;  /* mean sampling interval in accesses (samples file) */
    uint32_t mode;          /* NL_INST_EXACT | NL_INST_SAMPLED */
    uint32_t chunk_pages;   /* NL_INST_CHUNK_PAGES */
    uint32_t record_size;   /* sizeof(struct nl_inst_chunk) or sizeof(struct nl_inst_sample) */
    uint64_t copy_id;       /* which copy of the runtime wrote it */
    uint32_t full;          /* 1: the file could not grow (no space left where it lives), so
                               what came after its last record was not recorded */
    uint8_t reserved[4];
};

/** One page of a thread: counts[0] reads, counts[1] writes. Never touched: all zero. */
struct nl_inst_page {
    uint64_t counts[2];
    uint64_t first_ns;      /* CLOCK_MONOTONIC of the thread's first access; 0 = never */
};

/** Chunk i lies at file offset NL_INST_HEADER_SIZE + i * sizeof(struct nl_inst_chunk). */
struct nl_inst_chunk {
    uint64_t base_page;     /* page number (address >> 12) of pages[0], a multiple of 64 */
    uint64_t valid;         /* NL_INST_CHUNK_VALID once base_page is set; 0 = unused */
    uint64_t reserved[6];
    struct nl_inst_page pages[NL_INST_CHUNK_PAGES];
};

/** One sampled access; record i lies at NL_INST_HEADER_SIZE + i * 32. */
struct nl_inst_sample {
    uint64_t time_ns;       /* CLOCK_MONOTONIC */
    uint64_t addr;
    uint64_t ip;            /* return address of the hook: the instruction after the access call */
    uint32_t weight;        /* accesses this sample stands for */
    uint16_t size;          /* bytes accessed (1..16; 8 for a word of a range access) */
    uint8_t is_write;
    uint8_t valid;          /* 1, written last: the record is finished; 2 (NL_INST_SAMPLE_WRITING),
                               written before its time is taken: being written; 0 = not
                               started (or the file's unused tail) */
};

/** `valid` of a sample whose time may be taken already: a reader that finds a thread's next
 *  slot still 0 knows that the thread's next sample is no older than its look. */
#define NL_INST_SAMPLE_WRITING 2

#ifdef __cplusplus
static_assert(sizeof(struct nl_inst_header) == 64, "inst header is 64 bytes");
static_assert(sizeof(struct nl_inst_chunk) == 1600, "chunk is 1600 bytes");
static_assert(sizeof(struct nl_inst_sample) == 32, "sample is 32 bytes");
#else
_Static_assert(sizeof(struct nl_inst_header) == 64, "inst header is 64 bytes");
_Static_assert(sizeof(struct nl_inst_chunk) == 1600, "chunk is 1600 bytes");
_Static_assert(sizeof(struct nl_inst_sample) == 32, "sample is 32 bytes");
#endif

#endif
