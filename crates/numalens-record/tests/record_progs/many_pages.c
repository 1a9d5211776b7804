/* First-touches argv[1] pages of 4 KiB as fast as it can: half in this process and half in a
 * forked child, each half by two threads. Every page is a page fault, so a ring too small for
 * the burst makes the kernel drop samples in the rings of the first process and in the
 * inherited ones of its threads and child. Prints `pages N`; exits 0. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "out.h"

struct part {
    char *start;
    long pages;
};

static void *touch(void *arg)
{
    struct part *p = arg;
    for (long i = 0; i < p->pages; i++)
        p->start[i * 4096] = 1;
    return NULL;
}

/* Touches `pages` pages of a fresh mapping with two threads. */
static void touch_pages(long pages)
{
    size_t bytes = (size_t)pages * 4096;
    char *block = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED)
        exit(3);
    /* One fault per 4 KiB page whatever the THP setting. */
    madvise(block, bytes, MADV_NOHUGEPAGE);
    struct part halves[2] = {{block, pages / 2}, {block + pages / 2 * 4096, pages - pages / 2}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, touch, &halves[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
}

int main(int argc, char **argv)
{
    take_output(&argc, &argv);
    long pages = argc > 1 ? atol(argv[1]) : 100000;
    printf("pages %ld\n", pages);
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        return 4;
    touch_pages(child == 0 ? pages - pages / 2 : pages / 2);
    if (child == 0)
        _exit(0);
    int status;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 5;
}
