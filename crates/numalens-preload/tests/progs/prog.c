/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file prog.c
 * @brief Test program run under LD_PRELOAD=libnumalens.so; the first argument picks a scenario.
 *
 * Scenarios print what they did as "key value" lines (hex addresses) for the test to compare
 * with the event log.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define P(k, v) printf("%s %#lx\n", k, (unsigned long)(uintptr_t)(v))

static int alloc_scenario(void)
{
    void *a = malloc(100000);
    P("malloc", a);
    char *c = calloc(1000, 50);
    P("calloc", c);
    for (int i = 0; i < 50000; i++)
        if (c[i])
            return 10; /* calloc must zero */
    void *r0 = malloc(5000);
    P("realloc_from", r0);
    memset(r0, 7, 5000);
    void *r1 = realloc(r0, 4 << 20); /* large: moves to an mmap'd chunk */
    P("realloc_to", r1);
    if (((char *)r1)[4999] != 7)
        return 11;
    void *pm;
    if (posix_memalign(&pm, 4096, 20000) != 0 || ((uintptr_t)pm & 4095))
        return 12;
    P("posix_memalign", pm);
    void *aa = aligned_alloc(256, 8192);
    if (!aa || ((uintptr_t)aa & 255))
        return 13;
    P("aligned_alloc", aa);
    void *ma = memalign(64, 6000);
    P("memalign", ma);
    void *va = valloc(10000);
    P("valloc", va);
    free(NULL);
    for (int i = 0; i < 1000; i++)
        free(malloc(16 + i % 100)); /* small: counted only */
    free(a);
    free(c);
    free(r1);
    free(pm);
    free(aa);
    free(ma);
    free(va);
    fflush(stdout);
    return 3;
}

static void *worker_a(void *p)
{
    free(malloc(70000));
    return p;
}

static void *worker_b(void *p)
{
    free(malloc(80000));
    pthread_exit(p);
}

static void *worker_c(void *p)
{
    return p;
}

static int threads_scenario(void)
{
    void *(*fns[3])(void *) = {worker_a, worker_b, worker_c};
    const char *names[3] = {"routine1", "routine2", "routine3"};
    for (int i = 0; i < 3; i++) {
        pthread_t t;
        P(names[i], fns[i]);
        if (pthread_create(&t, NULL, fns[i], NULL) != 0)
            return 20;
        pthread_join(t, NULL);
    }
    return 0;
}

static int mmap_scenario(void)
{
    size_t len = 1 << 20;
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 30;
    P("mmap", m);
    m[0] = 1;
    char *r = mremap(m, len, 2 * len, MREMAP_MAYMOVE);
    if (r == MAP_FAILED)
        return 31;
    P("mremap", r);
    if (munmap(r, 2 * len) != 0)
        return 32;
    return 0;
}

static int leaf_scenario(void)
{
    P("leaf_malloc", malloc(123456));
    return 7;
}

static int fork_scenario(int do_exec, const char *self)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 40;
    if (pid == 0) {
        if (do_exec) {
            char *argv[] = {(char *)self, "leaf", NULL};
            execv(self, argv);
            _exit(41);
        }
        P("child_malloc", malloc(200000));
        fflush(stdout);
        exit(5);
    }
    P("child", pid);
    P("parent_malloc", malloc(300000));
    int st;
    waitpid(pid, &st, 0);
    printf("child_status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return 0;
}

static int crash_scenario(void)
{
    P("before_crash", malloc(90000));
    fflush(stdout);
    volatile int *nothing = NULL;
    *nothing = 1;
    return 0;
}

static int sleep_scenario(void)
{
    /* Enough large allocations to fill (and write out) the thread's buffer at least once. */
    for (int i = 0; i < 3000; i++)
        free(malloc(8192));
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
    return 0;
}

static int pages_scenario(void)
{
    size_t len = 64 * 4096;
    char *touched = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *untouched = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (touched == MAP_FAILED || untouched == MAP_FAILED)
        return 50;
    memset(touched, 1, len);
    P("touched", touched);
    P("untouched", untouched);
    printf("len %zu\n", len);
    return 0;
}

static int dlopen_scenario(const char *lib)
{
    void *h = dlopen(lib, RTLD_NOW);
    if (!h)
        return 60;
    void *(*f)(size_t) = (void *(*)(size_t))dlsym(h, "nl_test_lib_alloc");
    if (!f)
        return 61;
    P("lib_alloc", f(65536));
    return 0;
}

int main(int argc, char **argv)
{
    const char *s = argc > 1 ? argv[1] : "";
    if (!strcmp(s, "alloc"))
        return alloc_scenario();
    if (!strcmp(s, "threads"))
        return threads_scenario();
    if (!strcmp(s, "mmap"))
        return mmap_scenario();
    if (!strcmp(s, "leaf"))
        return leaf_scenario();
    if (!strcmp(s, "fork"))
        return fork_scenario(0, argv[0]);
    if (!strcmp(s, "forkexec"))
        return fork_scenario(1, argv[0]);
    if (!strcmp(s, "crash"))
        return crash_scenario();
    if (!strcmp(s, "sleep"))
        return sleep_scenario();
    if (!strcmp(s, "pages"))
        return pages_scenario();
    if (!strcmp(s, "dlopen") && argc > 2)
        return dlopen_scenario(argv[2]);
    fprintf(stderr, "unknown scenario %s\n", s);
    return 2;
}
