/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file lib.c
 * @brief A library the test program dlopen()s: its allocations' sites must point into it.
 */
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void *nl_test_lib_alloc(size_t n)
{
    void *p = malloc(n);
    if (p)
        memset(p, 0, n);
    return p;
}
