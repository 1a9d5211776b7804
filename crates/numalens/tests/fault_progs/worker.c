/* A program whose whole observable behaviour is checked while its recorder is killed: two
 * threads map, touch and sum buffers for ROUNDS rounds (a fresh mapping each round, so page
 * faults come all along the run); the sums go to OUT (through a
 * temporary file and a rename, so OUT is whole or absent); the exit status is 3. OUT.started is
 * written first thing, so a test knows the program ran. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

static long rounds;

static void *work(void *arg)
{
    unsigned long *sum = arg;
    size_t n = 4u << 20;
    for (long r = 0; r < rounds; r++) {
        unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            abort();
        for (size_t i = 0; i < n; i += 4096)
            p[i] = (unsigned char)(i / 4096 + r);
        for (size_t i = 0; i < n; i += 64)
            *sum += p[i];
        munmap(p, n);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s.started", argv[1]);
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
    rounds = atol(argv[2]);
    unsigned long a = 0, b = 0;
    pthread_t t;
    pthread_create(&t, NULL, work, &a);
    work(&b);
    pthread_join(t, NULL);
    snprintf(path, sizeof path, "%s.tmp", argv[1]);
    f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f, "sums %lu %lu\n", a, b);
    fclose(f);
    rename(path, argv[1]);
    return 3;
}
