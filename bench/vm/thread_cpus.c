/* thread_cpus COMM OUT [INTERVAL_MS]: where each thread of a program runs, measured. Waits (up
 * to a minute) for a process whose name (/proc/PID/comm) is COMM, then every INTERVAL_MS
 * (default 50) reads the CPU each of its threads last ran on (field 39 of
 * /proc/PID/task/TID/stat) and appends "TIME_NS TID CPU" to OUT whenever a thread is seen for
 * the first time or on another CPU than at its previous line; TIME_NS is CLOCK_MONOTONIC, the
 * clock of numalens profiles. Ends when the process has exited, or on SIGTERM/SIGINT.
 * bench/vm-placement runs it beside each recorded run: a profile's own CPU observations are
 * its page-fault samples, which a thread that stopped faulting no longer gives. */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_TIDS 4096

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static unsigned long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void nap(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The first process other than this one whose comm is @p comm, or 0. */
static long find(const char *comm)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    long found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid())
            continue;
        char path[64], name[64] = "";
        snprintf(path, sizeof path, "/proc/%ld/comm", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(name, sizeof name, f))
            name[strcspn(name, "\n")] = 0;
        fclose(f);
        if (strcmp(name, comm) == 0)
            found = pid;
    }
    closedir(d);
    return found;
}

/* Field 39 (processor) of a stat line: counted after the ")" that ends the command name. */
static int stat_cpu(const char *line)
{
    const char *p = strrchr(line, ')');
    if (!p)
        return -1;
    int field = 2;
    for (p++; *p && field < 39; p++)
        if (*p == ' ')
            field++;
    return field == 39 ? atoi(p) : -1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: thread_cpus COMM OUT [INTERVAL_MS]\n");
        return 2;
    }
    long interval = argc > 3 ? atol(argv[3]) : 50;
    if (interval <= 0)
        interval = 50;
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    FILE *out = fopen(argv[2], "w");
    if (!out) {
        perror("thread_cpus: open");
        return 1;
    }
    long pid = 0;
    for (int i = 0; !stop && !pid && i < 60000 / 20; i++) {
        pid = find(argv[1]);
        if (!pid)
            nap(20);
    }
    static long tids[MAX_TIDS];
    static int cpus[MAX_TIDS];
    int known = 0;
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%ld/task", pid);
    while (pid && !stop) {
        DIR *d = opendir(dir);
        if (!d)
            break; /* the process has exited */
        unsigned long long t = now_ns();
        struct dirent *e;
        while ((e = readdir(d))) {
            char *end;
            long tid = strtol(e->d_name, &end, 10);
            if (*end || tid <= 0)
                continue;
            char path[96], line[1024];
            snprintf(path, sizeof path, "%s/%ld/stat", dir, tid);
            FILE *f = fopen(path, "r");
            if (!f)
                continue;
            int cpu = fgets(line, sizeof line, f) ? stat_cpu(line) : -1;
            fclose(f);
            if (cpu < 0)
                continue;
            int i = 0;
            while (i < known && tids[i] != tid)
                i++;
            if (i < known && cpus[i] == cpu)
                continue;
            if (i == known) {
                if (known == MAX_TIDS)
                    continue;
                tids[known++] = tid;
            }
            cpus[i] = cpu;
            fprintf(out, "%llu %ld %d\n", t, tid, cpu);
        }
        closedir(d);
        nap(interval);
    }
    fclose(out);
    return 0;
}
