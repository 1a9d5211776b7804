/* The first link of a fork+exec chain: forks, the child execs argv[1] (with the output file and
 * argv[2] as its arguments), the parent waits and exits with the child's status + 10, so that a
 * test sees whether the status crossed both processes. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "out.h"

int main(int argc, char **argv)
{
    const char *out = take_output(&argc, &argv);
    if (argc < 3)
        return 2;
    printf("parent %d\n", getpid());
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        return 3;
    if (child == 0) {
        char *args[] = {argv[1], (char *)out, argv[2], NULL};
        execv(argv[1], args);
        _exit(127);
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status))
        return 4;
    printf("child %d\n", child);
    return WEXITSTATUS(status) + 10;
}
