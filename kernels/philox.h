/* Philox4x32-10 (Salmon et al., SC11), shared by the CPU and CUDA backends so both draw the same
 * numbers. Header-only; usable from C and CUDA device code. */
#ifndef MC_KERNELS_PHILOX_H
#define MC_KERNELS_PHILOX_H

#include <stdint.h>

#ifndef MC_HD
#ifdef __CUDACC__
#define MC_HD __host__ __device__ static inline
#else
#define MC_HD static inline
#endif
#endif

typedef struct {
    uint32_t v[4];
} mc_philox_ctr_t;

MC_HD uint32_t mc_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi)
{
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

MC_HD mc_philox_ctr_t mc_philox4x32_10(mc_philox_ctr_t c, uint32_t k0, uint32_t k1)
{
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = mc_mulhilo32(0xD2511F53u, c.v[0], &hi0);
        uint32_t lo1 = mc_mulhilo32(0xCD9E8D57u, c.v[2], &hi1);
        mc_philox_ctr_t n;
        n.v[0] = hi1 ^ c.v[1] ^ k0;
        n.v[1] = lo1;
        n.v[2] = hi0 ^ c.v[3] ^ k1;
        n.v[3] = lo0;
        c = n;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c;
}

/* Uniform in [0, 1) with 24 bits, the same on host and device. */
MC_HD float mc_u32_to_unit(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

/* Domain tags keep the init and dropout streams apart for the same seed. */
#define MC_PHILOX_TAG_INIT 0x1A17u
#define MC_PHILOX_TAG_DROPOUT 0xD209u

/* The four dropout words of elements 4*(e/4) .. 4*(e/4)+3 of a sample (see mc_dropout_t in
 * backend.h): one Philox call serves four consecutive elements. */
MC_HD mc_philox_ctr_t mc_dropout_block(uint64_t seed, uint32_t iteration, uint32_t layer,
                                       uint32_t site, uint64_t sample, uint64_t e)
{
    mc_philox_ctr_t c;
    c.v[0] = (uint32_t)(e >> 2);
    c.v[1] = (uint32_t)sample;
    c.v[2] = iteration;
    c.v[3] = (layer << 4) | (site & 15u);
    uint32_t k0 = (uint32_t)seed;
    uint32_t k1 = (uint32_t)(seed >> 32) ^ (MC_PHILOX_TAG_DROPOUT << 16) ^ (uint32_t)(sample >> 32);
    return mc_philox4x32_10(c, k0, k1);
}

/* The dropout word for element e of a sample. */
MC_HD uint32_t mc_dropout_bits(uint64_t seed, uint32_t iteration, uint32_t layer, uint32_t site,
                               uint64_t sample, uint64_t e)
{
    return mc_dropout_block(seed, iteration, layer, site, sample, e).v[e & 3];
}

/* Keep element e? Same decision everywhere for the same (seed, iteration, layer, site, sample). */
MC_HD int mc_dropout_keep(uint64_t seed, uint32_t iteration, uint32_t layer, uint32_t site,
                          uint64_t sample, uint64_t e, float p)
{
    return mc_u32_to_unit(mc_dropout_bits(seed, iteration, layer, site, sample, e)) >= p;
}

#endif
