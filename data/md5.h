/* MD5 (RFC 1321), for the names of the dataset index cache (data/index_cache.h): Megatron names
 * a cache entry by the md5 of its JSON description. Not for security; no crypto library is
 * linked, this is the plain algorithm, streaming: init, update any number of times, final. */
#ifndef MC_DATA_MD5_H
#define MC_DATA_MD5_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[4];
    uint64_t bytes; /* message length so far */
    uint8_t block[64];
    size_t used; /* bytes pending in block */
} mc_md5_t;

void mc_md5_init(mc_md5_t *c);
void mc_md5_update(mc_md5_t *c, const void *data, size_t len);
/* The 16-byte digest; c must be re-initialised before reuse. */
void mc_md5_final(mc_md5_t *c, uint8_t digest[16]);

/* A digest as 32 lowercase hex characters plus NUL (Python's hexdigest()). */
void mc_md5_to_hex(const uint8_t digest[16], char hex[33]);
/* One-shot digest as hex. */
void mc_md5_hex(const void *data, size_t len, char hex[33]);

#endif
