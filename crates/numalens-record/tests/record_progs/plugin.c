/* A shared library loaded with dlopen() after the program started: its allocation's call site is
 * in a module the runtime learns about only at dlopen. */
#include <stdlib.h>
#include <string.h>

char *plugin_fill(size_t bytes)
{
    char *buffer = malloc(bytes); /* site: plugin */
    if (buffer)
        memset(buffer, 3, bytes);
    return buffer;
}
