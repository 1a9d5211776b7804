/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file atomics.c
 * @brief Every __tsan_atomic* entry point, with the real atomic operation.
 *
 * The instrumented program's atomics reach these functions instead of the instructions, so they
 * must do the operation for real. Each uses sequential consistency whatever order was asked:
 * stronger than or equal to any requested order, so the program computes what it computes
 * natively. Counting: a load is one read, a store one write, a read-modify-write (exchange,
 * fetch_*, successful compare-exchange) one read and one write, a failed compare-exchange one
 * read.
 */
#include <stdint.h>

#include "inst.h"

#define SC __ATOMIC_SEQ_CST
#define IP() NL_HOOK_IP()

#define NL_ATOMIC_RMW(bits, T, op)                                                                 \
    NL_RMW_HOOK(NL_HOOK, , T, __tsan_atomic##bits##_fetch_##op, sizeof(T),                         \
                __atomic_fetch_##op(a, v, SC))

#define NL_ATOMICS(bits, T)                                                                        \
    NL_HOOK T __tsan_atomic##bits##_load(const volatile T *a, int mo)                              \
    {                                                                                              \
        (void)mo;                                                                                  \
        nl_access((uintptr_t)a, 0, sizeof(T), IP());                                               \
        return __atomic_load_n(a, SC);                                                             \
    }                                                                                              \
    NL_HOOK void __tsan_atomic##bits##_store(volatile T *a, T v, int mo)                           \
    {                                                                                              \
        (void)mo;                                                                                  \
        nl_access((uintptr_t)a, 1, sizeof(T), IP());                                               \
        __atomic_store_n(a, v, SC);                                                                \
    }                                                                                              \
    NL_RMW_HOOK(NL_HOOK, , T, __tsan_atomic##bits##_exchange, sizeof(T),                           \
                __atomic_exchange_n(a, v, SC))                                                     \
    NL_ATOMIC_RMW(bits, T, add)                                                                    \
    NL_ATOMIC_RMW(bits, T, sub)                                                                    \
    NL_ATOMIC_RMW(bits, T, and)                                                                    \
    NL_ATOMIC_RMW(bits, T, or)                                                                     \
    NL_ATOMIC_RMW(bits, T, xor)                                                                    \
    NL_ATOMIC_RMW(bits, T, nand)                                                                   \
    NL_HOOK int __tsan_atomic##bits##_compare_exchange_strong(volatile T *a, T *c, T v,            \
                                                              int mo, int fmo)                     \
    {                                                                                              \
        (void)mo;                                                                                  \
        (void)fmo;                                                                                 \
        nl_access((uintptr_t)a, 0, sizeof(T), IP());                                               \
        int ok = __atomic_compare_exchange_n(a, c, v, 0, SC, SC);                                  \
        if (ok)                                                                                    \
            nl_access((uintptr_t)a, 1, sizeof(T), IP());                                           \
        return ok;                                                                                 \
    }                                                                                              \
    /* Weak may fail spuriously; never failing spuriously is a valid weak. */                      \
    NL_HOOK int __tsan_atomic##bits##_compare_exchange_weak(volatile T *a, T *c, T v, int mo,      \
                                                            int fmo)                               \
    {                                                                                              \
        return __tsan_atomic##bits##_compare_exchange_strong(a, c, v, mo, fmo);                    \
    }                                                                                              \
    NL_HOOK T __tsan_atomic##bits##_compare_exchange_val(volatile T *a, T c, T v, int mo,          \
                                                         int fmo)                                  \
    {                                                                                              \
        (void)mo;                                                                                  \
        (void)fmo;                                                                                 \
        nl_access((uintptr_t)a, 0, sizeof(T), IP());                                               \
        T expected = c;                                                                            \
        if (__atomic_compare_exchange_n(a, &expected, v, 0, SC, SC))                               \
            nl_access((uintptr_t)a, 1, sizeof(T), IP());                                           \
        return expected;                                                                           \
    }

NL_ATOMICS(8, uint8_t)
NL_ATOMICS(16, uint16_t)
NL_ATOMICS(32, uint32_t)
NL_ATOMICS(64, uint64_t)

NL_HOOK void __tsan_atomic_thread_fence(int mo)
{
    (void)mo;
    __atomic_thread_fence(SC);
}

NL_HOOK void __tsan_atomic_signal_fence(int mo)
{
    (void)mo;
    __atomic_signal_fence(SC);
}
