/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file numalens_fd.h
 * @brief Descriptors the runtimes own, kept out of the program's way (both runtimes use this).
 *
 * A program may close every descriptor at start, dup2 over low ones, or open until EMFILE. A
 * runtime's file must neither take a descriptor number the program expects to get, nor end up
 * as the number of one of the program's own files. So each owned descriptor is moved above the
 * program's soft RLIMIT_NOFILE (the soft limit is raised to the hard one for the instant of the
 * move and put back): the kernel never hands out a number at or above the soft limit, and a
 * descriptor above it does not count against the program's limit. Where the hard limit leaves no
 * room, or the soft limit is very high, it goes as high as is cheap below the soft limit. Before each use the owner checks, with one
 * fstat, that the number still names its own file (device and inode) and reopens the file by
 * its path if not: a raw close_range or dup2 system call can take a number away, never make us
 * write into what replaced it.
 *
 * Raw system calls only: the inst runtime is linked into the program, where every libc import
 * adds a PLT entry that moves the program's code (docs/INST.md).
 */
#ifndef NUMALENS_FD_H
#define NUMALENS_FD_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Both runtimes tell a fork no handler of theirs saw by pages the kernel empties in a fork child
 * (Linux 4.14); older C library headers lack the names. */
#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif
#ifndef MADV_KEEPONFORK
#define MADV_KEEPONFORK 19
#endif

/** Room above the soft limit asked for while moving a descriptor (one per runtime file). */
#define NL_FD_ROOM 4096u

static inline long nl_fd_sys(long nr, long a, long b, long c, long d)
{
    long r = syscall(nr, a, b, c, d);
    return r;
}

/**
 * A runtime raises a limit of the whole process for the instant of a system call and puts it
 * back. The program's own getrlimit/setrlimit/prlimit calls (interposed by the preload runtime,
 * shims_limits.c) take this lock too, so they neither see the raised value nor have a limit they
 * set undone by the put-back. The word is the holder's tid; a holder that is no thread of this
 * process (the word was copied by a fork) holds nothing. The preload runtime exports its word as
 * numalens_limits_holder, and the inst runtime uses that one when it is there, so that both
 * runtimes and the program take one lock.
 */
_Atomic int *nl_fd_limits_word(void);

/** A hold of the limits lock: whether it was taken (not when the thread held it already), and
 * the signal mask to put back. */
struct nl_limits_hold {
    int taken;
    uint64_t mask;
};

/**
 * Takes the limits lock with every signal blocked until nl_fd_limits_unlock: a signal handler
 * that wants the event log's lock (the runtime's fatal-signal flush) must never run in a thread
 * holding this one while another thread holds the log's lock and waits for this one.
 */
static inline void nl_fd_limits_lock(struct nl_limits_hold *h)
{
    int e = errno;
    uint64_t all = ~(uint64_t)0;
    h->mask = 0;
    nl_fd_sys(SYS_rt_sigprocmask, SIG_BLOCK, (long)&all, (long)&h->mask, sizeof all);
    _Atomic int *word = nl_fd_limits_word();
    int me = (int)nl_fd_sys(SYS_gettid, 0, 0, 0, 0);
    h->taken = 1;
    for (;;) {
        int held = 0;
        if (atomic_compare_exchange_weak(word, &held, me))
            break;
        if (held == me) {
            h->taken = 0;
            break;
        }
        if (held && nl_fd_sys(SYS_tgkill, nl_fd_sys(SYS_getpid, 0, 0, 0, 0), held, 0, 0) != 0 &&
            errno == ESRCH)
            atomic_compare_exchange_strong(word, &held, 0);
        else
            nl_fd_sys(SYS_sched_yield, 0, 0, 0, 0);
    }
    errno = e;
}

static inline void nl_fd_limits_unlock(const struct nl_limits_hold *h)
{
    int e = errno;
    if (h->taken)
        atomic_store(nl_fd_limits_word(), 0);
    nl_fd_sys(SYS_rt_sigprocmask, SIG_SETMASK, (long)&h->mask, 0, sizeof h->mask);
    errno = e;
}

/**
 * The soft limit raised to make room above @p old (read here); 1 if it was raised. Takes the
 * limits lock (@p hold), which nl_fd_limit_restore gives back.
 */
static inline int nl_fd_limit_raise(struct rlimit *old, struct nl_limits_hold *hold)
{
    nl_fd_limits_lock(hold);
    if (nl_fd_sys(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, (long)old) != 0)
        return 0;
    if (old->rlim_cur >= old->rlim_max)
        return 0;
    struct rlimit wide = *old;
    uint64_t want = (uint64_t)old->rlim_cur + NL_FD_ROOM;
    wide.rlim_cur = want < old->rlim_max ? want : old->rlim_max;
    return nl_fd_sys(SYS_prlimit64, 0, RLIMIT_NOFILE, (long)&wide, 0) == 0;
}

static inline void nl_fd_limit_restore(const struct rlimit *old, int raised,
                                       const struct nl_limits_hold *hold)
{
    int e = errno;
    if (raised)
        nl_fd_sys(SYS_prlimit64, 0, RLIMIT_NOFILE, (long)old, 0);
    nl_fd_limits_unlock(hold);
    errno = e;
}

/* The kernel sizes a process's descriptor table to its highest open number, and every fork copies
 * it: a number near a soft limit of a million (containers) would cost megabytes per process. */
#define NL_FD_FAR 16384u

/** The lowest number an owned descriptor may take under the limit @p old. */
static inline long nl_fd_floor(const struct rlimit *old, int raised)
{
    if (raised && old->rlim_cur <= NL_FD_FAR)
        return (long)old->rlim_cur; /* above the program's reach */
    /* No room above the program's limit, or too far up: as high as is cheap, in the top quarter
     * (at most 1024 numbers) below that, where only a program about to run out would get to. */
    uint64_t top = old->rlim_cur < NL_FD_FAR ? old->rlim_cur : NL_FD_FAR;
    uint64_t below = top / 4 < 1024 ? top / 4 : 1024;
    /* Never among the standard descriptors; at or above the limit the move fails (EINVAL). */
    return top - below < 3 ? 3 : (long)(top - below);
}

/**
 * Opens @p path (flags get O_CLOEXEC) as a descriptor above the program's reach: the open itself
 * is done under the raised limit, so a program that used up its descriptors does not make it
 * fail. With @p transient (a file read and closed at once) a descriptor that cannot be moved up
 * is kept where it is; otherwise the open fails (EMFILE) rather than keep a number the program
 * would have got. Returns the descriptor or -1 (errno set).
 */
static inline int nl_fd_open_high(const char *path, int flags, int mode, int transient)
{
    struct rlimit old = {0, 0};
    struct nl_limits_hold hold;
    int raised = nl_fd_limit_raise(&old, &hold);
    int fd = (int)nl_fd_sys(SYS_openat, AT_FDCWD, (long)path, flags | O_CLOEXEC, mode);
    if (fd >= 0) {
        long high = fd >= nl_fd_floor(&old, raised)
                        ? fd
                        : nl_fd_sys(SYS_fcntl, fd, F_DUPFD_CLOEXEC, nl_fd_floor(&old, raised), 0);
        if (high != fd && (high >= 0 || !transient)) {
            nl_fd_sys(SYS_close, fd, 0, 0, 0);
            fd = (int)high;
            if (fd < 0) {
                if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL))
                    nl_fd_sys(SYS_unlinkat, AT_FDCWD, (long)path, 0, 0); /* we made it empty */
                errno = EMFILE;
            }
        }
    }
    nl_fd_limit_restore(&old, raised, &hold);
    return fd;
}

/**
 * Moves @p fd (one of ours) to another number above the program's reach; returns the new number,
 * or -1 if no number was free (ours is then unchanged).
 */
static inline int nl_fd_move_high(int fd)
{
    struct rlimit old = {0, 0};
    struct nl_limits_hold hold;
    int raised = nl_fd_limit_raise(&old, &hold);
    /* Nowhere up there: fail rather than take a low number the program would get. */
    long high = nl_fd_sys(SYS_fcntl, fd, F_DUPFD_CLOEXEC, nl_fd_floor(&old, raised), 0);
    if (high >= 0)
        nl_fd_sys(SYS_close, fd, 0, 0, 0);
    nl_fd_limit_restore(&old, raised, &hold);
    return (int)high;
}

/** Device and inode of what @p fd names; 0, or -1 if it names nothing (or fstat is refused). */
static inline int nl_fd_identity(int fd, uint64_t *dev, uint64_t *ino)
{
    struct stat st;
    if (fd < 0 || nl_fd_sys(SYS_fstat, fd, (long)&st, 0, 0) != 0)
        return -1;
    *dev = (uint64_t)st.st_dev;
    *ino = (uint64_t)st.st_ino;
    return 0;
}

/**
 * 1 if @p fd still names the file of identity (@p dev, @p ino). A refused fstat (a seccomp
 * filter) other than EBADF cannot tell: the descriptor is trusted then.
 */
static inline int nl_fd_still(int fd, uint64_t dev, uint64_t ino)
{
    uint64_t d, i;
    if (nl_fd_identity(fd, &d, &i) != 0)
        return fd >= 0 && errno != EBADF;
    return d == dev && i == ino;
}

#endif
