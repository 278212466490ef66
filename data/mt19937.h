/* numpy-compatible MT19937 (MEGATRON.md section 2.10): what `numpy.random.RandomState(seed)`
 * draws and how its legacy `shuffle` consumes the draws, so that Megatron's document and
 * shuffle indices are reproduced bit for bit.
 *
 * - Seeding is init_genrand (numpy's mt19937_seed for an integer seed, C++ std::mt19937(seed)).
 * - next32 is the tempered 32-bit output; next64 is (next32 << 32) | next32, high word drawn
 *   first (numpy's mt19937_next64).
 * - bounded(max) is numpy's random_interval: a uniform integer in [0, max] by masked rejection
 *   with the smallest all-ones mask >= max, 32-bit draws when max <= 0xffffffff, else 64-bit.
 * - shuffle is RandomState.shuffle on a 1-D array (frozen by NEP 19): for i = n-1 down to 1,
 *   swap x[i] with x[bounded(i)]. */
#ifndef MC_DATA_MT19937_H
#define MC_DATA_MT19937_H

#include <stdint.h>

#define MC_MT19937_N 624

typedef struct {
    uint32_t mt[MC_MT19937_N];
    int pos; /* next untempered word; MC_MT19937_N = regenerate first */
} mc_mt19937_t;

/* RandomState(seed) for an integer seed in [0, 2^32 - 1] (numpy rejects others). */
void mc_mt19937_seed(mc_mt19937_t *r, uint32_t seed);
uint32_t mc_mt19937_next32(mc_mt19937_t *r);
uint64_t mc_mt19937_next64(mc_mt19937_t *r);
/* Uniform in [0, max] (numpy random_interval). bounded(0) = 0 and draws nothing. */
uint64_t mc_mt19937_bounded(mc_mt19937_t *r, uint64_t max);

/* numpy's mt19937_next_double: (a >> 5, b >> 6) of two 32-bit draws, 53 bits in [0, 1). */
double mc_mt19937_next_double(mc_mt19937_t *r);
/* RandomState.binomial(1, p) for p in [0, 1] (numpy's legacy_random_binomial with n = 1: the
 * inversion algorithm on min(p, 1 - p), one double per try, a retry when the walk passes its
 * bound; p = 0 draws too). FIM's Bernoulli draws (data/fim.h). */
int mc_mt19937_binomial1(mc_mt19937_t *r, double p);

/* RandomState.shuffle of a 1-D array of n elements; the element type does not change the draws. */
void mc_mt19937_shuffle_i32(mc_mt19937_t *r, int32_t *x, int64_t n);
void mc_mt19937_shuffle_u32(mc_mt19937_t *r, uint32_t *x, int64_t n);
void mc_mt19937_shuffle_i64(mc_mt19937_t *r, int64_t *x, int64_t n);

#endif
