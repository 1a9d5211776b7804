/* Shared helpers of the numalens ground-truth workloads: argument parsing, deterministic
 * values and the result line. Header-only so that each workload is one compile command. */
#ifndef NUMALENS_WL_H
#define NUMALENS_WL_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WL_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* One `--name value` argument: a positive integer with its default. */
struct wl_arg {
    const char *name;
    uint64_t *value;
    uint64_t min;
    uint64_t max;
};

/* The defaults, saved before parsing so the usage message shows them, not the values given. */
static uint64_t wl_defaults[16];

static void wl_usage(const char *prog, const struct wl_arg *args, size_t count)
{
    fprintf(stderr, "usage: %s", prog);
    for (size_t i = 0; i < count; i++)
        fprintf(stderr, " [--%s N]", args[i].name);
    fprintf(stderr, "\ndefaults:");
    for (size_t i = 0; i < count; i++)
        fprintf(stderr, " --%s %" PRIu64, args[i].name, wl_defaults[i]);
    fprintf(stderr, "\n");
}

/* Bad arguments are usage errors: say what to change, exit 2. */
static void wl_fail(const char *prog, const struct wl_arg *args, size_t count, const char *what)
{
    fprintf(stderr, "%s: %s\n", prog, what);
    wl_usage(prog, args, count);
    exit(2);
}

static void wl_parse(int argc, char **argv, const struct wl_arg *args, size_t count)
{
    char msg[256];
    for (size_t k = 0; k < count && k < WL_COUNT(wl_defaults); k++)
        wl_defaults[k] = *args[k].value;
    for (int i = 1; i < argc; i += 2) {
        const struct wl_arg *arg = NULL;
        for (size_t k = 0; k < count; k++)
            if (strncmp(argv[i], "--", 2) == 0 && strcmp(argv[i] + 2, args[k].name) == 0)
                arg = &args[k];
        if (!arg) {
            snprintf(msg, sizeof msg, "unknown argument '%s'", argv[i]);
            wl_fail(argv[0], args, count, msg);
        }
        if (i + 1 >= argc) {
            snprintf(msg, sizeof msg, "--%s needs a value", arg->name);
            wl_fail(argv[0], args, count, msg);
        }
        char *end;
        errno = 0;
        unsigned long long v = strtoull(argv[i + 1], &end, 10);
        if (errno || *end || argv[i + 1][0] == '-' || argv[i + 1][0] == '\0' || v < arg->min ||
            v > arg->max) {
            snprintf(msg, sizeof msg, "--%s takes an integer from %" PRIu64 " to %" PRIu64
                                      ", not '%s'",
                     arg->name, arg->min, arg->max, argv[i + 1]);
            wl_fail(argv[0], args, count, msg);
        }
        *arg->value = v;
    }
}

/* A relation between arguments that must hold (e.g. blocks of whole pages per thread). */
static void wl_require(int ok, const char *prog, const struct wl_arg *args, size_t count,
                       const char *what)
{
    if (!ok)
        wl_fail(prog, args, count, what);
}

/* splitmix64: a deterministic value for index i, the same whichever thread computes it. */
static inline uint64_t wl_mix(uint64_t i)
{
    uint64_t z = i + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Allocation failure. Workloads call the allocator on their own marked line (not through a
 * helper) so that the allocation site names the workload's line, not this header's. */
__attribute__((unused)) static void wl_oom(size_t bytes)
{
    fprintf(stderr, "out of memory allocating %zu bytes\n", bytes);
    exit(1);
}

/* Per-thread partial results, one cache line each so collecting them shares no line. */
struct wl_slot {
    uint64_t value;
} __attribute__((aligned(64)));

static void wl_result(const char *name, uint64_t checksum, const struct wl_arg *args, size_t count)
{
    printf("%s checksum=%016" PRIx64, name, checksum);
    for (size_t i = 0; i < count; i++)
        printf(" %s=%" PRIu64, args[i].name, *args[i].value);
    printf("\n");
}

#endif
