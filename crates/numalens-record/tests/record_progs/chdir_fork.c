/* Changes directory first, as daemons do (daemon(3) moves to "/"), then forks: the child
 * allocates a 1 MiB block, touches it and writes `PID ADDRESS` into argv[1] (an absolute path,
 * since the directory changed); the parent waits for it and exits with its status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2 || chdir("/") != 0)
        return 2;
    pid_t child = fork();
    if (child < 0)
        return 3;
    if (child == 0) {
        char *block = malloc(1 << 20); /* site: child block */
        if (!block)
            _exit(4);
        memset(block, 1, 1 << 20);
        FILE *out = fopen(argv[1], "w");
        if (!out)
            _exit(5);
        fprintf(out, "%d %p\n", (int)getpid(), (void *)block);
        fclose(out);
        free(block);
        exit(0);
    }
    int status;
    if (waitpid(child, &status, 0) != child)
        return 6;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 7;
}
