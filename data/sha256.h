/* SHA-256 (FIPS 180-4), for inspect-data's sample digests. No crypto library is linked; this is
 * the plain algorithm, streaming: init, update any number of times, final. */
#ifndef MC_DATA_SHA256_H
#define MC_DATA_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t bytes; /* message length so far */
    uint8_t block[64];
    size_t used; /* bytes pending in block */
} mc_sha256_t;

void mc_sha256_init(mc_sha256_t *c);
void mc_sha256_update(mc_sha256_t *c, const void *data, size_t len);
/* The 32-byte digest; c must be re-initialised before reuse. */
void mc_sha256_final(mc_sha256_t *c, uint8_t digest[32]);

/* One-shot digest as 64 lowercase hex characters plus NUL. */
void mc_sha256_hex(const void *data, size_t len, char hex[65]);

#endif
