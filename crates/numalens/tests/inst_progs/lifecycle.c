/* Exact counts across fork, signal handlers and a final SIGKILL.
 * ./lifecycle fork|signal|kill N : N doubles in a page-aligned array.
 * - fork: the parent writes the array once; the child (a copy) reads it twice, then exits;
 * - signal: the main thread writes the array 32 times while a 100 us timer's handler writes one
 *   byte on a decoy page for each page of the array: a page that takes the same slot of the
 *   hooks' page cache (inst.h gives the slot of a page), so every tick refills the slot the
 *   interrupted access was using; the main loop's counts must stay exact;
 * - kill: the array is written 3 times, then the process kills itself with SIGKILL. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/mman.h>

#include "inst.h" /* nl_tlb_index(): the slot of a page */

static volatile long ticks;
/* For each page of the array, a page of a reserved region in the same cache slot. */
static char *decoys[4096];
static long ndecoys;

static void on_alarm(int sig)
{
    (void)sig;
    ticks = ticks + 1;
    for (long i = 0; i < ndecoys; i++)
        decoys[i][ticks % 4096] += 1;
}

/* Decoys for the pages of [a, a + bytes): distinct pages of a 1 GiB reserved region. */
static void find_decoys(const void *a, size_t bytes)
{
    size_t span = (size_t)1 << 30;
    char *region = mmap(0, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
    if (region == MAP_FAILED)
        exit(3);
    static unsigned char taken[(1u << 30) >> 12];
    for (size_t off = 0; off < bytes && ndecoys < 4096; off += 4096) {
        unsigned want = nl_tlb_index(((uintptr_t)a + off) >> NL_INST_PAGE_SHIFT);
        uint64_t first = (uintptr_t)region >> NL_INST_PAGE_SHIFT;
        for (size_t q = 0; q < span >> 12; q++) {
            if (!taken[q] && nl_tlb_index(first + q) == want) {
                taken[q] = 1;
                decoys[ndecoys++] = region + (q << 12);
                break;
            }
        }
    }
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
        find_decoys(a, (size_t)n * sizeof *a);
        signal(SIGALRM, on_alarm);
        struct itimerval every = {{0, 100}, {0, 100}};
        setitimer(ITIMER_REAL, &every, 0);
        for (int r = 0; r < 32; r++)
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
