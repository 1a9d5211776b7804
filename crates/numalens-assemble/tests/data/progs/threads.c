/* Known first touchers in little memory: the main thread fills a static array and the first half
 * of a heap block, a worker thread fills the second half. Small on purpose: its recording is
 * stored with the tests. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK (256 * 1024)
static char statics[64 * 1024];
static char *block;

static void *second_half(void *arg)
{
    (void)arg;
    memset(block + BLOCK / 2, 2, BLOCK / 2);
    return NULL;
}

int main(void)
{
    memset(statics, 1, sizeof statics);
    block = malloc(BLOCK);
    memset(block, 1, BLOCK / 2);
    pthread_t t;
    pthread_create(&t, NULL, second_half, NULL);
    pthread_join(t, NULL);
    free(block);
    return 0;
}
