/* numpy-compatible PCG64: what `numpy.random.default_rng(seed)` draws for the calls Megatron
 * makes with it (MockGPTLowLevelDataset's sequence lengths), bit for bit.
 *
 * - Seeding is SeedSequence(seed).generate_state(4, uint64) -> (s0, s1, i0, i1), then
 *   pcg64_set_seed: state = s0:s1 and increment = i0:i1 as 128-bit numbers (high word first)
 *   through pcg_setseq_128_srandom_r.
 * - next64 is the XSL-RR output of the stepped 128-bit LCG (numpy's PCG64.random_raw).
 * - next32 halves a 64-bit draw: the low word now, the high word on the next call.
 * - integers_i32 is Generator.integers(low, high, size, dtype=int32) with endpoint False:
 *   low + buffered_bounded_lemire_uint32(high - 1 - low) (Lemire's rejection, one 32-bit draw
 *   each, more on rejection). */
#ifndef MC_DATA_PCG64_H
#define MC_DATA_PCG64_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    unsigned __int128 state, inc;
    bool has_uint32; /* a buffered high word from next32 */
    uint32_t uinteger;
} mc_pcg64_t;

/* default_rng(seed) for an integer seed >= 0. */
void mc_pcg64_seed(mc_pcg64_t *r, uint64_t seed);
uint64_t mc_pcg64_next64(mc_pcg64_t *r);
uint32_t mc_pcg64_next32(mc_pcg64_t *r);
/* Generator.integers(low, high, size=n, dtype=numpy.int32), low < high. */
void mc_pcg64_integers_i32(mc_pcg64_t *r, int32_t low, int32_t high, int64_t n, int32_t *out);

#endif
