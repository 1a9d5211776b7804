/* interleave_all PROGRAM [ARGS...]: runs PROGRAM with every page it allocates interleaved over
 * the online nodes, as `numactl --interleave=all` does (the test-bed guest has no numactl): the
 * memory policy is set for this process and survives the exec. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MPOL_INTERLEAVE 3

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: interleave_all PROGRAM [ARGS...]\n");
        return 2;
    }
    unsigned long mask = 0;
    FILE *f = fopen("/sys/devices/system/node/has_memory", "r");
    unsigned a, b;
    char sep;
    while (f && fscanf(f, "%u", &a) == 1) {
        b = a;
        if (fscanf(f, "%c", &sep) == 1 && sep == '-' && fscanf(f, "%u%c", &b, &sep) < 1)
            break;
        for (unsigned n = a; n <= b && n < 64; n++)
            mask |= 1ul << n;
        if (sep != ',')
            break;
    }
    if (f)
        fclose(f);
    if (!mask || syscall(SYS_set_mempolicy, MPOL_INTERLEAVE, &mask, 65) != 0) {
        perror("interleave_all: set_mempolicy");
        return 1;
    }
    execvp(argv[1], argv + 1);
    perror("interleave_all: exec");
    return 127;
}
