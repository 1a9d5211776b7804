/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file nl_check.h
 * @brief The runtime's C tests' one check: report the failed condition, count it, go on, so a
 * run lists every failure before it exits non-zero.
 */
#ifndef NL_CHECK_H
#define NL_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
            failures++;                                                                \
        }                                                                              \
    } while (0)

#endif
