/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file shims_fd.c
 * @brief The interposed close/dup family: a program's call on the event file's descriptor
 * behaves as it does natively, where that descriptor does not exist.
 *
 * close, dup and fcntl on ours fail with EBADF; dup2/dup3 onto ours first move ours to another
 * number and then do what the program asked; close_range and closefrom close everything the
 * program asked for except ours. What bypasses these (a raw system call) can still take the
 * number away: the next write notices and reopens the file (owned_fd.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nl_shims.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* These may run before the runtime's constructor (another library's) or inside dlsym: the raw
 * system call stands in for the libc function until it is known. */
static void nl_fd_resolve(void)
{
    if (nl_unlikely(!nl_real.free) && !nl_self.resolving)
        nl_resolve();
}

static int nl_is_ours(int fd)
{
    return nl_owned_is(&nl_g.log, fd);
}

static int nl_ebadf(void)
{
    errno = EBADF;
    return -1;
}

NL_EXPORT int close(int fd)
{
    nl_fd_resolve();
    if (nl_is_ours(fd))
        return nl_ebadf();
    return nl_real.close ? nl_real.close(fd) : (int)syscall(SYS_close, fd);
}

NL_EXPORT int dup(int fd)
{
    nl_fd_resolve();
    if (nl_is_ours(fd))
        return nl_ebadf();
    return nl_real.dup ? nl_real.dup(fd) : (int)syscall(SYS_dup, fd);
}

NL_EXPORT int dup2(int old, int new)
{
    nl_fd_resolve();
    if (nl_is_ours(old))
        return nl_ebadf();
    if (old != new)
        nl_owned_step_aside(&nl_g.log, new);
    return nl_real.dup2 ? nl_real.dup2(old, new) : (int)syscall(SYS_dup2, old, new);
}

NL_EXPORT int dup3(int old, int new, int flags)
{
    nl_fd_resolve();
    if (old != new) {
        if (nl_is_ours(old))
            return nl_ebadf();
        nl_owned_step_aside(&nl_g.log, new);
    }
    return nl_real.dup3 ? nl_real.dup3(old, new, flags) : (int)syscall(SYS_dup3, old, new, flags);
}

/* Every fcntl command takes at most one argument, an int or a pointer: passed on as a word. */
static int nl_fcntl(int (*real)(int, int, ...), int fd, int cmd, void *arg)
{
    nl_fd_resolve();
    if (nl_is_ours(fd))
        return nl_ebadf();
    return real ? real(fd, cmd, arg) : (int)syscall(SYS_fcntl, fd, cmd, arg);
}

NL_EXPORT int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return nl_fcntl(nl_real.fcntl, fd, cmd, arg);
}

NL_EXPORT int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return nl_fcntl(nl_real.fcntl64 ? nl_real.fcntl64 : nl_real.fcntl, fd, cmd, arg);
}

static int nl_close_range_real(unsigned first, unsigned last, int flags)
{
    if (nl_real.close_range)
        return nl_real.close_range(first, last, flags);
#ifdef SYS_close_range
    return (int)syscall(SYS_close_range, first, last, flags);
#else
    errno = ENOSYS;
    return -1;
#endif
}

/** close_range over [first, last] less ours: the part below it, then the part above. */
static int nl_close_range_around(unsigned first, unsigned last, int flags)
{
    int ours = atomic_load(&nl_g.log.fd);
    if (ours < 0 || (unsigned)ours < first || (unsigned)ours > last ||
        (flags & CLOSE_RANGE_CLOEXEC))
        return nl_close_range_real(first, last, flags);
    if ((unsigned)ours > first && nl_close_range_real(first, (unsigned)ours - 1, flags) != 0)
        return -1;
    if ((unsigned)ours < last && nl_close_range_real((unsigned)ours + 1, last, flags) != 0)
        return -1;
    return 0;
}

NL_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
    nl_fd_resolve();
    return nl_close_range_around(first, last, flags);
}

NL_EXPORT void closefrom(int low)
{
    nl_fd_resolve();
    int e = errno;
    if (low < 0)
        low = 0;
    if (nl_close_range_around((unsigned)low, ~0u, 0) != 0 && nl_real.closefrom)
        nl_real.closefrom(low); /* no close_range: ours goes too, the next write reopens it */
    errno = e;
}
