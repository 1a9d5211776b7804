/* Installs a seccomp filter that makes openat, mmap and write to any descriptor but 1 and 2 fail
 * with EPERM (the program goes on), then works: allocations (from brk, as mmap fails), output.
 * With `own-stderr`, its descriptor 2 is first a file of its own. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "hostile.h"

#define DENY SECCOMP_RET_ERRNO | EPERM
#define NR offsetof(struct seccomp_data, nr)
#define ARG0 offsetof(struct seccomp_data, args[0])

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "own-stderr")) {
        close(2);
        open("stderr.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NR),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, DENY),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, DENY),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 1, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 2, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, DENY),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    unsigned sum = churn();
    int nnp = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    long installed = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
    int fd = open("forbidden", O_WRONLY | O_CREAT, 0644);
    int e = errno;
    sum += churn();
    printf("filter %d %ld, open %d errno %d, %u\n", nnp, installed, fd, e, sum);
    return 0;
}
