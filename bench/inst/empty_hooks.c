/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * Empty ThreadSanitizer-ABI hooks: the floor cost of call-per-access instrumentation.
 *
 * A program compiled with `numalens cc`'s flags and linked against this archive instead of
 * numalens' runtime pays for the calls the compiler inserted and nothing else, which is what
 * bench/inst compares the real hooks against. Plain loads and stores do nothing; atomics must
 * still be performed (the program depends on them), so they do exactly the operation; the
 * --wrap'ed memory functions forward to the real ones.
 *
 * noinline and an empty asm keep the compiler from proving the calls away inside this file;
 * calls from the program cannot be removed anyway (they cross an object boundary).
 */
#include <stddef.h>
#include <stdint.h>

#define HOOK __attribute__((visibility("default"), noinline))
#define KEEP(p) __asm__ volatile("" : : "r"(p) : "memory")

#define ACCESS(size)                                                                          \
    HOOK void __tsan_read##size(void *a) { KEEP(a); }                                         \
    HOOK void __tsan_write##size(void *a) { KEEP(a); }                                        \
    HOOK void __tsan_unaligned_read##size(void *a) { KEEP(a); }                               \
    HOOK void __tsan_unaligned_write##size(void *a) { KEEP(a); }                              \
    HOOK void __tsan_volatile_read##size(void *a) { KEEP(a); }                                \
    HOOK void __tsan_volatile_write##size(void *a) { KEEP(a); }                               \
    HOOK void __tsan_unaligned_volatile_read##size(void *a) { KEEP(a); }                      \
    HOOK void __tsan_unaligned_volatile_write##size(void *a) { KEEP(a); }                     \
    HOOK void __tsan_read##size##_pc(void *a, void *pc) { KEEP(a); (void)pc; }                \
    HOOK void __tsan_write##size##_pc(void *a, void *pc) { KEEP(a); (void)pc; }               \
    HOOK void __tsan_read_write##size(void *a) { KEEP(a); }                                   \
    HOOK void __tsan_unaligned_read_write##size(void *a) { KEEP(a); }

ACCESS(1)
ACCESS(2)
ACCESS(4)
ACCESS(8)
ACCESS(16)

HOOK void __tsan_read_range(void *a, unsigned long n) { KEEP(a); (void)n; }
HOOK void __tsan_write_range(void *a, unsigned long n) { KEEP(a); (void)n; }
HOOK void __tsan_read_range_pc(void *a, unsigned long n, void *pc) { KEEP(a); (void)n, (void)pc; }
HOOK void __tsan_write_range_pc(void *a, unsigned long n, void *pc) { KEEP(a); (void)n, (void)pc; }
HOOK void __tsan_vptr_read(void **p) { KEEP(p); }
HOOK void __tsan_vptr_update(void **p, void *v) { KEEP(p); (void)v; }
HOOK void __tsan_func_entry(void *pc) { KEEP(pc); }
HOOK void __tsan_func_exit(void) {}
HOOK void __tsan_init(void) {}
HOOK void __tsan_flush_memory(void) {}
HOOK void __tsan_ignore_thread_begin(void) {}
HOOK void __tsan_ignore_thread_end(void) {}
HOOK void __tsan_atomic_thread_fence(int mo) { (void)mo; __atomic_thread_fence(__ATOMIC_SEQ_CST); }
HOOK void __tsan_atomic_signal_fence(int mo) { (void)mo; __atomic_signal_fence(__ATOMIC_SEQ_CST); }

/* The memory order argument is a runtime value; sequentially consistent is right for all. */
#define SC __ATOMIC_SEQ_CST
#define RMW(bits, op)                                                                         \
    HOOK uint##bits##_t __tsan_atomic##bits##_##op(volatile uint##bits##_t *a, uint##bits##_t v, \
                                                   int mo)                                    \
    {                                                                                         \
        (void)mo;                                                                             \
        return __atomic_##op(a, v, SC);                                                       \
    }
#define ATOMICS(bits)                                                                         \
    HOOK uint##bits##_t __tsan_atomic##bits##_load(const volatile uint##bits##_t *a, int mo)  \
    {                                                                                         \
        (void)mo;                                                                             \
        return __atomic_load_n(a, SC);                                                        \
    }                                                                                         \
    HOOK void __tsan_atomic##bits##_store(volatile uint##bits##_t *a, uint##bits##_t v, int mo) \
    {                                                                                         \
        (void)mo;                                                                             \
        __atomic_store_n(a, v, SC);                                                           \
    }                                                                                         \
    HOOK uint##bits##_t __tsan_atomic##bits##_exchange(volatile uint##bits##_t *a,            \
                                                       uint##bits##_t v, int mo)              \
    {                                                                                         \
        (void)mo;                                                                             \
        return __atomic_exchange_n(a, v, SC);                                                 \
    }                                                                                         \
    RMW(bits, fetch_add)                                                                      \
    RMW(bits, fetch_sub)                                                                      \
    RMW(bits, fetch_and)                                                                      \
    RMW(bits, fetch_or)                                                                       \
    RMW(bits, fetch_xor)                                                                      \
    RMW(bits, fetch_nand)                                                                     \
    HOOK int __tsan_atomic##bits##_compare_exchange_strong(                                   \
        volatile uint##bits##_t *a, uint##bits##_t *expected, uint##bits##_t v, int mo, int fmo) \
    {                                                                                         \
        (void)mo, (void)fmo;                                                                  \
        return __atomic_compare_exchange_n(a, expected, v, 0, SC, SC);                        \
    }                                                                                         \
    HOOK int __tsan_atomic##bits##_compare_exchange_weak(                                     \
        volatile uint##bits##_t *a, uint##bits##_t *expected, uint##bits##_t v, int mo, int fmo) \
    {                                                                                         \
        (void)mo, (void)fmo;                                                                  \
        return __atomic_compare_exchange_n(a, expected, v, 1, SC, SC);                        \
    }                                                                                         \
    HOOK uint##bits##_t __tsan_atomic##bits##_compare_exchange_val(                           \
        volatile uint##bits##_t *a, uint##bits##_t expected, uint##bits##_t v, int mo, int fmo) \
    {                                                                                         \
        (void)mo, (void)fmo;                                                                  \
        __atomic_compare_exchange_n(a, &expected, v, 0, SC, SC);                              \
        return expected;                                                                      \
    }

ATOMICS(8)
ATOMICS(16)
ATOMICS(32)
ATOMICS(64)

/* `numalens cc` links with -Wl,--wrap=memcpy,--wrap=memmove,--wrap=memset. */
void *__real_memcpy(void *, const void *, size_t);
void *__real_memmove(void *, const void *, size_t);
void *__real_memset(void *, int, size_t);
HOOK void *__wrap_memcpy(void *d, const void *s, size_t n) { return __real_memcpy(d, s, n); }
HOOK void *__wrap_memmove(void *d, const void *s, size_t n) { return __real_memmove(d, s, n); }
HOOK void *__wrap_memset(void *d, int c, size_t n) { return __real_memset(d, c, n); }
