// A namespaced static array and a class's static member defined outside its class. Prints their
// addresses.
#include <cstdio>

#include "out.h"

namespace solver {
double field[1 << 18];            // defines: field
struct Grid {
    static double cells[1 << 18];
};
} // namespace solver

double solver::Grid::cells[1 << 18]; // defines: cells

int main(int argc, char **argv)
{
    take_output(&argc, &argv);
    for (long i = 0; i < (1 << 18); i++) {
        solver::Grid::cells[i] = i;
        solver::field[i] = solver::Grid::cells[i] * 2;
    }
    std::printf("field %p\ncells %p\n", (void *)solver::field, (void *)solver::Grid::cells);
    return 0;
}
