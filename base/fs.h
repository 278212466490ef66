/* File-system helpers every layer may use. */
#ifndef MC_BASE_FS_H
#define MC_BASE_FS_H

#include <stddef.h>

/* mkdir -p (mode 0777 less the umask). Returns 0, or -1 with "<path>: <why>" in err. */
int mc_mkdirs(const char *path, char *err, size_t n);

#endif
