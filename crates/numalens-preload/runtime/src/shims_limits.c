/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file shims_limits.c
 * @brief The interposed getrlimit/setrlimit/prlimit: the program never sees a limit the runtime
 * raised for an instant, and a limit it sets is never undone by the runtime putting its own
 * back (numalens_fd.h's limits lock). Each is the prlimit64 system call, as in glibc on 64-bit
 * systems (rlimit and rlimit64 are one layout there).
 */
#include <errno.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "nl_shims.h"
#include "numalens_fd.h"

_Static_assert(sizeof(struct rlimit) == sizeof(struct rlimit64), "one layout: a 64-bit system");

/* glibc's prototypes name the resource by its own enum type. */
typedef __rlimit_resource_t nl_resource;

static int nl_prlimit(pid_t pid, int resource, const void *new, void *old)
{
    struct nl_limits_hold hold;
    nl_fd_limits_lock(&hold);
    int rc = (int)syscall(SYS_prlimit64, pid, resource, new, old);
    nl_fd_limits_unlock(&hold);
    return rc;
}

NL_EXPORT int getrlimit(nl_resource resource, struct rlimit *limit)
{
    return nl_prlimit(0, resource, NULL, limit);
}

NL_EXPORT int getrlimit64(nl_resource resource, struct rlimit64 *limit)
{
    return nl_prlimit(0, resource, NULL, limit);
}

NL_EXPORT int setrlimit(nl_resource resource, const struct rlimit *limit)
{
    return nl_prlimit(0, resource, limit, NULL);
}

NL_EXPORT int setrlimit64(nl_resource resource, const struct rlimit64 *limit)
{
    return nl_prlimit(0, resource, limit, NULL);
}

NL_EXPORT int prlimit(pid_t pid, nl_resource resource, const struct rlimit *new, struct rlimit *old)
{
    return nl_prlimit(pid, resource, new, old);
}

NL_EXPORT int prlimit64(pid_t pid, nl_resource resource, const struct rlimit64 *new,
                        struct rlimit64 *old)
{
    return nl_prlimit(pid, resource, new, old);
}
