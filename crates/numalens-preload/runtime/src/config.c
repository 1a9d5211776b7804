/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file config.c
 * @brief The runtime's one table of environment variables, parsed once at start.
 *
 * Every setting the runtime reads is a row of nl_env_table; docs/RUNTIME.md documents the same
 * rows (a test checks that each name appears there).
 */
#include <stddef.h>
#include <string.h>

#include "nl_internal.h"

enum nl_env_type { NL_ENV_STR, NL_ENV_U64 };

struct nl_env_var {
    const char *name;
    enum nl_env_type type;
    size_t offset;
    const char *deflt;
    const char *doc;
};

static const struct nl_env_var nl_env_table[] = {
    {"NUMALENS_DIR", NL_ENV_STR, offsetof(struct nl_config, dir), "",
     "directory for events-<pid>.bin; unset or empty = the runtime is inert"},
    {"NUMALENS_MIN_OBJECT", NL_ENV_U64, offsetof(struct nl_config, min_object), "4096",
     "allocations of at least this many bytes get a record and a call site (k/m/g suffixes)"},
    {"NUMALENS_PAGE_NODES", NL_ENV_U64, offsetof(struct nl_config, page_nodes), "0",
     "1 = at exit, query the node of every page of writable private mappings"},
    {"NUMALENS_EXEC_COUNT", NL_ENV_U64, offsetof(struct nl_config, exec_count), "0",
     "how many execs led to this image; set by the runtime itself on exec"},
    {"NUMALENS_FRAMES", NL_ENV_U64, offsetof(struct nl_config, frames), "8",
     "call-site depth, 1 to 8 frames"},
    {"NUMALENS_SIGNALS", NL_ENV_U64, offsetof(struct nl_config, signals), "1",
     "1 = flush buffers on fatal signals and SIGTERM/SIGINT left at their default action"},
    {"NUMALENS_DEBUG", NL_ENV_U64, offsetof(struct nl_config, debug), "0",
     "1 = say on stderr why tracing was turned off"},
    {"NUMALENS_PLAN", NL_ENV_STR, offsetof(struct nl_config, plan), "",
     "rules file written by numalens run --plan; empty = no placement"},
    {"NUMALENS_PLAN_PARENT", NL_ENV_U64, offsetof(struct nl_config, plan_parent), "0",
     "pid of numalens run: the plan applies to the process it started, not to that one's children"},
};

#define NL_ENV_COUNT (sizeof(nl_env_table) / sizeof(nl_env_table[0]))

int nl_parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    const char *p = s;
    if (!s || !*s)
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (p == s)
        return -1;
    unsigned shift = 0;
    switch (*p) {
    case 'k': case 'K': shift = 10; p++; break;
    case 'm': case 'M': shift = 20; p++; break;
    case 'g': case 'G': shift = 30; p++; break;
    default: break;
    }
    if (*p != '\0' || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *out = v << shift;
    return 0;
}

static void nl_config_set(struct nl_config *cfg, const struct nl_env_var *v, const char *val)
{
    char *field = (char *)cfg + v->offset;
    if (v->type == NL_ENV_STR) {
        size_t n = strlen(val);
        if (n >= sizeof(cfg->dir))
            n = 0; /* a path we cannot hold: treat as unset rather than truncate it */
        memcpy(field, val, n);
        field[n] = '\0';
        return;
    }
    uint64_t x;
    if (nl_parse_u64(val, &x) != 0 && nl_parse_u64(v->deflt, &x) != 0)
        x = 0;
    memcpy(field, &x, sizeof x);
}

int nl_config_load(struct nl_config *cfg, char *(*get)(const char *))
{
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < NL_ENV_COUNT; i++) {
        const char *val = get ? get(nl_env_table[i].name) : NULL;
        nl_config_set(cfg, &nl_env_table[i], nl_env_table[i].deflt);
        if (val)
            nl_config_set(cfg, &nl_env_table[i], val);
    }
    if (cfg->frames < 1 || cfg->frames > NL_MAX_FRAMES)
        cfg->frames = NL_MAX_FRAMES;
    if (cfg->min_object < 1)
        cfg->min_object = 1;
    return cfg->dir[0] != '\0';
}

int nl_config_describe(unsigned i, const char **name, const char **deflt, const char **doc)
{
    if (i >= NL_ENV_COUNT)
        return 0;
    *name = nl_env_table[i].name;
    *deflt = nl_env_table[i].deflt;
    *doc = nl_env_table[i].doc;
    return 1;
}
