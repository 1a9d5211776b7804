/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file hooks.c
 * @brief The ThreadSanitizer ABI entry points that gcc and clang emit for plain accesses,
 * ranges, virtual-table pointers and function entry/exit.
 *
 * Each load or store the instrumented code performs is one access of its page, whatever its
 * width; unaligned, volatile and "_pc" variants count the same. A range (a struct copy the
 * compiler inlines, __tsan_memcpy and friends) counts one access per 8-byte word it overlaps.
 */
#include <stddef.h>
#include <stdint.h>

#include "inst.h"

#define NL_IP() __builtin_return_address(0)
/* For hooks whose one nl_access is their last act: see nl_inst_sample in inst.h. */
#define NL_TAIL_IP NULL
/* A range hook stays a function in every build: nl_inst_range needs the instruction address,
 * which only a hook that is not inlined can give. */
#define NL_RANGE_HOOK NL_EXPORT __attribute__((noinline))

/* One plain access whose call is the hook's last act, so its sampling path is a tail call. */
#define NL_ONE(name, is_write, size)                                                            \
    NL_HOOK void name(void *a) { nl_access((uintptr_t)a, is_write, size, NL_TAIL_IP); }

#define NL_PLAIN(size)                                                                          \
    NL_ONE(__tsan_read##size, 0, size)                                                          \
    NL_ONE(__tsan_write##size, 1, size)                                                         \
    NL_ONE(__tsan_unaligned_read##size, 0, size)                                                \
    NL_ONE(__tsan_unaligned_write##size, 1, size)                                               \
    NL_ONE(__tsan_volatile_read##size, 0, size)                                                 \
    NL_ONE(__tsan_volatile_write##size, 1, size)                                                \
    NL_ONE(__tsan_unaligned_volatile_read##size, 0, size)                                       \
    NL_ONE(__tsan_unaligned_volatile_write##size, 1, size)                                      \
    NL_HOOK void __tsan_read##size##_pc(void *a, void *pc)                                      \
    {                                                                                           \
        nl_access((uintptr_t)a, 0, size, pc);                                                   \
    }                                                                                           \
    NL_HOOK void __tsan_write##size##_pc(void *a, void *pc)                                     \
    {                                                                                           \
        nl_access((uintptr_t)a, 1, size, pc);                                                   \
    }                                                                                           \
    /* A compound access (x += 1 with clang's -tsan-compound-read-before-write). */             \
    NL_HOOK void __tsan_read_write##size(void *a)                                               \
    {                                                                                           \
        nl_access((uintptr_t)a, 0, size, NL_HOOK_IP());                                         \
        nl_access((uintptr_t)a, 1, size, NL_HOOK_IP());                                         \
    }                                                                                           \
    NL_HOOK void __tsan_unaligned_read_write##size(void *a)                                     \
    {                                                                                           \
        nl_access((uintptr_t)a, 0, size, NL_HOOK_IP());                                         \
        nl_access((uintptr_t)a, 1, size, NL_HOOK_IP());                                         \
    }

NL_PLAIN(1)
NL_PLAIN(2)
NL_PLAIN(4)
NL_PLAIN(8)
NL_PLAIN(16)

NL_RANGE_HOOK void __tsan_read_range(void *a, unsigned long size)
{
    nl_inst_range((uintptr_t)a, size, 0, NL_IP());
}

NL_RANGE_HOOK void __tsan_write_range(void *a, unsigned long size)
{
    nl_inst_range((uintptr_t)a, size, 1, NL_IP());
}

NL_RANGE_HOOK void __tsan_read_range_pc(void *a, unsigned long size, void *pc)
{
    nl_inst_range((uintptr_t)a, size, 0, pc);
}

NL_RANGE_HOOK void __tsan_write_range_pc(void *a, unsigned long size, void *pc)
{
    nl_inst_range((uintptr_t)a, size, 1, pc);
}

NL_HOOK void __tsan_vptr_read(void **vptr_p)
{
    nl_access((uintptr_t)vptr_p, 0, sizeof(void *), NL_TAIL_IP);
}

NL_HOOK void __tsan_vptr_update(void **vptr_p, void *new_val)
{
    (void)new_val;
    nl_access((uintptr_t)vptr_p, 1, sizeof(void *), NL_TAIL_IP);
}

/* Exact counting alone, of @p words 8-byte words at @p a: what LLVM's pass (llvm_plugin.cc)
 * calls for each access of a run in a thread that only counts, having read the mode word once
 * for the run. Never called otherwise. */
NL_HOOK void __numalens_count_read(void *a, unsigned long words)
{
    nl_count(nl_ith, (uintptr_t)a, 0, words);
}

NL_HOOK void __numalens_count_write(void *a, unsigned long words)
{
    nl_count(nl_ith, (uintptr_t)a, 1, words);
}

/* Function entry and exit carry no access; the sampled IP already names the code. */
NL_HOOK void __tsan_func_entry(void *call_pc) { (void)call_pc; }
NL_HOOK void __tsan_func_exit(void) {}

/* Called by the constructor of every instrumented module (and from .preinit_array by gcc's
 * libtsan_preinit.o): the real set-up waits for the first access, when libc is ready. */
NL_EXPORT void __tsan_init(void) {}
NL_EXPORT void __tsan_flush_memory(void) {}
NL_EXPORT void __tsan_ignore_thread_begin(void) {}
NL_EXPORT void __tsan_ignore_thread_end(void) {}
