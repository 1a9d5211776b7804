/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file test_walk.c
 * @brief The cached stack walker (cfi.c) against libgcc's unwinder, and its CFI interpreter.
 *
 * Every walk here is done twice from the same function, by nl_stack_fast() and by libgcc: the
 * frames must be the same (the first differs only by where in the caller each call returns). The
 * stacks cover frame-pointer and frameless code, alloca'd frames (CFA on rbp), a frame that
 * realigned its stack (CFA loaded from the frame), libc's qsort
 * between our frames, deep recursion, threads, and a signal handler, whose frame the cached walker
 * must refuse. A run prints `walks N fast M`; it exits non-zero on any failed check.
 */
#include <alloca.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nl_check.h"
#include "nl_internal.h"

static int walks, fast_walks;

/** Walks both ways from here and compares; @p expect_fast: 1 the fast walk must succeed, 0 it
 * must refuse. */
static __attribute__((noinline)) void compare_walks(int expect_fast)
{
    uint64_t fast[NL_MAX_FRAMES], slow[NL_MAX_FRAMES];
    int n = nl_stack_fast(fast, NL_MAX_FRAMES, 0, 0);
    unsigned m = nl_stack_libgcc(slow, NL_MAX_FRAMES, 0, 0);
    walks++;
    if (n < 0) {
        CHECK(!expect_fast);
        return;
    }
    fast_walks++;
    CHECK(expect_fast);
    CHECK((unsigned)n == m);
    /* Frame 0 is in this function, where each walker was called from. */
    CHECK(fast[0] > (uint64_t)compare_walks && fast[0] < (uint64_t)compare_walks + 512);
    CHECK(slow[0] > (uint64_t)compare_walks && slow[0] < (uint64_t)compare_walks + 512);
    for (unsigned i = 1; i < m && i < (unsigned)n; i++) {
        if (fast[i] != slow[i])
            fprintf(stderr, "frame %u: fast %#lx libgcc %#lx\n", i, (unsigned long)fast[i],
                    (unsigned long)slow[i]);
        CHECK(fast[i] == slow[i]);
    }
}

static volatile int sink;

__attribute__((noinline, optimize("omit-frame-pointer"))) static void frameless(int depth)
{
    volatile char pad[40];
    pad[depth % 40] = (char)depth;
    if (depth > 0)
        frameless(depth - 1);
    else
        compare_walks(1);
    sink += pad[0];
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void with_fp(int depth)
{
    volatile char pad[24];
    pad[depth % 24] = 1;
    if (depth > 0)
        with_fp(depth - 1);
    else
        frameless(2);
    sink += pad[0];
}

/* A variable-size alloca makes the compiler base the CFA on rbp. */
__attribute__((noinline)) static void with_alloca(int n)
{
    volatile char *p = alloca((size_t)n);
    p[0] = 1;
    if (n > 16)
        with_alloca(n / 2);
    else
        with_fp(1);
    sink += p[0];
}

/* A cache-line-aligned local with a variable-size one: gcc realigns the stack through a copy of
 * the incoming stack pointer, and the CFA is loaded from the frame (a CFA expression). */
struct aligned_slot {
    long v;
} __attribute__((aligned(64)));

static void *volatile escaped;

__attribute__((noinline)) static void realigned(int n)
{
    struct aligned_slot slots[4];
    volatile char vla[n];
    vla[0] = 1;
    slots[n & 3].v = n;
    escaped = slots; /* kept in memory, so aligned */
    frameless(n % 2);
    sink += vla[0] + (int)slots[n & 3].v;
}

/* Calls realigned() from a frame whose CFA is on rbp, so the walk needs the rbp realigned() saved;
 * the alloca shifts realigned()'s padding, so each call's CFA is elsewhere in its frame. */
__attribute__((noinline)) static void realigned_below_alloca(int pad)
{
    volatile char *p = alloca((size_t)pad);
    p[0] = 1;
    realigned(pad);
    sink += p[0];
}

static int by_value(const void *a, const void *b)
{
    static int once;
    if (!once++)
        realigned(100);
    return *(const int *)a - *(const int *)b;
}

static void through_qsort(void)
{
    int v[8] = {5, 3, 7, 1, 8, 2, 6, 4};
    qsort(v, 8, sizeof v[0], by_value);
    CHECK(v[0] == 1 && v[7] == 8);
}

__attribute__((noinline)) static void deep(int depth)
{
    if (depth > 0)
        deep(depth - 1);
    else
        compare_walks(1);
    sink++;
}

static uint64_t main_lo, main_top;

static void *thread_main(void *arg)
{
    (void)arg;
    pthread_attr_t attr;
    void *lo;
    size_t size;
    CHECK(pthread_getattr_np(pthread_self(), &attr) == 0);
    CHECK(pthread_attr_getstack(&attr, &lo, &size) == 0);
    pthread_attr_destroy(&attr);
    /* Unknown bounds, then the main thread's: the fast walk refuses both. */
    compare_walks(0);
    nl_stack_set_bounds(main_lo, main_top);
    compare_walks(0);
    nl_stack_set_bounds((uint64_t)lo, (uint64_t)lo + size);
    through_qsort();
    deep(3); /* short: the walk reaches clone's outermost frame */
    return NULL;
}

static void on_signal(int sig)
{
    (void)sig;
    /* The signal frame's rule is beyond the cached walker: it must hand over to libgcc. */
    compare_walks(0);
}

static void test_walks(void)
{
    uint64_t lo, size;
    CHECK(nl_main_stack(&lo, &size) == 0);
    main_lo = lo;
    main_top = lo + size;
    nl_stack_set_bounds(main_lo, main_top);
    for (int round = 0; round < 2; round++) { /* the second round reads the cached rules */
        with_alloca(64);
        for (int pad = 16; pad <= 64; pad += 16)
            realigned_below_alloca(pad);
        deep(20);
        deep(0);
    }
    through_qsort();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0);
    pthread_join(t, NULL);
    signal(SIGUSR1, on_signal);
    raise(SIGUSR1);
    nl_rules_flush();
    deep(5);
}

/* ---- the interpreter on hand-made CFI ---- */

/* A CIE ("zR", code align 1, data align -8, RA column 16, FDE pointers pcrel sdata4) whose
 * initial row is CFA = rsp + 8, RA at CFA - 8; then one FDE. */
static const uint8_t cie_and_fde[] = {
    /* CIE: length 20, id 0, version 1, "zR", 1, -8, 16, aug length 1, 0x1b */
    20, 0, 0, 0, 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b,
    0x0c, 7, 8,    /* def_cfa rsp+8 */
    0x90, 1,       /* offset r16 at cfa-8 */
    0, 0,          /* padding */
    /* FDE at offset 24: length, CIE pointer (back to offset 0 from offset 28) */
    48, 0, 0, 0, 28, 0, 0, 0,
    0, 0, 0, 0, 0x40, 0, 0, 0, /* pc_begin, pc_range (ignored: func is passed in) */
    0,                         /* augmentation length */
    0x41,                      /* advance 1:   push %rbp */
    0x0e, 16,                  /*   def_cfa_offset 16 */
    0x86, 2,                   /*   offset rbp at cfa-16 */
    0x43,                      /* advance 3:   mov %rsp,%rbp */
    0x0d, 6,                   /*   def_cfa_register rbp */
    0x4a,                      /* advance 10 */
    0x0a,                      /*   remember_state */
    0x0c, 7, 8,                /*   def_cfa rsp+8 (epilogue) */
    0xc6,                      /*   restore rbp */
    0x41,                      /* advance 1 */
    0x0b,                      /*   restore_state: the body's row again */
    0x42,                      /* advance 2:   a realigned frame */
    0x10, 6, 2, 0x76, 0,       /*   expression: rbp saved at rbp + 0 */
    0x0f, 3, 0x76, 0x58, 0x06, /*   def_cfa_expression: CFA = *(rbp - 40) */
    0x41,                      /* advance 1 */
    0x0f, 2, 0x77, 0x08,       /*   def_cfa_expression rsp + 8, no deref: beyond the walker */
    0x41,                      /* advance 1 */
    0x07, 16,                  /*   undefined RA */
};

static int rule_at(uint64_t pc, struct nl_frame_rule *r)
{
    return nl_cfi_rule(cie_and_fde + 24, 0x1000, pc, r);
}

static void test_interpreter(void)
{
    struct nl_frame_rule r;
    CHECK(rule_at(0x1000, &r) == 0);
    CHECK(r.kind == NL_RULE_OK && !r.cfa_is_rbp && r.cfa_off == 8 && r.ra_off == -8);
    CHECK(r.rbp_off == 0);
    CHECK(rule_at(0x1001, &r) == 0 && r.cfa_off == 16 && r.rbp_off == -16 && !r.cfa_is_rbp);
    CHECK(rule_at(0x1003, &r) == 0 && r.cfa_off == 16 && !r.cfa_is_rbp);
    CHECK(rule_at(0x1004, &r) == 0 && r.cfa_is_rbp && r.cfa_off == 16 && r.rbp_off == -16);
    CHECK(rule_at(0x100e, &r) == 0 && !r.cfa_is_rbp && r.cfa_off == 8 && r.rbp_off == 0);
    CHECK(rule_at(0x100f, &r) == 0 && r.cfa_is_rbp && r.cfa_off == 16 && r.rbp_off == -16);
    CHECK(rule_at(0x1011, &r) == 0 && r.cfa_deref && r.cfa_off == -40 && r.rbp_at_rbp);
    CHECK(r.rbp_off == 0 && r.ra_off == -8);
    CHECK(rule_at(0x1012, &r) == -1);
    CHECK(rule_at(0x1013, &r) == 0 && r.kind == NL_RULE_END);
    /* A signal frame's CIE ("zRS") is refused outright. */
    uint8_t copy[sizeof cie_and_fde];
    memcpy(copy, cie_and_fde, sizeof copy);
    copy[0] = 20;
    memcpy(copy + 9, "zS\0", 3); /* "zS": same length as "zR", no FDE encoding byte */
    copy[15] = 1;
    copy[16] = 0; /* a nop where the encoding byte was */
    CHECK(nl_cfi_rule(copy + 24, 0x1000, 0x1000, &r) == -1);
}

int main(void)
{
    test_interpreter();
    test_walks();
    printf("walks %d fast %d\n", walks, fast_walks);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    return failures ? 1 : 0;
}
