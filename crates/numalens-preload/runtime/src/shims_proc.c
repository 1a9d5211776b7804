/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file shims_proc.c
 * @brief The interposed thread and process functions: pthread_create/pthread_exit, fork,
 * the exec family (execve, execv, execvp, execvpe, execl, execlp, execle, fexecve, execveat),
 * dlopen and _exit.
 *
 * Logical thread ids are handed out by pthread_create in the creating thread, so they follow
 * creation order (main thread 0). The exec wrappers pass NUMALENS_EXEC_COUNT+1 to the new image
 * in a copy of its environment and leave LD_PRELOAD alone, so the runtime follows into it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nl_shims.h"

void nl_emit_process_start(void);
void nl_emit_main_thread_start(void);
void nl_finish(void);

struct nl_start {
    void *(*fn)(void *);
    void *arg;
    int32_t logical, parent_logical;
    int32_t parent_tid;
};

static void nl_thread_begin(const struct nl_start *s)
{
    nl_self.guard++;
    if (nl_thread_attach(s->logical) == 0) {
        uint64_t lo = 0, size = 0;
        pthread_attr_t attr;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            void *addr;
            size_t sz;
            if (pthread_attr_getstack(&attr, &addr, &sz) == 0) {
                lo = (uint64_t)addr;
                size = sz;
                nl_stack_set_bounds(lo, lo + size);
            }
            pthread_attr_destroy(&attr);
        }
        nl_emit(NL_REC_THREAD_START, (uint64_t)s->logical, (uint64_t)s->fn,
                (uint64_t)s->parent_tid, lo, size, (uint64_t)(int64_t)s->parent_logical);
        if (size)
            nl_emit(NL_REC_STACK, lo, size, (uint64_t)s->logical, 0, 0, 0);
        nl_tls_emit(s->logical);
        nl_plan_thread(s->logical);
    }
    nl_self.guard--;
}

static void nl_thread_end(void)
{
    if (nl_self.dead || !atomic_load(&nl_g.on))
        return;
    nl_self.guard++;
    if (nl_self.buf)
        nl_emit(NL_REC_THREAD_EXIT, (uint64_t)(int64_t)nl_self.logical, 0, 0, 0, 0, 0);
    nl_thread_detach();
    nl_self.guard--;
}

static void *nl_thread_main(void *p)
{
    struct nl_start s = *(struct nl_start *)p;
    nl_real.free(p);
    nl_thread_begin(&s);
    void *r = s.fn(s.arg);
    nl_thread_end();
    return r;
}

NL_EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
                             void *arg)
{
    if (nl_unlikely(!nl_real.free))
        nl_resolve();
    if (!atomic_load(&nl_g.on))
        return nl_real.pthread_create(t, attr, fn, arg);
    struct nl_start *s = nl_real.malloc(sizeof *s);
    if (!s)
        return nl_real.pthread_create(t, attr, fn, arg);
    s->fn = fn;
    s->arg = arg;
    s->parent_tid = nl_gettid();
    s->parent_logical = nl_self.logical;
    int e = errno;
    nl_self.guard++;
    int32_t logical = nl_thread_create_note();
    nl_self.guard--;
    errno = e;
    s->logical = logical;
    int rc = nl_real.pthread_create(t, attr, nl_thread_main, s);
    if (rc != 0) {
        nl_real.free(s);
        e = errno;
        nl_self.guard++;
        nl_thread_create_failed(logical, rc);
        nl_self.guard--;
        errno = e;
    }
    return rc;
}

NL_EXPORT void pthread_exit(void *ret)
{
    if (nl_unlikely(!nl_real.free))
        nl_resolve();
    nl_thread_end();
    nl_real.pthread_exit(ret);
}

/** A fork child makes the runtime's state its own: its log, empty buffers, its sites and modules
 * written anew. Run by the pthread_atfork handler below, or on the child's first record when the
 * fork ran no handler (nl_core_fork_seen). */
static void nl_fork_child(int known)
{
    int e = errno;
    nl_self.guard++;
    nl_plan_forget();
    nl_sites_reset();
    nl_modules_reset();
    /* After a fork no handler saw, a thread of the parent may have held the loader's lock, which
     * listing the modules (dl_iterate_phdr) takes: the child would hang where natively it does
     * not. It lists none then, and the recorder gives it its parent's. */
    if (nl_core_after_fork() == 0) {
        if (known)
            nl_emit_process_start();
        else
            nl_emit_main_thread_start();
    }
    nl_self.guard--;
    errno = e;
}

/** Writes out every thread's records: what a process did before it forked reaches its log even
 * when it then leaves by _exit, as daemonising parents do. */
static void nl_flush_before_fork(void)
{
    if (!atomic_load(&nl_g.on))
        return;
    int e = errno;
    /* Inside the runtime (a signal handler that interrupted it, and forks or execs) this thread's
     * own buffer may be locked by the code it interrupted: only the flush that skips a locked
     * buffer is safe then. */
    int inside = nl_self.guard > 0;
    nl_self.guard++;
    if (!inside) {
        nl_small_emit();
        nl_flush_self();
    }
    nl_flush_all();
    nl_self.guard--;
    errno = e;
}

/* Every fork that goes through libc runs this, daemon(3)'s included, whose fork is internal to
 * libc and never reaches the fork() below. */
static void nl_atfork_child(void)
{
    nl_core_fork_seen(1);
}

void nl_fork_watch(void)
{
    nl_core_on_fork(nl_fork_child);
    pthread_atfork(nl_flush_before_fork, NULL, nl_atfork_child);
}

/* glibc's daemon() forks inside libc, and its parent leaves by _exit(0), past every exit path:
 * the log says so first, so that a first process that daemonised is not taken for one killed. */
NL_EXPORT int daemon(int nochdir, int noclose)
{
    if (nl_unlikely(!nl_real.free))
        nl_resolve();
    if (!nl_real.daemon) {
        errno = ENOSYS;
        return -1;
    }
    if (atomic_load(&nl_g.on)) {
        nl_flush_before_fork();
        nl_write_now(NL_REC_DAEMON, 0, 0, 0);
    }
    uint32_t pid = nl_g.pid;
    int rc = nl_real.daemon(nochdir, noclose);
    if (rc != 0 && atomic_load(&nl_g.on) && (uint32_t)getpid() == pid) {
        /* The fork failed and this process goes on: DAEMON is not its last record. */
        int e = errno;
        nl_self.guard++;
        nl_emit(NL_REC_FORK, 0, 0, 0, 0, 0, 0);
        nl_self.guard--;
        errno = e;
    }
    return rc;
}

/* The child's side is the pthread_atfork handler's; the parent writes which child it made. */
NL_EXPORT pid_t fork(void)
{
    if (nl_unlikely(!nl_real.free))
        nl_resolve();
    if (!atomic_load(&nl_g.on))
        return nl_real.fork();
    pid_t pid = nl_real.fork();
    if (pid > 0) {
        int e = errno;
        nl_self.guard++;
        nl_emit(NL_REC_FORK, (uint64_t)pid, 0, 0, 0, 0, 0);
        nl_self.guard--;
        errno = e;
    }
    return pid;
}

/* ---- exec ---- */

static const char nl_exec_var[] = "NUMALENS_EXEC_COUNT=";

static size_t nl_env_count(char *const envp[])
{
    size_t n = 0;
    while (envp && envp[n])
        n++;
    return n;
}

/** @p envp (@p n entries) with NUMALENS_EXEC_COUNT replaced by @p entry, into @p env (room for
 * n + 2). */
static char **nl_env_fill(char **env, char *const envp[], size_t n, char *entry)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(envp[i], nl_exec_var, sizeof nl_exec_var - 1) != 0)
            env[k++] = envp[i];
    env[k++] = entry;
    env[k] = NULL;
    return env;
}

/* An environment up to this many entries is copied on the stack: in a vfork child, which shares
 * its parent's memory, a mapping made before a successful exec would stay in the parent. */
#define NL_ENV_ON_STACK 512 /* 4 KiB: threads with small stacks exec too */

static void nl_exec_entry(char *out)
{
    uint64_t v = nl_g.cfg.exec_count + 1;
    char tmp[24];
    int n = 0;
    memcpy(out, nl_exec_var, sizeof nl_exec_var - 1);
    out += sizeof nl_exec_var - 1;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *out++ = tmp[--n];
    *out = '\0';
}

static void nl_before_exec(const char *path)
{
    if (nl_foreign_process())
        return;
    if (nl_self.guard > 0) {
        /* Inside the runtime: what can be written safely, and EXEC straight to the file. */
        nl_flush_before_fork();
        nl_write_now(NL_REC_EXEC, nl_g.cfg.exec_count + 1, 0, 0);
        return;
    }
    nl_self.guard++;
    nl_emit_bytes(NL_REC_EXEC, nl_g.cfg.exec_count + 1, 0, 0, 0, 0, 0, path,
                  path ? strnlen(path, NL_MAX_PATH_PAYLOAD) + 1 : 0);
    nl_small_emit();
    nl_flush_self();
    nl_flush_all();
    nl_self.guard--;
}

/** One exec call: which function, and its arguments besides the environment. */
struct nl_exec_call {
    enum { NL_EXECVE, NL_EXECVPE, NL_FEXECVE, NL_EXECVEAT } fn;
    int fd; /* fexecve, execveat */
    const char *path;
    char *const *argv;
    int flags; /* execveat */
};

static int nl_exec_real(const struct nl_exec_call *c, char *const envp[])
{
    switch (c->fn) {
    case NL_EXECVPE:
        return nl_real.execvpe(c->path, c->argv, envp);
    case NL_FEXECVE:
        return nl_real.fexecve(c->fd, c->argv, envp);
    case NL_EXECVEAT:
        if (nl_real.execveat)
            return nl_real.execveat(c->fd, c->path, c->argv, envp, c->flags);
        return (int)syscall(SYS_execveat, c->fd, c->path, c->argv, envp, c->flags);
    default:
        return nl_real.execve(c->path, c->argv, envp);
    }
}

static int nl_exec(const struct nl_exec_call *c, char *const envp[])
{
    if (nl_unlikely(!nl_real.free))
        nl_resolve();
    if (!atomic_load(&nl_g.on))
        return nl_exec_real(c, envp);
    char entry[sizeof nl_exec_var + 24];
    nl_exec_entry(entry);
    size_t n = nl_env_count(envp);
    nl_before_exec(c->path);
    if (n <= NL_ENV_ON_STACK) {
        char *env[n + 2];
        return nl_exec_real(c, nl_env_fill(env, envp, n, entry));
    }
    size_t bytes = (n + 2) * sizeof(char *);
    char **env = (char **)syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (env == MAP_FAILED)
        return nl_exec_real(c, envp);
    int rc = nl_exec_real(c, nl_env_fill(env, envp, n, entry));
    int e = errno;
    syscall(SYS_munmap, env, bytes);
    errno = e;
    return rc;
}

NL_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    struct nl_exec_call c = {.fn = NL_EXECVE, .path = path, .argv = argv};
    return nl_exec(&c, envp);
}

NL_EXPORT int execv(const char *path, char *const argv[])
{
    return execve(path, argv, environ);
}

NL_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    struct nl_exec_call c = {.fn = NL_EXECVPE, .path = file, .argv = argv};
    return nl_exec(&c, envp);
}

NL_EXPORT int execvp(const char *file, char *const argv[])
{
    return execvpe(file, argv, environ);
}

NL_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    struct nl_exec_call c = {.fn = NL_FEXECVE, .fd = fd, .argv = argv};
    return nl_exec(&c, envp);
}

NL_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                       int flags)
{
    struct nl_exec_call c = {.fn = NL_EXECVEAT, .fd = dirfd, .path = path, .argv = argv, .flags = flags};
    return nl_exec(&c, envp);
}

/* The list forms: libc's own execl/execlp/execle call its execve directly, past the shims above,
 * so the new image was started without EXEC and under the old exec count. Their argument lists
 * are copied into an array on the stack, as libc does. */
#define NL_ARGV_FROM_LIST(first, ap, argv)                                                         \
    size_t n_ = 1;                                                                                 \
    va_start(ap, first);                                                                           \
    while (va_arg(ap, char *))                                                                     \
        n_++;                                                                                      \
    va_end(ap);                                                                                    \
    char *argv[n_ + 1];                                                                            \
    argv[0] = (char *)first;                                                                       \
    va_start(ap, first);                                                                           \
    for (size_t i_ = 1; i_ <= n_; i_++)                                                            \
        argv[i_] = va_arg(ap, char *);

NL_EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    NL_ARGV_FROM_LIST(arg, ap, argv);
    va_end(ap);
    return execve(path, argv, environ);
}

NL_EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    NL_ARGV_FROM_LIST(arg, ap, argv);
    va_end(ap);
    return execvpe(file, argv, environ);
}

NL_EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    NL_ARGV_FROM_LIST(arg, ap, argv);
    char *const *envp = va_arg(ap, char *const *); /* after the NULL ending the list */
    va_end(ap);
    return execve(path, argv, envp);
}

/* ---- dlopen, _exit ---- */

NL_EXPORT void *dlopen(const char *file, int mode)
{
    if (nl_unlikely(!nl_real.free))
        nl_resolve();
    void *h = nl_real.dlopen(file, mode);
    if (h)
        nl_rules_flush(); /* the new module may sit where an unloaded one was */
    if (h && atomic_load(&nl_g.on) && !nl_self.guard) {
        nl_self.guard++;
        nl_modules_emit_new();
        nl_self.guard--;
    }
    return h;
}

NL_EXPORT void _exit(int status)
{
    if (nl_unlikely(!nl_real.free))
        nl_resolve();
    if (!nl_foreign_process())
        nl_finish();
    if (nl_real.exit_now)
        nl_real.exit_now(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}
