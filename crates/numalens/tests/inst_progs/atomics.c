/* Every atomic width and operation, from 4 threads at once: the instrumented build must print
 * exactly what the native build prints. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#define THREADS 4
#define ROUNDS 20000

static uint8_t a8;
static uint16_t a16;
static uint32_t a32, x32 = 0xffffffffu;
static uint64_t a64, o64, n64 = ~0ull, cas64;
static unsigned __int128 a128;

static void *work(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        __atomic_fetch_add(&a8, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&a16, 3, __ATOMIC_ACQ_REL);
        __atomic_fetch_sub(&a32, 2, __ATOMIC_SEQ_CST);
        __atomic_fetch_xor(&x32, 1u << (i % 32), __ATOMIC_RELEASE);
        __atomic_fetch_or(&o64, 1ull << ((i + id) % 64), __ATOMIC_RELAXED);
        __atomic_fetch_and(&n64, ~(1ull << ((i * 7 + id) % 64)), __ATOMIC_RELAXED);
        __atomic_fetch_nand(&a64, 0, __ATOMIC_RELAXED); /* a64 = ~(a64 & 0) = all ones */
        uint64_t seen = __atomic_load_n(&cas64, __ATOMIC_ACQUIRE);
        while (!__atomic_compare_exchange_n(&cas64, &seen, seen + id + 1, i & 1, __ATOMIC_SEQ_CST,
                                            __ATOMIC_RELAXED))
            ;
        unsigned __int128 old = __atomic_load_n(&a128, __ATOMIC_SEQ_CST);
        while (!__atomic_compare_exchange_n(&a128, &old, old + ((unsigned __int128)1 << 64) + 1, 0,
                                            __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            ;
    }
    __atomic_exchange_n(&a64, id, __ATOMIC_SEQ_CST);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return 0;
}

int main(void)
{
    pthread_t t[THREADS];
    for (uint64_t i = 0; i < THREADS; i++)
        pthread_create(&t[i], 0, work, (void *)(uintptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], 0);
    uint64_t hi = (uint64_t)(a128 >> 64), lo = (uint64_t)a128;
    printf("a8=%u a16=%u a32=%u x32=%x o64=%llx n64=%llx a64<4=%d cas64=%llu a128=%llu:%llu\n",
           a8, a16, a32, x32, (unsigned long long)o64, (unsigned long long)n64, a64 < 4,
           (unsigned long long)cas64, (unsigned long long)hi, (unsigned long long)lo);
    return 0;
}
