/* Four threads, each writing one byte into every page of its own stripe of one anonymous
 * mapping (huge pages off, so that every page is faulted alone). Each thread prints
 * "stripe TID START END" before it starts: where its accesses are, told by the program itself.
 * Then a forked child writes every page of the first stripe again, each a copy-on-write fault on
 * a page that is present, and prints "child PID START END". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum { THREADS = 4, PAGES = 2000 };
static char *buf;
static long page;
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;

static void *work(void *arg)
{
    char *start = buf + (long)arg * PAGES * page;
    pthread_mutex_lock(&out);
    printf("stripe %ld %lu %lu\n", (long)syscall(SYS_gettid), (unsigned long)start,
           (unsigned long)(start + PAGES * page));
    fflush(stdout);
    pthread_mutex_unlock(&out);
    for (long p = 0; p < PAGES; p++)
        start[p * page] = 1;
    return NULL;
}

int main(void)
{
    page = sysconf(_SC_PAGESIZE);
    size_t len = (size_t)THREADS * PAGES * page;
    buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED || madvise(buf, len, MADV_NOHUGEPAGE) != 0)
        return 1;
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, work, (void *)i);
    for (long i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    pid_t child = fork();
    if (child == 0) {
        printf("child %ld %lu %lu\n", (long)getpid(), (unsigned long)buf,
               (unsigned long)(buf + PAGES * page));
        fflush(stdout);
        for (long p = 0; p < PAGES; p++)
            buf[p * page] = 2;
        _exit(0);
    }
    int status;
    return child > 0 && waitpid(child, &status, 0) == child && status == 0 ? 0 : 1;
}
