/* Static data of its own, big and small, beside whatever the runtimes bring: only these may be
 * listed as its static objects. */
#include <stdio.h>

#include "hostile.h"

char program_table[1 << 20];
static char program_small[200];

int main(void)
{
    memset(program_table, 1, sizeof program_table);
    memset(program_small, 2, sizeof program_small);
    printf("%d %u\n", program_table[7] + program_small[9], churn());
    return 0;
}
