/* The rules of the fused (flash) attention of the CUDA backend, shared by its kernels
 * (kernels/cuda/attention.cu) and by the host model of them (test/unit/kernels/test_attention_tiled.c),
 * so the tile ranges, masks, row statistics, dropout words and shared-memory layouts that the
 * kernels use are checked on a machine without a GPU. Plain C, usable from CUDA device code.
 *
 * The algorithm (backend.h's attention contract, the CPU kernel kernels/cpu/attention.c is the
 * reference). Per (batch row b, head h), query i and key j:
 *   kind(i, j): PAD (outside S x S), AFTER (j > i: masked), OTHER_DOC (j <= i, another document
 *   under --reset-attention-mask: masked), VISIBLE. Masked scores are -10000, not -inf, so a
 *   row's softmax runs over all S keys:
 *     M_i = max(visible and other-document scores, -10000 if i < S-1),
 *     l_i = sum_{j <= i} exp(s_ij - M_i) + (S-1-i) exp(-10000 - M_i),
 *     p_ij = exp(s_ij - M_i) / l_i (s_ij = -10000 for masked keys).
 * Forward, per query tile: the S-1-i AFTER keys are counted analytically before any key is
 * visited (mc_att_row_init: M = -10000, l = S-1-i); the key tiles up to the diagonal are visited
 * with an online softmax (running max, rescaled sum and output). The AFTER keys carry a nonzero
 * probability only when every other score of the row is below about -9913 (exp(-10000 - M) is 0
 * in fp32 otherwise); then, and only then, a second pass adds their exp(-10000 - M) * v_j to the
 * output, exactly like the CPU kernel's "full" rows. exp flushes to 0 below -87.34 like the CPU's
 * vector exp, so both make that decision alike. The saved state is M and l per row (not the
 * log-sum-exp: with M = -10000 its fp32 ulp, 1e-3, would perturb the recomputed p by 5e-4).
 * Dropout (site ATTN_PROBS) multiplies p after the softmax: the numerator of the output keeps
 * p * keep, the sum l does not; 1/(1-p) is applied with 1/l at the end.
 * Backward: D_i = dO_i . O_i; for each key tile (one CTA) the query tiles from the diagonal on
 * give dV += Pd^T dO and dK += scale dS^T Q with Pd = p keep/(1-p), dS = p (dP keep/(1-p) - D)
 * on VISIBLE entries only (masked scores are constants); query tiles before the diagonal add
 * only their AFTER probabilities to dV, and only when they carry any. A second kernel, one CTA
 * per query tile, gives dQ = scale dS K over the key tiles up to the diagonal. No atomics: the
 * result does not depend on scheduling. */
#ifndef MC_KERNELS_CUDA_ATTENTION_TILES_H
#define MC_KERNELS_CUDA_ATTENTION_TILES_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "kernels/backend.h"
#ifdef __cplusplus
}
#endif
#include "kernels/philox.h"

#ifdef __CUDACC__
#define MC_ATT_FN __host__ __device__ static inline
#define MC_ATT_CX __host__ __device__ static inline constexpr
#else
#define MC_ATT_FN static inline
#define MC_ATT_CX static inline
#endif

#define MC_ATT_MASK (-10000.0f)
/* Below this exp gives 0 (the CPU's mc_v4_exp does the same: FLT_MIN = exp(-87.3365)). */
#define MC_ATT_EXP_MIN (-87.3365447505531f)

MC_ATT_FN float mc_att_exp(float x) { return x < MC_ATT_EXP_MIN ? 0.0f : expf(x); }

enum { MC_ATT_PAD = 0, MC_ATT_AFTER = 1, MC_ATT_OTHER_DOC = 2, MC_ATT_VISIBLE = 3 };

/* The kind of entry (i, j) of an S x S score matrix; same_doc: the two tokens' documents agree
 * (always true without --reset-attention-mask). */
MC_ATT_CX int mc_att_kind(int i, int j, int S, int same_doc)
{
    return (i >= S || j >= S) ? MC_ATT_PAD
           : j > i            ? MC_ATT_AFTER
           : same_doc         ? MC_ATT_VISIBLE
                              : MC_ATT_OTHER_DOC;
}

/* Running max and sum of row i before any key is visited: the S-1-i AFTER keys, each
 * exp(-10000 - M) = 1. The last row has none. Rows past S get harmless values (never stored). */
MC_ATT_FN void mc_att_row_init(int i, int S, float *m, float *l)
{
    if (i >= S) {
        *m = 0.0f;
        *l = 1.0f;
    } else if (i < S - 1) {
        *m = MC_ATT_MASK;
        *l = (float)(S - 1 - i);
    } else {
        *m = -INFINITY;
        *l = 0.0f;
    }
}

/* exp(-10000 - M): the unnormalised weight of each AFTER key of row i (0 for rows without any). */
MC_ATT_FN float mc_att_after_weight(int i, int S, float m)
{
    return i < S - 1 ? mc_att_exp(MC_ATT_MASK - m) : 0.0f;
}

/* Forward causal pass: the score entering the online softmax, from s = scale * q.k. AFTER and PAD
 * entries are not part of it (-inf): mc_att_row_init counts the AFTER ones. */
MC_ATT_FN float mc_att_fwd_score(int kind, float s)
{
    return kind == MC_ATT_VISIBLE ? s : kind == MC_ATT_OTHER_DOC ? MC_ATT_MASK : -INFINITY;
}

/* Backward: p_ij from s = scale * q.k, the saved row max m and 1/l (masked entries: -10000). */
MC_ATT_FN float mc_att_prob(int kind, float s, float m, float inv_l)
{
    return kind == MC_ATT_PAD ? 0.0f
                              : mc_att_exp((kind == MC_ATT_VISIBLE ? s : MC_ATT_MASK) - m) * inv_l;
}

/* The score gradient p (dP - D), dP = dout . v with the dropout mask and 1/(1-p) applied;
 * masked scores are constants and get none. */
MC_ATT_FN float mc_att_dscore(int kind, float p, float dp, float D)
{
    return kind == MC_ATT_VISIBLE ? p * (dp - D) : 0.0f;
}

/* ---- tile ranges (tiles of bq queries and bk keys, tile t starts at t * b) ---- */
MC_ATT_CX int mc_att_ntiles(int n, int b) { return (n + b - 1) / b; }
/* Last key tile the query tile at i0 visits in the causal pass: the one holding key
 * min(i0 + bq, S) - 1, its last query. */
MC_ATT_CX int mc_att_last_key_tile(int i0, int bq, int bk, int S)
{
    return ((i0 + bq < S ? i0 + bq : S) - 1) / bk;
}
/* First key tile holding an AFTER key of some query of the tile at i0 (a key > i0). */
MC_ATT_CX int mc_att_first_after_tile(int i0, int bk) { return (i0 + 1) / bk; }
/* First query tile holding a query >= j0: the query tiles before it see the key tile at j0 only
 * as AFTER keys. */
MC_ATT_CX int mc_att_first_causal_query_tile(int j0, int bq) { return j0 / bq; }

/* ---- dropout ---- */
/* backend.h's element number of (i, j) of this rank's head h in a sample: [NH_full, S, S]. */
MC_ATT_FN uint64_t mc_att_elem(int head_offset, int h, int S, int i, int j)
{
    return ((uint64_t)(head_offset + h) * (uint64_t)S + (uint64_t)i) * (uint64_t)S + (uint64_t)j;
}
/* Keep bits of elements e (bit 0) and e + 1 (bit 1), mc_dropout_keep's decisions, with one
 * Philox call when both lie in the same block of four (always, for even S). */
MC_ATT_FN unsigned mc_att_keep2(const mc_dropout_t *d, uint64_t sample, uint64_t e)
{
    const mc_philox_ctr_t r = mc_dropout_block(d->seed, d->iteration, d->layer, d->site, sample, e);
    const unsigned k = (unsigned)(e & 3u);
    const uint32_t w1 =
        k == 3u ? mc_dropout_block(d->seed, d->iteration, d->layer, d->site, sample, e + 1).v[0]
                : r.v[k + 1u];
    return (unsigned)(mc_u32_to_unit(r.v[k]) >= d->p) |
           ((unsigned)(mc_u32_to_unit(w1) >= d->p) << 1);
}

/* ---- sizes ---- */
/* Head dimensions are padded (with zeros) to one of the compiled widths; 0: unsupported. */
MC_ATT_CX int mc_att_hdp(int HD)
{
    return HD <= 0 ? 0 : HD <= 64 ? 64 : HD <= 80 ? 80 : HD <= 128 ? 128 : HD <= 256 ? 256 : 0;
}
#define MC_ATT_HD_MAX 256

enum { MC_ATT_FWD = 0, MC_ATT_DKDV = 1, MC_ATT_DQ = 2 };
typedef struct {
    int bq, bk;
} mc_att_tiles_t;

/* Tile sizes of each kernel by element size (4: fp32 on FMA units, 2: bf16/fp16 on tensor cores)
 * and padded head dimension: multiples of 16 (the mma shape), bk <= 64 (a warp holds a score
 * row in pairs), chosen so every kernel with hdp <= 128 fits the 99 KiB of shared memory a block
 * may have on every sm_80+ GPU (hdp 256 needs the 163 KiB of A100/H100). Checked by
 * test_attention_tiled. */
MC_ATT_CX mc_att_tiles_t mc_att_mk_tiles(int bq, int bk)
{
    mc_att_tiles_t t = {bq, bk};
    return t;
}
MC_ATT_CX mc_att_tiles_t mc_att_tiles(int kernel, int tsize, int hdp)
{
    if (tsize == 2) {
        if (kernel == MC_ATT_FWD)
            return hdp <= 128 ? mc_att_mk_tiles(64, 32) : mc_att_mk_tiles(32, 32);
        if (kernel == MC_ATT_DKDV)
            return hdp <= 64 ? mc_att_mk_tiles(32, 64) : mc_att_mk_tiles(32, 32);
        return hdp <= 80 ? mc_att_mk_tiles(64, 32) : mc_att_mk_tiles(32, 32);
    }
    if (kernel == MC_ATT_FWD) return hdp <= 128 ? mc_att_mk_tiles(32, 32) : mc_att_mk_tiles(16, 16);
    if (kernel == MC_ATT_DKDV)
        return hdp <= 128 ? mc_att_mk_tiles(16, 32) : mc_att_mk_tiles(16, 16);
    return hdp <= 128 ? mc_att_mk_tiles(32, 16) : mc_att_mk_tiles(16, 16);
}

/* Shared-memory layout of one CTA (byte offsets, 128-byte aligned, and leading dimensions in
 * elements). T tiles (tsize bytes per element): q/dout [bq][ldt], k/v [bk][ldt], p/ds [bq][ldp];
 * fp32 tiles: s/dp [bq][lds], acc0 (O, dK or dQ) and acc1 (dV) [rows][ldf]; rows: 3 fp32 per
 * query (m, l or 1/l, and alpha or D); seg: bq + bk document numbers. The padding (16 bytes for
 * 16-bit tiles, as wmma needs ld % 8 == 0; one float for fp32 tiles, against bank conflicts)
 * is never read as data. Buffers a kernel does not use have size 0. */
typedef struct {
    size_t q, k, v, dout, acc0, acc1, s, dp, p, ds, rows, seg, bytes;
    int ldt, ldp, lds, ldf;
} mc_att_layout_t;

MC_ATT_CX size_t mc_att_align(size_t n) { return (n + 127u) / 128u * 128u; }

MC_ATT_CX mc_att_layout_t mc_att_layout(int kernel, int tsize, int hdp, int bq, int bk)
{
    mc_att_layout_t L = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const int pad = tsize == 4 ? 1 : 8;
    const int fwd = kernel == MC_ATT_FWD, dkdv = kernel == MC_ATT_DKDV;
    const size_t ts = (size_t)tsize;
    L.ldt = hdp + pad;
    L.ldp = bk + pad;
    L.lds = bk + 4;
    L.ldf = hdp + 4;
    size_t o = 0;
    L.q = o;
    o += mc_att_align((size_t)bq * (size_t)L.ldt * ts);
    L.k = o;
    o += mc_att_align((size_t)bk * (size_t)L.ldt * ts);
    L.v = o;
    o += mc_att_align((size_t)bk * (size_t)L.ldt * ts);
    L.dout = o;
    if (!fwd) o += mc_att_align((size_t)bq * (size_t)L.ldt * ts);
    L.acc0 = o;
    o += mc_att_align((size_t)(dkdv ? bk : bq) * (size_t)L.ldf * 4u);
    L.acc1 = o;
    if (dkdv) o += mc_att_align((size_t)bk * (size_t)L.ldf * 4u);
    L.s = o;
    o += mc_att_align((size_t)bq * (size_t)L.lds * 4u);
    L.dp = o;
    if (!fwd) o += mc_att_align((size_t)bq * (size_t)L.lds * 4u);
    L.p = o;
    if (kernel != MC_ATT_DQ) o += mc_att_align((size_t)bq * (size_t)L.ldp * ts);
    L.ds = o;
    if (!fwd) o += mc_att_align((size_t)bq * (size_t)L.ldp * ts);
    L.rows = o;
    o += mc_att_align((size_t)bq * 3u * 4u);
    L.seg = o;
    o += mc_att_align((size_t)(bq + bk) * 4u);
    L.bytes = o;
    return L;
}

#endif
