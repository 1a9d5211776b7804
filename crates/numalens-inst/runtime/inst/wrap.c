/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file wrap.c
 * @brief memcpy, memmove and memset called by the instrumented program, counted as range
 * accesses.
 *
 * gcc and clang 14 leave these calls to libc (ThreadSanitizer's own runtime intercepts them).
 * `numalens cc` links with `-Wl,--wrap=memcpy,--wrap=memmove,--wrap=memset`, which routes the
 * program's calls (and only the program's: shared libraries keep theirs) here. This file is an
 * archive member of its own: its __real_* references exist only in links that wrap.
 */
#include <stddef.h>
#include <stdint.h>

#include "inst.h"

void *__real_memcpy(void *dst, const void *src, size_t n);
void *__real_memmove(void *dst, const void *src, size_t n);
void *__real_memset(void *dst, int c, size_t n);

NL_EXPORT void *__wrap_memcpy(void *dst, const void *src, size_t n)
{
    nl_inst_range((uintptr_t)src, n, 0, __builtin_return_address(0));
    nl_inst_range((uintptr_t)dst, n, 1, __builtin_return_address(0));
    return __real_memcpy(dst, src, n);
}

NL_EXPORT void *__wrap_memmove(void *dst, const void *src, size_t n)
{
    nl_inst_range((uintptr_t)src, n, 0, __builtin_return_address(0));
    nl_inst_range((uintptr_t)dst, n, 1, __builtin_return_address(0));
    return __real_memmove(dst, src, n);
}

NL_EXPORT void *__wrap_memset(void *dst, int c, size_t n)
{
    nl_inst_range((uintptr_t)dst, n, 1, __builtin_return_address(0));
    return __real_memset(dst, c, n);
}
