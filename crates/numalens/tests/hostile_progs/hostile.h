/* What every hostile program shares: work that makes the runtime write (allocations and first
 * touches enough to fill its buffers several times over), and writing a file of its own. */
#ifndef HOSTILE_H
#define HOSTILE_H

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A few thousand tracked allocations and 4 MiB of first touches: returns a checksum. */
static inline unsigned churn(void)
{
    unsigned sum = 0;
    char *big = malloc(4 << 20);
    if (big) {
        memset(big, 1, 4 << 20);
        sum += (unsigned char)big[12345];
    }
    for (int i = 0; i < 3000; i++) {
        char *p = malloc(100000);
        if (!p)
            continue;
        memset(p, i, 100000);
        sum += (unsigned char)p[i];
        free(p);
    }
    free(big);
    return sum;
}

/* Writes @p text into @p fd whole; returns what write() returned last. */
static inline long put_fd(int fd, const char *text)
{
    return (long)write(fd, text, strlen(text));
}

/* Creates (or truncates) the file @p name with @p text in it. */
static inline void put(const char *name, const char *text)
{
    int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        put_fd(fd, text);
        close(fd);
    }
}

#endif
