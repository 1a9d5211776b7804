/* Replaces itself by `exec_all leaf VARIANT` through one exec variant (or starts it with
 * posix_spawn or vfork and waits); the leaf writes a file naming the variant. `vfork-many`
 * starts /bin/true 300 times through vfork and execv and writes how much its own address space
 * grew meanwhile. */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "hostile.h"

extern char **environ;

static int leaf(const char *variant)
{
    char line[128];
    snprintf(line, sizeof line, "leaf after %s: %u\n", variant, churn());
    put("leaf.out", line);
    put_fd(1, line);
    return 0;
}

/* The process's VmSize in kB. */
static long vm_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %ld", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

static int vfork_many(void)
{
    char *args[] = {"true", NULL};
    long before = vm_size();
    for (int i = 0; i < 300; i++) {
        pid_t pid = vfork();
        if (pid == 0) {
            execv("/bin/true", args);
            _exit(127);
        }
        if (pid < 0 || waitpid(pid, NULL, 0) != pid)
            return 3;
    }
    char line[64];
    snprintf(line, sizeof line, "grew by %ld kB\n", vm_size() - before);
    put("grew.out", line);
    return 0;
}

static int spawned(int rc, pid_t pid)
{
    int status = 0;
    if (rc != 0 || waitpid(pid, &status, 0) != pid)
        return 3;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 4;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    const char *v = argv[1];
    if (!strcmp(v, "leaf"))
        return leaf(argc > 2 ? argv[2] : "?");
    if (!strcmp(v, "vfork-many"))
        return vfork_many();
    const char *self = "/proc/self/exe";
    char *args[] = {argv[0], "leaf", (char *)v, NULL};
    unsigned sum = churn(); /* something to record before the exec */
    printf("before %s: %u\n", v, sum);
    fflush(stdout);
    if (!strcmp(v, "execl"))
        execl(self, argv[0], "leaf", v, (char *)NULL);
    else if (!strcmp(v, "execlp"))
        execlp(argv[0], argv[0], "leaf", v, (char *)NULL);
    else if (!strcmp(v, "execle"))
        execle(self, argv[0], "leaf", v, (char *)NULL, environ);
    else if (!strcmp(v, "execv"))
        execv(self, args);
    else if (!strcmp(v, "execvp"))
        execvp(argv[0], args);
    else if (!strcmp(v, "execvpe"))
        execvpe(argv[0], args, environ);
    else if (!strcmp(v, "execve"))
        execve(self, args, environ);
    else if (!strcmp(v, "fexecve")) {
        int fd = open(self, O_RDONLY | O_CLOEXEC);
        fexecve(fd, args, environ);
    } else if (!strcmp(v, "execveat"))
        execveat(AT_FDCWD, self, args, environ, 0);
    else if (!strcmp(v, "posix_spawn")) {
        pid_t pid;
        return spawned(posix_spawn(&pid, self, NULL, NULL, args, environ), pid);
    } else if (!strcmp(v, "posix_spawnp")) {
        pid_t pid;
        return spawned(posix_spawnp(&pid, argv[0], NULL, NULL, args, environ), pid);
    } else if (!strcmp(v, "vfork")) {
        pid_t pid = vfork();
        if (pid == 0) {
            execv(self, args);
            _exit(127);
        }
        return spawned(pid < 0, pid);
    }
    perror(v);
    return 1;
}
