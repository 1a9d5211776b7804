/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file modules.c
 * @brief Loaded modules (MODULE records with GNU build ids) and static TLS blocks (TLS records).
 *
 * Walks dl_iterate_phdr; a module is reported once per process, keyed by its load bias and
 * lowest address, so calling nl_modules_emit_new() after each dlopen() reports only new ones.
 */
#include <elf.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#include "nl_internal.h"

#define NL_MAX_MODULES 1024u
#define NL_BUILD_ID_MAX 64u

static uint64_t nl_mod_seen[NL_MAX_MODULES];
static unsigned nl_mod_count;
static atomic_int nl_mod_lock;

size_t nl_note_build_id(const void *note, size_t size, uint8_t *out, size_t cap)
{
    const unsigned char *p = note, *end = p + size;
    while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
        ElfW(Nhdr) nh;
        memcpy(&nh, p, sizeof nh);
        size_t name_sz = (nh.n_namesz + 3u) & ~3u, desc_sz = (nh.n_descsz + 3u) & ~3u;
        const unsigned char *name = p + sizeof nh, *desc = name + name_sz;
        if (name_sz > (size_t)(end - name) || desc_sz > (size_t)(end - desc))
            return 0;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
            size_t n = nh.n_descsz < cap ? nh.n_descsz : cap;
            memcpy(out, desc, n);
            return n;
        }
        p = desc + desc_sz;
    }
    return 0;
}

static int nl_seen(uint64_t key)
{
    for (unsigned i = 0; i < nl_mod_count; i++)
        if (nl_mod_seen[i] == key)
            return 1;
    if (nl_mod_count < NL_MAX_MODULES)
        nl_mod_seen[nl_mod_count++] = key;
    return 0;
}

static int nl_module_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    unsigned *index = ctx;
    uint64_t lo = UINT64_MAX, hi = 0;
    uint8_t payload[NL_BUILD_ID_MAX + NL_MAX_PATH_PAYLOAD + 1];
    size_t id_len = 0;
    memset(payload, 0, NL_BUILD_ID_MAX);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD) {
            uint64_t s = info->dlpi_addr + ph->p_vaddr;
            if (s < lo)
                lo = s;
            if (s + ph->p_memsz > hi)
                hi = s + ph->p_memsz;
        } else if (ph->p_type == PT_NOTE && id_len == 0) {
            id_len = nl_note_build_id((const void *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz,
                                      payload, NL_BUILD_ID_MAX);
        }
    }
    int is_main = (*index)++ == 0;
    if (lo >= hi || nl_seen(((uint64_t)info->dlpi_addr * 31u) ^ lo))
        return 0;
    char *path = (char *)payload + NL_BUILD_ID_MAX;
    size_t plen = 0;
    if (info->dlpi_name && info->dlpi_name[0]) {
        plen = strlen(info->dlpi_name);
        if (plen > NL_MAX_PATH_PAYLOAD)
            plen = NL_MAX_PATH_PAYLOAD;
        memcpy(path, info->dlpi_name, plen);
    } else if (is_main) {
        ssize_t r = readlink("/proc/self/exe", path, NL_MAX_PATH_PAYLOAD);
        plen = r > 0 ? (size_t)r : 0;
    }
    path[plen] = '\0';
    nl_emit_bytes(NL_REC_MODULE, info->dlpi_addr, lo, hi, id_len, (uint64_t)is_main, 0, payload,
                  NL_BUILD_ID_MAX + plen + 1);
    return 0;
}

void nl_modules_emit_new(void)
{
    int z = 0;
    while (!atomic_compare_exchange_weak(&nl_mod_lock, &z, 1))
        z = 0;
    unsigned index = 0;
    dl_iterate_phdr(nl_module_cb, &index);
    atomic_store(&nl_mod_lock, 0);
}

void nl_modules_reset(void)
{
    nl_mod_count = 0;
    atomic_store(&nl_mod_lock, 0);
}

static int nl_tls_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    int32_t logical = *(int32_t *)ctx;
    if (!info->dlpi_tls_data)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_TLS)
            nl_emit(NL_REC_TLS, (uint64_t)info->dlpi_tls_data, ph->p_memsz, info->dlpi_tls_modid,
                    (uint64_t)(int64_t)logical, 0, 0);
    }
    return 0;
}

void nl_tls_emit(int32_t logical)
{
    dl_iterate_phdr(nl_tls_cb, &logical);
}

struct nl_range_find {
    uint64_t addr, lo, hi;
    int found;
};

static int nl_range_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
    (void)size;
    struct nl_range_find *f = ctx;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uint64_t s = info->dlpi_addr + ph->p_vaddr;
        if (s < lo)
            lo = s;
        if (s + ph->p_memsz > hi)
            hi = s + ph->p_memsz;
    }
    if (f->addr >= lo && f->addr < hi) {
        f->lo = lo;
        f->hi = hi;
        f->found = 1;
        return 1;
    }
    return 0;
}

int nl_module_range(const void *addr, uint64_t *lo, uint64_t *hi)
{
    struct nl_range_find f = {(uint64_t)addr, 0, 0, 0};
    dl_iterate_phdr(nl_range_cb, &f);
    if (!f.found)
        return -1;
    *lo = f.lo;
    *hi = f.hi;
    return 0;
}
