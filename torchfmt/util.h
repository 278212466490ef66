/* Small helpers shared by the ckpt/ files (internal): one-line errors, quoting file-supplied
 * text in them, little-endian byte access, a string hash. ckpt/ depends on libc, zlib and base/error.h. */
#ifndef MC_TORCHFMT_UTIL_H
#define MC_TORCHFMT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* One-line errors: mc_errf (base/error.h) formats into err and returns -1. */
#include "base/error.h"
/* Prefixes err's current text with "<prefix>: " (in place, truncating). */
void ck_err_prefix(char *err, size_t n, const char *prefix);

/* Text from a file quoted in a message: at most CK_SHOWN_MAX bytes (then "..."), bytes outside
 * printable ASCII replaced by '?'. */
#define CK_SHOWN_MAX 60
const char *ck_shown(const char *s, size_t len, char buf[CK_SHOWN_MAX + 4]);

static inline uint16_t ck_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t ck_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t ck_le64(const uint8_t *p)
{
    return ck_le32(p) | (uint64_t)ck_le32(p + 4) << 32;
}
static inline void ck_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void ck_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void ck_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* FNV-1a, 64 bits. */
static inline uint64_t ck_hash(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

#endif
