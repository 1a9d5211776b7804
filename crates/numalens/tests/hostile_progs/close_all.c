/* A daemon's start: close every descriptor, then open its own files. Afterwards it counts the
 * descriptors that close() and fcntl() still find open above the ones it opened: none, natively. */
#include <stdio.h>
#include <sys/resource.h>

#include "hostile.h"

int main(void)
{
    for (int fd = 0; fd < 1024; fd++)
        close(fd);
    int fds[6];
    char name[32], line[64];
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "out.%d", i);
        fds[i] = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    unsigned sum = churn();
    struct rlimit lim;
    getrlimit(RLIMIT_NOFILE, &lim);
    int top = lim.rlim_max > (1 << 20) ? 1 << 20 : (int)lim.rlim_max;
    int flagged = 0, closed = 0, duped = 0;
    for (int fd = fds[5] + 1; fd < top; fd++) {
        flagged += fcntl(fd, F_GETFD) >= 0;
        int d = dup(fd);
        if (d >= 0) {
            duped++;
            close(d);
        }
        closed += close(fd) == 0;
    }
    for (int i = 0; i < 6; i++) {
        snprintf(line, sizeof line, "fd %d: %d %d %d %u\n", fds[i], flagged, duped, closed, sum);
        put_fd(fds[i], line);
    }
    return 0;
}
