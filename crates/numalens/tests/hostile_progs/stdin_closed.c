/* Starts itself again with its standard input closed, as a program run with `<&-` starts: the
 * first file anyone opens then gets descriptor 0. */
#include <stdio.h>

#include "hostile.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        close(0);
        char *again[] = {argv[0], "again", NULL};
        execv("/proc/self/exe", again);
        return 127;
    }
    unsigned sum = churn();
    int fd = open("out", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char line[64];
    snprintf(line, sizeof line, "fd %d: %u\n", fd, sum);
    put_fd(fd, line);
    return 0;
}
