/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file maps.c
 * @brief Reading /proc/self/maps with read(2) into a static buffer (no stdio, no malloc).
 *
 * Used at start (the main thread's stack) and at exit (page-node queries), never concurrently
 * with itself: a flag refuses a second reader instead of blocking.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "nl_internal.h"
#include "numalens_fd.h"

static char nl_maps_buf[16384];
static atomic_int nl_maps_busy;

static int nl_hex(const char **p, uint64_t *out)
{
    uint64_t v = 0;
    const char *s = *p;
    int any = 0;
    for (;; s++) {
        char c = *s;
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            break;
        v = (v << 4) | d;
        any = 1;
    }
    *p = s;
    *out = v;
    return any ? 0 : -1;
}

static const char *nl_skip_field(const char *s)
{
    while (*s == ' ')
        s++;
    while (*s && *s != ' ')
        s++;
    return s;
}

int nl_maps_parse_line(char *line, struct nl_map *m)
{
    const char *p = line;
    if (nl_hex(&p, &m->lo) != 0 || *p++ != '-' || nl_hex(&p, &m->hi) != 0 || *p++ != ' ')
        return -1;
    for (int i = 0; i < 4; i++) {
        if (!p[i])
            return -1;
        m->perms[i] = p[i];
    }
    m->perms[4] = '\0';
    p += 4;
    p = nl_skip_field(p); /* offset */
    p = nl_skip_field(p); /* device */
    p = nl_skip_field(p); /* inode */
    while (*p == ' ')
        p++;
    m->path = p;
    return 0;
}

int nl_maps_foreach(const char *path, int (*cb)(const struct nl_map *m, void *ctx), void *ctx)
{
    int z = 0;
    if (!atomic_compare_exchange_strong(&nl_maps_busy, &z, 1))
        return -1;
    /* Opened under the raised limit (numalens_fd.h): a program that used up its descriptors,
     * as one may by the time it exits, does not make this fail. */
    int fd = nl_fd_open_high(path, O_RDONLY, 0, 1);
    if (fd < 0) {
        atomic_store(&nl_maps_busy, 0);
        return -1;
    }
    size_t have = 0;
    int stop = 0;
    while (!stop) {
        ssize_t r = read(fd, nl_maps_buf + have, sizeof nl_maps_buf - 1 - have);
        if (r <= 0)
            break;
        have += (size_t)r;
        size_t start = 0;
        for (size_t i = 0; i < have && !stop; i++) {
            if (nl_maps_buf[i] != '\n')
                continue;
            nl_maps_buf[i] = '\0';
            struct nl_map m;
            if (nl_maps_parse_line(nl_maps_buf + start, &m) == 0)
                stop = cb(&m, ctx);
            start = i + 1;
        }
        memmove(nl_maps_buf, nl_maps_buf + start, have - start);
        have -= start;
        if (have == sizeof nl_maps_buf - 1)
            have = 0; /* a line longer than the buffer: drop it */
    }
    nl_fd_sys(SYS_close, fd, 0, 0, 0);
    atomic_store(&nl_maps_busy, 0);
    return 0;
}

struct nl_stack_find {
    uint64_t lo, hi;
};

static int nl_stack_cb(const struct nl_map *m, void *ctx)
{
    struct nl_stack_find *f = ctx;
    if (strcmp(m->path, "[stack]") != 0)
        return 0;
    f->lo = m->lo;
    f->hi = m->hi;
    return 1;
}

int nl_main_stack(uint64_t *lo, uint64_t *size)
{
    struct nl_stack_find f = {0, 0};
    if (nl_maps_foreach("/proc/self/maps", nl_stack_cb, &f) != 0 || f.hi <= f.lo)
        return -1;
    *lo = f.lo;
    *size = f.hi - f.lo;
    return 0;
}
