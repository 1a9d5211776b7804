/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file owned_fd.c
 * @brief The event file's descriptor, which the program can neither take over nor lose for us.
 *
 * The descriptor lives above the program's reach (numalens_fd.h). Every write checks first that
 * the number still names our file and reopens the file by its path if not, and the interposed
 * close/dup family (shims_fd.c) moves ours out of the way of a call that targets it. Writers and
 * movers take one lock, so no write goes to a number in the middle of being moved; only the
 * thread that holds it can be interrupted by a signal handler that wants it: a writer there
 * writes after the interrupted one (whose descriptor cannot move meanwhile), a mover gives up
 * instead of waiting for itself.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "nl_internal.h"
#include "numalens_fd.h"

/* Exported: the inst runtime, linked into the program, takes this same lock (numalens_fd.h). */
NL_EXPORT _Atomic int numalens_limits_holder;

_Atomic int *nl_fd_limits_word(void)
{
    return &numalens_limits_holder;
}

/** Takes @p o's lock; 0 if the calling thread already holds it (a signal handler inside a write).
 * The lock word is the holder's tid, so there is no moment when it is held by nobody known. */
static int nl_owned_lock(struct nl_owned *o)
{
    int32_t me = nl_gettid();
    for (;;) {
        int free_ = 0;
        if (atomic_compare_exchange_weak(&o->lock, &free_, me))
            return 1;
        if (free_ == me)
            return 0;
        sched_yield();
    }
}

static void nl_owned_unlock(struct nl_owned *o)
{
    atomic_store(&o->lock, 0);
}

int nl_owned_create(struct nl_owned *o, const char *path, int flags, int mode)
{
    size_t len = strlen(path);
    if (len >= sizeof o->path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = nl_fd_open_high(path, flags, mode, 0);
    if (fd < 0)
        return -1;
    struct stat st;
    if (nl_fd_sys(SYS_fstat, fd, (long)&st, 0, 0) == 0) {
        o->dev = (uint64_t)st.st_dev;
        o->ino = (uint64_t)st.st_ino;
        o->named = st.st_nlink > 0;
    } else {
        o->dev = o->ino = 0;
        o->named = 0;
    }
    memcpy(o->path, path, len + 1);
    o->size = 0; /* created empty (O_EXCL), and only we write it */
    /* A reopen finds the file there: it must not create another, nor truncate this one. */
    o->reopen_flags = flags & ~(O_CREAT | O_EXCL | O_TRUNC);
    atomic_store(&o->lock, 0);
    atomic_store(&o->fd, fd);
    return 0;
}

/** The descriptor, checked (and reopened if it was taken); -1 if the file is gone. Locked.
 * A file of ours that has no name any more was removed by the recorder at the end of its
 * recording (a process of the program can outlive a recording the user stopped): nothing would
 * read it, and it would hold its disk space, so it is closed for good. */
static int nl_owned_checked(struct nl_owned *o)
{
    int fd = atomic_load(&o->fd);
    struct stat st;
    if (fd >= 0 && nl_fd_sys(SYS_fstat, fd, (long)&st, 0, 0) != 0) {
        if (errno != EBADF)
            return fd; /* fstat refused (a seccomp filter): cannot tell, trusted (numalens_fd.h) */
    } else if (fd >= 0 && (uint64_t)st.st_dev == o->dev && (uint64_t)st.st_ino == o->ino) {
        if (st.st_nlink > 0 || !o->named)
            return fd;
        atomic_store(&o->fd, -1);
        o->path[0] = '\0';
        nl_fd_sys(SYS_close, fd, 0, 0, 0);
        errno = ENOENT;
        return -1;
    }
    /* The number is not ours any more: whatever it names now is the program's. */
    atomic_store(&o->fd, -1);
    if (!o->path[0])
        return -1;
    fd = nl_fd_open_high(o->path, o->reopen_flags, 0, 0);
    if (fd < 0)
        return -1;
    uint64_t dev, ino;
    if (nl_fd_identity(fd, &dev, &ino) == 0 && (dev != o->dev || ino != o->ino)) {
        nl_fd_sys(SYS_close, fd, 0, 0, 0); /* another file under our name: not ours either */
        return -1;
    }
    atomic_store(&o->fd, fd);
    o->reopens++;
    return fd;
}

/**
 * Makes room under the program's RLIMIT_FSIZE for a write that ends at byte @p end: past the
 * soft limit a write would raise SIGXFSZ, which kills the program by default. The soft limit is
 * raised to the hard one for the write (1 returned: put it back after); 0 when there is room; -1
 * if even the hard one leaves none. The caller holds the limits lock, so the program cannot
 * lower the limit between this check and the write.
 */
static int nl_fsize_room(uint64_t end, struct rlimit *old)
{
    if (nl_fd_sys(SYS_prlimit64, 0, RLIMIT_FSIZE, 0, (long)old) != 0 ||
        old->rlim_cur == RLIM_INFINITY || end <= old->rlim_cur)
        return 0;
    if (old->rlim_max != RLIM_INFINITY && end > old->rlim_max) {
        errno = EFBIG;
        return -1;
    }
    struct rlimit wide = {old->rlim_max, old->rlim_max};
    return nl_fd_sys(SYS_prlimit64, 0, RLIMIT_FSIZE, (long)&wide, 0) == 0 ? 1 : -1;
}

static void nl_fsize_restore(int widened, const struct rlimit *old)
{
    if (widened > 0) {
        int e = errno;
        nl_fd_sys(SYS_prlimit64, 0, RLIMIT_FSIZE, (long)old, 0);
        errno = e;
    }
}

int nl_owned_write(struct nl_owned *o, const void *p, size_t len)
{
    /* A signal handler that interrupted this thread's own write (a fatal signal's last records):
     * the descriptor was checked by the interrupted write and cannot move while this thread holds
     * the lock, so it is written directly rather than the records lost. The limits lock is free
     * then (signals are blocked while it is held), so the size check is made either way. */
    int nested = !nl_owned_lock(o);
    struct nl_limits_hold hold;
    nl_fd_limits_lock(&hold);
    struct rlimit fsize;
    int fd = nested ? atomic_load(&o->fd) : nl_owned_checked(o);
    int widened = fd < 0 ? -1 : nl_fsize_room(o->size + len, &fsize);
    int rc = widened < 0 ? -1 : 0;
    const char *c = p;
    while (rc == 0 && len > 0) {
        ssize_t w = write(fd, c, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            rc = -1;
            break;
        }
        c += w;
        len -= (size_t)w;
        o->size += (uint64_t)w;
    }
    nl_fsize_restore(widened, &fsize);
    nl_fd_limits_unlock(&hold);
    if (!nested)
        nl_owned_unlock(o);
    return rc;
}

void nl_owned_note(struct nl_owned *o, const void *p, size_t len, uint64_t at)
{
    if (!nl_owned_lock(o))
        return;
    struct nl_limits_hold hold;
    nl_fd_limits_lock(&hold);
    int fd = atomic_load(&o->fd);
    /* pwrite on an O_APPEND file appends whatever the offset: the flag is dropped for it. A
     * filter that refused write(2) may still let these through; if not, nothing is lost. Past
     * RLIMIT_FSIZE (the reason writing may have stopped) it would raise SIGXFSZ: room is made
     * as for a write, or the note is not written. */
    struct rlimit fsize;
    int widened = fd < 0 ? -1 : nl_fsize_room(at + len, &fsize);
    long flags = widened < 0 ? -1 : nl_fd_sys(SYS_fcntl, fd, F_GETFL, 0, 0);
    if (flags >= 0 && nl_fd_sys(SYS_fcntl, fd, F_SETFL, flags & ~O_APPEND, 0) == 0) {
        nl_fd_sys(SYS_pwrite64, fd, (long)p, (long)len, (long)at);
        nl_fd_sys(SYS_fcntl, fd, F_SETFL, flags, 0);
    }
    nl_fsize_restore(widened, &fsize);
    nl_fd_limits_unlock(&hold);
    nl_owned_unlock(o);
}

int nl_owned_is(struct nl_owned *o, int fd)
{
    return fd >= 0 && fd == atomic_load(&o->fd);
}

void nl_owned_step_aside(struct nl_owned *o, int fd)
{
    if (!nl_owned_is(o, fd) || !nl_owned_lock(o))
        return;
    if (atomic_load(&o->fd) == fd) {
        int e = errno;
        /* No free number: ours is left to be replaced, and the next write reopens the file. */
        atomic_store(&o->fd, nl_fd_move_high(fd));
        errno = e;
    }
    nl_owned_unlock(o);
}

void nl_owned_close(struct nl_owned *o)
{
    int fd = atomic_exchange(&o->fd, -1);
    if (fd >= 0 && nl_fd_still(fd, o->dev, o->ino))
        nl_fd_sys(SYS_close, fd, 0, 0, 0); /* not close(): the shim would refuse it as ours */
    o->path[0] = '\0';
    atomic_store(&o->lock, 0);
}
