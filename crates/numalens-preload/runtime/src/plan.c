/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file plan.c
 * @brief `numalens run --plan`: the rules of a plan applied as objects and threads appear.
 *
 * The recorder compiles the plan into a rules file (numalens_plan.h) that is mapped read-only
 * here and checked once against its own size; nothing is parsed or allocated afterwards. Heap
 * and mmap objects are found by the profile's site key, which is computed here the way the
 * recorder computes it from a SITE record (FNV-1a over each frame's module build id, or path
 * when it has none, and the frame's offset from the load bias), once per new site: the
 * decision is cached beside the runtime's own site table. Static objects are placed before
 * main (the runtime's constructor runs before the program's), threads when they start.
 *
 * Every action is one NL_REC_PLACE record with the kernel's answer. A rule the kernel refuses
 * changes nothing else: the program runs on as it would without the plan.
 */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nl_internal.h"
#include "numalens_plan.h"

/* As modules.c: the longest build id kept. */
#define NL_PLAN_ID_MAX 64u
#define NL_MPOL_BIND 2
#define NL_MPOL_INTERLEAVE 3
#define NL_MPOL_MF_MOVE (1 << 1)

struct nl_plan {
    const struct nl_plan_header *h;
    const struct nl_plan_site *sites;
    const struct nl_plan_static *statics;
    const struct nl_plan_thread *threads;
    const struct nl_plan_action *actions;
    const struct nl_plan_range *ranges;
    uint64_t page_size;
};

static struct nl_plan nl_plan;

int nl_plan_check(const void *base, uint64_t size, struct nl_plan *out);

/** Checks that the counts of @p base fit in @p size and every index stays inside; 0 if valid. */
int nl_plan_check(const void *base, uint64_t size, struct nl_plan *out)
{
    const struct nl_plan_header *h = base;
    if (size < sizeof *h || memcmp(h->magic, NL_PLAN_MAGIC, 8) != 0 || h->version != NL_PLAN_VERSION)
        return -1;
    uint64_t need = sizeof *h + (uint64_t)h->sites * sizeof(struct nl_plan_site) +
                    (uint64_t)h->statics * sizeof(struct nl_plan_static) +
                    (uint64_t)h->threads * sizeof(struct nl_plan_thread) +
                    (uint64_t)h->actions * sizeof(struct nl_plan_action) +
                    (uint64_t)h->ranges * sizeof(struct nl_plan_range);
    if (need != size)
        return -1;
    const char *p = (const char *)base + sizeof *h;
    out->h = h;
    out->sites = (const void *)p;
    p += (uint64_t)h->sites * sizeof(struct nl_plan_site);
    out->statics = (const void *)p;
    p += (uint64_t)h->statics * sizeof(struct nl_plan_static);
    out->threads = (const void *)p;
    p += (uint64_t)h->threads * sizeof(struct nl_plan_thread);
    out->actions = (const void *)p;
    p += (uint64_t)h->actions * sizeof(struct nl_plan_action);
    out->ranges = (const void *)p;
    for (uint32_t i = 0; i < h->actions; i++) {
        const struct nl_plan_action *a = &out->actions[i];
        if ((uint64_t)a->first_range + a->range_count > h->ranges || a->node >= NL_PLAN_MAX_NODES)
            return -1;
        if (a->kind == NL_PLAN_PATTERN && a->range_count == 0)
            return -1;
    }
    for (uint32_t i = 0; i < h->sites; i++)
        if (out->sites[i].action >= h->actions)
            return -1;
    for (uint32_t i = 0; i < h->statics; i++)
        if (out->statics[i].action >= h->actions)
            return -1;
    for (uint32_t i = 0; i < h->ranges; i++)
        if (out->ranges[i].node >= NL_PLAN_MAX_NODES ||
            out->ranges[i].first_page > out->ranges[i].last_page)
            return -1;
    return 0;
}

/* ---- applying an action to [start, start + size) ---- */

static long nl_mbind(uint64_t start, uint64_t len, int mode, uint64_t mask)
{
    /* maxnode counts bits and the kernel reads one bit fewer than it is given. */
    long r = syscall(SYS_mbind, (void *)start, len, mode, &mask, NL_PLAN_MAX_NODES + 1,
                     NL_MPOL_MF_MOVE);
    return r == 0 ? 0 : errno;
}

/** The lowest node of @p mask (the node a spread rule's record names). */
static int64_t nl_lowest(uint64_t mask)
{
    return mask ? (int64_t)__builtin_ctzll(mask) : 0;
}

static void nl_place_emit(uint64_t start, uint64_t len, uint32_t rule, int64_t node, long err,
                          int what)
{
    nl_emit(NL_REC_PLACE, start, len, rule, (uint64_t)node, (uint64_t)err, (uint64_t)what);
}

/** Binds the pages [first, last] (offsets from @p base) that lie inside [base, end) to @p node. */
static void nl_bind_pages(uint64_t base, uint64_t end, uint64_t first, uint64_t last,
                          uint32_t node, uint32_t rule, int what)
{
    uint64_t ps = nl_plan.page_size;
    uint64_t pages = (end - base + ps - 1) / ps;
    if (first >= pages)
        return;
    if (last >= pages)
        last = pages - 1;
    uint64_t start = base + first * ps, len = (last - first + 1) * ps;
    long err = nl_mbind(start, len, NL_MPOL_BIND, 1ull << node);
    nl_place_emit(start, len, rule, node, err, what);
}

/** A weighted pattern: runs of pages on one node bound together. */
static void nl_apply_pattern(const struct nl_plan_action *a, uint64_t base, uint64_t end, int what)
{
    uint64_t ps = nl_plan.page_size, pages = (end - base + ps - 1) / ps;
    long first_err = 0;
    uint64_t run = 0;
    for (uint64_t p = 0; p < pages; p = run) {
        uint32_t node = nl_plan.ranges[a->first_range + p % a->range_count].node;
        for (run = p + 1; run < pages; run++)
            if (nl_plan.ranges[a->first_range + run % a->range_count].node != node)
                break;
        long err = nl_mbind(base + p * ps, (run - p) * ps, NL_MPOL_BIND, 1ull << node);
        if (err && !first_err)
            first_err = err;
    }
    nl_place_emit(base, pages * ps, a->rule, nl_lowest(a->nodes), first_err, what | NL_PLACE_SPREAD);
}

static void nl_apply(const struct nl_plan_action *a, uint64_t start, uint64_t size, int what)
{
    uint64_t ps = nl_plan.page_size;
    uint64_t base = start & ~(ps - 1), end = start + size;
    if (size == 0 || end < start)
        return;
    switch (a->kind) {
    case NL_PLAN_BIND:
        nl_bind_pages(base, end, 0, UINT64_MAX - 1, a->node, a->rule, what);
        break;
    case NL_PLAN_INTERLEAVE: {
        uint64_t len = (end - base + ps - 1) / ps * ps;
        long err = nl_mbind(base, len, NL_MPOL_INTERLEAVE, a->nodes);
        nl_place_emit(base, len, a->rule, nl_lowest(a->nodes), err, what | NL_PLACE_SPREAD);
        break;
    }
    case NL_PLAN_RANGES:
        for (uint32_t i = 0; i < a->range_count; i++) {
            const struct nl_plan_range *r = &nl_plan.ranges[a->first_range + i];
            nl_bind_pages(base, end, r->first_page, r->last_page, r->node, a->rule, what);
        }
        break;
    case NL_PLAN_PATTERN:
        nl_apply_pattern(a, base, end, what);
        break;
    }
    /* Out now rather than when the buffer fills: a plan's timed moves find the object by its
     * records while the program runs (one write per placed object). */
    nl_flush_self();
}

/* ---- the profile's site key ---- */

struct nl_key_find {
    uint64_t addr;
    int index, found;
    uint64_t bias;
    uint8_t id[NL_PLAN_ID_MAX];
    size_t id_len;
    char path[NL_MAX_PATH_PAYLOAD + 1];
};

static int nl_key_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    struct nl_key_find *f = ctx;
    int is_main = f->index++ == 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD) {
            uint64_t s = info->dlpi_addr + ph->p_vaddr;
            lo = s < lo ? s : lo;
            hi = s + ph->p_memsz > hi ? s + ph->p_memsz : hi;
        }
    }
    if (f->addr < lo || f->addr >= hi)
        return 0;
    f->found = 1;
    f->bias = info->dlpi_addr;
    /* The build id may be in any PT_NOTE segment (property notes often come first). */
    f->id_len = 0;
    for (int i = 0; i < info->dlpi_phnum && !f->id_len; i++)
        if (info->dlpi_phdr[i].p_type == PT_NOTE)
            f->id_len = nl_note_build_id((const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr),
                                         info->dlpi_phdr[i].p_memsz, f->id, sizeof f->id);
    f->path[0] = '\0';
    if (f->id_len == 0 && info->dlpi_name && info->dlpi_name[0]) {
        strncpy(f->path, info->dlpi_name, NL_MAX_PATH_PAYLOAD);
        f->path[NL_MAX_PATH_PAYLOAD] = '\0';
    } else if (f->id_len == 0 && is_main) {
        ssize_t r = readlink("/proc/self/exe", f->path, NL_MAX_PATH_PAYLOAD);
        f->path[r > 0 ? r : 0] = '\0';
    }
    return 1;
}

static uint64_t nl_fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/** The key the recorder gives the site of @p frames (crates/numalens-assemble/src/sites.rs). */
uint64_t nl_plan_site_key(const uint64_t *frames, unsigned n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned i = 0; i < n; i++) {
        struct nl_key_find f;
        f.addr = frames[i];
        f.index = 0;
        f.found = 0;
        dl_iterate_phdr(nl_key_cb, &f);
        if (!f.found) {
            h = nl_fnv(h, &frames[i], 8);
            continue;
        }
        h = f.id_len ? nl_fnv(h, f.id, f.id_len) : nl_fnv(h, f.path, strlen(f.path));
        uint64_t svma = frames[i] - f.bias;
        h = nl_fnv(h, &svma, 8);
    }
    return h;
}

/* ---- the runtime's entry points ---- */

/** Index of the action of the site rule with @p key, or -1. */
static int nl_plan_key_action(uint64_t key)
{
    for (uint32_t i = 0; i < nl_plan.h->sites; i++)
        if (nl_plan.sites[i].key == key)
            return (int)nl_plan.sites[i].action;
    return -1;
}

/* The decision per runtime site id: slot = id, value = action + 2 (1: no rule). Computing a key
 * walks the loaded modules once per frame, so it is done once per site; two threads meeting a
 * new site at once both compute it, and agree. */
#define NL_PLAN_SLOTS 4096u
static _Atomic uint64_t nl_plan_ids[NL_PLAN_SLOTS];
static _Atomic int32_t nl_plan_decisions[NL_PLAN_SLOTS];

static int nl_plan_cached(uint64_t id, unsigned *slot)
{
    unsigned i = (unsigned)(id % NL_PLAN_SLOTS);
    for (unsigned probe = 0; probe < 32; probe++, i = (i + 1) % NL_PLAN_SLOTS) {
        uint64_t cur = atomic_load(&nl_plan_ids[i]);
        if (cur == 0 && !atomic_compare_exchange_strong(&nl_plan_ids[i], &cur, id) && cur != id)
            continue;
        if (cur == 0 || cur == id) {
            *slot = i;
            return atomic_load(&nl_plan_decisions[i]);
        }
    }
    *slot = NL_PLAN_SLOTS;
    return 0;
}

int nl_plan_site_action(uint64_t id, const uint64_t *frames, unsigned n)
{
    unsigned slot;
    int cached = nl_plan_cached(id, &slot);
    if (cached)
        return cached - 2;
    uint64_t key = nl_plan_site_key(frames, n);
    int action = nl_plan_key_action(key);
    if (slot < NL_PLAN_SLOTS)
        atomic_store(&nl_plan_decisions[slot], action + 2);
    return action;
}

int nl_plan_active(void)
{
    return nl_plan.h != NULL;
}

void nl_plan_object(int action, uint64_t start, uint64_t size)
{
    if (action >= 0 && nl_plan.h)
        nl_apply(&nl_plan.actions[action], start, size, NL_PLACE_OBJECT);
}

/* The site of the allocation being recorded by this thread, set by nl_site_capture. */
static NL_TLS int nl_plan_pending = -1;

void nl_plan_note_site(uint64_t id, const uint64_t *frames, unsigned n)
{
    nl_plan_pending = nl_plan.h ? nl_plan_site_action(id, frames, n) : -1;
}

void nl_plan_allocated(uint64_t start, uint64_t size)
{
    int action = nl_plan_pending;
    nl_plan_pending = -1;
    nl_plan_object(action, start, size);
}

struct nl_static_find {
    const struct nl_plan_static *rule;
    int index;
};

static int nl_static_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    struct nl_static_find *f = ctx;
    int is_main = f->index++ == 0;
    const char *want = f->rule->module;
    if (want[0] == '\0' ? !is_main : !(info->dlpi_name && strstr(info->dlpi_name, want)))
        return 0;
    uint64_t start = info->dlpi_addr + f->rule->offset;
    nl_apply(&nl_plan.actions[f->rule->action], start, f->rule->size, NL_PLACE_STATIC);
    return 1;
}

/** Whether the main executable has the build id the static rules were made for. */
static int nl_main_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    int *same = ctx;
    uint8_t id[NL_PLAN_ID_MAX];
    size_t len = 0;
    for (int i = 0; i < info->dlpi_phnum && !len; i++)
        if (info->dlpi_phdr[i].p_type == PT_NOTE)
            len = nl_note_build_id((const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr),
                                   info->dlpi_phdr[i].p_memsz, id, sizeof id);
    *same = len && len == nl_plan.h->exe_build_id_len && len <= sizeof nl_plan.h->exe_build_id &&
            memcmp(id, nl_plan.h->exe_build_id, len) == 0;
    return 1;
}

static void nl_plan_statics(void)
{
    int same = 0;
    dl_iterate_phdr(nl_main_cb, &same);
    if (!same)
        return;
    for (uint32_t i = 0; i < nl_plan.h->statics; i++) {
        struct nl_static_find f = {&nl_plan.statics[i], 0};
        dl_iterate_phdr(nl_static_cb, &f);
    }
}

void nl_plan_thread(int32_t logical)
{
    for (uint32_t i = 0; nl_plan.h && i < nl_plan.h->threads; i++) {
        const struct nl_plan_thread *t = &nl_plan.threads[i];
        if ((int32_t)t->logical != logical)
            continue;
        long r = syscall(SYS_sched_setaffinity, 0, sizeof t->cpus, t->cpus);
        nl_place_emit(0, 0, t->rule, -1, r == 0 ? 0 : errno, NL_PLACE_THREAD);
        /* A plan's timed thread moves find the thread by this record, while it runs. */
        nl_flush_self();
        return;
    }
}

/** Maps the rules file at @p path and places the static objects; the runtime runs on without a
 * plan when the file is missing or malformed (the recorder checked it before the run). */
void nl_plan_start(const char *path)
{
    /* Raw system calls: the program's descriptors and mappings are not ours to trace. */
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    long base = -1;
    if (fstat(fd, &st) == 0 && st.st_size > 0)
        base = syscall(SYS_mmap, NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    syscall(SYS_close, fd);
    if (base == -1)
        return;
    struct nl_plan p;
    if (nl_plan_check((const void *)base, (uint64_t)st.st_size, &p) != 0) {
        syscall(SYS_munmap, base, (size_t)st.st_size);
        return;
    }
    p.page_size = (uint64_t)sysconf(_SC_PAGESIZE);
    nl_plan = p;
    nl_plan_statics();
    nl_plan_thread(0);
}

/** A fork child is another process: the plan's rules are for the first one. */
void nl_plan_forget(void)
{
    nl_plan.h = NULL;
}
