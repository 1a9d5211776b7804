/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file numalens_events.h
 * @brief The event log written by libnumalens: the one definition of its binary layout.
 *
 * Each traced process image writes one file, `events-<pid>.bin` (`events-<pid>-e<N>.bin` for the
 * image reached by the N-th exec in a chain, N > 0; a `.<k>` suffix is added before `.bin` if the
 * name exists already), in the directory named by the
 * environment variable NUMALENS_DIR. The file is a header followed by fixed-size records, all
 * little-endian. Records are written in chunks (a thread's buffer at a time) with write(2), so a
 * file holds whole records only, except possibly a torn last chunk when the process was killed
 * mid-write; readers drop a trailing partial record. Records of different threads interleave;
 * within one thread they are in time order. The Rust mirror is crates/numalens-preload/src/events/;
 * a round-trip test (C writes, Rust reads) keeps the two equal.
 */
#ifndef NUMALENS_EVENTS_H
#define NUMALENS_EVENTS_H

#include <stdint.h>

#define NL_EVENTS_MAGIC "NLEVENTS"   /* 8 bytes, no terminator in the file */
#define NL_EVENTS_VERSION 1u
#define NL_RECORD_SIZE 64u

/** File header: 64 bytes. */
struct nl_file_header {
    char magic[8];           /* NL_EVENTS_MAGIC */
    uint32_t version;        /* NL_EVENTS_VERSION */
    uint32_t record_size;    /* NL_RECORD_SIZE */
    uint32_t pid;
    uint32_t ppid;
    uint64_t start_ns;       /* CLOCK_MONOTONIC when the runtime started in this process */
    uint32_t page_size;      /* sysconf(_SC_PAGESIZE) */
    uint32_t min_object;     /* allocations of at least this size get a record and a call site */
    uint64_t exec_count;     /* how many exec()s led to this image (0 for the first program) */
    uint32_t write_errno;    /* 0, or the errno of the write after which the runtime could write
                                no more of this log (set in place when that happens) */
    uint32_t inst_uncounted; /* threads of the inst runtime (linked into the program) that could
                                not make their count files, so counted nothing (set in place) */
    uint8_t reserved[8];
};

/** Record kinds. New kinds may be added within a version; readers skip kinds they do not know. */
enum nl_record_kind {
    NL_REC_ALLOC = 1,        /* a=address b=size c=alignment (0 = default) d=site_id (0 = none)
                                e=nl_alloc_fn */
    NL_REC_FREE = 2,         /* a=address */
    NL_REC_REALLOC = 3,      /* a=new address b=new size c=old address d=site_id */
    NL_REC_MMAP = 4,         /* a=address b=length c=prot | flags << 32 d=site_id e=fd (as int64) */
    NL_REC_MUNMAP = 5,       /* a=address b=length */
    NL_REC_MREMAP = 6,       /* a=new address b=new length c=old address d=old length */
    NL_REC_THREAD_START = 7, /* a=logical thread id b=start routine (0 for the main thread)
                                c=parent tid (0 for the main thread) d=stack low e=stack size
                                f=parent logical thread id */
    NL_REC_THREAD_EXIT = 8,  /* a=logical thread id */
    NL_REC_FORK = 9,         /* a=child pid (written by the parent); 0 after a DAEMON whose fork
                                failed */
    NL_REC_EXEC = 10,        /* a=exec count of the new image; payload: the path being exec'd,
                                NUL-padded. Records after it in the same file mean exec failed. */
    NL_REC_MODULE = 11,      /* a=load bias b=lowest vaddr c=highest vaddr d=build-id length
                                e=1 for the main executable, else 0;
                                payload: build id (record 1, 64 bytes max), then the path */
    NL_REC_STACK = 12,       /* a=low address b=size c=logical thread id (main thread included) */
    NL_REC_TLS = 13,         /* a=address b=size c=module id (dlpi_tls_modid) d=logical thread id */
    NL_REC_SITE = 14,        /* a=site_id (never 0) b=frame count; payload: 1 record of up to 8
                                return addresses, innermost first, unused slots 0 */
    NL_REC_PAGE_NODES = 15,  /* a=first page address b=page count c=node (int64: -ENOENT never touched,
                                other negative = -errno) d=page size: a run of pages on one node */
    NL_REC_SMALL_ALLOCS = 16,/* a=allocations below min_object since the last such record b=their bytes */
    NL_REC_END = 17,         /* the runtime finished cleanly in this process (exit path ran) */
    NL_REC_SIGNAL = 18,      /* a=signal number b=si_addr c=si_code (as int64): a fatal signal
                                arrived, buffers were flushed, the signal is re-raised */
    NL_REC_DAEMON = 19,      /* daemon(3) is called, every earlier record written: once it has forked,
                                the process ends with _exit(0), so a log that ends here ended cleanly */
    NL_REC_PLACE = 20,       /* a=first address b=length c=plan rule index d=node (int64; of a spread
                                rule, the lowest of its nodes) e=0 or the errno mbind/sched_setaffinity
                                gave f=what (nl_place_what, NL_PLACE_SPREAD or'ed in):
                                a rule of `numalens run --plan` applied */
    NL_REC_FLUSH_MARK = 21,  /* no fields: the writing thread's buffer is written out with this
                                record last, so the log holds every record of it up to this time
                                (the inst hooks' sample path asks for it every 100 ms) */
    NL_REC_THREAD_CREATE = 22, /* a=logical thread id handed to the new thread b=0, written by the
                                creating thread before pthread_create, so before any record of
                                the new thread; b=the error pthread_create returned in a second
                                record when the thread was not created */
};

/** Which allocation function made an NL_REC_ALLOC. */
enum nl_alloc_fn {
    NL_FN_MALLOC = 1,
    NL_FN_CALLOC = 2,
    NL_FN_POSIX_MEMALIGN = 3,
    NL_FN_ALIGNED_ALLOC = 4,
    NL_FN_MEMALIGN = 5,
    NL_FN_VALLOC = 6,
    NL_FN_PVALLOC = 7,
};

/**
 * One record: 64 bytes. `payload` tells how many raw 64-byte records follow and belong to this
 * one (strings are NUL-padded; a site's frames are 8 little-endian uint64).
 */
struct nl_record {
    uint16_t kind;           /* enum nl_record_kind */
    uint16_t payload;        /* number of raw 64-byte payload records that follow */
    uint32_t tid;            /* kernel thread id of the thread that wrote it */
    uint64_t time_ns;        /* CLOCK_MONOTONIC */
    uint64_t a, b, c, d, e, f;
};

#define NL_MAX_FRAMES 8
/** Longest path kept in MODULE and EXEC payloads (bytes, before NUL padding). */
#define NL_MAX_PATH_PAYLOAD 1023

#ifdef __cplusplus
static_assert(sizeof(struct nl_record) == NL_RECORD_SIZE, "record is 64 bytes");
static_assert(sizeof(struct nl_file_header) == 64, "header is 64 bytes");
#else
_Static_assert(sizeof(struct nl_record) == NL_RECORD_SIZE, "record is 64 bytes");
_Static_assert(sizeof(struct nl_file_header) == 64, "header is 64 bytes");
#endif

#endif
