/* How the CUDA dropout kernel (kernels/cuda/dropout.cu) splits a [d0, b, inner] view into work
 * items, one Philox block (four consecutive mask words) per item. Plain C and __host__
 * __device__, so test/unit/kernels/test_cuda_dropout_map.c runs every item on the CPU and checks that
 * the items cover each element exactly once with the mask of mc_dropout_keep (the CPU's).
 *
 * Element numbering (backend.h, mc_dropout_t): row (i, b) of the view (i < d0, b < B) is the
 * elements e0 + [0, inner) of sample sample0 + b, e0 = (i + d0_offset) * inner_full +
 * inner_offset. Element e takes word e & 3 of Philox block e >> 2. A row's elements touch at
 * most (inner + 2) / 4 + 1 blocks (the most when e0 % 4 == 3), so every row gets that many items
 * and the ones past its last block are empty. */
#ifndef MC_KERNELS_CUDA_DROPOUT_MAP_H
#define MC_KERNELS_CUDA_DROPOUT_MAP_H

#include <stdint.h>

#include "kernels/philox.h"

/* Items per row. */
MC_HD long mc_dropout_items_per_row(int inner) { return (long)(inner + 2) / 4 + 1; }

typedef struct {
    long row;        /* i * B + b: the row's elements start at row * inner in the buffer */
    uint64_t sample; /* global sample index */
    uint64_t e0;     /* element number of the row's inner index 0 */
    uint64_t block;  /* Philox block (counter word 0 is its low 32 bits, as in mc_dropout_bits) */
    int j0, j1;      /* the item covers inner indices [j0, j1) of the row (empty when j0 >= j1) */
} mc_dropout_item_t;

/* Work item t of rows * mc_dropout_items_per_row(inner). */
MC_HD mc_dropout_item_t mc_dropout_item(long t, int B, int inner, int d0_offset, int inner_full,
                                        int inner_offset, uint64_t sample0)
{
    const long per = mc_dropout_items_per_row(inner);
    mc_dropout_item_t it;
    it.row = t / per;
    const long g = t % per, i = it.row / B, b = it.row % B;
    it.sample = sample0 + (uint64_t)b;
    const uint64_t e0 = (uint64_t)(i + d0_offset) * (uint64_t)inner_full + (uint64_t)inner_offset;
    it.e0 = e0;
    it.block = (e0 >> 2) + (uint64_t)g;
    /* the block's elements [4 block, 4 block + 4) within the row's [e0, e0 + inner) */
    const uint64_t lo = it.block * 4 > e0 ? it.block * 4 : e0;
    const uint64_t hi =
        it.block * 4 + 4 < e0 + (uint64_t)inner ? it.block * 4 + 4 : e0 + (uint64_t)inner;
    it.j0 = (int)(lo - e0);
    it.j1 = hi > lo ? (int)(hi - e0) : it.j0;
    return it;
}

/* The four mask words of Philox block `block` of a sample: word k is mc_dropout_bits(...,
 * e = 4 block + k) (the same counter and key). */
MC_HD mc_philox_ctr_t mc_dropout_block_words(uint64_t seed, uint32_t iteration, uint32_t layer,
                                             uint32_t site, uint64_t sample, uint64_t block)
{
    mc_philox_ctr_t c;
    c.v[0] = (uint32_t)block;
    c.v[1] = (uint32_t)sample;
    c.v[2] = iteration;
    c.v[3] = (layer << 4) | (site & 15u);
    const uint32_t k0 = (uint32_t)seed;
    const uint32_t k1 =
        (uint32_t)(seed >> 32) ^ (MC_PHILOX_TAG_DROPOUT << 16) ^ (uint32_t)(sample >> 32);
    return mc_philox4x32_10(c, k0, k1);
}

/* 1/(1-p) in fp32, as the CPU backend scales kept values (0 when p >= 1). */
MC_HD float mc_dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

#endif
