/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file nl_shims.h
 * @brief What the interposition shims share: the next definitions of the functions they wrap,
 * the bootstrap pool, and the slow paths into the core.
 */
#ifndef NL_SHIMS_H
#define NL_SHIMS_H

#include <pthread.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "nl_internal.h"

#pragma GCC visibility push(hidden)

struct nl_real_fns {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void (*free)(void *);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    size_t (*usable)(void *);
    void *(*mmap)(void *, size_t, int, int, int, off_t);
    void *(*mmap64)(void *, size_t, int, int, int, off_t);
    int (*munmap)(void *, size_t);
    void *(*mremap)(void *, size_t, size_t, int, ...);
    int (*pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    void (*pthread_exit)(void *) __attribute__((noreturn));
    pid_t (*fork)(void);
    int (*daemon)(int, int);
    int (*execve)(const char *, char *const[], char *const[]);
    int (*execvpe)(const char *, char *const[], char *const[]);
    int (*fexecve)(int, char *const[], char *const[]);
    int (*execveat)(int, const char *, char *const[], char *const[], int);
    void *(*dlopen)(const char *, int);
    void (*exit_now)(int) __attribute__((noreturn));
    int (*close)(int);
    int (*dup)(int);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    int (*fcntl)(int, int, ...);
    int (*fcntl64)(int, int, ...);
    int (*close_range)(unsigned, unsigned, int);
    void (*closefrom)(int);
};

extern struct nl_real_fns nl_real;
/** 1 when the malloc we wrap is glibc's, whose chunk headers free() may read. */
extern int nl_glibc_chunks;

/** Makes every fork child's runtime state its own, whichever way it was forked (shims_proc.c). */
void nl_fork_watch(void);

/** Looks up every wrapped function with dlsym(RTLD_NEXT); dlsym's own allocations use the pool. */
void nl_resolve(void);
void *nl_boot_alloc(size_t size, size_t align, int zero);
#define NL_BOOT_SIZE (64u * 1024u)
extern unsigned char nl_boot_pool[NL_BOOT_SIZE];

static inline int nl_boot_owns(const void *p)
{
    return (uintptr_t)p - (uintptr_t)nl_boot_pool < NL_BOOT_SIZE;
}
size_t nl_boot_size(const void *p);

/** 1 in a vfork(2) child (or posix_spawn's): it shares the parent's memory, so it must not touch
 * the runtime's state. */
static inline int nl_foreign_process(void)
{
    return (uint32_t)syscall(SYS_getpid) != nl_g.pid;
}

/** Learns where the inst runtime's files are (shims_fd.c), from @p get (getenv). */
void nl_fd_shims_init(char *(*get)(const char *));

/** Slow paths, called only for allocations of at least min_object. */
void nl_on_alloc(void *p, size_t size, size_t align, int fn);
void nl_on_free(void *p);

/* Two additions to thread-local counters, no branch: a check for a periodic record here cost a
 * quarter of the shims' time on a malloc/free loop (a load-increment-store chain and a branch on
 * every call). The counts are written when the thread ends, at exec and at exit. */
static inline void nl_count_small(size_t size)
{
    nl_self.small_n++;
    nl_self.small_bytes += size;
}

#pragma GCC visibility pop

#endif
