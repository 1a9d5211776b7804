/* Loads argv[1] with dlopen(), calls its plugin_fill() for argv[2] MiB (allocated and
 * first-touched by this thread inside the library), prints the buffer and the tid; exits 4. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "out.h"

int main(int argc, char **argv)
{
    take_output(&argc, &argv);
    if (argc < 3)
        return 2;
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    char *(*fill)(size_t) = (char *(*)(size_t))dlsym(lib, "plugin_fill");
    size_t bytes = (size_t)atol(argv[2]) << 20;
    char *buffer = fill ? fill(bytes) : NULL;
    if (!buffer)
        return 1;
    printf("main %d\nbuffer %p\nbytes %zu\n", gettid(), (void *)buffer, bytes);
    free(buffer);
    dlclose(lib);
    return 4;
}
