/* Forks behind the back of an interposed fork():
 *   daemon   glibc's daemon(3), whose fork is internal to libc; the child works and writes its file.
 *   raw      syscall(SYS_fork) while a second thread allocates without pause, so that the forked
 *   _Fork    child often inherits locks that thread held; each child allocates (enough to make the
 *            runtime write) and exits. A child still running after 10 s counts as hung.
 * The program writes "forks.out" with the number of forks and of hung children.
 *   kept     a plain fork() after work: the child writes "kept.out", how many mappings of
 *            files named after its parent's pid it holds (the inst runtime's, if it kept them).
 *   handler  the parent writes every word of handler_page once, then forks; a fork handler the
 *            program registered first (before any instrumented access) writes them all again in
 *            the child, which then exits. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "hostile.h"

#define FORKS 20

static atomic_int stop;

static void *allocate_forever(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        char *p = malloc(100000);
        if (p) {
            p[0] = 1;
            free(p);
        }
    }
    return NULL;
}

static pid_t fork_behind(const char *how)
{
    if (!strcmp(how, "raw"))
        return (pid_t)syscall(SYS_fork);
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34)
    return _Fork();
#else
    return (pid_t)syscall(SYS_fork);
#endif
}

/* Waits up to 10 s for @p pid; 1 (after killing it) when it had not ended by then. */
static int hung(pid_t pid)
{
    for (int i = 0; i < 1000; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return 0;
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return 1;
}

static int forks_behind(const char *how)
{
    pthread_t t;
    if (pthread_create(&t, NULL, allocate_forever, NULL) != 0)
        return 2;
    int hangs = 0;
    for (int i = 0; i < FORKS; i++) {
        pid_t pid = fork_behind(how);
        if (pid == 0) {
            for (int j = 0; j < 2000; j++) {
                char *p = malloc(100000);
                if (p) {
                    p[j % 100000] = 1;
                    free(p);
                }
            }
            _exit(0);
        }
        if (pid < 0)
            return 3;
        hangs += hung(pid);
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    char line[64];
    snprintf(line, sizeof line, "forks: %d hung: %d\n", FORKS, hangs);
    put("forks.out", line);
    return 0;
}

static volatile long handler_page[512] __attribute__((aligned(4096)));

static void write_handler_page(void)
{
    for (int i = 0; i < 512; i++)
        handler_page[i] = i;
}

/* Registered before main, ahead of the inst runtime's own handlers (made at its first access). */
__attribute__((constructor(101))) static void register_early(void)
{
    pthread_atfork(NULL, NULL, write_handler_page);
}

static int handler(void)
{
    write_handler_page();
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    return 0;
}

/* Lines of /proc/self/maps naming a file "inst-PID-…" of process @p pid. */
static int mappings_of(pid_t pid)
{
    char needle[32], line[512];
    snprintf(needle, sizeof needle, "/inst-%d-", (int)pid);
    FILE *f = fopen("/proc/self/maps", "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return n;
}

static int kept(void)
{
    unsigned sum = churn();
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        char line[64];
        snprintf(line, sizeof line, "parent's files mapped here: %d\n", mappings_of(parent));
        put("kept.out", line);
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    return sum == 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "kept"))
        return kept();
    if (argc > 1 && !strcmp(argv[1], "handler"))
        return handler();
    if (argc > 1 && strcmp(argv[1], "daemon") != 0)
        return forks_behind(argv[1]);
    if (daemon(1, 0) != 0)
        return 1;
    char line[64];
    snprintf(line, sizeof line, "daemon worked: %u\n", churn());
    put("daemon.partial", line);
    rename("daemon.partial", "daemon.out");
    return 0;
}
