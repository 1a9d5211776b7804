/* Takes over every signal: blocks them all, ignores all it may, catches SIGSEGV (from a real
 * fault) and SIGUSR1/SIGUSR2, and runs with all of it in place. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>

#include "hostile.h"

static sigjmp_buf back;
static volatile sig_atomic_t usr;

static void on_segv(int sig)
{
    siglongjmp(back, sig);
}

static void on_usr(int sig)
{
    usr += sig == SIGUSR1 ? 1 : 100;
}

int main(void)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    static int ignored;
    for (int s = 1; s < NSIG; s++)
        ignored += signal(s, SIG_IGN) != SIG_ERR;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, NULL);
    sa.sa_handler = on_usr;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    static unsigned sum;
    sum = churn();
    raise(SIGUSR1);
    raise(SIGUSR2);
    sigset_t usrs;
    sigemptyset(&usrs);
    sigaddset(&usrs, SIGUSR1);
    sigaddset(&usrs, SIGUSR2);
    sigaddset(&usrs, SIGSEGV);
    sigprocmask(SIG_UNBLOCK, &usrs, NULL);
    int caught = sigsetjmp(back, 1);
    if (!caught)
        *(volatile int *)16 = 1;
    sum += churn();
    printf("ignored %d, usr %d, caught %d, %u\n", ignored, (int)usr, caught, sum);
    return 0;
}
