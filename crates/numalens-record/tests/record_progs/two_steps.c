/* Touches the first half of a 16 MiB block, waits, touches the second half, waits, exits.
 * Prints `block ADDR` and `bytes N`. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static void pause_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(void) {
    size_t bytes = 16UL << 20;
    char *block = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED) return 2;
    /* 4 KiB pages, so the two halves differ page by page whatever the THP setting. */
    madvise(block, bytes, MADV_NOHUGEPAGE);
    printf("block %p\nbytes %zu\n", (void *)block, bytes);
    fflush(stdout);
    for (size_t i = 0; i < bytes / 2; i += 4096) block[i] = 1;
    pause_ms(400);
    for (size_t i = bytes / 2; i < bytes; i += 4096) block[i] = 1;
    pause_ms(400);
    return 0;
}
