/*
 * record_probe: a program with a known memory layout, run under `numalens record` in the
 * test-bed guest. It does not check anything itself: it prints where its memory is and which
 * thread touched it, and the host compares that with the profile (numalens-vm-check).
 *
 *   record_probe first-touch [MIB]   one thread per node with CPUs, created in node order and
 *                                    pinned to that node's first CPU; thread K first-touches
 *                                    block K (MIB MiB, default 8) of one malloc'd array and
 *                                    block K (2 MiB) of a static array
 *   record_probe balancing [MIB]     a thread on the first CPU node first-touches MIB MiB
 *                                    (default 64) of a malloc'd array; then a thread on the last
 *                                    CPU node reads it until NUMA balancing has moved at least
 *                                    90 % of its pages there (or 60 s passed)
 *
 * Output, one fact per line (the checker's input):
 *   thread ROLE LOGICAL_ID TID NODE CPU     ROLE is K for first-touch, writer/reader for balancing
 *   object heap START SIZE                  the pointer malloc returned, and the size asked
 *   block heap|static K START SIZE          what thread K touched
 *   moved PAGES_ON_READER_NODE PAGES SECONDS
 *
 * Blocks start on 2 MiB boundaries and are multiples of 2 MiB, so with THP=always no huge page
 * straddles two threads' blocks. Dynamically linked on purpose: the recorder's runtime is
 * preloaded into it. The memory stays allocated until exit, when the runtime queries the node of
 * every page (page_nodes).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 8
#define HUGE (2UL << 20)
#define STATIC_BLOCK HUGE
#define MOVED_FRACTION 0.9
#define MAX_READ_SECONDS 60.0

static char static_array[MAX_THREADS * STATIC_BLOCK] __attribute__((aligned(2 << 20)));

struct worker {
    int index, node, cpu;
    pid_t tid;
    char *heap;          /* block of the malloc'd array */
    char *stat;          /* block of the static array, or NULL */
    size_t size;
    int read_until_moved; /* balancing reader: read instead of write */
    long on_node, pages;  /* reader: pages found on its node, out of pages */
    double seconds;
};

static int cpu_nodes[MAX_THREADS], node_first_cpu[MAX_THREADS], cpu_node_count;

/* Nodes with CPUs, ascending, and the first CPU of each (cpulist "0-3,5" starts with it). */
static void discover_nodes(void)
{
    for (int node = 0; node < 64 && cpu_node_count < MAX_THREADS; node++) {
        char path[96], buf[256] = "";
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        char *got = fgets(buf, sizeof buf, f);
        fclose(f);
        char *end;
        long cpu = got ? strtol(buf, &end, 10) : -1;
        if (got && end != buf) {
            cpu_nodes[cpu_node_count] = node;
            node_first_cpu[cpu_node_count++] = (int)cpu;
        }
    }
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("sched_setaffinity");
        exit(2);
    }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Pages of [buf, buf+size) on `node`, by a move_pages query (which moves nothing). */
static long pages_on(char *buf, size_t size, int node)
{
    long page = sysconf(_SC_PAGESIZE), n = (long)(size / page), on = 0;
    void **pages = malloc(n * sizeof *pages);
    int *status = malloc(n * sizeof *status);
    for (long i = 0; i < n; i++)
        pages[i] = buf + i * page;
    if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0) == 0)
        for (long i = 0; i < n; i++)
            on += status[i] == node;
    free(pages);
    free(status);
    return on;
}

/* Reads every cache line until the pages have moved to this thread's node. The query runs
 * only every 0.2 s: it is not free, and the balancing scanner needs time between passes.
 * Backwards, so that under THP the reader's first access to a huge page is on another base
 * page than the writer's first touch (forwards, both would hit its first base page, and a
 * recorder that tracked pages at the base size could not be told from a correct one). */
static void read_until_moved(struct worker *w)
{
    volatile unsigned long sum = 0;
    double start = now(), next_check = start;
    w->pages = (long)(w->size / sysconf(_SC_PAGESIZE));
    while (now() - start < MAX_READ_SECONDS) {
        for (size_t k = w->size; k >= 64; k -= 64)
            sum += (unsigned char)w->heap[k - 64];
        if (now() >= next_check) {
            w->on_node = pages_on(w->heap, w->size, w->node);
            if (w->on_node >= w->pages * MOVED_FRACTION)
                break;
            next_check = now() + 0.2;
        }
    }
    w->seconds = now() - start;
    /* The balancing scanner keeps marking the pages PROT_NONE for its hinting faults, and the
     * guest's 6.1 kernel answers a move_pages query on such a page with -ENOENT, as if it were
     * untouched: the runtime's query at exit would see a random part of the array so. Once the
     * pages have moved, balancing is switched off (the guest ends with this run) and one more
     * pass on this node takes the last hinting faults, so that query sees every page. */
    int fd = open("/proc/sys/kernel/numa_balancing", O_WRONLY);
    if (fd < 0 || write(fd, "0", 1) != 1)
        perror("record_probe: switching NUMA balancing off");
    if (fd >= 0)
        close(fd);
    for (size_t k = w->size; k >= 64; k -= 64)
        sum += (unsigned char)w->heap[k - 64];
}

static void *work(void *arg)
{
    struct worker *w = arg;
    pin(w->cpu);
    w->tid = (pid_t)syscall(SYS_gettid);
    if (w->read_until_moved) {
        read_until_moved(w);
        return NULL;
    }
    memset(w->heap, w->index + 1, w->size);
    if (w->stat)
        memset(w->stat, w->index + 1, STATIC_BLOCK);
    return NULL;
}

/* Starts threads w[0..n) in order (their logical ids follow) and waits for all of them. */
static void run(struct worker *w, int n)
{
    pthread_t t[MAX_THREADS];
    for (int k = 0; k < n; k++)
        if (pthread_create(&t[k], NULL, work, &w[k]) != 0) {
            perror("pthread_create");
            exit(2);
        }
    for (int k = 0; k < n; k++)
        pthread_join(t[k], NULL);
}

/* A malloc'd array with room to start its blocks on a 2 MiB boundary. */
static char *heap_array(size_t size, char **raw)
{
    *raw = malloc(size + HUGE);
    if (!*raw) {
        perror("malloc");
        exit(2);
    }
    printf("object heap %p %zu\n", (void *)*raw, size + HUGE);
    return (char *)(((uintptr_t)*raw + HUGE - 1) & ~(HUGE - 1));
}

static void print_thread(const char *role, int logical, const struct worker *w)
{
    printf("thread %s %d %d %d %d\n", role, logical, (int)w->tid, w->node, w->cpu);
}

static int first_touch(size_t block)
{
    struct worker w[MAX_THREADS];
    char *raw, *heap = heap_array(block * cpu_node_count, &raw);
    for (int k = 0; k < cpu_node_count; k++) {
        w[k] = (struct worker){.index = k, .node = cpu_nodes[k], .cpu = node_first_cpu[k],
                               .heap = heap + k * block, .stat = static_array + k * STATIC_BLOCK,
                               .size = block};
    }
    /* Concurrently, as a parallel first touch would: faults of all nodes interleave. */
    run(w, cpu_node_count);
    for (int k = 0; k < cpu_node_count; k++) {
        char role[16];
        snprintf(role, sizeof role, "%d", k);
        /* Logical ids are creation order, the main thread being 0. */
        print_thread(role, k + 1, &w[k]);
        printf("block heap %d %p %zu\n", k, (void *)w[k].heap, block);
        printf("block static %d %p %lu\n", k, (void *)w[k].stat, STATIC_BLOCK);
    }
    return 0;
}

static int balancing(size_t size)
{
    char *raw, *heap = heap_array(size, &raw);
    int last = cpu_node_count - 1;
    struct worker writer = {.node = cpu_nodes[0], .cpu = node_first_cpu[0], .heap = heap,
                            .size = size};
    struct worker reader = {.node = cpu_nodes[last], .cpu = node_first_cpu[last], .heap = heap,
                            .size = size, .read_until_moved = 1};
    run(&writer, 1);
    run(&reader, 1);
    print_thread("writer", 1, &writer);
    print_thread("reader", 2, &reader);
    printf("block heap 0 %p %zu\n", (void *)heap, size);
    printf("moved %ld %ld %.2f\n", reader.on_node, reader.pages, reader.seconds);
    return 0;
}

int main(int argc, char **argv)
{
    discover_nodes();
    /* Rounded up to 2 MiB, so blocks keep huge-page alignment. */
    size_t mib = argc >= 3 ? (strtoul(argv[2], NULL, 10) + 1) & ~1UL : 0;
    if (argc >= 2 && strcmp(argv[1], "first-touch") == 0)
        return first_touch((mib ? mib : 8) << 20);
    if (argc >= 2 && strcmp(argv[1], "balancing") == 0) {
        if (cpu_node_count < 2) {
            fprintf(stderr, "record_probe: balancing needs two nodes with CPUs\n");
            return 2;
        }
        return balancing((mib ? mib : 64) << 20);
    }
    fprintf(stderr, "usage: %s first-touch [MIB] | balancing [MIB]\n", argv[0]);
    return 2;
}
