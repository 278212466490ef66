/* Context-parallel attention on OpenBLAS (backend.h's attention_block_* ops): one block of
 * queries against one block of keys, per (batch row, query head), in tiles of BLK_R query rows
 * whose scores [BLK_R, visible keys] live in the caller's scratch. Queries are read in place from
 * the qkv layout, keys and values from the compact kv layout, through leading dimensions.
 *
 * Forward: the softmax over the visible keys (max, then exp with cpu.h's vector exp and the sum
 * in double, as the whole-sequence op), the dropout of the normalised probabilities keyed by
 * global positions, the product with the values, and each row's log-sum-exp max + log(sum).
 * Backward (flash attention's): P = exp(s - lse) from the merged statistics, D = dout . out,
 * dS = P * (dropout(dout v^T) - D), accumulated into fp32 dq and dkv. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

#define BLK_R 64

static inline int imin(int a, int b) { return a < b ? a : b; }

/* Keys of the block that query row i sees: [0, n). */
static inline int visible(int i, int Sk, int q_pos, int k_pos, int mask)
{
    if (mask != MC_ATTN_BLOCK_CAUSAL) return Sk;
    const long n = (long)q_pos + i - k_pos + 1;
    return n < 0 ? 0 : n > Sk ? Sk : (int)n;
}

/* Offsets in row 0 of a kv tensor of group g's key head (its value head follows). */
static inline long kv_k(int b, int g, int NG, int HD) { return ((long)b * NG + g) * 2 * HD; }

/* Where the block's dropout element of (head h, query i, key j) starts: a row's elements are
 * consecutive in j. */
static inline uint64_t drop_e0(int head, int S_full, int qi, int kj)
{
    return ((uint64_t)head * (uint64_t)S_full + (uint64_t)qi) * (uint64_t)S_full + (uint64_t)kj;
}

void mc_cpu_attention_block_sizes(const mc_backend_t *be, mc_dtype_t dt, int Sq, int Sk, int B,
                                  int NH, int HD, size_t *fwd_scratch, size_t *bwd_scratch)
{
    (void)be, (void)dt, (void)B, (void)NH, (void)HD;
    const size_t tile = (size_t)imin(BLK_R, Sq > 0 ? Sq : 1) * (size_t)(Sk > 0 ? Sk : 1);
    *fwd_scratch = tile * sizeof(float);
    *bwd_scratch = 2 * tile * sizeof(float);
}

/* Rows [i0, i1) of one (b, h): scores into T (row stride Sk), softmax over the visible keys,
 * lse out, dropout, then out = T v. */
static void forward_tile(float *T, float *o, float *lse, const float *q, const float *k,
                         const float *v, long lq, long lkv, long lo, long ll, int i0, int i1,
                         int Sk, int HD, int q_pos, int k_pos, int mask, float scale,
                         const mc_dropout_t *d, uint64_t sample, int head, int S_full)
{
    const int r = i1 - i0, W = visible(i1 - 1, Sk, q_pos, k_pos, mask);
    if (W == 0) { /* no row of the tile sees a key */
        for (int i = i0; i < i1; i++) {
            memset(o + (long)i * lo, 0, (size_t)HD * sizeof(float));
            lse[(long)i * ll] = -INFINITY;
        }
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, W, HD, scale, q + (long)i0 * lq,
                (int)lq, k, (int)lkv, 0.0f, T, Sk);
    const int drop = d && d->p > 0.0f;
    const float dscale = drop ? mc_cpu_dropout_scale(d->p) : 1.0f;
    for (int i = i0; i < i1; i++) {
        float *row = T + (long)(i - i0) * Sk;
        const int nv = visible(i, Sk, q_pos, k_pos, mask);
        if (nv == 0) {
            memset(row, 0, (size_t)W * sizeof(float));
            lse[(long)i * ll] = -INFINITY;
            continue;
        }
        const float mx = mc_cpu_row_max(row, nv);
        const double sum = mc_cpu_exp_shift_sum(row, row, nv, mx);
        const float inv = (float)(1.0 / sum);
        for (int j = 0; j < nv; j++) row[j] *= inv;
        for (int j = nv; j < W; j++) row[j] = 0.0f;
        lse[(long)i * ll] = mx + (float)log(sum);
        if (drop)
            mc_cpu_dropout_span(row, row, nv, d, sample, drop_e0(head, S_full, q_pos + i, k_pos),
                                dscale);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, HD, W, 1.0f, T, Sk, v, (int)lkv, 0.0f,
                o + (long)i0 * lo, (int)lo);
}

void mc_cpu_attention_block_forward_f32(const mc_backend_t *be, float *out, float *lse,
                                        float *scratch, const float *qkv, const float *kv, int Sq,
                                        int Sk, int B, int NH, int NG, int HD, int q_pos, int k_pos,
                                        int S_full, int mask, float scale, const mc_dropout_t *d,
                                        int head_offset, int NH_full)
{
    (void)be, (void)NH_full;
    if (Sq <= 0 || B <= 0 || NH <= 0 || NG <= 0 || HD <= 0) return;
    const long lq = mc_cpu_qkv_width(NH, NG, HD) * B, lkv = 2L * NG * HD * B;
    const long lo = (long)B * NH * HD, ll = (long)B * NH;
    const int qpg = NH / NG, drop = d && d->p > 0.0f;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + mc_cpu_qkv_q(b, h, NH, NG, HD);
            const float *k = kv + kv_k(b, h / qpg, NG, HD), *v = k + HD;
            float *o = out + (long)b * NH * HD + (long)h * HD;
            float *l = lse + (long)b * NH + h;
            const uint64_t sample = drop ? d->sample0 + (uint64_t)b : 0;
            for (int i0 = 0; i0 < Sq; i0 += BLK_R)
                forward_tile(scratch, o, l, q, k, v, lq, lkv, lo, ll, i0, imin(i0 + BLK_R, Sq), Sk,
                             HD, q_pos, k_pos, mask, scale, d, sample, head_offset + h, S_full);
        }
}

/* One (b, h)'s pointers and strides for the backward. */
typedef struct {
    const float *q, *k, *v, *dO, *O, *lse;
    float *dq, *dk, *dv;
    long lq, lkv, lo, ll;
} bwd_head_t;

/* Rows [i0, i1) of one (b, h): P in T, dropout(P) then dP in U. */
static void backward_tile(float *T, float *U, const bwd_head_t *x, int i0, int i1, int Sk, int HD,
                          int q_pos, int k_pos, int mask, float scale, const mc_dropout_t *d,
                          uint64_t sample, int head, int S_full)
{
    const int r = i1 - i0, W = visible(i1 - 1, Sk, q_pos, k_pos, mask);
    if (W == 0) return;
    const int drop = d && d->p > 0.0f;
    const float dscale = drop ? mc_cpu_dropout_scale(d->p) : 1.0f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, W, HD, scale, x->q + (long)i0 * x->lq,
                (int)x->lq, x->k, (int)x->lkv, 0.0f, T, Sk);
    for (int i = i0; i < i1; i++) { /* P = exp(s - lse) over the visible keys, 0 beyond */
        float *p = T + (long)(i - i0) * Sk, *u = U + (long)(i - i0) * Sk;
        const int nv = visible(i, Sk, q_pos, k_pos, mask);
        if (nv > 0) mc_cpu_exp_shift_sum(p, p, nv, x->lse[(long)i * x->ll]);
        for (int j = nv; j < W; j++) p[j] = 0.0f;
        if (drop)
            mc_cpu_dropout_span(u, p, nv, d, sample, drop_e0(head, S_full, q_pos + i, k_pos),
                                dscale);
        else memcpy(u, p, (size_t)nv * sizeof(float));
        for (int j = nv; j < W; j++) u[j] = 0.0f;
    }
    /* dv[0:W] += dropout(P)^T dout */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, W, HD, r, 1.0f, U, Sk,
                x->dO + (long)i0 * x->lo, (int)x->lo, 1.0f, x->dv, (int)x->lkv);
    /* dP = dropout(dout v^T); dS = P (dP - D), D = dout . out */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, W, HD, 1.0f, x->dO + (long)i0 * x->lo,
                (int)x->lo, x->v, (int)x->lkv, 0.0f, U, Sk);
    for (int i = i0; i < i1; i++) {
        float *p = T + (long)(i - i0) * Sk, *u = U + (long)(i - i0) * Sk;
        const int nv = visible(i, Sk, q_pos, k_pos, mask);
        const float *dO = x->dO + (long)i * x->lo, *O = x->O + (long)i * x->lo;
        double dot = 0.0;
        for (int c = 0; c < HD; c++) dot += (double)dO[c] * O[c];
        const float D = (float)dot;
        if (drop)
            mc_cpu_dropout_span(u, u, nv, d, sample, drop_e0(head, S_full, q_pos + i, k_pos),
                                dscale);
        for (int j = 0; j < nv; j++) p[j] = p[j] * (u[j] - D);
    }
    /* dq += scale dS k; dk += scale dS^T q */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, HD, W, scale, T, Sk, x->k,
                (int)x->lkv, 1.0f, x->dq + (long)i0 * x->lo, (int)x->lo);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, W, HD, r, scale, T, Sk,
                x->q + (long)i0 * x->lq, (int)x->lq, 1.0f, x->dk, (int)x->lkv);
}

void mc_cpu_attention_block_backward_f32(const mc_backend_t *be, float *dq, float *dkv,
                                         float *scratch, const float *dout, const float *qkv,
                                         const float *kv, const float *out, const float *lse,
                                         int Sq, int Sk, int B, int NH, int NG, int HD, int q_pos,
                                         int k_pos, int S_full, int mask, float scale,
                                         const mc_dropout_t *d, int head_offset, int NH_full)
{
    (void)be, (void)NH_full;
    if (Sq <= 0 || Sk <= 0 || B <= 0 || NH <= 0 || NG <= 0 || HD <= 0) return;
    const int qpg = NH / NG, drop = d && d->p > 0.0f;
    float *T = scratch, *U = scratch + (long)imin(BLK_R, Sq) * Sk;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const long ho = (long)b * NH * HD + (long)h * HD, ko = kv_k(b, h / qpg, NG, HD);
            const bwd_head_t x = {.q = qkv + mc_cpu_qkv_q(b, h, NH, NG, HD),
                                  .k = kv + ko,
                                  .v = kv + ko + HD,
                                  .dO = dout + ho,
                                  .O = out + ho,
                                  .lse = lse + (long)b * NH + h,
                                  .dq = dq + ho,
                                  .dk = dkv + ko,
                                  .dv = dkv + ko + HD,
                                  .lq = mc_cpu_qkv_width(NH, NG, HD) * B,
                                  .lkv = 2L * NG * HD * B,
                                  .lo = (long)B * NH * HD,
                                  .ll = (long)B * NH};
            const uint64_t sample = drop ? d->sample0 + (uint64_t)b : 0;
            for (int i0 = 0; i0 < Sq; i0 += BLK_R)
                backward_tile(T, U, &x, i0, imin(i0 + BLK_R, Sq), Sk, HD, q_pos, k_pos, mask, scale,
                              d, sample, head_offset + h, S_full);
        }
}

void mc_cpu_attention_lse_merge(const mc_backend_t *be, float *out, float *lse, const float *part,
                                const float *part_lse, long rows, int NH, int HD)
{
    (void)be;
    for (long r = 0; r < rows * NH; r++) {
        const float a = lse[r], b = part_lse[r];
        float *o = out + r * HD;
        const float *p = part + r * HD;
        if (b == -INFINITY) continue;
        if (a == -INFINITY) {
            memcpy(o, p, (size_t)HD * sizeof(float));
            lse[r] = b;
            continue;
        }
        /* L = max + log(exp(a - max) + exp(b - max)), in double */
        const double mx = a > b ? a : b;
        const double ea = exp((double)a - mx), eb = exp((double)b - mx), s = ea + eb;
        const float wa = (float)(ea / s), wb = (float)(eb / s);
        for (int c = 0; c < HD; c++) o[c] = o[c] * wa + p[c] * wb;
        lse[r] = (float)(mx + log(s));
    }
}
