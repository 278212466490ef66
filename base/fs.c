#include "base/fs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

int mc_mkdirs(const char *path, char *err, size_t n)
{
    char p[4352]; /* a 4096-byte directory plus the names callers append to it */
    if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
        return mc_path_errf(err, n, path, "path too long");
    for (char *s = p + 1;; s++) {
        bool end = *s == '\0';
        if (*s != '/' && !end) continue;
        *s = '\0';
        struct stat st;
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            return mc_path_errf(err, n, p, "cannot create the directory: %s", strerror(errno));
        if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
            return mc_path_errf(err, n, p, "exists but is not a directory");
        if (end) return 0;
        *s = '/';
    }
}

int mc_write_file(const char *path, const void *data, size_t len, char *err, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return mc_path_errf(err, n, path, "cannot create it: %s", strerror(errno));
    const char *p = data;
    int rc = 0;
    while (len && !rc) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) rc = -1;
        else p += w, len -= (size_t)w;
    }
    if (rc || fsync(fd) != 0)
        rc = mc_path_errf(err, n, path, "cannot write it: %s", strerror(errno));
    if (close(fd) != 0 && !rc)
        rc = mc_path_errf(err, n, path, "cannot write it: %s", strerror(errno));
    if (rc) unlink(path);
    return rc;
}
