/* A thread made with the raw clone3 system call (no pthread, no TLS of its own: it makes raw
 * system calls only) touches memory and writes a file; unshare(CLONE_FILES) then gives the
 * program a descriptor table of its own, which it empties. */
#define _GNU_SOURCE
#include <linux/sched.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "hostile.h"

static atomic_int done;
static char *area;

static void child_body(void)
{
    for (long i = 0; i < (8L << 20); i += 4096)
        area[i] = 1;
    long fd = syscall(SYS_openat, AT_FDCWD, "thread.out", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    syscall(SYS_write, fd, "from the clone3 thread\n", 23);
    syscall(SYS_close, fd);
    atomic_store(&done, 1);
    syscall(SYS_exit, 0);
}

/* clone3 by hand: the child starts on its new, empty stack, where returning from a libc
 * function is impossible, so it calls @p fn straight from here (x86-64). */
static long clone3_run(struct clone_args *ca, void (*fn)(void))
{
    long ret;
    register long target asm("r10") = (long)fn;
    asm volatile("syscall\n\t"
                 "test %%rax, %%rax\n\t"
                 "jnz 1f\n\t"
                 "call *%%r10\n\t"
                 "1:\n\t"
                 : "=a"(ret)
                 : "a"((long)SYS_clone3), "D"(ca), "S"(sizeof *ca), "r"(target)
                 : "rcx", "r11", "memory");
    return ret;
}

int main(void)
{
    area = mmap(NULL, 8 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    size_t stack_size = 1 << 20;
    char *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct clone_args ca;
    memset(&ca, 0, sizeof ca);
    ca.flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
    ca.stack = (uint64_t)(uintptr_t)stack;
    ca.stack_size = stack_size;
    long tid = clone3_run(&ca, child_body);
    while (tid > 0 && !atomic_load(&done))
        sched_yield();
    unsigned sum = churn();
    int unshared = unshare(CLONE_FILES);
    close_range(3, ~0u, 0);
    sum += churn();
    int fd = open("main.out", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char line[96];
    snprintf(line, sizeof line, "clone3 %s, unshare %d, fd %d, %u\n", tid > 0 ? "ok" : "failed",
             unshared, fd, sum);
    put_fd(fd, line);
    return 0;
}
