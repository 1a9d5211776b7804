/* Transparent huge pages against 4 KiB pages, from two threads.
 *   huge.c MIB
 * Maps two 2 MiB-aligned regions of MIB MiB each: `huge` with MADV_HUGEPAGE, `small` with
 * MADV_NOHUGEPAGE. Thread 1 first-touches the first half of each, thread 2 the second half, one
 * byte per 4 KiB. Then thread 1 reads and writes one byte of every page of both regions again
 * after mprotect(PROT_NONE)/mprotect(RW), which makes the next access to each present page fault
 * again: those faults hit present pages, so the kernel reports their mapped size.
 * Prints `huge ADDR`, `small ADDR`, `bytes N`, `tid1 T`, `tid2 T`. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HUGE_PAGE (2UL << 20)

static char *huge_region, *small_region;
static size_t bytes;

static char *aligned_map(size_t len, int advice) {
    char *raw = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) exit(2);
    char *p = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
    if (madvise(p, len, advice) != 0) exit(3);
    return p;
}

static void touch(char *p, size_t len) {
    for (size_t i = 0; i < len; i += 4096) p[i] = 1;
}

static void *half(void *arg) {
    long which = (long)arg;
    printf("tid%ld %ld\n", which + 1, (long)syscall(SYS_gettid));
    fflush(stdout);
    touch(huge_region + which * bytes / 2, bytes / 2);
    touch(small_region + which * bytes / 2, bytes / 2);
    return NULL;
}

int main(int argc, char **argv) {
    bytes = (size_t)atol(argc > 1 ? argv[1] : "8") << 20;
    huge_region = aligned_map(bytes, MADV_HUGEPAGE);
    small_region = aligned_map(bytes, MADV_NOHUGEPAGE);
    printf("huge %p\nsmall %p\nbytes %zu\n", (void *)huge_region, (void *)small_region, bytes);
    fflush(stdout);
    for (long t = 0; t < 2; t++) {
        pthread_t th;
        pthread_create(&th, NULL, half, (void *)t);
        pthread_join(th, NULL);
    }
    /* Present pages fault again after losing and regaining access. */
    mprotect(huge_region, bytes, PROT_READ);
    mprotect(small_region, bytes, PROT_READ);
    mprotect(huge_region, bytes, PROT_READ | PROT_WRITE);
    mprotect(small_region, bytes, PROT_READ | PROT_WRITE);
    touch(huge_region, bytes);
    touch(small_region, bytes);
    return 0;
}
