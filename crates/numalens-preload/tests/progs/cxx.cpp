// SPDX-License-Identifier: MIT OR Apache-2.0
/**
 * @file cxx.cpp
 * @brief C++ new/delete reach malloc/free under the runtime.
 */
#include <cstdio>
#include <vector>

int main()
{
    auto *a = new double[20000];
    std::printf("new %p\n", static_cast<void *>(a));
    std::vector<int> v(50000, 1);
    std::printf("vector %p\n", static_cast<void *>(v.data()));
    delete[] a;
    return v[10] == 1 ? 0 : 1;
}
