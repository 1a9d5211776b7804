/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file atomics128.c
 * @brief The 16-byte __tsan_atomic128_* entry points, built on cmpxchg16b.
 *
 * gcc sends 16-byte __atomic builtins to libatomic even with -mcx16; here every operation is a
 * compare-and-swap loop on the __sync builtin, which is the instruction itself. A load is a
 * compare-and-swap of 0 by 0 (it needs writable memory, as the instruction does). Counting is
 * as in atomics.c.
 */
#include <stdint.h>

#include "inst.h"

#if defined(__x86_64__) && defined(__SIZEOF_INT128__)

typedef unsigned __int128 u128;

#define IP() __builtin_return_address(0)
#define CX16 __attribute__((target("cx16")))

static CX16 u128 nl_cas(volatile u128 *a, u128 expected, u128 desired)
{
    return __sync_val_compare_and_swap(a, expected, desired);
}

static CX16 u128 nl_load(volatile u128 *a) { return nl_cas(a, 0, 0); }

/* The operation: applies f(old, v) until the swap succeeds; returns the old value. Then the hook. */
#define NL_RMW128(name, f)                                                                      \
    static inline __attribute__((always_inline)) CX16 u128 nl_op_##name(volatile u128 *a, u128 v) \
    {                                                                                           \
        u128 old = nl_load(a);                                                                  \
        for (u128 seen; (seen = nl_cas(a, old, (f))) != old;)                                   \
            old = seen;                                                                         \
        return old;                                                                             \
    }                                                                                           \
    NL_RMW_HOOK(NL_EXPORT, CX16, u128, __tsan_atomic128_##name, 16, nl_op_##name(a, v))

NL_RMW128(exchange, v)
NL_RMW128(fetch_add, old + v)
NL_RMW128(fetch_sub, old - v)
NL_RMW128(fetch_and, old & v)
NL_RMW128(fetch_or, old | v)
NL_RMW128(fetch_xor, old ^ v)
NL_RMW128(fetch_nand, ~(old & v))

NL_EXPORT CX16 u128 __tsan_atomic128_load(const volatile u128 *a, int mo)
{
    (void)mo;
    nl_access((uintptr_t)a, 0, 16, IP());
    return nl_load((volatile u128 *)a);
}

NL_EXPORT CX16 void __tsan_atomic128_store(volatile u128 *a, u128 v, int mo)
{
    (void)mo;
    nl_access((uintptr_t)a, 1, 16, IP());
    u128 old = nl_load(a);
    for (u128 seen; (seen = nl_cas(a, old, v)) != old;)
        old = seen;
}

NL_EXPORT CX16 int __tsan_atomic128_compare_exchange_strong(volatile u128 *a, u128 *c, u128 v,
                                                            int mo, int fmo)
{
    (void)mo;
    (void)fmo;
    nl_access((uintptr_t)a, 0, 16, IP());
    u128 expected = *c, seen = nl_cas(a, expected, v);
    if (seen == expected) {
        nl_access((uintptr_t)a, 1, 16, IP());
        return 1;
    }
    *c = seen;
    return 0;
}

NL_EXPORT CX16 int __tsan_atomic128_compare_exchange_weak(volatile u128 *a, u128 *c, u128 v,
                                                          int mo, int fmo)
{
    return __tsan_atomic128_compare_exchange_strong(a, c, v, mo, fmo);
}

NL_EXPORT CX16 u128 __tsan_atomic128_compare_exchange_val(volatile u128 *a, u128 c, u128 v,
                                                          int mo, int fmo)
{
    (void)mo;
    (void)fmo;
    nl_access((uintptr_t)a, 0, 16, IP());
    u128 seen = nl_cas(a, c, v);
    if (seen == c)
        nl_access((uintptr_t)a, 1, 16, IP());
    return seen;
}

#endif
