// C++ allocations in two std::threads: each thread allocates an array with new[] and a vector,
// and initialises both itself, so it is their first toucher. Prints, per thread, the tid and the
// two blocks; exits 6.
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "out.h"

static std::mutex out;
static const size_t elements = 1 << 20; // 8 MiB of doubles, 4 MiB of ints

__attribute__((noinline)) static double *make_samples(size_t n)
{
    return new double[n]; // site: new[]
}

__attribute__((noinline)) static std::vector<int> make_counts(size_t n)
{
    return std::vector<int>(n, 1); // site: vector
}

static void worker(int k, long *sum)
{
    double *samples = make_samples(elements);
    for (size_t i = 0; i < elements; i++)
        samples[i] = double(i) * k;
    std::vector<int> counts = make_counts(elements);
    {
        std::lock_guard<std::mutex> lock(out);
        std::printf("tid%d %d\nsamples%d %p\ncounts%d %p\n", k, int(gettid()), k,
                    static_cast<void *>(samples), k, static_cast<void *>(counts.data()));
    }
    long s = 0;
    for (size_t i = 0; i < elements; i += 512)
        s += long(samples[i]) + counts[i];
    *sum = s;
    delete[] samples;
}

int main(int argc, char **argv)
{
    take_output(&argc, &argv);
    long sums[2] = {0, 0};
    std::thread a(worker, 0, &sums[0]);
    std::thread b(worker, 1, &sums[1]);
    a.join();
    b.join();
    std::printf("sum %ld\n", sums[0] + sums[1]);
    return 6;
}
