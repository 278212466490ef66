/* numpy-compatible MT19937 and legacy RandomState.shuffle; see mt19937.h. */
#include "data/mt19937.h"

#include <math.h>

#define MT_M 397
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu
#define MT_MATRIX_A 0x9908b0dfu

void mc_mt19937_seed(mc_mt19937_t *r, uint32_t seed)
{
    r->mt[0] = seed;
    for (int i = 1; i < MC_MT19937_N; i++) {
        uint32_t p = r->mt[i - 1];
        r->mt[i] = 1812433253u * (p ^ (p >> 30)) + (uint32_t)i;
    }
    r->pos = MC_MT19937_N;
}

static void mt_generate(mc_mt19937_t *r)
{
    uint32_t *mt = r->mt;
    int k;
    for (k = 0; k < MC_MT19937_N - MT_M; k++) {
        uint32_t y = (mt[k] & MT_UPPER) | (mt[k + 1] & MT_LOWER);
        mt[k] = mt[k + MT_M] ^ (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
    }
    for (; k < MC_MT19937_N - 1; k++) {
        uint32_t y = (mt[k] & MT_UPPER) | (mt[k + 1] & MT_LOWER);
        mt[k] = mt[k + (MT_M - MC_MT19937_N)] ^ (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
    }
    uint32_t y = (mt[MC_MT19937_N - 1] & MT_UPPER) | (mt[0] & MT_LOWER);
    mt[MC_MT19937_N - 1] = mt[MT_M - 1] ^ (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
    r->pos = 0;
}

uint32_t mc_mt19937_next32(mc_mt19937_t *r)
{
    if (r->pos >= MC_MT19937_N) mt_generate(r);
    uint32_t y = r->mt[r->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

uint64_t mc_mt19937_next64(mc_mt19937_t *r)
{
    uint64_t hi = mc_mt19937_next32(r); /* high word first, as numpy's mt19937_next64 */
    uint64_t lo = mc_mt19937_next32(r);
    return hi << 32 | lo;
}

/* Smallest 2^k - 1 >= max (max > 0): numpy's mask |= mask >> 1 ... >> 32. */
static inline uint64_t mask_for(uint64_t max) { return ~(uint64_t)0 >> __builtin_clzll(max); }

uint64_t mc_mt19937_bounded(mc_mt19937_t *r, uint64_t max)
{
    if (max == 0) return 0;
    uint64_t mask = mask_for(max), v;
    if (max <= 0xffffffffu) {
        do v = mc_mt19937_next32(r) & mask;
        while (v > max);
    } else {
        do v = mc_mt19937_next64(r) & mask;
        while (v > max);
    }
    return v;
}

double mc_mt19937_next_double(mc_mt19937_t *r)
{
    const int32_t a = (int32_t)(mc_mt19937_next32(r) >> 5),
                  b = (int32_t)(mc_mt19937_next32(r) >> 6);
    return (a * 67108864.0 + b) / 9007199254740992.0;
}

/* random_binomial_inversion for n = 1: X counts failures of U > px with px updated as numpy
 * does; the bound min(n, np + 10 sqrt(npq + 1)) is 1 for n = 1. */
static int binomial1_inversion(mc_mt19937_t *r, double p)
{
    const double q = 1.0 - p, qn = exp(log(q)); /* numpy: exp(n * log(q)), not q */
    int x = 0;
    double px = qn, u = mc_mt19937_next_double(r);
    while (u > px) {
        x++;
        if (x > 1) {
            x = 0;
            px = qn;
            u = mc_mt19937_next_double(r);
        } else {
            u -= px;
            px = ((1 - x + 1) * p * px) / (x * q);
        }
    }
    return x;
}

/* legacy_random_binomial_original: unlike Generator's, no shortcut for p = 0 (one draw too). */
int mc_mt19937_binomial1(mc_mt19937_t *r, double p)
{
    if (p <= 0.5) return binomial1_inversion(r, p);
    return 1 - binomial1_inversion(r, 1.0 - p);
}

/* The draws depend only on the RNG and i, not on the array, so they are made a block ahead and
 * the elements they will touch prefetched: the swaps are random accesses, which otherwise
 * dominate (3-4x faster on arrays larger than the cache). The order of draws and swaps is
 * unchanged. */
#define MC_SHUFFLE_BLOCK 64
#define MC_DEFINE_SHUFFLE(name, T)                                                                 \
    void name(mc_mt19937_t *r, T *x, int64_t n)                                                    \
    {                                                                                              \
        int64_t js[MC_SHUFFLE_BLOCK];                                                              \
        for (int64_t i = n - 1; i >= 1;) {                                                         \
            int m = i < MC_SHUFFLE_BLOCK ? (int)i : MC_SHUFFLE_BLOCK;                              \
            for (int k = 0; k < m; k++) {                                                          \
                js[k] = (int64_t)mc_mt19937_bounded(r, (uint64_t)(i - k));                         \
                __builtin_prefetch(&x[js[k]], 1);                                                  \
            }                                                                                      \
            for (int k = 0; k < m; k++, i--) {                                                     \
                T t = x[i];                                                                        \
                x[i] = x[js[k]];                                                                   \
                x[js[k]] = t;                                                                      \
            }                                                                                      \
        }                                                                                          \
    }

MC_DEFINE_SHUFFLE(mc_mt19937_shuffle_i32, int32_t)
MC_DEFINE_SHUFFLE(mc_mt19937_shuffle_u32, uint32_t)
MC_DEFINE_SHUFFLE(mc_mt19937_shuffle_i64, int64_t)
