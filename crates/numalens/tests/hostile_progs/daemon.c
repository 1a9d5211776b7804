/* Daemonises: the parent exits at once; the child starts a session, closes every descriptor,
 * works for a while and then writes its file. */
#include <stdio.h>
#include <time.h>

#include "hostile.h"

int main(void)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid < 0;
    setsid();
    for (int fd = 0; fd < 1024; fd++)
        close(fd);
    struct timespec pause = {0, 200 * 1000 * 1000};
    nanosleep(&pause, NULL);
    char line[64];
    snprintf(line, sizeof line, "daemon worked: %u\n", churn());
    put("daemon.partial", line);
    rename("daemon.partial", "daemon.out");
    return 0;
}
