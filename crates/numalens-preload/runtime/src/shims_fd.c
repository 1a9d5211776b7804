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
 *
 * The inst runtime's files (linked into the program, runtime/inst/state.c) are ours too: close,
 * dup and fcntl refuse them the same way. They are told apart by what they are, one fstat of a
 * descriptor the program closes and, only for a file on the same file system, its path in
 * /proc/self/fd; a dup2 or close_range over one lets it go, and the inst runtime reopens the
 * file by its path when it next needs it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* The inst runtime's files: "<dir>/inst-", their directory's device; set at start. */
static char nl_inst_prefix[600];
static size_t nl_inst_prefix_len;
static uint64_t nl_inst_dev;

void nl_fd_shims_init(char *(*get)(const char *))
{
    const char *dir = get("NUMALENS_INST_DIR");
    if (!dir || !*dir)
        dir = get("NUMALENS_DIR");
    const char *mode = get("NUMALENS_INST");
    char real[PATH_MAX];
    struct stat st;
    if (!mode || !*mode || !dir || !*dir || !realpath(dir, real) || stat(real, &st) != 0)
        return;
    size_t n = strlen(real);
    if (n + sizeof "/inst-" > sizeof nl_inst_prefix)
        return;
    memcpy(nl_inst_prefix, real, n);
    memcpy(nl_inst_prefix + n, "/inst-", sizeof "/inst-");
    nl_inst_dev = (uint64_t)st.st_dev;
    nl_inst_prefix_len = n + sizeof "/inst-" - 1;
}

/** 1 if @p fd is one of the inst runtime's files. */
static int nl_is_inst_file(int fd)
{
    struct stat st;
    if (!nl_inst_prefix_len || fd < 0 || syscall(SYS_fstat, fd, &st) != 0 ||
        (uint64_t)st.st_dev != nl_inst_dev || !S_ISREG(st.st_mode))
        return 0;
    char link[32] = "/proc/self/fd/", path[sizeof nl_inst_prefix];
    char digits[12];
    int nd = 0;
    for (unsigned v = (unsigned)fd; nd == 0 || v; v /= 10)
        digits[nd++] = (char)('0' + v % 10);
    char *p = link + strlen(link);
    while (nd)
        *p++ = digits[--nd];
    *p = '\0';
    ssize_t len = readlink(link, path, sizeof path);
    return len >= (ssize_t)nl_inst_prefix_len &&
           memcmp(path, nl_inst_prefix, nl_inst_prefix_len) == 0;
}

static int nl_is_ours(int fd)
{
    return nl_owned_is(&nl_g.log, fd) || nl_is_inst_file(fd);
}

/* Before the program's call replaces @p fd: ours moves out of the way. Not in a vfork child, whose
 * descriptor table is its own while the runtime's memory is its parent's. */
static void nl_make_way(int fd)
{
    if (nl_owned_is(&nl_g.log, fd) && !nl_foreign_process())
        nl_owned_step_aside(&nl_g.log, fd);
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
        nl_make_way(new);
    return nl_real.dup2 ? nl_real.dup2(old, new) : (int)syscall(SYS_dup2, old, new);
}

NL_EXPORT int dup3(int old, int new, int flags)
{
    nl_fd_resolve();
    if (old != new) {
        if (nl_is_ours(old))
            return nl_ebadf();
        nl_make_way(new);
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
