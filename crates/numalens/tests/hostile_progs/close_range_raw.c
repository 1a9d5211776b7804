/* Closes every descriptor behind libc's back (the raw close_range system call), or with
 * closefrom(), then opens its own files. */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/syscall.h>

#include "hostile.h"

int main(int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "raw";
    if (!strcmp(how, "raw"))
        syscall(SYS_close_range, 0u, ~0u, 0);
    else if (!strcmp(how, "closefrom"))
        closefrom(0);
    else
        close_range(0, ~0u, 0);
    int fds[6];
    char name[32], line[64];
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "out.%d", i);
        fds[i] = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    unsigned sum = churn();
    for (int i = 0; i < 6; i++) {
        snprintf(line, sizeof line, "fd %d: %u\n", fds[i], sum);
        put_fd(fds[i], line);
    }
    return 0;
}
