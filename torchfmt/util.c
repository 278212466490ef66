/* See util.h. */
#include "torchfmt/util.h"

#include <stdio.h>
#include <stdlib.h>

void ck_err_prefix(char *err, size_t n, const char *prefix)
{
    if (!err || !n) return;
    char *old = strdup(err);
    if (!old) return; /* keep the message without its prefix */
    snprintf(err, n, "%s: %s", prefix, old);
    free(old);
}

const char *ck_shown(const char *s, size_t len, char buf[CK_SHOWN_MAX + 4])
{
    size_t k = 0;
    for (; k < len && k < CK_SHOWN_MAX; k++) {
        unsigned char c = (unsigned char)s[k];
        buf[k] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (k < len) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
    return buf;
}
