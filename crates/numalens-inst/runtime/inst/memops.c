/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file memops.c
 * @brief __tsan_memcpy, __tsan_memset and __tsan_memmove (what newer clang emits for memory
 * intrinsics): the range is counted, then the copy is done here.
 *
 * The copies do not call memcpy: a program linked by `numalens cc` has its memcpy calls routed
 * through __wrap_memcpy (wrap.c), which would count the range a second time.
 */
#include <stddef.h>
#include <stdint.h>

#include "inst.h"

static void *nl_copy_forward(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
    void *d = dst;
    __asm__ volatile("rep movsb" : "+D"(d), "+S"(src), "+c"(n) : : "memory");
#else
    volatile unsigned char *d = dst;
    const unsigned char *s = src;
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
#endif
    return dst;
}

static void *nl_copy_backward(void *dst, const void *src, size_t n)
{
    volatile unsigned char *d = dst;
    const unsigned char *s = src;
    while (n--)
        d[n] = s[n];
    return dst;
}

static void *nl_fill(void *dst, int c, size_t n)
{
#if defined(__x86_64__)
    void *d = dst;
    __asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(c) : "memory");
#else
    volatile unsigned char *d = dst;
    for (size_t i = 0; i < n; i++)
        d[i] = (unsigned char)c;
#endif
    return dst;
}

NL_EXPORT void *__tsan_memcpy(void *dst, const void *src, size_t n)
{
    nl_inst_range((uintptr_t)src, n, 0, __builtin_return_address(0));
    nl_inst_range((uintptr_t)dst, n, 1, __builtin_return_address(0));
    return nl_copy_forward(dst, src, n);
}

NL_EXPORT void *__tsan_memmove(void *dst, const void *src, size_t n)
{
    nl_inst_range((uintptr_t)src, n, 0, __builtin_return_address(0));
    nl_inst_range((uintptr_t)dst, n, 1, __builtin_return_address(0));
    if ((uintptr_t)dst - (uintptr_t)src >= n)
        return nl_copy_forward(dst, src, n);
    return nl_copy_backward(dst, src, n);
}

NL_EXPORT void *__tsan_memset(void *dst, int c, size_t n)
{
    nl_inst_range((uintptr_t)dst, n, 1, __builtin_return_address(0));
    return nl_fill(dst, c, n);
}
