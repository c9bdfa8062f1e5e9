/* Emulates a disk whose flushes are slow: loaded with LD_PRELOAD, every fsync and fdatasync
 * first sleeps SLOW_FSYNC_US microseconds, then flushes for real. The sync benchmark uses it to
 * measure on a disk like the one its goals were set on (about 1,100 commits a second), for the
 * server and its baseline alike. Benchmarks only: never loaded by the backplane itself.
 *   cc -shared -fPIC -O2 -o slow_fsync.so slow_fsync.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>

static void wait_like_a_slow_disk(void) {
    static long micros = -1;
    if (micros < 0) {
        const char *text = getenv("SLOW_FSYNC_US");
        micros = text ? atol(text) : 0;
    }
    if (micros > 0) {
        struct timespec delay = {micros / 1000000, (micros % 1000000) * 1000};
        while (nanosleep(&delay, &delay) != 0 && errno == EINTR) {}
    }
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    wait_like_a_slow_disk();
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    wait_like_a_slow_disk();
    return real(fd);
}
