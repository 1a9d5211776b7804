/* Opens files until EMFILE under a soft limit of 512 (the hard one left as it is), says how many
 * it got, and closes them. */
#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>

#include "hostile.h"

int main(void)
{
    struct rlimit lim;
    getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = 512;
    setrlimit(RLIMIT_NOFILE, &lim);
    unsigned sum = churn();
    int n = 0, last = -1;
    for (int fd; (fd = open("/dev/null", O_RDONLY)) >= 0; n++)
        last = fd;
    int e = errno;
    sum += churn(); /* the runtime writes while the program holds every descriptor */
    for (int fd = 3; fd <= last; fd++)
        close(fd);
    printf("opened %d (last %d), then errno %d, %u\n", n, last, e, sum);
    return 0;
}
