/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file shims.c
 * @brief The interposed allocation and mapping functions: thin forwarders over the core.
 *
 * Fast path (below min_object): call the real function, bump two thread-local counters, return.
 * No unwinding, no record, no lock. Large allocations take nl_on_alloc(): a call site and an
 * ALLOC record. free() asks malloc_usable_size() whether the block can be a large one (usable
 * size >= min_object) and only then writes FREE; a few FREEs of small blocks rounded up past
 * the threshold are harmless (the reader ignores frees of unknown addresses). Records that
 * release memory are stamped before the release, so a reuse of the address by another thread
 * can never appear to precede it.
 */
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nl_shims.h"

int nl_glibc_chunks;

static inline int nl_tracing(void)
{
    return atomic_load_explicit(&nl_g.on, memory_order_relaxed) && !nl_self.guard;
}

void nl_on_alloc(void *p, size_t size, size_t align, int fn)
{
    if (!nl_tracing())
        return;
    nl_self.guard++;
    uint64_t site = nl_site_capture();
    nl_emit(NL_REC_ALLOC, (uint64_t)p, size, align, site, (uint64_t)fn, 0);
    if (nl_unlikely(nl_plan_active()) && site)
        nl_plan_allocated((uint64_t)p, size);
    nl_flush_if_large(size);
    nl_self.guard--;
}

void nl_on_free(void *p)
{
    nl_self.guard++;
    nl_emit(NL_REC_FREE, (uint64_t)p, 0, 0, 0, 0, 0);
    nl_self.guard--;
}

/** The size of glibc's chunk holding @p p. glibc keeps it (with 3 flag bits) just below the
 * block, and it is never smaller than the usable size: below min_object, the block is small and
 * free() needs no call to find out. Only valid when nl_glibc_chunks. */
static inline size_t nl_chunk_size(const void *p)
{
    return ((const size_t *)p)[-1] & ~(size_t)7;
}

/** Before dlsym has answered: resolve (once per thread), else serve from the pool. */
static int nl_early(void)
{
    if (nl_self.resolving)
        return 0;
    nl_resolve();
    return nl_real.free != NULL;
}

static inline void *nl_after(void *p, size_t size, size_t align, int fn)
{
    if (nl_likely(size < nl_g.min_object))
        nl_count_small(size);
    else if (p)
        nl_on_alloc(p, size, align, fn);
    return p;
}

/* malloc and calloc count a small request before forwarding it, so that the forward is a tail
 * call: no frame, no return through the shim. A small request that fails is counted all the
 * same, as it always was. The real function is tested for NULL instead of a separate "resolved"
 * flag: it is loaded for the call anyway, and it is only published once dlsym has answered. */

__attribute__((noinline)) static void *nl_malloc_slow(size_t size)
{
    if (nl_unlikely(!nl_real.free))
        return nl_early() ? malloc(size) : nl_boot_alloc(size, 0, 0);
    return nl_after(nl_real.malloc(size), size, 0, NL_FN_MALLOC);
}

NL_EXPORT void *malloc(size_t size)
{
    void *(*real)(size_t) = nl_real.malloc;
    if (nl_likely(size < nl_g.min_object && real)) {
        nl_count_small(size);
        return real(size);
    }
    return nl_malloc_slow(size);
}

__attribute__((noinline)) static void *nl_calloc_slow(size_t n, size_t m, size_t size)
{
    if (nl_unlikely(!nl_real.free))
        return nl_early() ? calloc(n, m) : nl_boot_alloc(size, 0, 1);
    return nl_after(nl_real.calloc(n, m), size, 0, NL_FN_CALLOC);
}

NL_EXPORT void *calloc(size_t n, size_t m)
{
    size_t size;
    if (__builtin_mul_overflow(n, m, &size))
        size = SIZE_MAX;
    void *(*real)(size_t, size_t) = nl_real.calloc;
    if (nl_likely(size < nl_g.min_object && real)) {
        nl_count_small(size);
        return real(n, m);
    }
    return nl_calloc_slow(n, m, size);
}

/** free() while tracing, for blocks that may be large. */
__attribute__((noinline)) static void nl_free_traced(void *p)
{
    if (!nl_self.guard && nl_real.usable(p) >= nl_g.min_object)
        nl_on_free(p);
    nl_real.free(p);
}

NL_EXPORT void free(void *p)
{
    void (*real)(void *) = nl_real.free;
    if (nl_unlikely(!p || nl_boot_owns(p) || !real))
        return;
    /* With glibc's chunks, min_object alone decides (it is UINT64_MAX whenever tracing is off):
     * one load and one compare, then a tail call. */
    if (nl_likely(nl_glibc_chunks) ? nl_likely(nl_chunk_size(p) < nl_g.min_object)
                                   : !atomic_load_explicit(&nl_g.on, memory_order_relaxed)) {
        real(p);
        return;
    }
    nl_free_traced(p);
}

NL_EXPORT void *realloc(void *old, size_t size)
{
    if (nl_unlikely(!nl_real.free) && !nl_early())
        return nl_boot_alloc(size, 0, 0); /* only dlsym's own calls: nothing to copy yet */
    if (nl_unlikely(old && nl_boot_owns(old))) {
        void *p = malloc(size);
        size_t keep = nl_boot_size(old);
        if (p)
            memcpy(p, old, keep < size ? keep : size);
        return p;
    }
    if (!nl_tracing())
        return nl_real.realloc(old, size);
    size_t old_size = old ? nl_real.usable(old) : 0;
    if (size < nl_g.min_object && old_size < nl_g.min_object) {
        void *p = nl_real.realloc(old, size);
        if (p)
            nl_count_small(size);
        return p;
    }
    uint64_t t = nl_now();
    void *p = nl_real.realloc(old, size);
    if (p || size == 0) {
        int e = errno;
        nl_self.guard++;
        uint64_t site = size >= nl_g.min_object ? nl_site_capture() : 0;
        nl_emit_at(t, NL_REC_REALLOC, (uint64_t)p, size, (uint64_t)old, site, 0, 0);
        if (nl_unlikely(nl_plan_active()) && site && p)
            nl_plan_allocated((uint64_t)p, size);
        nl_flush_if_large(size);
        nl_self.guard--;
        errno = e;
    }
    return p;
}

NL_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    if (nl_unlikely(!nl_real.free) && !nl_early()) {
        void *p = nl_boot_alloc(size, align, 0);
        if (!p)
            return ENOMEM;
        *out = p;
        return 0;
    }
    int rc = nl_real.posix_memalign(out, align, size);
    if (rc == 0)
        nl_after(*out, size, align, NL_FN_POSIX_MEMALIGN);
    return rc;
}

NL_EXPORT void *aligned_alloc(size_t align, size_t size)
{
    if (nl_unlikely(!nl_real.free) && !nl_early())
        return nl_boot_alloc(size, align, 0);
    return nl_after(nl_real.aligned_alloc(align, size), size, align, NL_FN_ALIGNED_ALLOC);
}

NL_EXPORT void *memalign(size_t align, size_t size)
{
    if (nl_unlikely(!nl_real.free) && !nl_early())
        return nl_boot_alloc(size, align, 0);
    return nl_after(nl_real.memalign(align, size), size, align, NL_FN_MEMALIGN);
}

NL_EXPORT void *valloc(size_t size)
{
    if (nl_unlikely(!nl_real.free) && !nl_early())
        return nl_boot_alloc(size, 4096, 0);
    return nl_after(nl_real.valloc(size), size, (size_t)sysconf(_SC_PAGESIZE), NL_FN_VALLOC);
}

NL_EXPORT void *pvalloc(size_t size)
{
    if (nl_unlikely(!nl_real.free) && !nl_early())
        return nl_boot_alloc(size, 4096, 0);
    return nl_after(nl_real.pvalloc(size), size, (size_t)sysconf(_SC_PAGESIZE), NL_FN_PVALLOC);
}

/* ---- mappings ---- */

static void nl_on_mmap(void *p, size_t len, int prot, int flags, int fd)
{
    if (p == MAP_FAILED || !nl_tracing())
        return;
    int e = errno;
    nl_self.guard++;
    uint64_t site = len >= nl_g.min_object ? nl_site_capture() : 0;
    nl_emit(NL_REC_MMAP, (uint64_t)p, len, (uint64_t)(uint32_t)prot | (uint64_t)(uint32_t)flags << 32,
            site, (uint64_t)(int64_t)fd, 0);
    if (nl_unlikely(nl_plan_active()) && site)
        nl_plan_allocated((uint64_t)p, len);
    nl_flush_if_large(len);
    nl_self.guard--;
    errno = e;
}

NL_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (nl_unlikely(!nl_real.free))
        return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    void *p = nl_real.mmap(addr, len, prot, flags, fd, off);
    nl_on_mmap(p, len, prot, flags, fd);
    return p;
}

NL_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
    if (nl_unlikely(!nl_real.free || !nl_real.mmap64))
        return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    void *p = nl_real.mmap64(addr, len, prot, flags, fd, off);
    nl_on_mmap(p, len, prot, flags, fd);
    return p;
}

NL_EXPORT int munmap(void *addr, size_t len)
{
    if (nl_unlikely(!nl_real.free))
        return (int)syscall(SYS_munmap, addr, len);
    if (nl_tracing()) {
        int e = errno;
        nl_self.guard++;
        nl_emit(NL_REC_MUNMAP, (uint64_t)addr, len, 0, 0, 0, 0);
        nl_self.guard--;
        errno = e;
    }
    return nl_real.munmap(addr, len);
}

NL_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    void *want = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        want = va_arg(ap, void *);
        va_end(ap);
    }
    if (nl_unlikely(!nl_real.free))
        return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, want);
    uint64_t t = nl_tracing() ? nl_now() : 0;
    void *p = nl_real.mremap(old, old_len, new_len, flags, want);
    if (p != MAP_FAILED && t && nl_tracing()) {
        int e = errno;
        nl_self.guard++;
        nl_emit_at(t, NL_REC_MREMAP, (uint64_t)p, new_len, (uint64_t)old, old_len, 0, 0);
        nl_self.guard--;
        errno = e;
    }
    return p;
}
