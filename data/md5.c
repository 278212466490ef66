/* MD5 as RFC 1321 section 3 states it (the per-step constants are floor(2^32 * |sin(i + 1)|)). */
#include <string.h>

#include "data/md5.h"

static const uint32_t K[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};

/* Left rotations per round, four per round. */
static const int S[4][4] = {{7, 12, 17, 22}, {5, 9, 14, 20}, {4, 11, 16, 23}, {6, 10, 15, 21}};

static inline uint32_t rotl(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

static void compress(uint32_t h[4], const uint8_t p[64])
{
    uint32_t m[16];
    for (int t = 0; t < 16; t++) /* little-endian words */
        m[t] = (uint32_t)p[4 * t] | (uint32_t)p[4 * t + 1] << 8 | (uint32_t)p[4 * t + 2] << 16 |
               (uint32_t)p[4 * t + 3] << 24;
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        switch (i >> 4) {
        case 0:
            f = (b & c) | (~b & d);
            g = i;
            break;
        case 1:
            f = (d & b) | (~d & c);
            g = (5 * i + 1) & 15;
            break;
        case 2:
            f = b ^ c ^ d;
            g = (3 * i + 5) & 15;
            break;
        default:
            f = c ^ (b | ~d);
            g = (7 * i) & 15;
            break;
        }
        f += a + K[i] + m[g];
        a = d;
        d = c;
        c = b;
        b += rotl(f, S[i >> 4][i & 3]);
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d;
}

void mc_md5_init(mc_md5_t *c)
{
    c->h[0] = 0x67452301;
    c->h[1] = 0xefcdab89;
    c->h[2] = 0x98badcfe;
    c->h[3] = 0x10325476;
    c->bytes = 0;
    c->used = 0;
}

void mc_md5_update(mc_md5_t *c, const void *data, size_t len)
{
    const uint8_t *p = data;
    c->bytes += len;
    if (c->used) {
        size_t k = 64 - c->used < len ? 64 - c->used : len;
        memcpy(c->block + c->used, p, k);
        c->used += k;
        p += k;
        len -= k;
        if (c->used < 64) return;
        compress(c->h, c->block);
        c->used = 0;
    }
    for (; len >= 64; p += 64, len -= 64) compress(c->h, p);
    memcpy(c->block, p, len);
    c->used = len;
}

void mc_md5_final(mc_md5_t *c, uint8_t digest[16])
{
    uint64_t bits = c->bytes * 8;
    c->block[c->used++] = 0x80;
    if (c->used > 56) {
        memset(c->block + c->used, 0, 64 - c->used);
        compress(c->h, c->block);
        c->used = 0;
    }
    memset(c->block + c->used, 0, 56 - c->used);
    for (int i = 0; i < 8; i++) c->block[56 + i] = (uint8_t)(bits >> (8 * i)); /* little-endian */
    compress(c->h, c->block);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 4; k++) digest[4 * i + k] = (uint8_t)(c->h[i] >> (8 * k));
}

void mc_md5_to_hex(const uint8_t digest[16], char hex[33])
{
    static const char X[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        hex[2 * i] = X[digest[i] >> 4];
        hex[2 * i + 1] = X[digest[i] & 15];
    }
    hex[32] = '\0';
}

void mc_md5_hex(const void *data, size_t len, char hex[33])
{
    mc_md5_t c;
    uint8_t d[16];
    mc_md5_init(&c);
    mc_md5_update(&c, data, len);
    mc_md5_final(&c, d);
    mc_md5_to_hex(d, hex);
}
