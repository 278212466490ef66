#include "base/fs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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
