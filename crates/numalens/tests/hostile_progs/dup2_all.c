/* dup2 of one file onto every descriptor number the program may use (after raising its soft
 * limit to the hard one), then closes them all and works with what it reopens. */
#include <stdio.h>
#include <sys/resource.h>

#include "hostile.h"

int main(void)
{
    struct rlimit lim;
    getrlimit(RLIMIT_NOFILE, &lim);
    if (lim.rlim_max > 65536)
        lim.rlim_max = 65536;
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    int t = open("target", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    int failed = 0;
    for (int fd = 0; fd < (int)lim.rlim_cur; fd++)
        failed += fd != t && dup2(t, fd) != fd;
    /* Allocations the runtime records, too few to make it write while every number is taken. */
    void *small[100];
    for (int i = 0; i < 100; i++)
        small[i] = malloc(8192);
    for (int i = 0; i < 100; i++)
        free(small[i]);
    char line[64];
    snprintf(line, sizeof line, "dup2 failed %d times\n", failed);
    put_fd(1, line);
    put_fd(19, line);
    for (int fd = 3; fd < (int)lim.rlim_cur; fd++)
        close(fd);
    unsigned sum = churn();
    int f = open("after", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    snprintf(line, sizeof line, "reopened as %d, %u\n", f, sum);
    put_fd(f, line);
    return 0;
}
