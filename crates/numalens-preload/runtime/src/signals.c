/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file signals.c
 * @brief Fatal signals: flush what can be flushed, write SIGNAL, then die the way we would have.
 *
 * A handler is installed only for signals still at their default action, so it runs only when
 * the process is about to be terminated by the signal anyway. It writes out every buffer whose
 * lock it can take (the others are being written by their owners), writes a SIGNAL record
 * straight to the file, restores the previous (default) disposition and re-raises: the signal is
 * blocked while the handler runs, so it is delivered as soon as the handler returns and the
 * process ends with the same signal and status as without the runtime. Everything called here is
 * async-signal-safe (write, sigaction, raise, clock_gettime, atomics).
 */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "nl_internal.h"

static const int nl_fatal[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTERM, SIGINT};
#define NL_NFATAL (sizeof nl_fatal / sizeof nl_fatal[0])

static struct sigaction nl_prev[NL_NFATAL];
static atomic_int nl_in_fatal;

static void nl_on_fatal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    int saved = errno;
    if (atomic_exchange(&nl_in_fatal, 1) == 0 && atomic_load(&nl_g.on)) {
        nl_flush_all();
        nl_write_now(NL_REC_SIGNAL, (uint64_t)sig, si ? (uint64_t)si->si_addr : 0,
                     si ? (uint64_t)(int64_t)si->si_code : 0);
    }
    for (unsigned i = 0; i < NL_NFATAL; i++)
        if (nl_fatal[i] == sig)
            sigaction(sig, &nl_prev[i], NULL);
    raise(sig);
    errno = saved;
}

void nl_signals_install(void)
{
    for (unsigned i = 0; i < NL_NFATAL; i++) {
        struct sigaction cur;
        if (sigaction(nl_fatal[i], NULL, &cur) != 0)
            continue;
        if ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL)
            continue; /* the program (or a parent) chose something: leave it alone */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = nl_on_fatal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        nl_prev[i] = cur;
        sigaction(nl_fatal[i], &sa, NULL);
    }
}
