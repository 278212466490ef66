/* numpy-compatible PCG64 and SeedSequence; see pcg64.h. Constants are numpy's
 * (bit_generator.pyx, pcg64.h). */
#include "data/pcg64.h"

/* SeedSequence's hash constants */
#define SS_INIT_A 0x43b0d7e5u
#define SS_MULT_A 0x931e8875u
#define SS_INIT_B 0x8b51f9ddu
#define SS_MULT_B 0x58f38dedu
#define SS_MIX_MULT_L 0xca01f9ddu
#define SS_MIX_MULT_R 0x4973f715u
#define SS_XSHIFT 16
#define SS_POOL 4

#define PCG_MULT                                                                                   \
    (((unsigned __int128)2549297995355413924ULL << 64) | (unsigned __int128)4865540595714422341ULL)

static uint32_t hashmix(uint32_t value, uint32_t *hash_const)
{
    value ^= *hash_const;
    *hash_const *= SS_MULT_A;
    value *= *hash_const;
    return value ^ (value >> SS_XSHIFT);
}

static uint32_t mix(uint32_t x, uint32_t y)
{
    uint32_t r = SS_MIX_MULT_L * x - SS_MIX_MULT_R * y;
    return r ^ (r >> SS_XSHIFT);
}

/* SeedSequence(seed).pool: the entropy as 32-bit words, low first ([0] for 0), mixed. */
static void seed_pool(uint64_t seed, uint32_t pool[SS_POOL])
{
    uint32_t words[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    const int n_words = seed >> 32 ? 2 : 1;
    uint32_t hc = SS_INIT_A;
    for (int i = 0; i < SS_POOL; i++) pool[i] = hashmix(i < n_words ? words[i] : 0, &hc);
    for (int s = 0; s < SS_POOL; s++)
        for (int d = 0; d < SS_POOL; d++)
            if (s != d) pool[d] = mix(pool[d], hashmix(pool[s], &hc));
}

static void step(mc_pcg64_t *r) { r->state = r->state * PCG_MULT + r->inc; }

void mc_pcg64_seed(mc_pcg64_t *r, uint64_t seed)
{
    uint32_t pool[SS_POOL], w[8];
    seed_pool(seed, pool);
    /* generate_state(4, uint64): 8 words cycling over the pool, paired little-endian */
    uint32_t hc = SS_INIT_B;
    for (int i = 0; i < 8; i++) {
        uint32_t v = pool[i % SS_POOL] ^ hc;
        hc *= SS_MULT_B;
        v *= hc;
        w[i] = v ^ (v >> SS_XSHIFT);
    }
    uint64_t v[4];
    for (int i = 0; i < 4; i++) v[i] = (uint64_t)w[2 * i] | (uint64_t)w[2 * i + 1] << 32;
    const unsigned __int128 s = (unsigned __int128)v[0] << 64 | v[1];
    const unsigned __int128 inc = (unsigned __int128)v[2] << 64 | v[3];
    r->state = 0;
    r->inc = inc << 1 | 1u;
    step(r);
    r->state += s;
    step(r);
    r->has_uint32 = false;
    r->uinteger = 0;
}

uint64_t mc_pcg64_next64(mc_pcg64_t *r)
{
    step(r);
    const uint64_t x = (uint64_t)(r->state >> 64) ^ (uint64_t)r->state;
    const unsigned rot = (unsigned)(r->state >> 122);
    return (x >> rot) | (x << ((64 - rot) & 63));
}

uint32_t mc_pcg64_next32(mc_pcg64_t *r)
{
    if (r->has_uint32) {
        r->has_uint32 = false;
        return r->uinteger;
    }
    const uint64_t next = mc_pcg64_next64(r);
    r->has_uint32 = true;
    r->uinteger = (uint32_t)(next >> 32);
    return (uint32_t)next;
}

/* buffered_bounded_lemire_uint32: uniform in [0, rng], rng < 0xffffffff. */
static uint32_t bounded_lemire(mc_pcg64_t *r, uint32_t rng)
{
    const uint32_t excl = rng + 1;
    uint64_t m = (uint64_t)mc_pcg64_next32(r) * excl;
    uint32_t leftover = (uint32_t)m;
    if (leftover < excl) {
        const uint32_t threshold = (UINT32_MAX - rng) % excl;
        while (leftover < threshold) {
            m = (uint64_t)mc_pcg64_next32(r) * excl;
            leftover = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

void mc_pcg64_integers_i32(mc_pcg64_t *r, int32_t low, int32_t high, int64_t n, int32_t *out)
{
    const uint32_t off = (uint32_t)low, rng = (uint32_t)((int64_t)high - 1 - low);
    for (int64_t i = 0; i < n; i++) {
        if (rng == 0) { /* numpy draws nothing for a one-value range */
            out[i] = low;
            continue;
        }
        if (rng == UINT32_MAX) { /* the full range: the draw itself */
            out[i] = (int32_t)(off + mc_pcg64_next32(r));
            continue;
        }
        out[i] = (int32_t)(off + bounded_lemire(r, rng));
    }
}
