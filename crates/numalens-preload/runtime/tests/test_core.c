/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/**
 * @file test_core.c
 * @brief Tests of the runtime's core linked directly (no LD_PRELOAD, no shims).
 *
 * Modes: `unit` runs self-checking unit tests; `write DIR` writes one record of every kind with
 * known values (the Rust round-trip test reads them back); `threads DIR N K` has N threads emit
 * K records each through their own buffers; `owned DIR` checks the event file's descriptor against
 * a program that takes it (owned_fd.c); `raw-fork DIR` forks behind the core's back; `create DIR`
 * announces threads in the creator's log; `env-table` prints the configuration table.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nl_check.h"
#include "nl_internal.h"
#include "numalens_fd.h"

static const char *fake_env[][2] = {
    {"NUMALENS_DIR", "/tmp/x"},
    {"NUMALENS_MIN_OBJECT", "64k"},
    {"NUMALENS_FRAMES", "99"},
    {"NUMALENS_PAGE_NODES", "junk"},
};

static char *fake_get(const char *name)
{
    for (size_t i = 0; i < sizeof fake_env / sizeof fake_env[0]; i++)
        if (strcmp(fake_env[i][0], name) == 0)
            return (char *)fake_env[i][1];
    return NULL;
}

static void test_config(void)
{
    uint64_t v;
    CHECK(nl_parse_u64("4096", &v) == 0 && v == 4096);
    CHECK(nl_parse_u64("2m", &v) == 0 && v == 2u << 20);
    CHECK(nl_parse_u64("", &v) == -1);
    CHECK(nl_parse_u64("12x", &v) == -1);
    CHECK(nl_parse_u64("99999999999999999999999", &v) == -1);
    struct nl_config c;
    CHECK(nl_config_load(&c, fake_get) == 1);
    CHECK(strcmp(c.dir, "/tmp/x") == 0);
    CHECK(c.min_object == 65536);
    CHECK(c.frames == NL_MAX_FRAMES); /* out of range: default */
    CHECK(c.page_nodes == 0);         /* malformed: default */
    CHECK(c.signals == 1);
    CHECK(nl_config_load(&c, NULL) == 0 && c.min_object == 4096);
}

static void test_maps_line(void)
{
    char line[] = "7f0000001000-7f0000003000 rw-p 00000000 00:00 0          [stack]";
    struct nl_map m;
    CHECK(nl_maps_parse_line(line, &m) == 0);
    CHECK(m.lo == 0x7f0000001000ull && m.hi == 0x7f0000003000ull);
    CHECK(strcmp(m.perms, "rw-p") == 0 && strcmp(m.path, "[stack]") == 0);
    char anon[] = "55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0 ";
    CHECK(nl_maps_parse_line(anon, &m) == 0 && m.path[0] == '\0');
    char bad[] = "zzz";
    CHECK(nl_maps_parse_line(bad, &m) != 0);
    uint64_t lo, size;
    CHECK(nl_main_stack(&lo, &size) == 0 && size > 0);
    int here;
    CHECK((uint64_t)&here >= lo && (uint64_t)&here < lo + size);
}

static void test_build_id_note(void)
{
    unsigned char note[64];
    Elf64_Nhdr other = {4, 4, 1}, id = {4, 5, NT_GNU_BUILD_ID};
    size_t at = 0;
    memcpy(note + at, &other, sizeof other);
    at += sizeof other;
    memcpy(note + at, "GNU\0abcd", 8);
    at += 8;
    memcpy(note + at, &id, sizeof id);
    at += sizeof id;
    memcpy(note + at, "GNU\0\x01\x02\x03\x04\x05\0\0", 12);
    at += 12;
    uint8_t out[64];
    CHECK(nl_note_build_id(note, at, out, sizeof out) == 5 && out[0] == 1 && out[4] == 5);
    CHECK(nl_note_build_id(note, 10, out, sizeof out) == 0); /* truncated note */
}

static void test_site_hash(void)
{
    uint64_t a[3] = {1, 2, 3}, b[3] = {1, 2, 4};
    CHECK(nl_site_hash(a, 3) != nl_site_hash(b, 3));
    CHECK(nl_site_hash(a, 3) == nl_site_hash(a, 3));
    CHECK(nl_site_hash(a, 2) != nl_site_hash(a, 3));
    CHECK(nl_site_hash(NULL, 0) != 0);
}

static int unit(void)
{
    test_config();
    test_maps_line();
    test_build_id_note();
    test_site_hash();
    /* Sites are written once; tracing off: nothing breaks. */
    uint64_t f[2] = {10, 20};
    CHECK(nl_site_note(77, f, 2) == 1);
    CHECK(nl_site_note(77, f, 2) == 0);
    nl_sites_reset();
    CHECK(nl_site_note(77, f, 2) == 1);
    CHECK(nl_reserve(1) == NULL);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    else
        printf("ok\n");
    return failures ? 1 : 0;
}

static int start(const char *dir, uint64_t exec_count)
{
    struct nl_config c;
    nl_config_load(&c, NULL);
    strcpy(c.dir, dir);
    c.exec_count = exec_count;
    c.min_object = 1234;
    return nl_core_start(&c, 4321);
}

/* The values here are repeated in tests/runtime_events_roundtrip.rs. */
static int write_all_kinds(const char *dir)
{
    if (start(dir, 3) != 0)
        return 2;
    nl_emit(NL_REC_ALLOC, 0x1000, 5000, 64, 0xabc, NL_FN_POSIX_MEMALIGN, 0);
    nl_emit(NL_REC_FREE, 0x1000, 0, 0, 0, 0, 0);
    nl_emit(NL_REC_REALLOC, 0x2000, 9000, 0x1000, 0xabd, 0, 0);
    nl_emit(NL_REC_MMAP, 0x7000, 1 << 20, 3 | (uint64_t)0x22 << 32, 0xabe, (uint64_t)(int64_t)-1, 0);
    nl_emit(NL_REC_MUNMAP, 0x7000, 1 << 20, 0, 0, 0, 0);
    nl_emit(NL_REC_MREMAP, 0x9000, 2 << 20, 0x7000, 1 << 20, 0, 0);
    nl_emit(NL_REC_THREAD_START, 2, 0x401000, 111, 0x7ff000, 8 << 20, 0);
    nl_emit(NL_REC_THREAD_EXIT, 2, 0, 0, 0, 0, 0);
    nl_emit(NL_REC_FORK, 5555, 0, 0, 0, 0, 0);
    const char *path = "/usr/bin/true";
    nl_emit_bytes(NL_REC_EXEC, 4, 0, 0, 0, 0, 0, path, strlen(path) + 1);
    uint8_t mod[64 + 200];
    memset(mod, 0, sizeof mod);
    for (int i = 0; i < 20; i++)
        mod[i] = (uint8_t)(0xa0 + i);
    memset(mod + 64, 'x', 150); /* a path spanning three payload records */
    mod[64] = '/';
    nl_emit_bytes(NL_REC_MODULE, 0x400000, 0x400000, 0x404000, 20, 1, 0, mod, 64 + 151);
    nl_emit(NL_REC_STACK, 0x7ff000, 8 << 20, 0, 0, 0, 0);
    nl_emit(NL_REC_TLS, 0x7fe000, 128, 1, 0, 0, 0);
    uint64_t frames[3] = {0x401234, 0x401567, 0x7f0000001000};
    nl_site_note(0xabc, frames, 3);
    struct nl_run r = {0, 0, 4096, 0};
    for (uint64_t p = 0; p < 6; p++)
        nl_run_feed(&r, 0x10000 + p * 4096, p < 4 ? 0 : -ENOENT);
    nl_run_feed(&r, 0x40000, 0); /* not adjacent: a new run */
    nl_run_end(&r);
    nl_self.small_n += 10;
    nl_self.small_bytes += 1000;
    nl_small_emit();
    nl_emit(999, 1, 2, 3, 4, 5, 6); /* a kind the reader does not know */
    nl_flush_self();
    struct nl_record s;
    memset(&s, 0, sizeof s);
    s.kind = NL_REC_SIGNAL;
    s.a = 11;
    s.b = 0x10;
    s.c = 1;
    nl_write_direct(&s);
    nl_core_finish();
    /* Real modules, TLS and stack of this process: checked loosely on the Rust side. */
    nl_modules_emit_new();
    nl_tls_emit(0);
    nl_flush_self();
    return 0;
}

/* ---- owned descriptors (owned_fd.c) ---- */

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void path_in(char *out, size_t cap, const char *dir, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

/* How many descriptors open() gives before EMFILE (all closed again). */
static int descriptors_left(void)
{
    int fds[4096], n = 0;
    while (n < 4096 && (fds[n] = open("/dev/null", O_RDONLY)) >= 0)
        n++;
    for (int i = 0; i < n; i++)
        close(fds[i]);
    return n;
}

/* The descriptor sits above the soft limit and does not count against it. */
static void test_owned_out_of_reach(struct nl_owned *o, const char *path)
{
    struct rlimit lim, wide;
    getrlimit(RLIMIT_NOFILE, &wide);
    CHECK(wide.rlim_max > 128); /* room to test in */
    lim = wide;
    lim.rlim_cur = 64;
    CHECK(setrlimit(RLIMIT_NOFILE, &lim) == 0);
    int left = descriptors_left();
    CHECK(nl_owned_create(o, path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0644) == 0);
    CHECK(o->fd >= 64);
    getrlimit(RLIMIT_NOFILE, &lim);
    CHECK(lim.rlim_cur == 64); /* put back */
    CHECK(descriptors_left() == left);
    setrlimit(RLIMIT_NOFILE, &wide); /* a program may raise it again, and reach ours */
}

/* A raw close and a raw dup2 of someone else's file onto our number: the write goes to ours. */
static void test_owned_taken(struct nl_owned *o, const char *path, const char *victim)
{
    int ours = o->fd;
    syscall(SYS_close, ours);
    int v = open(victim, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(v >= 0 && syscall(SYS_dup2, v, ours) == ours);
    CHECK(nl_owned_write(o, "abc", 3) == 0);
    CHECK(file_size(victim) == 0 && file_size(path) == 3);
    CHECK(o->fd != ours && o->reopens == 1);
    close(v);
    syscall(SYS_close, ours);
    /* Stepping aside: the number is freed for the program, the file stays ours. */
    int before = o->fd;
    nl_owned_step_aside(o, before);
    CHECK(o->fd >= 0 && o->fd != before && fcntl(before, F_GETFD) == -1 && errno == EBADF);
    CHECK(nl_owned_write(o, "de", 2) == 0 && file_size(path) == 5);
    CHECK(nl_owned_is(o, o->fd) && !nl_owned_is(o, before));
}

/* Past a soft RLIMIT_FSIZE the write makes room (no SIGXFSZ); past the hard one it fails. */
static void test_owned_fsize(struct nl_owned *o, const char *path)
{
    struct rlimit lim;
    getrlimit(RLIMIT_FSIZE, &lim);
    lim.rlim_cur = 4;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    char block[100];
    memset(block, 'z', sizeof block);
    CHECK(nl_owned_write(o, block, sizeof block) == 0 && file_size(path) == 105);
    getrlimit(RLIMIT_FSIZE, &lim);
    CHECK(lim.rlim_cur == 4);
    lim.rlim_max = 4; /* irreversible: the last check of this process */
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    errno = 0;
    CHECK(nl_owned_write(o, block, sizeof block) == -1 && errno == EFBIG);
    CHECK(file_size(path) == 105);
}

/* A file removed (the recorder's end) is closed at the next write, for good. */
static void test_owned_removed(const char *path)
{
    struct nl_owned o;
    memset(&o, 0, sizeof o);
    CHECK(nl_owned_create(&o, path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0644) == 0);
    CHECK(nl_owned_write(&o, "abc", 3) == 0);
    int fd = o.fd;
    CHECK(unlink(path) == 0);
    errno = 0;
    CHECK(nl_owned_write(&o, "def", 3) == -1 && errno == ENOENT);
    CHECK(o.fd == -1 && fcntl(fd, F_GETFD) == -1);
    CHECK(nl_owned_write(&o, "ghi", 3) == -1 && access(path, F_OK) != 0);
}

/* Where a descriptor goes when there is no room above the soft limit: in the top quarter below it
 * (at most 1024 numbers), never among 0-2; above it when there is room and it is not too far. */
static void test_fd_floor(void)
{
    struct rlimit l = {64, 64};
    CHECK(nl_fd_floor(&l, 0) == 48);
    l.rlim_cur = 8;
    CHECK(nl_fd_floor(&l, 0) == 6);
    l.rlim_cur = 2;
    CHECK(nl_fd_floor(&l, 0) == 3);
    l.rlim_cur = 1u << 20;
    CHECK(nl_fd_floor(&l, 0) == 16384 - 1024 && nl_fd_floor(&l, 1) == 16384 - 1024);
    l.rlim_cur = 1024;
    CHECK(nl_fd_floor(&l, 1) == 1024 && nl_fd_floor(&l, 0) == 768);
}

/* The limits lock: a thread may take it again inside itself, signals are blocked while it is held
 * and their mask put back after, and a holder that is no thread of this process (a word copied by
 * a fork) holds nothing. */
static void test_limits_lock(void)
{
    struct nl_limits_hold outer, inner;
    sigset_t before, during;
    sigprocmask(SIG_SETMASK, NULL, &before);
    nl_fd_limits_lock(&outer);
    CHECK(outer.taken == 1);
    sigprocmask(SIG_SETMASK, NULL, &during);
    CHECK(sigismember(&during, SIGTERM) && sigismember(&during, SIGINT));
    nl_fd_limits_lock(&inner);
    CHECK(inner.taken == 0);
    nl_fd_limits_unlock(&inner);
    CHECK(atomic_load(nl_fd_limits_word()) == (int)syscall(SYS_gettid));
    nl_fd_limits_unlock(&outer);
    CHECK(atomic_load(nl_fd_limits_word()) == 0);
    sigprocmask(SIG_SETMASK, NULL, &during);
    CHECK(sigismember(&during, SIGTERM) == sigismember(&before, SIGTERM));
    pid_t gone = fork();
    if (gone == 0)
        _exit(0);
    waitpid(gone, NULL, 0);
    atomic_store(nl_fd_limits_word(), (int)gone);
    nl_fd_limits_lock(&outer); /* returns: does not wait for the gone holder */
    CHECK(outer.taken == 1);
    nl_fd_limits_unlock(&outer);
}

/* A note goes in place, though the file is O_APPEND. */
static void test_owned_note(const char *path)
{
    struct nl_owned o;
    memset(&o, 0, sizeof o);
    CHECK(nl_owned_create(&o, path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0644) == 0);
    CHECK(nl_owned_write(&o, "xxxxxxxx", 8) == 0);
    nl_owned_note(&o, "YY", 2, 2);
    CHECK(nl_owned_write(&o, "!", 1) == 0);
    char got[16] = {0};
    int fd = open(path, O_RDONLY);
    CHECK(read(fd, got, sizeof got) == 9 && memcmp(got, "xxYYxxxx!", 9) == 0);
    close(fd);
    nl_owned_close(&o);
}

static int owned(const char *dir)
{
    char path[600], victim[600], noted[600], removed[600];
    path_in(path, sizeof path, dir, "owned");
    path_in(victim, sizeof victim, dir, "victim");
    path_in(noted, sizeof noted, dir, "noted");
    path_in(removed, sizeof removed, dir, "removed");
    struct nl_owned o;
    memset(&o, 0, sizeof o);
    test_owned_out_of_reach(&o, path);
    test_owned_taken(&o, path, victim);
    test_owned_note(noted);
    test_owned_removed(removed);
    test_limits_lock();
    test_fd_floor();
    test_owned_fsize(&o, path);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    else
        printf("ok\n");
    return failures ? 1 : 0;
}

/* ---- a fork no handler saw ---- */

static int forked_children;

static int forked_known = -1;

static void on_fork(int known)
{
    forked_children++;
    forked_known = known;
    nl_core_after_fork();
}

/* A raw fork system call while "another thread" holds the log's lock: the child's first record
 * makes the state its own (its own log, the lock let go) instead of waiting forever or writing
 * into the parent's log. The child is killed by SIGALRM if it hangs. Prints the child's pid. */
static int raw_fork(const char *dir)
{
    long page = sysconf(_SC_PAGESIZE);
    void *probe = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (probe == MAP_FAILED || madvise(probe, page, MADV_WIPEONFORK) != 0) {
        printf("skip: no MADV_WIPEONFORK here\n");
        return 0;
    }
    munmap(probe, page);
    if (start(dir, 0) != 0)
        return 2;
    nl_core_on_fork(on_fork);
    nl_emit(NL_REC_FREE, 1, 0, 0, 0, 0, 0);
    nl_flush_self();
    atomic_store(&nl_g.log.lock, 0x7ffffff0); /* no thread of the child */
    pid_t child = (pid_t)syscall(SYS_fork);
    if (child == 0) {
        alarm(10);
        nl_emit(NL_REC_FREE, 0xc41d, 0, 0, 0, 0, 0);
        nl_flush_self();
        _exit(forked_children == 1 && forked_known == 0 && nl_g.pid == (uint32_t)getpid() ? 0 : 3);
    }
    atomic_store(&nl_g.log.lock, 0);
    int status = 0;
    CHECK(child > 0 && waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(forked_children == 0);
    nl_emit(NL_REC_FREE, 2, 0, 0, 0, 0, 0);
    nl_core_finish();
    printf("%d\n", (int)child);
    return failures ? 1 : 0;
}

struct th_arg {
    int k;
};

static void *th_main(void *p)
{
    struct th_arg *a = p;
    nl_thread_attach(-1);
    for (int i = 0; i < a->k; i++)
        nl_emit(NL_REC_FREE, (uint64_t)i, (uint64_t)nl_self.logical, 0, 0, 0, 0);
    nl_thread_detach();
    return NULL;
}

/* Threads emit concurrently; buffers fill and are written whole; buffers are reused. */
static int threads(const char *dir, int n, int k)
{
    if (start(dir, 0) != 0)
        return 2;
    pthread_t t[64];
    struct th_arg a = {k};
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < n && i < 64; i++)
            pthread_create(&t[i], NULL, th_main, &a);
        for (int i = 0; i < n && i < 64; i++)
            pthread_join(t[i], NULL);
    }
    nl_core_finish();
    return 0;
}

/* ---- a thread's creation, logged by its creator ---- */

void numalens_flush_mark(void);

static atomic_int created_recorded, created_go;

static void *created_main(void *p)
{
    nl_thread_attach(*(int32_t *)p);
    nl_emit(NL_REC_THREAD_START, (uint64_t)nl_self.logical, 0, 0, 0, 0, 0);
    nl_emit(NL_REC_ALLOC, 0x5000, 8192, 0, 0, NL_FN_MALLOC, 0);
    atomic_store(&created_recorded, 1);
    while (!atomic_load(&created_go))
        sched_yield();
    nl_thread_detach();
    return NULL;
}

/* A creator announces a thread (and one whose creation failed) and writes a flush mark while the
 * new thread's records are still in its buffer. Prints the log's size just after the mark: that
 * prefix holds the creator's records up to the mark and none of the new thread. */
static int create(const char *dir)
{
    if (start(dir, 0) != 0)
        return 2;
    int32_t failed = nl_thread_create_note();
    nl_thread_create_failed(failed, EAGAIN);
    int32_t logical = nl_thread_create_note();
    CHECK(failed == 1 && logical == 2);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, created_main, &logical) == 0);
    while (!atomic_load(&created_recorded))
        sched_yield();
    numalens_flush_mark();
    printf("%ld\n", (long)lseek(atomic_load(&nl_g.log.fd), 0, SEEK_END));
    atomic_store(&created_go, 1);
    pthread_join(t, NULL);
    nl_core_finish();
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "create") == 0)
        return create(argv[2]);
    if (argc >= 2 && strcmp(argv[1], "unit") == 0)
        return unit();
    if (argc >= 3 && strcmp(argv[1], "write") == 0)
        return write_all_kinds(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "owned") == 0)
        return owned(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "raw-fork") == 0)
        return raw_fork(argv[2]);
    if (argc >= 5 && strcmp(argv[1], "threads") == 0)
        return threads(argv[2], atoi(argv[3]), atoi(argv[4]));
    if (argc >= 2 && strcmp(argv[1], "env-table") == 0) {
        const char *name, *deflt, *doc;
        for (unsigned i = 0; nl_config_describe(i, &name, &deflt, &doc); i++)
            printf("%s\t%s\t%s\n", name, deflt, doc);
        return 0;
    }
    fprintf(stderr,
            "usage: test_core unit | write DIR | owned DIR | raw-fork DIR | threads DIR N K | "
            "create DIR | env-table\n");
    return 2;
}
