/* File-system helpers every layer may use. */
#ifndef MC_BASE_FS_H
#define MC_BASE_FS_H

#include <stddef.h>

/* mkdir -p (mode 0777 less the umask). Returns 0, or -1 with "<path>: <why>" in err. */
int mc_mkdirs(const char *path, char *err, size_t n);
/* Creates or truncates path with len bytes of data and makes them durable (fsync); a failed
 * write removes the file. Returns 0, or -1 with "<path>: <why>" in err. */
int mc_write_file(const char *path, const void *data, size_t len, char *err, size_t n);

#endif
