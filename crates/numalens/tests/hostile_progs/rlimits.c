/* Lowers its own limits: eight descriptors (then opens until EMFILE), a small address space
 * (then asks for more than it allows), or a small largest file (then writes up to it). Or
 * "watch": one thread sets its largest file size, to one of two values in turn, and reads it back
 * while the other works until it is done; it writes how often the value read was not the one just
 * set. "watch-nofile": the same with its descriptor limit while the other starts threads. "full":
 * 64 descriptors, hard limit too, all used, then a thread. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/resource.h>

#include "hostile.h"

static void lower(int which, rlim_t to)
{
    struct rlimit lim;
    getrlimit(which, &lim);
    lim.rlim_cur = to;
    setrlimit(which, &lim);
}

static atomic_int watching = 1;
static int watched = RLIMIT_FSIZE;

static void *set_and_read_back(void *arg)
{
    long *mismatches = arg;
    for (rlim_t i = 0; i < 100000; i++) {
        rlim_t want = watched == RLIMIT_FSIZE ? (i % 2 ? 300000 : 200000) : (i % 2 ? 900 : 1000);
        lower(watched, want);
        struct rlimit lim;
        getrlimit(watched, &lim);
        *mismatches += lim.rlim_cur != want;
    }
    atomic_store(&watching, 0);
    return NULL;
}

/* A short-lived thread that writes a little memory: under the inst backend each makes its files. */
static void *touch(void *arg)
{
    volatile char *p = arg;
    for (int i = 0; i < 4096; i += 64)
        p[i] = (char)i;
    return NULL;
}

static void start_threads(void)
{
    static char block[4096];
    pthread_t t;
    if (pthread_create(&t, NULL, touch, block) == 0)
        pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "nofile";
    unsigned sum = churn();
    char line[128];
    if (!strcmp(what, "watch") || !strcmp(what, "watch-nofile")) {
        long mismatches = 0;
        pthread_t t;
        watched = strcmp(what, "watch") ? RLIMIT_NOFILE : RLIMIT_FSIZE;
        pthread_create(&t, NULL, set_and_read_back, &mismatches);
        while (atomic_load(&watching))
            watched == RLIMIT_FSIZE ? (void)churn() : start_threads();
        pthread_join(t, NULL);
        snprintf(line, sizeof line, "read back another limit %ld times\n", mismatches);
    } else if (!strcmp(what, "full")) {
        /* No room left at all, not even above the soft limit: then a new thread works. */
        struct rlimit lim = {64, 64};
        setrlimit(RLIMIT_NOFILE, &lim);
        int n = 0;
        while (open("/dev/null", O_RDONLY) >= 0)
            n++;
        start_threads();
        snprintf(line, sizeof line, "opened %d before a thread, %u\n", n, sum);
    } else if (!strcmp(what, "nofile")) {
        lower(RLIMIT_NOFILE, 8);
        int n = 0;
        while (open("/dev/null", O_RDONLY) >= 0)
            n++;
        int e = errno;
        sum += churn();
        snprintf(line, sizeof line, "opened %d, then errno %d, %u\n", n, e, sum);
    } else if (!strcmp(what, "as")) {
        lower(RLIMIT_AS, (rlim_t)4 << 30);
        void *p = malloc((size_t)8 << 30);
        sum += churn();
        snprintf(line, sizeof line, "8 GiB: %s, %u\n", p ? "got" : "refused", sum);
    } else {
        /* SIGXFSZ stays at its default: a write past the limit would kill the program. */
        lower(RLIMIT_FSIZE, 10000);
        int fd = open("sized", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        char block[1000];
        memset(block, 'x', sizeof block);
        long total = 0;
        for (int i = 0; i < 10; i++)
            total += write(fd, block, sizeof block);
        sum += churn();
        snprintf(line, sizeof line, "wrote %ld, %u\n", total, sum);
    }
    put("result", line);
    put_fd(1, line);
    return 0;
}
