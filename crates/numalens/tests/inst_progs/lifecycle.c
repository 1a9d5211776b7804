/* Exact counts across fork, signal handlers and a final SIGKILL.
 * ./lifecycle fork|signal|kill N : N doubles in a page-aligned array.
 * - fork: the parent writes the array once; the child (a copy) reads it twice, then exits;
 * - signal: the main thread writes the array 8 times while a 200 us timer's handler writes one
 *   word on each of 1024 pages, so it refills every slot of the hooks' page cache, the one the
 *   interrupted access was using among them; the main loop's counts must stay exact;
 * - kill: the array is written 3 times, then the process kills itself with SIGKILL. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define HIT_PAGES 1024
static volatile long ticks;
static long hits[HIT_PAGES * 512];

static void on_alarm(int sig)
{
    (void)sig;
    ticks = ticks + 1;
    for (long p = 0; p < HIT_PAGES; p++)
        hits[p * 512 + ticks % 512] += 1;
}

static void write_all(double *a, long n, double v)
{
    for (long i = 0; i < n; i++)
        a[i] = v + (double)i; /* @count write */
}

static double read_all(const double *a, long n)
{
    double s = 0;
    for (long i = 0; i < n; i++)
        s += a[i]; /* @count read */
    return s;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    long n = atol(argv[2]);
    double *a;
    if (posix_memalign((void **)&a, 4096, (size_t)n * sizeof *a)) /* @object array */
        return 1;
    /* Where the array is: a SIGKILL loses the runtime's last buffer, allocation record included. */
    printf("array %lu\n", (unsigned long)(uintptr_t)a);
    fflush(stdout);
    if (!strcmp(argv[1], "fork")) {
        write_all(a, n, 1.0);
        pid_t child = fork();
        if (child == 0) {
            double s = read_all(a, n);
            __asm__ volatile("" ::: "memory"); /* two real sweeps, not one doubled */
            s += read_all(a, n);
            printf("child %.0f\n", s);
            fflush(stdout);
            _exit(0);
        }
        int status;
        waitpid(child, &status, 0);
        printf("parent done %d\n", WEXITSTATUS(status));
    } else if (!strcmp(argv[1], "signal")) {
        signal(SIGALRM, on_alarm);
        struct itimerval every = {{0, 200}, {0, 200}};
        setitimer(ITIMER_REAL, &every, 0);
        for (int r = 0; r < 8; r++)
            write_all(a, n, r);
        struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_REAL, &off, 0);
        printf("signal %.0f ticks>0=%d\n", read_all(a, n), ticks > 0);
    } else if (!strcmp(argv[1], "kill")) {
        for (int r = 0; r < 3; r++)
            write_all(a, n, r);
        fflush(stdout);
        raise(SIGKILL);
    }
    return 0;
}
