/* Two processes: the parent fills a heap block, forks, and the child fills a block of its own and
 * writes into its copy of the parent's (copy on write). The blocks are checked, so that the
 * compiler keeps every allocation and write. Small on purpose: its recording is stored with the
 * tests. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK (128 * 1024)
static char *parent, *own;

int main(void)
{
    parent = malloc(BLOCK);
    memset(parent, 1, BLOCK);
    pid_t child = fork();
    if (child == 0) {
        own = malloc(BLOCK);
        memset(own, 2, BLOCK);
        memset(parent, 3, BLOCK / 4);
        _exit(own[BLOCK - 1] + parent[0] == 5 ? 0 : 1);
    }
    int status;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && parent[0] == 1 ? WEXITSTATUS(status) : 1;
}
