/* Causal self-attention on OpenBLAS, per (batch row, query head), reading q/k/v in place from
 * the [s, b, NG*(NH/NG+2)*HD] qkv buffer through leading dimensions (no copies). With query
 * groups (NG < NH) the query heads of a group share its key and value head; the backward sums
 * their dk/dv contributions into the group's columns (the first head of a group overwrites).
 *
 * Causality is exploited in blocks of ATT_R query rows: scores are computed only for the keys a
 * block can see (masked scores are the constant -10000 whatever q.k is), and the products with
 * the probabilities skip the masked keys whenever their probability is exactly 0 in fp32
 * (exp(-10000 - max) is 0 unless every visible score of the row is below about -9913; a block
 * where it is not uses all S keys, so the result is exact either way).
 *
 * With segments (--reset-attention-mask), keys j <= i of another document are masked as well:
 * their score is set to -10000 after the scores product and the softmax handles them as ordinary
 * entries (so the masked keys j > i still share one probability); their gradient is zeroed.
 *
 * Dropout on the probabilities (site ATTN_PROBS) regenerates the Philox mask: element
 * (head_offset + head) * S * S + i * S + j of sample sample0 + b. The forward pass applies it to a
 * stack tile of ATT_R x ATT_C probabilities at a time (ops never allocate); the backward pass uses
 * the caller's scratch. Softmax: exp is cpu.h's vector exp (which flushes results below FLT_MIN to
 * 0), sums are accumulated in double. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

#define ATT_R 64
#define ATT_C 256
#define ATT_MASK (-10000.0f)

static inline int imin(int a, int b) { return a < b ? a : b; }

/* --reset-attention-mask: keys j <= i of another document than query i get the masked score too;
 * the softmax then treats them as ordinary entries of the constant value -10000. */
static void mask_segments(float *P, int S, int i0, int i1, const int32_t *seg)
{
    for (int i = i0; i < i1; i++) {
        float *row = P + (long)i * S;
        const int32_t si = seg[i];
        for (int j = 0; j < i; j++)
            if (seg[j] != si) row[j] = ATT_MASK;
    }
}

/* Do masked keys of row i carry a nonzero probability? (They all carry the same one.) */
static inline int masked_nonzero(const float *P, int S, int i)
{
    return i < S - 1 && P[(long)i * S + (S - 1)] != 0.0f;
}

void mc_cpu_attention_forward_f32(const mc_backend_t *be, float *out, float *probs,
                                  const float *qkv, int S, int B, int NH, int NG, int HD,
                                  const int32_t *segments, float scale, const mc_dropout_t *d,
                                  int head_offset, int NH_full)
{
    (void)be;
    (void)NH_full; /* the element index only needs this rank's head offset */
    if (S <= 0 || B <= 0 || NH <= 0 || NG <= 0 || HD <= 0) return;
    const long lq = mc_cpu_qkv_width(NH, NG, HD) * B, lo = (long)B * NH * HD;
    const int drop = d && d->p > 0.0f;
    const float dscale = drop ? mc_cpu_dropout_scale(d->p) : 1.0f;
    const long SS = (long)S * S;

    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + mc_cpu_qkv_q(b, h, NH, NG, HD);
            const float *k = qkv + mc_cpu_qkv_k(b, h, NH, NG, HD), *v = k + HD;
            float *o = out + (long)b * NH * HD + (long)h * HD;
            float *P = probs + ((long)b * NH + h) * SS;
            const uint64_t sample = drop ? d->sample0 + (uint64_t)b : 0;
            const uint64_t ebase = (uint64_t)(head_offset + h) * (uint64_t)SS;
            const int32_t *seg = segments ? segments + (long)b * S : NULL;

            for (int i0 = 0; i0 < S; i0 += ATT_R) {
                const int i1 = imin(i0 + ATT_R, S), r = i1 - i0;
                /* scores[i0:i1, 0:i1] = scale * q k^T */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, i1, HD, scale,
                            q + (long)i0 * lq, (int)lq, k, (int)lq, 0.0f, P + (long)i0 * S, S);
                if (seg) mask_segments(P, S, i0, i1, seg);
                int full = 0;
                for (int i = i0; i < i1; i++) {
                    float *row = P + (long)i * S;
                    const int nv = i + 1, nm = S - nv;
                    float mx = mc_cpu_row_max(row, nv);
                    if (nm > 0 && ATT_MASK > mx) mx = ATT_MASK;
                    double sum = mc_cpu_exp_shift_sum(row, row, nv, mx);
                    float em = 0.0f;
                    if (nm > 0) {
                        em = mc_v4_exp(mc_v4_splat(ATT_MASK - mx))[0];
                        sum += (double)nm * em;
                    }
                    const float inv = (float)(1.0 / sum);
                    for (int j = 0; j < nv; j++) row[j] *= inv;
                    const float pm = em * inv;
                    for (int j = nv; j < S; j++) row[j] = pm;
                    full |= pm != 0.0f;
                }
                const int W = full ? S : i1; /* keys with a possibly nonzero probability */
                float *ob = o + (long)i0 * lo;
                if (!drop) {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, HD, W, 1.0f,
                                P + (long)i0 * S, S, v, (int)lq, 0.0f, ob, (int)lo);
                    continue;
                }
                float tile[ATT_R * ATT_C];
                for (int c0 = 0; c0 < W; c0 += ATT_C) {
                    const int c = imin(ATT_C, W - c0);
                    for (int i = i0; i < i1; i++) {
                        float *t = tile + (long)(i - i0) * ATT_C;
                        int ce = full ? c : imin(c, i + 1 - c0);
                        if (ce < 0) ce = 0;
                        mc_cpu_dropout_span(t, P + (long)i * S + c0, ce, d, sample,
                                            ebase + (uint64_t)i * (uint64_t)S + (uint64_t)c0,
                                            dscale);
                        for (int j = ce; j < c; j++) t[j] = 0.0f;
                    }
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, HD, c, 1.0f, tile,
                                ATT_C, v + (long)c0 * lq, (int)lq, c0 ? 1.0f : 0.0f, ob, (int)lo);
                }
            }
        }
}

void mc_cpu_attention_backward_f32(const mc_backend_t *be, float *dqkv, float *scratch,
                                   const float *dout, const float *qkv, const float *probs, int S,
                                   int B, int NH, int NG, int HD, const int32_t *segments,
                                   float scale, const mc_dropout_t *d, int head_offset, int NH_full)
{
    (void)be;
    (void)NH_full;
    if (S <= 0 || B <= 0 || NH <= 0 || NG <= 0 || HD <= 0) return;
    const long lq = mc_cpu_qkv_width(NH, NG, HD) * B, lo = (long)B * NH * HD;
    const int drop = d && d->p > 0.0f;
    const float dscale = drop ? mc_cpu_dropout_scale(d->p) : 1.0f;
    const long SS = (long)S * S;

    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const long qo = mc_cpu_qkv_q(b, h, NH, NG, HD), ko = mc_cpu_qkv_k(b, h, NH, NG, HD);
            const float *q = qkv + qo, *k = qkv + ko, *v = k + HD;
            float *dq = dqkv + qo, *dk = dqkv + ko, *dv = dk + HD;
            /* the group's first query head overwrites its dk/dv, the others add to them */
            const int first = h % (NH / NG) == 0;
            const float *dO = dout + (long)b * NH * HD + (long)h * HD;
            const float *P = probs + ((long)b * NH + h) * SS;
            float *T = scratch + ((long)b * NH + h) * SS;
            const uint64_t sample = drop ? d->sample0 + (uint64_t)b : 0;
            const uint64_t ebase = (uint64_t)(head_offset + h) * (uint64_t)SS;
            const int32_t *seg = segments ? segments + (long)b * S : NULL;

            if (first)
                for (int s = 0; s < S; s++)
                    memset(dv + (long)s * lq, 0, (size_t)HD * sizeof(float));

            for (int i0 = 0; i0 < S; i0 += ATT_R) {
                const int i1 = imin(i0 + ATT_R, S), r = i1 - i0;
                int full = 0;
                for (int i = i0; i < i1; i++) full |= masked_nonzero(P, S, i);
                const int W = full ? S : i1;

                /* dv[0:W] += dropout(P)[i0:i1, 0:W]^T @ dout[i0:i1] */
                const float *Pd = P;
                if (drop) {
                    for (int i = i0; i < i1; i++) {
                        const int ce = full ? W : i + 1;
                        float *t = T + (long)i * S;
                        mc_cpu_dropout_span(t, P + (long)i * S, ce, d, sample,
                                            ebase + (uint64_t)i * (uint64_t)S, dscale);
                        for (int j = ce; j < W; j++) t[j] = 0.0f;
                    }
                    Pd = T;
                }
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, W, HD, r, 1.0f,
                            Pd + (long)i0 * S, S, dO + (long)i0 * lo, (int)lo, 1.0f, dv, (int)lq);

                /* dP[i0:i1, 0:W] = dout @ v^T, then the dropout mask, then the softmax backward
                 * dS = P * (dP - rowsum(dP * P)); masked scores get no gradient. */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r, W, HD, 1.0f,
                            dO + (long)i0 * lo, (int)lo, v, (int)lq, 0.0f, T + (long)i0 * S, S);
                for (int i = i0; i < i1; i++) {
                    float *t = T + (long)i * S;
                    const float *pr = P + (long)i * S;
                    const int ce = full ? W : i + 1; /* P is exactly 0 beyond ce */
                    if (drop)
                        mc_cpu_dropout_span(t, t, ce, d, sample, ebase + (uint64_t)i * (uint64_t)S,
                                            dscale);
                    double dot = 0.0;
                    for (int j = 0; j < ce; j++) dot += (double)t[j] * pr[j];
                    const float fd = (float)dot;
                    for (int j = 0; j <= i; j++) t[j] = pr[j] * (t[j] - fd);
                    for (int j = i + 1; j < W; j++) t[j] = 0.0f;
                    if (seg) { /* keys of other documents: masked_fill made the score a constant */
                        const int32_t si = seg[i];
                        for (int j = 0; j < i; j++)
                            if (seg[j] != si) t[j] = 0.0f;
                    }
                }
                /* dq[i0:i1] = scale * dS[i0:i1, 0:i1] @ k[0:i1] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r, HD, i1, scale,
                            T + (long)i0 * S, S, k, (int)lq, 0.0f, dq + (long)i0 * lq, (int)lq);
            }
            /* dk[j0:j1] = scale * dS[j0:S, j0:j1]^T @ q[j0:S] (dS is lower triangular) */
            for (int j0 = 0; j0 < S; j0 += ATT_R) {
                const int c = imin(ATT_R, S - j0);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, HD, S - j0, scale,
                            T + (long)j0 * S + j0, S, q + (long)j0 * lq, (int)lq,
                            first ? 0.0f : 1.0f, dk + (long)j0 * lq, (int)lq);
            }
        }
}
