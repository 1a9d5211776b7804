/* Worst case for page-fault recording: two threads do nothing but first-touch GIB GiB. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

static char *buffer;
static size_t half;

static void *touch(void *arg)
{
    char *p = buffer + (size_t)arg * half;
    for (size_t i = 0; i < half; i += 4096)
        p[i] = 1;
    return NULL;
}

int main(int argc, char **argv)
{
    size_t bytes = (size_t)(argc > 1 ? atof(argv[1]) : 4.0) * (1UL << 30);
    half = bytes / 2;
    buffer = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(buffer, bytes, MADV_NOHUGEPAGE);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, touch, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    return 0;
}
