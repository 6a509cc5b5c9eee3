/* A read-only disk for one process, for `disk_faults`: loaded with LD_PRELOAD, it refuses with
 * EROFS (as a filesystem remounted read-only does) every write, truncate, sync, unlink and
 * opening for writing of a file under $CCSYNTH_TEST_READ_ONLY_DIR, while the file named by
 * $CCSYNTH_TEST_READ_ONLY_FLAG exists. A mounted filesystem with files open for writing cannot
 * be remounted read-only, and on tmpfs `chattr +i` does not stop writes through descriptors
 * already open (SQLite's write-ahead log), so the refusal is made where the kernel would make it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static int refusing(void) {
    const char *flag = getenv("CCSYNTH_TEST_READ_ONLY_FLAG");
    return flag != NULL && access(flag, F_OK) == 0;
}

static int path_under(const char *path) {
    const char *dir = getenv("CCSYNTH_TEST_READ_ONLY_DIR");
    return dir != NULL && path != NULL && strncmp(path, dir, strlen(dir)) == 0;
}

static int fd_under(int fd) {
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 0) return 0;
    path[n] = 0;
    return path_under(path);
}

#define REAL(name) static __typeof__(name) *real; if (!real) real = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)
#define REFUSE_IF(cond) if ((cond) && refusing()) { errno = EROFS; return -1; }

ssize_t write(int fd, const void *b, size_t n) { REAL(write); REFUSE_IF(fd > 2 && fd_under(fd)); return real(fd, b, n); }
ssize_t pwrite(int fd, const void *b, size_t n, off_t o) { REAL(pwrite); REFUSE_IF(fd_under(fd)); return real(fd, b, n, o); }
ssize_t pwrite64(int fd, const void *b, size_t n, off64_t o) { REAL(pwrite64); REFUSE_IF(fd_under(fd)); return real(fd, b, n, o); }
int ftruncate(int fd, off_t n) { REAL(ftruncate); REFUSE_IF(fd_under(fd)); return real(fd, n); }
int ftruncate64(int fd, off64_t n) { REAL(ftruncate64); REFUSE_IF(fd_under(fd)); return real(fd, n); }
int fsync(int fd) { REAL(fsync); REFUSE_IF(fd_under(fd)); return real(fd); }
int fdatasync(int fd) { REAL(fdatasync); REFUSE_IF(fd_under(fd)); return real(fd); }
int unlink(const char *p) { REAL(unlink); REFUSE_IF(path_under(p)); return real(p); }

static int writes(int flags) { return (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) != 0; }

#define OPEN(name, ...)                                                             \
    {                                                                               \
        mode_t mode = 0;                                                            \
        if (flags & (O_CREAT | O_TMPFILE)) {                                        \
            va_list ap;                                                             \
            va_start(ap, flags);                                                    \
            mode = va_arg(ap, mode_t);                                              \
            va_end(ap);                                                             \
        }                                                                           \
        REAL(name);                                                                 \
        REFUSE_IF(writes(flags) && path_under(p));                                  \
        return real(__VA_ARGS__, flags, mode);                                      \
    }
int open(const char *p, int flags, ...) OPEN(open, p)
int open64(const char *p, int flags, ...) OPEN(open64, p)
int openat(int d, const char *p, int flags, ...) OPEN(openat, d, p)
int openat64(int d, const char *p, int flags, ...) OPEN(openat64, d, p)
