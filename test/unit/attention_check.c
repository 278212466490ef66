/* Attention cases against the CPU backend (attention_check.h). */
#include "test/unit/attention_check.h"

#include "kernels/philox.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const mc_dropout_t att_dropout = {.seed = 77, .iteration = 5, .layer = 2, .site = MC_DROPOUT_SITE_ATTN_PROBS,
                                  .sample0 = 40, .p = 0.25f};

/* FNV-1a over the case's fields, so cases that differ in any field (dropout, segments too) get
 * inputs of their own. */
uint64_t att_case_seed(const att_case_t *c)
{
    const long f[] = {c->dt, c->S, c->B, c->NH, c->HD, c->head_offset, c->NH_full,
                      c->dropout, c->segments, c->masked_dominant, lroundf(c->qk_range * 16.0f)};
    const char *env = getenv("MC_ATT_SEED");
    uint64_t h = 14695981039346656037ull;
    for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++) h = (h ^ (uint64_t)f[k]) * 1099511628211ull;
    if (att_ng(c) != c->NH) h = (h ^ (uint64_t)att_ng(c)) * 1099511628211ull; /* MHA cases keep their inputs */
    return h + (env ? strtoull(env, NULL, 10) : 0);
}

static const mc_dtype_t DTYPES[] = {MC_DT_F32, MC_DT_BF16, MC_DT_F16};

/* S = 1, one tile, a tile +- 1 and tails for every kernel's tiles (16, 32, 64), and a
 * GPT-length sequence: 1024 on a GPU, 640 on the emulated device (ten 64-key tiles; S = 1024
 * alone took three quarters of the emulated op test's time, its cost growing as S^2). */
#ifdef MC_CUDA_EMU
#define ATT_LONG_S 640
#else
#define ATT_LONG_S 1024
#endif
static int cases_lengths(att_case_t *cs)
{
    static const int Ss[] = {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 130, 257};
    int n = 0;
    for (int t = 0; t < 3; t++)
        for (unsigned u = 0; u < sizeof(Ss) / sizeof(Ss[0]); u++)
            cs[n++] = (att_case_t){.dt = DTYPES[t], .S = Ss[u], .B = 2, .NH = 2, .HD = 64, .NH_full = 2,
                                   .dropout = (int)(u & 1)};
    for (int t = 1; t < 3; t++)
        cs[n++] = (att_case_t){.dt = DTYPES[t], .S = ATT_LONG_S, .B = 1, .NH = 2, .HD = 64, .NH_full = 2, .dropout = 1};
    return n;
}

/* The GPT head dims (64: 124M/350M, 128: 1.3B, 80: 2.7B), dims padded to them (3, 96) or to
 * 256 (200), with this rank's heads at an offset of NH_full (tensor parallelism). */
static int cases_head_dims(att_case_t *cs)
{
    static const int HDs[] = {64, 80, 128, 3, 96, 200};
    int n = 0;
    for (int t = 0; t < 3; t++)
        for (int u = 0; u < 6; u++)
            for (int drop = 0; drop <= 1; drop++)
                cs[n++] = (att_case_t){.dt = DTYPES[t], .S = 77, .B = 2, .NH = 2, .HD = HDs[u], .head_offset = 2,
                                       .NH_full = 6, .dropout = drop};
    return n;
}

static int cases_dropout(att_case_t *cs)
{
    int n = 0;
    for (int t = 0; t < 3; t++) {
        cs[n++] = (att_case_t){.dt = DTYPES[t], .S = 197, .B = 3, .NH = 3, .HD = 64, .head_offset = 1, .NH_full = 4,
                               .dropout = 1};
        /* odd S: key pairs straddle Philox blocks */
        cs[n++] = (att_case_t){.dt = DTYPES[t], .S = 33, .B = 2, .NH = 3, .HD = 80, .NH_full = 3, .dropout = 1};
    }
    return n;
}

/* Segments, scores up to about +-50 (the online softmax rescales a lot), every visible score far
 * below -10000 (the after pass of the forward, the tail query tiles of dK/dV), and all-equal
 * segments. */
static int cases_other(int group, att_case_t *cs)
{
    int n = 0;
    for (int t = 0; t < 3; t++)
        for (int pass = 0; pass < 4; pass++) {
            const att_case_t seg = {.dt = DTYPES[t], .S = 131, .B = 3, .NH = 2, .HD = 64, .NH_full = 2,
                                    .dropout = pass & 1, .segments = 1};
            const att_case_t peak = {.dt = DTYPES[t], .S = 150, .B = 2, .NH = 1, .HD = 128, .NH_full = 1,
                                     .dropout = 1, .qk_range = 4.0f};
            const att_case_t md = {.dt = DTYPES[t], .S = 70, .B = 2, .NH = 1, .HD = 4, .NH_full = 1,
                                   .dropout = pass & 1, .segments = pass >> 1, .masked_dominant = 1};
            const att_case_t eq = {.dt = DTYPES[t], .S = 131, .B = 2, .NH = 2, .HD = 64, .NH_full = 2,
                                   .dropout = 1, .segments = 2};
            if (group == ATT_SEGMENTS && pass < 2) cs[n++] = seg;
            if (group == ATT_PEAKED && pass == 0) cs[n++] = peak;
            if (group == ATT_MASKED_DOMINANT) cs[n++] = md;
            if (group == ATT_BITWISE && pass == 0) cs[n++] = eq;
        }
    return n;
}

/* Grouped-query attention: MQA and two groups, with dropout, segments, odd S and several head
 * dims (the dK/dV kernel sums a group's query heads). */
static int cases_gqa(att_case_t *cs)
{
    int n = 0;
    for (int t = 0; t < 3; t++) {
        cs[n++] = (att_case_t){.dt = DTYPES[t], .S = 77, .B = 2, .NH = 4, .NG = 1, .HD = 64, .NH_full = 4, .dropout = 1};
        cs[n++] = (att_case_t){.dt = DTYPES[t], .S = 65, .B = 2, .NH = 4, .NG = 2, .HD = 64, .head_offset = 4,
                               .NH_full = 8, .dropout = 1, .segments = 1};
        cs[n++] = (att_case_t){.dt = DTYPES[t], .S = 33, .B = 1, .NH = 6, .NG = 2, .HD = 80, .NH_full = 6};
        cs[n++] = (att_case_t){.dt = DTYPES[t], .S = 40, .B = 1, .NH = 2, .NG = 1, .HD = 128, .NH_full = 2,
                               .dropout = 1};
    }
    return n;
}

int att_cases(int group, att_case_t *cases)
{
    switch (group) {
    case ATT_GQA: return cases_gqa(cases);
    case ATT_LENGTHS: return cases_lengths(cases);
    case ATT_HEAD_DIMS: return cases_head_dims(cases);
    case ATT_DROPOUT: return cases_dropout(cases);
    default: return cases_other(group, cases);
    }
}

static uint64_t g_state;
static double urand(void)
{
    g_state ^= g_state << 13;
    g_state ^= g_state >> 7;
    g_state ^= g_state << 17;
    return (double)(g_state >> 11) * (1.0 / 9007199254740992.0);
}

static void *xcalloc(long n, size_t size)
{
    void *p = calloc((size_t)(n > 0 ? n : 1), size);
    assert_non_null(p);
    return p;
}

/* Document numbers of batch row b: several random documents, one document, or many short ones
 * (1 to 3 tokens), by b % 3 (numbers need not be ordered). */
static void make_segments(int32_t *seg, int S, int B, int all_equal)
{
    for (int b = 0; b < B; b++) {
        int32_t *r = seg + (long)b * S;
        const int kind = all_equal ? 1 : b % 3;
        int doc = 5 * b + 1, left = 0;
        for (int s = 0; s < S; s++) {
            if (kind == 1) {
                r[s] = 42;
                continue;
            }
            if (left == 0) {
                doc = kind == 0 ? (int)(urand() * 1000) : doc + 1;
                left = kind == 0 ? 1 + (int)(urand() * (S / 3 + 1)) : 1 + (int)(urand() * 3);
            }
            r[s] = doc;
            left--;
        }
    }
}

/* The inputs: q, k, v and dout uniform (integer q and k for masked-dominant cases). */
static void make_inputs(att_ref_t *r, const att_case_t *c, uint64_t seed)
{
    g_state = seed * 0x9E3779B97F4A7C15ull + 1;
    const int S = c->S, B = c->B, NH = c->NH, HD = c->HD;
    const size_t es = mc_dtype_size(c->dt);
    if (c->segments) {
        r->seg = xcalloc((long)B * S, sizeof(int32_t));
        make_segments(r->seg, S, B, c->segments == 2);
    }
    r->qkv32 = xcalloc(r->nqkv, sizeof(float));
    r->dout32 = xcalloc(r->nout, sizeof(float));
    const double qr = c->qk_range > 0.0f ? c->qk_range : 1.5;
    const long gw = (long)(NH / att_ng(c) + 2) * HD; /* a query group's columns: q heads, k, v */
    for (long i = 0; i < r->nqkv; i++) {
        const long col = i % gw; /* q, k or v of a group */
        const double range = col < gw - HD ? qr : 1.0;
        r->qkv32[i] = mc_round_to(c->dt, (float)(-range + 2.0 * range * urand()));
    }
    if (c->masked_dominant) /* integer q and k: scores near -20000 * HD / 4, exact in fp32 */
        for (long row = 0; row < (long)S * B * NH; row++) {
            const int s = (int)(row / ((long)B * NH));
            float *q = r->qkv32 + row * 3 * HD, *k = q + HD;
            for (int e = 0; e < HD; e++) {
                q[e] = 100.0f + (float)((s + e) % 3);
                k[e] = -100.0f - (float)((s * e) % 4);
            }
        }
    for (long i = 0; i < r->nout; i++) r->dout32[i] = mc_round_to(c->dt, (float)(-1.0 + 2.0 * urand()));
    r->qkv = xcalloc(r->nqkv, es);
    r->dout = xcalloc(r->nout, es);
    mc_convert(r->qkv, c->dt, r->qkv32, MC_DT_F32, r->nqkv);
    mc_convert(r->dout, c->dt, r->dout32, MC_DT_F32, r->nout);
}

/* Unit roundoff of dt, and the relative error of the fp32 sums of a case: (S + HD + 2) 2^-24. */
static double unit_roundoff(mc_dtype_t dt)
{
    return dt == MC_DT_BF16 ? 0x1p-8 : dt == MC_DT_F16 ? 0x1p-11 : 0x1p-24;
}
static double sum_error(const att_case_t *c) { return (c->S + c->HD + 2) * 0x1p-24; }

/* Weights w_j of query i's keys for the cancellation bound (att_tolerance's comment), in double
 * from the CPU's probabilities P (row i of one (b, h)) and backend.h's dropout mask:
 *   w_j = 4 eps |dS_j| + p_j (eps (C + 2 A') + 2 f (A + kd_j a_j)) for the keys that query i
 * sees, 0 for masked ones (they get no gradient), where kd_j = keep_ij/(1-p), pd_j = p_j kd_j,
 * dp_j = dO_i.v_j, a_j = sum_e |dO_ie v_je|, O = sum_j pd_j v_j, D = sum_j pd_j dp_j,
 * dS_j = p_j (kd_j dp_j - D), C = sum_e |dO_ie O_e|, A' = sum_j pd_j |dp_j|, A = sum_j pd_j a_j.
 * ws: 2 S + HD doubles. */
static void bound_weights(const att_ref_t *r, const float *P, int b, int h, int i, double *w, double *ws)
{
    const att_case_t *c = &r->c;
    const int S = c->S, HD = c->HD;
    const long lq = (long)c->B * c->NH * 3 * HD, lo = (long)c->B * c->NH * HD;
    const float *v = r->qkv32 + (long)b * c->NH * 3 * HD + (long)h * 3 * HD + 2 * HD;
    const float *dO = r->dout32 + (long)i * lo + (long)b * c->NH * HD + (long)h * HD;
    const int32_t *seg = r->seg ? r->seg + (long)b * S : NULL;
    const uint64_t e0 = ((uint64_t)(c->head_offset + h) * (uint64_t)S + (uint64_t)i) * (uint64_t)S;
    const double u = unit_roundoff(c->dt), f = sum_error(c), eps = u + f;
    double *dp = ws, *kd = ws + S, *O = ws + 2 * S, D = 0.0, A = 0.0, A1 = 0.0, C = 0.0;
    memset(O, 0, sizeof(double) * (size_t)HD);
    for (int j = 0; j < S; j++) {
        const float *vj = v + (long)j * lq;
        double a = 0.0;
        dp[j] = 0.0;
        kd[j] = 1.0;
        if (r->d.p > 0.0f)
            kd[j] = mc_dropout_keep(r->d.seed, r->d.iteration, r->d.layer, r->d.site, r->d.sample0 + (uint64_t)b,
                                    e0 + (uint64_t)j, r->d.p) / (1.0 - (double)r->d.p);
        const double pd = P[j] * kd[j];
        for (int e = 0; e < HD; e++) {
            dp[j] += (double)dO[e] * vj[e];
            a += fabs((double)dO[e] * vj[e]);
            O[e] += pd * vj[e];
        }
        D += pd * dp[j];
        A1 += pd * fabs(dp[j]);
        A += pd * a;
        w[j] = a; /* a_j until the second pass */
    }
    for (int e = 0; e < HD; e++) C += fabs((double)dO[e] * O[e]);
    for (int j = 0; j < S; j++) {
        const int sees = j <= i && (!seg || seg[j] == seg[i]);
        const double dS = P[j] * (kd[j] * dp[j] - D);
        w[j] = sees ? 4.0 * eps * fabs(dS) + P[j] * (eps * (C + 2.0 * A1) + 2.0 * f * (A + kd[j] * w[j])) : 0.0;
    }
}

/* The cancellation bound of each dQ and dK element (0 for dV): dQ_ie <= scale sum_j w_ij |k_je|,
 * dK_je <= scale sum_i w_ij |q_ie|. probs: the CPU's probabilities [b, NH, s, s] as fp32. */
static void grad_bounds(att_ref_t *r, const float *probs)
{
    const att_case_t *c = &r->c;
    const int S = c->S, HD = c->HD;
    const long lq = (long)c->B * c->NH * 3 * HD;
    const double sc = (double)r->scale;
    double *w = xcalloc(S, sizeof(double)), *ws = xcalloc(2L * S + HD, sizeof(double));
    r->dqkv_bound = xcalloc(r->nqkv, sizeof(double));
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->NH; h++) {
            const long off = (long)b * c->NH * 3 * HD + (long)h * 3 * HD;
            const float *q = r->qkv32 + off, *P = probs + ((long)b * c->NH + h) * S * S;
            double *bq = r->dqkv_bound + off;
            for (int i = 0; i < S; i++) {
                bound_weights(r, P + (long)i * S, b, h, i, w, ws);
                for (int j = 0; j <= i; j++) {
                    if (w[j] == 0.0) continue;
                    for (int e = 0; e < HD; e++) {
                        bq[(long)i * lq + e] += sc * w[j] * fabsf(q[(long)j * lq + HD + e]);
                        bq[(long)j * lq + HD + e] += sc * w[j] * fabsf(q[(long)i * lq + e]);
                    }
                }
            }
        }
    free(w);
    free(ws);
}

void att_ref_make(att_ref_t *r, const att_case_t *c, uint64_t seed)
{
    memset(r, 0, sizeof(*r));
    r->c = *c;
    const int S = c->S, B = c->B, NH = c->NH, HD = c->HD;
    const size_t es = mc_dtype_size(c->dt);
    r->nqkv = (long)S * B * (NH + 2 * att_ng(c)) * HD;
    r->nout = (long)S * B * NH * HD;
    r->scale = c->masked_dominant ? 0.5f : 1.0f / sqrtf((float)HD);
    r->d = att_dropout;
    if (!c->dropout) r->d.p = 0.0f;
    make_inputs(r, c, seed);

    const mc_backend_t *be = mc_backend_cpu();
    size_t state_bytes = 0, scratch_bytes = 0;
    be->attention_sizes(be, c->dt, S, B, NH, HD, &state_bytes, &scratch_bytes);
    void *state = xcalloc((long)state_bytes, 1), *scratch = xcalloc((long)scratch_bytes, 1);
    r->out = xcalloc(r->nout, es);
    r->dqkv = xcalloc(r->nqkv, es);
    be->attention_forward(be, c->dt, r->out, state, scratch, r->qkv, S, B, NH, att_ng(c), HD, r->seg, r->scale, &r->d,
                          c->head_offset, c->NH_full);
    be->attention_backward(be, c->dt, r->dqkv, scratch, r->dout, r->qkv, r->out, state, S, B, NH, att_ng(c), HD,
                           r->seg, r->scale, &r->d, c->head_offset, c->NH_full);
    if (c->masked_dominant) { /* backend.h: the CPU's state is the probabilities [b, NH, s, s] of dt */
        const long np = (long)B * NH * S * S;
        float *probs = xcalloc(np, sizeof(float));
        mc_convert(probs, MC_DT_F32, state, c->dt, np);
        grad_bounds(r, probs);
        free(probs);
    }
    free(state);
    free(scratch);
    r->out32 = xcalloc(r->nout, sizeof(float));
    r->dqkv32 = xcalloc(r->nqkv, sizeof(float));
    mc_convert(r->out32, MC_DT_F32, r->out, c->dt, r->nout);
    mc_convert(r->dqkv32, MC_DT_F32, r->dqkv, c->dt, r->nqkv);
}

void att_ref_free(att_ref_t *r)
{
    free(r->seg);
    free(r->qkv);
    free(r->dout);
    free(r->qkv32);
    free(r->dout32);
    free(r->out);
    free(r->dqkv);
    free(r->out32);
    free(r->dqkv32);
    free(r->dqkv_bound);
    memset(r, 0, sizeof(*r));
}

const char *att_case_name(const att_case_t *c)
{
    static char buf[160];
    snprintf(buf, sizeof(buf), "%s S=%d B=%d NH=%d NG=%d HD=%d heads %d/%d%s seg=%d%s qk=%.1f", mc_dtype_name(c->dt),
             c->S, c->B, c->NH, att_ng(c), c->HD, c->head_offset, c->NH_full, c->dropout ? " dropout" : "", c->segments,
             c->masked_dominant ? " masked-dominant" : "", (double)(c->qk_range > 0.0f ? c->qk_range : 1.5f));
    return buf;
}

/* Why these tolerances (err <= rtol |want| + max(atol max|want|, bound)):
 * fp32: the same fp32 math in another order (online softmax rescaling, tile-wise sums, expf vs
 *   the CPU's vector exp, fp32 vs the CPU's double row sums): a few ulp per term. The host model
 *   of the kernels stays below 0.22 of 1e-5 (out) and 0.04 of 3e-5 (dqkv); the margin is for
 *   the GPU's FMA order. Any indexing or masking error is O(1), 10^4 times larger.
 * bf16/fp16: both sides round their output once (0.5 ulp each, so up to 1 ulp apart after
 *   double rounding: 2^-8 bf16, 2^-11 fp16 relative), and the fused kernels round p to dt before
 *   P V, and p keep/(1-p) and dS before the gradient products, where the CPU multiplies fp32
 *   values by probabilities it saved in dt; those differences are random, about 1 ulp of dt per
 *   term, and sum to a few ulp of the tensor's scale. So: 2 ulp relative plus 2 ulp (of the
 *   largest value) absolute for out, twice that for dqkv, which goes through two rounded
 *   products. A shifted index or a wrong mask moves elements by O(1) of their scale, 30 (bf16)
 *   to 250 (fp16) times the tolerance.
 * bound (masked-dominant cases: r->dqkv_bound): there dQ_i = scale sum_j dS_ij k_j adds terms
 *   with |k_j| ~ 100 (one sign) whose dS_ij sum to 0, a small difference of large terms whose
 *   error, a fraction of the terms, does not scale with max|dqkv| (the ulp terms alone fail 12
 *   of 61 input sets, by up to 1.5x). To first order in u = dt's unit roundoff and
 *   f = (S + HD + 2) 2^-24 (fp32 sums), eps = u + f, the two sides' dS_ij differ by at most
 *   2 u |dS| (the kernel rounds dS, the CPU rounds the p it saves) + 2 f |dS| (fp32 p) +
 *   2 f p kd_j a_j (fp32 dP) + p |dD_i|, where the D_i differ by eps (C + 2 A') + 2 f A (the
 *   kernel's dO.O from its rounded O and P, the CPU's p dP from its rounded p; the sums are
 *   bound_weights'), and each side's sum over j adds f |dS| |k|: |dQ_ie error| <= scale sum_j
 *   w_ij |k_je| with bound_weights' w, and |dK_je error| <= scale sum_i w_ij |q_ie|. It is
 *   derived, not fitted, and computed from the CPU's probabilities; rtol covers the final
 *   roundings. A wrong mask or a perturbed dS moves dQ or dK by scale |dS_ij| |k_j| (or |q_i|):
 *   one dS of the last row off by 25% fails at 1.2x (bf16) to 50x (fp16), its mask flipped at
 *   5x to 200x. In the other cases this worst case is looser than the ulp terms (up to 5x for
 *   bf16/fp16, 50x for fp32), so it is not used there.
 * The host model (same roundings as the kernels; mma sums in another order only) reaches at
 * most 0.45 of these for out and 0.44 for dqkv (0.27 in the masked-dominant cases) over every
 * case of test_attention_tiled and 61 input sets (MC_ATT_VERBOSE=1 prints the ratios;
 * MC_ATT_SEED=n picks other inputs). */
void att_tolerance(mc_dtype_t dt, int grad, double *rtol, double *atol)
{
    if (dt == MC_DT_BF16) {
        *rtol = grad ? 1.6e-2 : 7.9e-3;
        *atol = grad ? 1.6e-2 : 7.9e-3;
    } else if (dt == MC_DT_F16) {
        *rtol = grad ? 2e-3 : 1e-3;
        *atol = grad ? 2e-3 : 1e-3;
    } else {
        *rtol = grad ? 3e-5 : 1e-5;
        *atol = grad ? 3e-5 : 1e-5;
    }
}

double att_check(const char *what, const att_case_t *c, const float *got, const float *want, long n, int grad,
                 const double *bound)
{
    double rtol, atol, scale = 0.0, worst = 0.0;
    long wi = 0;
    att_tolerance(c->dt, grad, &rtol, &atol);
    for (long i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
    for (long i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - (double)want[i]);
        const double allowed = rtol * fabs((double)want[i]) + fmax(atol * scale, bound ? bound[i] : 0.0);
        const double ratio = allowed > 0.0 ? err / allowed : (err > 0.0 ? INFINITY : 0.0);
        if (!(ratio <= worst)) { /* also catches NaN */
            worst = isnan(ratio) ? INFINITY : ratio;
            wi = i;
        }
    }
    const double bw = bound && n ? bound[wi] : 0.0;
    if (getenv("MC_ATT_VERBOSE"))
        fprintf(stderr, "# %-5s %s: worst err/allowed %.3f at %ld (got %.8g want %.8g, max|want| %.4g, bound %.3g)\n",
                what, att_case_name(c), worst, wi, n ? (double)got[wi] : 0.0, n ? (double)want[wi] : 0.0, scale, bw);
    if (worst > 1.0)
        fail_msg("%s (%s): element %ld is %.8g, the CPU backend has %.8g (err %.3g, %.2fx the tolerance, "
                 "cancellation bound %.3g)",
                 what, att_case_name(c), wi, (double)got[wi], (double)want[wi],
                 fabs((double)got[wi] - (double)want[wi]), worst, bw);
    return worst;
}
