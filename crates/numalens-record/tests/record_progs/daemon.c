/* Daemonises: the first process forks and exits at once with status 7; the child starts a
 * session of its own, first-touches argv[2] pages over argv[1] ms, allocates a 1 MiB block and
 * touches it, writes "done" into the file argv[3], then stays argv[4] ms (0 if absent) before it
 * exits through exit(). With argv[5] "thread", the child's main thread hands the work to a new
 * thread and ends with pthread_exit, so the process runs on without it. Prints `child PID`,
 * `block ADDR` and `touched N`. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "out.h"

static void pause_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static void work(long ms, long pages, const char *done, long linger_ms)
{
    size_t bytes = (size_t)pages * 4096;
    char *pool = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pool == MAP_FAILED)
        exit(3);
    madvise(pool, bytes, MADV_NOHUGEPAGE);
    /* Ten steps, so the work spans the time asked for. */
    for (long step = 0; step < 10; step++) {
        for (long i = step * pages / 10; i < (step + 1) * pages / 10; i++)
            pool[i * 4096] = 1;
        pause_ms(ms / 10);
    }
    char *block = malloc(1 << 20); /* site: daemon block */
    if (!block)
        exit(4);
    memset(block, 2, 1 << 20);
    printf("block %p\ntouched %ld\n", (void *)block, pages);
    fflush(stdout);
    int fd = open(done, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "done\n", 5) != 5)
        exit(5);
    close(fd);
    pause_ms(linger_ms);
    free(block);
    exit(0);
}

static char **work_args;
static int work_argc;

static void *work_thread(void *unused)
{
    (void)unused;
    work(atol(work_args[1]), atol(work_args[2]), work_args[3],
         work_argc > 4 ? atol(work_args[4]) : 0);
    return NULL;
}

int main(int argc, char **argv)
{
    take_output(&argc, &argv);
    if (argc < 4)
        return 2;
    printf("parent %d\n", getpid());
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        return 6;
    if (child == 0) {
        setsid();
        printf("child %d\n", getpid());
        fflush(stdout);
        work_args = argv;
        work_argc = argc;
        if (argc > 5 && strcmp(argv[5], "thread") == 0) {
            pthread_t worker;
            if (pthread_create(&worker, NULL, work_thread, NULL) != 0)
                exit(8);
            pthread_exit(NULL);
        }
        work_thread(NULL);
    }
    return 7;
}
