// A loop that reads an array and calls a function that writes another array and throws, the
// exception caught in the loop: the writes' samples must not be lost to the loop's copy of the
// countdowns. Prints the loop's reads and the function's writes.
#include <cstdio>
#include <cstdlib>

static int *written;

__attribute__((noinline)) void write_and_throw(long i)
{
    for (int j = 0; j < 16; j++)
        written[j + (i & 1023) * 16] += (int)i;
    if (i >= 0)
        throw 1;
}

int main()
{
    written = static_cast<int *>(std::calloc(16384, sizeof(int))); // @object written
    long *read = static_cast<long *>(std::calloc(4096, sizeof(long))); // @object read
    long sum = 0, reads = 0, writes = 0;
    for (long i = 0; i < 200000; i++) {
        sum += read[i & 4095];
        reads++;
        try {
            write_and_throw(i);
        } catch (int) {
        }
        writes += 16;
    }
    std::printf("%ld %ld %ld\n", reads, writes, sum);
    return 0;
}
