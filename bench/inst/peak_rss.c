/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * peak_rss PROGRAM [ARGS...]: runs the program and writes its peak resident set size in KiB
 * (wait4's ru_maxrss) to the file named by $PEAK_RSS_OUT; exits with the program's status.
 *
 * bench/inst builds it with `numalens cc`, so `numalens record --backend inst` accepts it as the
 * program to record; the real program inherits the recording environment and is recorded as
 * usual, and its peak memory is measured without the recorder's own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    const char *out = getenv("PEAK_RSS_OUT");
    if (argc < 2 || !out) {
        fprintf(stderr, "usage: PEAK_RSS_OUT=FILE peak_rss PROGRAM [ARGS...]\n");
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        execv(argv[1], argv + 1);
        perror(argv[1]);
        _exit(127);
    }
    int status;
    struct rusage usage;
    if (wait4(pid, &status, 0, &usage) < 0) {
        perror("wait4");
        return 1;
    }
    FILE *f = fopen(out, "w");
    if (!f || fprintf(f, "%ld\n", usage.ru_maxrss) < 0 || fclose(f) != 0) {
        perror(out);
        return 1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
