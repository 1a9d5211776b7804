/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file hooks.c
 * @brief Finding the wrapped functions, the bootstrap pool, and the runtime's start and exit.
 *
 * dlsym() may itself call malloc/calloc before we know where the real ones are; those calls are
 * served from a static pool (never freed: there are only a few). The constructor reads the
 * configuration once; without NUMALENS_DIR it returns and every shim is a plain forwarder.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "nl_shims.h"

struct nl_real_fns nl_real;

/* Marks this module as the runtime: its statics (the site table, the rule cache, the pools) are
 * not the program's objects, and the recorder leaves out the statics of a module with this
 * section (src/symbols.rs). */
__attribute__((used, section("numalens_runtime"))) static const char nl_runtime_marker[16] =
    "numalens-rt-1";

_Alignas(64) unsigned char nl_boot_pool[NL_BOOT_SIZE];
static atomic_size_t nl_boot_used;

void *nl_boot_alloc(size_t size, size_t align, int zero)
{
    (void)zero; /* the pool is static, hence zeroed, and never reused */
    if (align < 16)
        align = 16;
    if (align > 4096 || size > NL_BOOT_SIZE)
        return NULL;
    size_t need = size + align + 16, at = atomic_fetch_add(&nl_boot_used, need);
    if (at + need > NL_BOOT_SIZE)
        return NULL;
    uintptr_t base = (uintptr_t)nl_boot_pool + at + 16;
    uintptr_t p = (base + align - 1) & ~(uintptr_t)(align - 1);
    memcpy((void *)(p - sizeof(size_t)), &size, sizeof size);
    return (void *)p;
}

size_t nl_boot_size(const void *p)
{
    size_t s;
    memcpy(&s, (const char *)p - sizeof(size_t), sizeof s);
    return s;
}

#define NL_SYM(field, name) *(void **)&r.field = dlsym(RTLD_NEXT, name)

void nl_resolve(void)
{
    struct nl_real_fns r;
    if (nl_real.free)
        return;
    nl_self.resolving = 1;
    memset(&r, 0, sizeof r);
    NL_SYM(malloc, "malloc");
    NL_SYM(calloc, "calloc");
    NL_SYM(realloc, "realloc");
    NL_SYM(free, "free");
    NL_SYM(posix_memalign, "posix_memalign");
    NL_SYM(aligned_alloc, "aligned_alloc");
    NL_SYM(memalign, "memalign");
    NL_SYM(valloc, "valloc");
    NL_SYM(pvalloc, "pvalloc");
    NL_SYM(usable, "malloc_usable_size");
    NL_SYM(mmap, "mmap");
    NL_SYM(mmap64, "mmap64");
    NL_SYM(munmap, "munmap");
    NL_SYM(mremap, "mremap");
    NL_SYM(pthread_create, "pthread_create");
    NL_SYM(pthread_exit, "pthread_exit");
    NL_SYM(fork, "fork");
    NL_SYM(daemon, "daemon");
    NL_SYM(execve, "execve");
    NL_SYM(execvpe, "execvpe");
    NL_SYM(fexecve, "fexecve");
    NL_SYM(execveat, "execveat");
    NL_SYM(dlopen, "dlopen");
    NL_SYM(exit_now, "_exit");
    NL_SYM(close, "close");
    NL_SYM(dup, "dup");
    NL_SYM(dup2, "dup2");
    NL_SYM(dup3, "dup3");
    NL_SYM(fcntl, "fcntl");
    NL_SYM(fcntl64, "fcntl64");
    NL_SYM(close_range, "close_range");
    NL_SYM(closefrom, "closefrom");
    nl_self.resolving = 0;
    if (!r.malloc || !r.free || !r.calloc || !r.realloc || !r.usable)
        return; /* keep forwarding to the pool: nothing else is possible */
    /* Publish free last: it is the "resolved" flag the shims test. */
    void (*f)(void *) = r.free;
    r.free = NULL;
    nl_real = r;
    __atomic_store_n(&nl_real.free, f, __ATOMIC_RELEASE);
}

/** The main thread's start and stack, without its TLS blocks (which take the loader's lock). */
void nl_emit_main_thread_start(void)
{
    uint64_t lo = 0, size = 0;
    nl_main_stack(&lo, &size);
    nl_emit(NL_REC_THREAD_START, 0, 0, 0, lo, size, 0);
    if (size)
        nl_emit(NL_REC_STACK, lo, size, 0, 0, 0, 0);
}

static void nl_emit_main_thread(void)
{
    nl_emit_main_thread_start();
    nl_tls_emit(0);
}

/** What every process image (and fork child) reports first. */
void nl_emit_process_start(void)
{
    nl_modules_emit_new();
    nl_emit_main_thread();
}

__attribute__((constructor)) static void nl_init(void)
{
    struct nl_config cfg;
    nl_resolve();
    if (!nl_real.free)
        return;
    /* Known even when inert: free() then rules out every block with one compare (min_object is
     * UINT64_MAX) instead of a second flag. */
    Dl_info info;
    nl_self.guard++;
    if (dladdr((void *)nl_real.malloc, &info) && info.dli_fname && strstr(info.dli_fname, "/libc.so"))
        nl_glibc_chunks = 1;
    nl_self.guard--;
    if (!nl_config_load(&cfg, getenv))
        return;
    nl_self.guard++;
    nl_fd_shims_init(getenv);
    uint64_t lo, hi;
    if (nl_module_range((const void *)nl_init, &lo, &hi) == 0)
        nl_unwind_set_skip(lo, hi);
    uint64_t stack_lo, stack_size;
    struct rlimit limit;
    if (nl_main_stack(&stack_lo, &stack_size) == 0 && getrlimit(RLIMIT_STACK, &limit) == 0) {
        /* The main stack grows down to its limit below its top. */
        uint64_t top = stack_lo + stack_size, room = limit.rlim_cur;
        nl_stack_set_bounds(room == RLIM_INFINITY || room > top ? 0 : top - room, top);
    }
    if (nl_core_start(&cfg, (uint32_t)getppid()) == 0) {
        nl_fork_watch();
        nl_emit_process_start();
        if (cfg.signals)
            nl_signals_install();
        if (cfg.plan[0] && cfg.plan_parent == (uint64_t)getppid())
            nl_plan_start(cfg.plan);
    }
    nl_self.guard--;
}

/** The normal-exit path: flush everything, page nodes if asked, END. */
void nl_finish(void)
{
    if (!atomic_load(&nl_g.on))
        return;
    nl_self.guard++;
    if (nl_g.cfg.page_nodes) {
        nl_flush_all();
        nl_pages_emit("/proc/self/maps");
    }
    nl_core_finish();
    atomic_store(&nl_g.on, 0);
    nl_g.min_object = UINT64_MAX;
    nl_self.guard--;
}

__attribute__((destructor)) static void nl_fini(void)
{
    nl_finish();
}
