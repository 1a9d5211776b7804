// C++: a std::vector per thread and a shared one read by all, std::thread, std::atomic.
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

static std::atomic<long> done{0};

int main()
{
    const long n = 1 << 18;
    std::vector<double> shared(n, 1.0); // @object shared
    std::vector<std::thread> threads;
    std::vector<double> sums(4);
    for (int t = 0; t < 4; t++)
        threads.emplace_back([&, t] {
            double s = 0;
            for (long i = 0; i < n; i++)
                s += shared[i];
            sums[t] = s;
            done.fetch_add(1);
        });
    for (auto &t : threads)
        t.join();
    std::printf("%.0f %ld\n", sums[0] + sums[1] + sums[2] + sums[3], done.load());
}
