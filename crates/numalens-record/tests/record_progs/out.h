/* The record tests run their programs directly (no shell to redirect stdout): the first argument
 * names the file that stdout is appended to (appended, so that the processes of a chain share
 * it), and is taken off the arguments. */
#ifndef RECORD_PROGS_OUT_H
#define RECORD_PROGS_OUT_H
#include <stdio.h>
#include <stdlib.h>

static inline const char *take_output(int *argc, char ***argv)
{
    if (*argc < 2 || !freopen((*argv)[1], "a", stdout))
        exit(2);
    const char *path = (*argv)[1];
    (*argv)[1] = (*argv)[0];
    (*argc)--;
    (*argv)++;
    return path;
}
#endif
