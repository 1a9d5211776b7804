/* The less common allocation calls, each followed by first touches from a known thread:
 * - realloc that moves a block: the main thread fills 64 KiB, realloc grows it to 8 MiB (glibc
 *   moves it to a mapping and copies the 64 KiB), a worker fills the rest;
 * - posix_memalign (2 MiB alignment) and aligned_alloc (64 KiB), filled by a worker;
 * - calloc of 16 MiB by the main thread, written by a worker (glibc does not clear fresh mappings,
 *   so the writer is the first toucher); the program checks the zeros it reads;
 * - free(NULL) and realloc(NULL, n) in between, which must not disturb the other objects.
 * Prints addresses and tids; exits 9. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "out.h"

#define MIB (1ul << 20)
static char *grown, *aligned, *aligned2, *zeroed, *from_null;
static int zeros_ok = 1;

static void *second_part(void *arg)
{
    (void)arg;
    memset(grown + 64 * 1024, 2, 8 * MIB - 64 * 1024);
    memset(aligned, 3, 4 * MIB);
    memset(aligned2, 4, 1 * MIB);
    for (size_t i = 0; i < 16 * MIB; i += 4096) {
        if (zeroed[i] != 0)
            zeros_ok = 0;
        zeroed[i] = 5;
    }
    memset(from_null, 6, 2 * MIB);
    printf("worker %d\n", gettid());
    return NULL;
}

int main(int argc, char **argv)
{
    take_output(&argc, &argv);
    printf("main %d\n", gettid());
    char *small = malloc(64 * 1024); /* site: small */
    memset(small, 1, 64 * 1024);
    printf("small %p\n", (void *)small);
    free(NULL);
    grown = realloc(small, 8 * MIB); /* site: realloc */
    printf("grown %p\n", (void *)grown);
    void *p = NULL;
    if (posix_memalign(&p, 2 * MIB, 4 * MIB) != 0) /* site: posix_memalign */
        return 1;
    aligned = p;
    aligned2 = aligned_alloc(64 * 1024, 1 * MIB); /* site: aligned_alloc */
    zeroed = calloc(16, MIB); /* site: calloc */
    free(NULL);
    from_null = realloc(NULL, 2 * MIB); /* site: realloc_null */
    if (!grown || !aligned2 || !zeroed || !from_null)
        return 1;
    printf("aligned %p\naligned2 %p\nzeroed %p\nfrom_null %p\n", (void *)aligned, (void *)aligned2,
           (void *)zeroed, (void *)from_null);
    pthread_t t;
    pthread_create(&t, NULL, second_part, NULL);
    pthread_join(t, NULL);
    printf("zeros_ok %d\n", zeros_ok);
    for (size_t i = 0; i < 64 * 1024; i++)
        if (grown[i] != 1)
            return 1;
    free(grown);
    free(aligned);
    free(aligned2);
    free(zeroed);
    free(from_null);
    return 9;
}
