/* The CUDA backend's fused attention, modelled on the host: the same tile loops, online
 * softmax, masks, dropout words and roundings to the 16-bit type as the kernels of
 * kernels/cuda/attention.cu, through the rules they share (kernels/cuda/attention_tiles.h),
 * written as plain C loops (one row or one key pair at a time where a kernel has a warp or a
 * thread). Checked against the CPU backend's attention for fp32, bf16 and fp16, with the
 * tolerances the GPU test (test/gpu/test_gpu_attention.c) holds the kernels to, on cases of its
 * own and on every case of the GPU test with the same inputs (attention_check's att_cases and
 * att_case_seed). This is the check of the tiling logic that runs without a GPU.
 * MC_ATT_VERBOSE=1 prints the worst error/tolerance ratio of every comparison. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cuda/attention_tiles.h"
#include "test/unit/attention_check.h"

typedef struct {
    mc_att_tiles_t fwd, dkdv, dq;
} tiles_t;

/* The kernels' tiles for this element type and head dim. */
static tiles_t kernel_tiles(mc_dtype_t dt, int HD)
{
    const int ts = (int)mc_dtype_size(dt), hdp = mc_att_hdp(HD);
    tiles_t t = {mc_att_tiles(MC_ATT_FWD, ts, hdp), mc_att_tiles(MC_ATT_DKDV, ts, hdp), mc_att_tiles(MC_ATT_DQ, ts, hdp)};
    return t;
}

static float *fzalloc(long n)
{
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    assert_non_null(p);
    return p;
}

typedef struct {
    const att_ref_t *r;
    int S, B, NH, HD, drop;
    long lq, lo;
    float dscale;
    int NG, QPG; /* query groups, query heads per group */
} model_t;

/* Offsets in row 0 of qkv of query head h's q and of its group's k (Megatron's layout). */
static long q_off(const model_t *m, int b, int h)
{
    return (long)b * (m->NH + 2 * m->NG) * m->HD + ((long)(h / m->QPG) * (m->QPG + 2) + h % m->QPG) * m->HD;
}
static long k_off(const model_t *m, int b, int h)
{
    return (long)b * (m->NH + 2 * m->NG) * m->HD + ((long)(h / m->QPG) * (m->QPG + 2) + m->QPG) * m->HD;
}

static model_t model_of(const att_ref_t *r)
{
    const att_case_t *c = &r->c;
    model_t m = {r,    c->S,      c->B,  c->NH, c->HD, r->d.p > 0.0f, (long)c->B * (c->NH + 2 * att_ng(c)) * c->HD,
                 (long)c->B * c->NH * c->HD, 1.0f, att_ng(c), c->NH / att_ng(c)};
    if (m.drop) m.dscale = mc_cpu_dropout_scale(r->d.p);
    return m;
}

static int same_doc(const model_t *m, int b, int i, int j)
{
    const int32_t *seg = m->r->seg;
    return !seg || i >= m->S || j >= m->S || seg[(long)b * m->S + i] == seg[(long)b * m->S + j];
}

/* Row x of the [s, b, ...] tensor t at (b, h) with row stride ld (x < S), as the kernels read
 * it; NULL past S, where a kernel's tile holds zeros. */
static const float *row_at(const float *t, long ld, int x, int S) { return x < S ? t + (long)x * ld : NULL; }

static float dot(const float *a, const float *b, int n)
{
    if (!a || !b) return 0.0f;
    float s = 0.0f;
    for (int e = 0; e < n; e++) s += a[e] * b[e];
    return s;
}

static void axpy(float *y, float a, const float *x, int n)
{
    if (!x || a == 0.0f) return;
    for (int e = 0; e < n; e++) y[e] += a * x[e];
}

/* att_forward_kernel, one query tile of one (b, h) at a time. out: fp32 values of the dt output;
 * state: [2][b, NH, s]. */
static void model_forward(const model_t *m, mc_att_tiles_t t, float *out, float *state)
{
    const att_ref_t *r = m->r;
    const mc_dtype_t dt = r->c.dt;
    const int S = m->S, HD = m->HD, BQ = t.bq, BK = t.bk;
    float *O = fzalloc((long)BQ * HD), *rm = fzalloc(BQ), *rl = fzalloc(BQ), *P = fzalloc(BK);
    for (int b = 0; b < m->B; b++)
        for (int h = 0; h < m->NH; h++) {
            const float *q = r->qkv32 + q_off(m, b, h), *k = r->qkv32 + k_off(m, b, h), *v = k + HD;
            const uint64_t sample = r->d.sample0 + (uint64_t)b;
            for (int I = mc_att_ntiles(S, BQ) - 1; I >= 0; I--) {
                const int i0 = I * BQ;
                memset(O, 0, sizeof(float) * (size_t)BQ * (size_t)HD);
                for (int x = 0; x < BQ; x++) mc_att_row_init(i0 + x, S, &rm[x], &rl[x]);
                const int last = mc_att_last_key_tile(i0, BQ, BK, S);
                for (int J = 0; J <= last; J++) {
                    const int j0 = J * BK;
                    for (int x = 0; x < BQ; x++) {
                        const int i = i0 + x;
                        float s[64], mt = -INFINITY;
                        for (int c = 0; c < BK; c++) {
                            const int j = j0 + c, kind = mc_att_kind(i, j, S, same_doc(m, b, i, j));
                            const float qk = dot(row_at(q, m->lq, i, S), row_at(k, m->lq, j, S), HD);
                            s[c] = mc_att_fwd_score(kind, qk * r->scale);
                            mt = fmaxf(mt, s[c]);
                        }
                        const float m_old = rm[x], m_new = fmaxf(m_old, mt);
                        const float alpha = m_new == m_old ? 1.0f : mc_att_exp(m_old - m_new);
                        float sum = 0.0f;
                        for (int c = 0; c < BK; c += 2) {
                            const float p0 = s[c] == -INFINITY ? 0.0f : mc_att_exp(s[c] - m_new);
                            const float p1 = s[c + 1] == -INFINITY ? 0.0f : mc_att_exp(s[c + 1] - m_new);
                            sum += p0 + p1;
                            unsigned keep = 3u;
                            if (m->drop && (p0 != 0.0f || p1 != 0.0f))
                                keep = mc_att_keep2(&r->d, sample, mc_att_elem(r->c.head_offset, h, S, i, j0 + c));
                            P[c] = mc_round_to(dt, (keep & 1u) ? p0 : 0.0f);
                            P[c + 1] = mc_round_to(dt, (keep & 2u) ? p1 : 0.0f);
                        }
                        rm[x] = m_new;
                        rl[x] = rl[x] * alpha + sum;
                        float *o = O + (long)x * HD;
                        if (alpha != 1.0f)
                            for (int e = 0; e < HD; e++) o[e] *= alpha;
                        for (int c = 0; c < BK; c++) axpy(o, P[c], row_at(v, m->lq, j0 + c, S), HD);
                    }
                }
                /* the keys after each query, when they carry probability */
                int any = 0;
                float w[64];
                for (int x = 0; x < BQ; x++) any |= (w[x] = mc_att_after_weight(i0 + x, S, rm[x])) != 0.0f;
                if (any)
                    for (int J = mc_att_first_after_tile(i0, BK); J < mc_att_ntiles(S, BK); J++) {
                        const int j0 = J * BK;
                        for (int x = 0; x < BQ; x++) {
                            const int i = i0 + x;
                            for (int c = 0; c < BK; c += 2) {
                                const int j = j0 + c;
                                const float p0 = mc_att_kind(i, j, S, 1) == MC_ATT_AFTER ? w[x] : 0.0f;
                                const float p1 = mc_att_kind(i, j + 1, S, 1) == MC_ATT_AFTER ? w[x] : 0.0f;
                                unsigned keep = 3u;
                                if (m->drop && (p0 != 0.0f || p1 != 0.0f))
                                    keep = mc_att_keep2(&r->d, sample, mc_att_elem(r->c.head_offset, h, S, i, j));
                                P[c] = mc_round_to(dt, (keep & 1u) ? p0 : 0.0f);
                                P[c + 1] = mc_round_to(dt, (keep & 2u) ? p1 : 0.0f);
                            }
                            for (int c = 0; c < BK; c++) axpy(O + (long)x * HD, P[c], row_at(v, m->lq, j0 + c, S), HD);
                        }
                    }
                const long st = ((long)b * m->NH + h) * S, plane = (long)m->B * m->NH * S;
                for (int x = 0; x < BQ && i0 + x < S; x++) {
                    float *o = out + (long)(i0 + x) * m->lo + (long)b * m->NH * HD + (long)h * HD;
                    for (int e = 0; e < HD; e++) o[e] = mc_round_to(dt, O[(long)x * HD + e] * (m->dscale / rl[x]));
                    state[st + i0 + x] = rm[x];
                    state[plane + st + i0 + x] = rl[x];
                }
            }
        }
    free(O);
    free(rm);
    free(rl);
    free(P);
}

/* The entries (i, j), (i, j + 1) of the backward: Pd = p keep/(1-p) and dS, rounded to dt, as
 * the dK/dV and dQ kernels form them. s: scale * q.k of the pair; dp: dout . v (unmasked). */
typedef struct {
    float pd[2], ds[2];
} pair_t;

static pair_t bwd_pair(const model_t *m, int b, int h, int i, int j, const float s[2], const float dp[2], float rmax,
                       float inv_l, float D)
{
    const att_ref_t *r = m->r;
    const mc_dtype_t dt = r->c.dt;
    pair_t out;
    int kind[2];
    float p[2];
    for (int u = 0; u < 2; u++) {
        kind[u] = mc_att_kind(i, j + u, m->S, same_doc(m, b, i, j + u));
        p[u] = mc_att_prob(kind[u], s[u], rmax, inv_l);
    }
    unsigned keep = 3u;
    if (m->drop && (p[0] != 0.0f || p[1] != 0.0f))
        keep = mc_att_keep2(&r->d, r->d.sample0 + (uint64_t)b, mc_att_elem(r->c.head_offset, h, m->S, i, j));
    for (int u = 0; u < 2; u++) {
        const int kept = (keep >> u) & 1u;
        out.pd[u] = mc_round_to(dt, kept ? p[u] * m->dscale : 0.0f);
        out.ds[u] = mc_round_to(dt, mc_att_dscore(kind[u], p[u], kept ? dp[u] * m->dscale : 0.0f, D));
    }
    return out;
}

/* att_dsum_kernel, att_dkdv_kernel and att_dq_kernel. out: the forward's output (fp32 values of
 * dt); dqkv: fp32 values of the dt gradient. */
static void model_backward(const model_t *m, tiles_t t, float *dqkv, const float *out, const float *state)
{
    const att_ref_t *r = m->r;
    const mc_dtype_t dt = r->c.dt;
    const int S = m->S, HD = m->HD, NH = m->NH;
    const long rows = (long)m->B * NH * S;
    float *D = fzalloc(rows);
    for (long row = 0; row < rows; row++) {
        const int i = (int)(row % S), h = (int)((row / S) % NH), b = (int)(row / S / NH);
        const long off = (long)i * m->lo + (long)b * NH * HD + (long)h * HD;
        D[row] = dot(r->dout32 + off, out + off, HD);
    }
    const int KQ = t.dkdv.bq, KK = t.dkdv.bk, QQ = t.dq.bq, QK = t.dq.bk;
    /* a group's dK and dV over all keys: att_dkdv_kernel sums the group's query heads in turn */
    float *dKg = fzalloc((long)S * HD + (long)KK * HD), *dVg = fzalloc((long)S * HD + (long)KK * HD);
    float *dQ = fzalloc((long)QQ * HD);
    for (int b = 0; b < m->B; b++)
        for (int h = 0; h < NH; h++) {
            const long qoff = q_off(m, b, h), koff = k_off(m, b, h);
            const float *q = r->qkv32 + qoff, *k = r->qkv32 + koff, *v = k + HD;
            const int first = h % m->QPG == 0, last_head = h % m->QPG == m->QPG - 1;
            const float *dO = r->dout32 + (long)b * NH * HD + (long)h * HD;
            const long st = ((long)b * NH + h) * S, plane = rows;
            /* dK, dV: one key tile at a time */
            for (int J = 0; J < mc_att_ntiles(S, KK); J++) {
                const int j0 = J * KK, Ic = mc_att_first_causal_query_tile(j0, KQ);
                float *dK = dKg + (long)j0 * HD, *dV = dVg + (long)j0 * HD;
                if (first) {
                    memset(dK, 0, sizeof(float) * (size_t)KK * (size_t)HD);
                    memset(dV, 0, sizeof(float) * (size_t)KK * (size_t)HD);
                }
                for (int I = 0; I < mc_att_ntiles(S, KQ); I++) {
                    const int i0 = I * KQ, causal = I >= Ic;
                    int any = causal;
                    for (int x = 0; x < KQ && i0 + x < S; x++) any |= mc_att_after_weight(i0 + x, S, state[st + i0 + x]) != 0.0f;
                    if (!any) continue;
                    for (int x = 0; x < KQ; x++) {
                        const int i = i0 + x;
                        const float rmax = i < S ? state[st + i] : 0.0f, inv_l = i < S ? 1.0f / state[plane + st + i] : 0.0f;
                        const float Di = i < S ? D[st + i] : 0.0f;
                        for (int c = 0; c < KK; c += 2) {
                            float s[2] = {0.0f, 0.0f}, dp[2] = {0.0f, 0.0f};
                            for (int u = 0; u < 2 && causal; u++) {
                                s[u] = dot(row_at(q, m->lq, i, S), row_at(k, m->lq, j0 + c + u, S), HD) * r->scale;
                                dp[u] = dot(row_at(dO, m->lo, i, S), row_at(v, m->lq, j0 + c + u, S), HD);
                            }
                            const pair_t pr = bwd_pair(m, b, h, i, j0 + c, s, dp, rmax, inv_l, Di);
                            for (int u = 0; u < 2; u++) {
                                axpy(dV + (long)(c + u) * HD, pr.pd[u], row_at(dO, m->lo, i, S), HD);
                                if (causal) axpy(dK + (long)(c + u) * HD, pr.ds[u], row_at(q, m->lq, i, S), HD);
                            }
                        }
                    }
                }
                for (int c = 0; c < KK && j0 + c < S && last_head; c++)
                    for (int e = 0; e < HD; e++) {
                        dqkv[koff + (long)(j0 + c) * m->lq + e] = mc_round_to(dt, dK[(long)c * HD + e] * r->scale);
                        dqkv[koff + (long)(j0 + c) * m->lq + HD + e] = mc_round_to(dt, dV[(long)c * HD + e]);
                    }
            }
            /* dQ: one query tile at a time, key tiles up to the diagonal */
            for (int I = 0; I < mc_att_ntiles(S, QQ); I++) {
                const int i0 = I * QQ;
                memset(dQ, 0, sizeof(float) * (size_t)QQ * (size_t)HD);
                for (int J = 0; J <= mc_att_last_key_tile(i0, QQ, QK, S); J++) {
                    const int j0 = J * QK;
                    for (int x = 0; x < QQ; x++) {
                        const int i = i0 + x;
                        const float rmax = i < S ? state[st + i] : 0.0f, inv_l = i < S ? 1.0f / state[plane + st + i] : 0.0f;
                        const float Di = i < S ? D[st + i] : 0.0f;
                        for (int c = 0; c < QK; c += 2) {
                            float s[2], dp[2];
                            for (int u = 0; u < 2; u++) {
                                s[u] = dot(row_at(q, m->lq, i, S), row_at(k, m->lq, j0 + c + u, S), HD) * r->scale;
                                dp[u] = dot(row_at(dO, m->lo, i, S), row_at(v, m->lq, j0 + c + u, S), HD);
                            }
                            const pair_t pr = bwd_pair(m, b, h, i, j0 + c, s, dp, rmax, inv_l, Di);
                            for (int u = 0; u < 2; u++) axpy(dQ + (long)x * HD, pr.ds[u], row_at(k, m->lq, j0 + c + u, S), HD);
                        }
                    }
                }
                for (int x = 0; x < QQ && i0 + x < S; x++)
                    for (int e = 0; e < HD; e++)
                        dqkv[qoff + (long)(i0 + x) * m->lq + e] = mc_round_to(dt, dQ[(long)x * HD + e] * r->scale);
            }
        }
    free(D);
    free(dKg);
    free(dVg);
    free(dQ);
}

/* Runs the model on a case with the given tiles and checks it against the CPU backend. */
static void check_case_tiles(const att_case_t *c, tiles_t t)
{
    att_ref_t r;
    att_ref_make(&r, c, att_case_seed(c));
    const model_t m = model_of(&r);
    float *out = fzalloc(r.nout), *dqkv = fzalloc(r.nqkv), *state = fzalloc(2L * c->B * c->NH * c->S);
    for (long i = 0; i < r.nqkv; i++) dqkv[i] = NAN; /* every element must be written */
    model_forward(&m, t.fwd, out, state);
    att_check("out", c, out, r.out32, r.nout, 0, NULL);
    model_backward(&m, t, dqkv, out, state);
    att_check("dqkv", c, dqkv, r.dqkv32, r.nqkv, 1, r.dqkv_bound);
    free(out);
    free(dqkv);
    free(state);
    att_ref_free(&r);
}

static void check_case(const att_case_t *c) { check_case_tiles(c, kernel_tiles(c->dt, c->HD)); }

static const mc_dtype_t DTYPES[] = {MC_DT_F32, MC_DT_BF16, MC_DT_F16};

/* ---- the rules ---- */

/* The tile ranges visit every entry each pass needs, and the skipped tiles hold none. */
static void test_tile_ranges(void **state)
{
    (void)state;
    static const int sizes[] = {16, 32, 64};
    for (int S = 1; S <= 140; S++)
        for (int a = 0; a < 3; a++)
            for (int e = 0; e < 3; e++) {
                const int bq = sizes[a], bk = sizes[e];
                for (int I = 0; I < mc_att_ntiles(S, bq); I++) {
                    const int i0 = I * bq, last = mc_att_last_key_tile(i0, bq, bk, S), fa = mc_att_first_after_tile(i0, bk);
                    assert_true(last < mc_att_ntiles(S, bk));
                    for (int i = i0; i < i0 + bq && i < S; i++)
                        for (int j = 0; j < S; j++) {
                            if (j <= i) assert_true(j / bk <= last);  /* causal keys are visited */
                            if (j > i) assert_true(j / bk >= fa);     /* after-keys lie in the after pass */
                        }
                    /* the last visited tile holds a key <= some query of the tile */
                    assert_true(last * bk <= (i0 + bq < S ? i0 + bq : S) - 1);
                }
                for (int J = 0; J < mc_att_ntiles(S, bk); J++) {
                    const int j0 = J * bk, Ic = mc_att_first_causal_query_tile(j0, bq);
                    for (int I = 0; I < mc_att_ntiles(S, bq); I++) {
                        int has_causal = 0;
                        for (int i = I * bq; i < (I + 1) * bq && i < S; i++)
                            for (int j = j0; j < j0 + bk && j < S; j++) has_causal |= j <= i;
                        assert_int_equal(has_causal, I >= Ic);
                    }
                }
            }
}

static void test_kinds_and_rows(void **state)
{
    (void)state;
    assert_int_equal(mc_att_kind(3, 2, 5, 1), MC_ATT_VISIBLE);
    assert_int_equal(mc_att_kind(3, 3, 5, 1), MC_ATT_VISIBLE);
    assert_int_equal(mc_att_kind(3, 2, 5, 0), MC_ATT_OTHER_DOC);
    assert_int_equal(mc_att_kind(3, 4, 5, 1), MC_ATT_AFTER);
    assert_int_equal(mc_att_kind(3, 4, 5, 0), MC_ATT_AFTER);
    assert_int_equal(mc_att_kind(5, 0, 5, 1), MC_ATT_PAD);
    assert_int_equal(mc_att_kind(0, 5, 5, 1), MC_ATT_PAD);
    float m, l;
    mc_att_row_init(0, 5, &m, &l);
    assert_true(m == -10000.0f && l == 4.0f);
    mc_att_row_init(4, 5, &m, &l);
    assert_true(m == -INFINITY && l == 0.0f);
    assert_true(mc_att_after_weight(4, 5, -10000.0f) == 0.0f); /* the last row has no keys after it */
    assert_true(mc_att_after_weight(0, 5, -10000.0f) == 1.0f);
    assert_true(mc_att_after_weight(0, 5, -9913.0f) > 0.0f);
    assert_true(mc_att_after_weight(0, 5, -9912.0f) == 0.0f);
    /* the CPU's flush point */
    assert_true(mc_att_exp(-87.3f) > 0.0f && mc_att_exp(-87.34f) == 0.0f && mc_att_exp(-INFINITY) == 0.0f);
    assert_true(mc_att_prob(MC_ATT_PAD, 1.0f, 0.0f, 1.0f) == 0.0f);
    assert_true(mc_att_prob(MC_ATT_AFTER, 5.0f, -10000.0f, 0.5f) == 0.5f);
    assert_true(mc_att_dscore(MC_ATT_OTHER_DOC, 0.5f, 1.0f, 0.0f) == 0.0f);
    assert_true(mc_att_dscore(MC_ATT_VISIBLE, 0.5f, 1.0f, 0.25f) == 0.375f);
    /* element numbers: backend.h's [NH_full, s, s] of a sample */
    assert_true(mc_att_elem(2, 1, 7, 3, 4) == 3u * 49u + 3u * 7u + 4u);
}

/* mc_att_keep2 gives mc_dropout_keep's decisions, across Philox block edges. */
static void test_keep2(void **state)
{
    (void)state;
    mc_dropout_t d = att_dropout;
    for (int pi = 0; pi < 3; pi++) {
        d.p = pi == 0 ? 0.25f : pi == 1 ? 0.5f : 0.9f;
        for (uint64_t e = 0; e < 4000; e++) {
            const uint64_t sample = 40 + e % 3, ee = e + (e % 5 == 0 ? (1ull << 33) : 0);
            const unsigned k = mc_att_keep2(&d, sample, ee);
            assert_int_equal(k & 1u, mc_dropout_keep(d.seed, d.iteration, d.layer, d.site, sample, ee, d.p));
            assert_int_equal(k >> 1, mc_dropout_keep(d.seed, d.iteration, d.layer, d.site, sample, ee + 1, d.p));
        }
    }
}

/* Every kernel's tiles suit the mma shapes and its shared memory fits the GPUs it is built for:
 * 99 KiB per block (every sm_80+ part, sm_86/89 included) up to head dim 128, 163 KiB (A100,
 * H100) for 256. */
static void test_layouts(void **state)
{
    (void)state;
    static const int hdps[] = {64, 80, 128, 256};
    for (int ts = 2; ts <= 4; ts += 2)
        for (int hi = 0; hi < 4; hi++)
            for (int kernel = MC_ATT_FWD; kernel <= MC_ATT_DQ; kernel++) {
                const int hdp = hdps[hi];
                const mc_att_tiles_t t = mc_att_tiles(kernel, ts, hdp);
                assert_true(t.bq % 16 == 0 && t.bk % 16 == 0 && t.bq >= 16 && t.bk >= 16 && t.bk <= 64 && t.bq <= 64);
                const mc_att_layout_t L = mc_att_layout(kernel, ts, hdp, t.bq, t.bk);
                const size_t offs[] = {L.q, L.k, L.v, L.dout, L.acc0, L.acc1, L.s, L.dp, L.p, L.ds, L.rows, L.seg, L.bytes};
                for (int u = 0; u < 13; u++) {
                    assert_int_equal(offs[u] % 128, 0);
                    if (u) assert_true(offs[u] >= offs[u - 1]);
                }
                /* each buffer fits before the next one */
                assert_true(L.k - L.q >= (size_t)t.bq * L.ldt * ts);
                assert_true(L.v - L.k >= (size_t)t.bk * L.ldt * ts);
                assert_true(L.dout - L.v >= (size_t)t.bk * L.ldt * ts);
                if (kernel != MC_ATT_FWD) assert_true(L.acc0 - L.dout >= (size_t)t.bq * L.ldt * ts);
                assert_true(L.acc1 - L.acc0 >= (size_t)(kernel == MC_ATT_DKDV ? t.bk : t.bq) * L.ldf * 4);
                if (kernel == MC_ATT_DKDV) assert_true(L.s - L.acc1 >= (size_t)t.bk * L.ldf * 4);
                assert_true(L.dp - L.s >= (size_t)t.bq * L.lds * 4);
                if (kernel != MC_ATT_FWD) assert_true(L.p - L.dp >= (size_t)t.bq * L.lds * 4);
                if (kernel != MC_ATT_DQ) assert_true(L.ds - L.p >= (size_t)t.bq * L.ldp * ts);
                if (kernel != MC_ATT_FWD) assert_true(L.rows - L.ds >= (size_t)t.bq * L.ldp * ts);
                assert_true(L.seg - L.rows >= (size_t)t.bq * 3 * 4);
                assert_true(L.bytes - L.seg >= (size_t)(t.bq + t.bk) * 4);
                /* wmma: 16-bit tiles' ld a multiple of 8 elements, fp32 tiles' of 4 */
                if (ts == 2) assert_true(L.ldt % 8 == 0 && L.ldp % 8 == 0);
                assert_true(L.lds % 4 == 0 && L.ldf % 4 == 0);
                assert_true(L.ldt >= hdp && L.ldp >= t.bk && L.lds >= t.bk && L.ldf >= hdp);
                assert_true(L.bytes <= (hdp <= 128 ? 101376u : 166912u));
            }
    assert_int_equal(mc_att_hdp(1), 64);
    assert_int_equal(mc_att_hdp(64), 64);
    assert_int_equal(mc_att_hdp(65), 80);
    assert_int_equal(mc_att_hdp(80), 80);
    assert_int_equal(mc_att_hdp(96), 128);
    assert_int_equal(mc_att_hdp(256), 256);
    assert_int_equal(mc_att_hdp(257), 0);
    assert_int_equal(mc_att_hdp(0), 0);
}

/* ---- the model against the CPU backend ---- */

/* Sequence lengths around the tiles: 1, a tile, a tile +- 1, several tiles with a tail. */
static void test_model_lengths(void **state)
{
    (void)state;
    static const int Ss[] = {1, 2, 15, 16, 17, 31, 33, 64, 65, 100, 130};
    for (int t = 0; t < 3; t++)
        for (unsigned u = 0; u < sizeof(Ss) / sizeof(Ss[0]); u++) {
            const att_case_t c = {.dt = DTYPES[t], .S = Ss[u], .B = 2, .NH = 2, .HD = 8, .NH_full = 2};
            check_case(&c);
        }
}

/* The GPT head dims (64, 80 and 128) with tails, dropout, tensor-parallel head offsets. */
static void test_model_head_dims(void **state)
{
    (void)state;
    static const int HDs[] = {64, 80, 128, 3};
    for (int t = 0; t < 3; t++)
        for (int u = 0; u < 4; u++) {
            const att_case_t c = {.dt = DTYPES[t], .S = 70, .B = 1, .NH = 2, .HD = HDs[u], .head_offset = 2, .NH_full = 6,
                                  .dropout = u & 1};
            check_case(&c);
        }
}

static void test_model_dropout(void **state)
{
    (void)state;
    for (int t = 0; t < 3; t++) {
        const att_case_t c = {.dt = DTYPES[t], .S = 97, .B = 3, .NH = 2, .HD = 16, .head_offset = 1, .NH_full = 4,
                              .dropout = 1};
        check_case(&c);
        const att_case_t odd = {.dt = DTYPES[t], .S = 33, .B = 2, .NH = 3, .HD = 8, .NH_full = 3, .dropout = 1};
        check_case(&odd); /* odd S: key pairs straddle Philox blocks */
    }
}

static void test_model_segments(void **state)
{
    (void)state;
    for (int t = 0; t < 3; t++)
        for (int drop = 0; drop <= 1; drop++) {
            const att_case_t c = {.dt = DTYPES[t], .S = 131, .B = 3, .NH = 1, .HD = 8, .NH_full = 1, .dropout = drop,
                                  .segments = 1};
            check_case(&c);
        }
}

/* Scores up to about +-50: the online rescaling moves the running max a lot. */
static void test_model_peaked(void **state)
{
    (void)state;
    for (int t = 0; t < 3; t++) {
        const att_case_t c = {.dt = DTYPES[t], .S = 90, .B = 2, .NH = 1, .HD = 64, .NH_full = 1, .dropout = 1,
                              .qk_range = 4.0f};
        check_case(&c);
    }
}

/* The algorithm does not depend on the tiles: other tile shapes than the kernels' give the
 * same results within the tolerances. */
static void test_model_any_tiles(void **state)
{
    (void)state;
    static const int sizes[] = {16, 32, 64};
    for (int a = 0; a < 3; a++)
        for (int e = 0; e < 3; e++) {
            const mc_att_tiles_t t = {sizes[a], sizes[e]}, u = {sizes[e], sizes[a]};
            const tiles_t tt = {t, t, u};
            const att_case_t c = {.dt = MC_DT_BF16, .S = 75, .B = 1, .NH = 2, .HD = 8, .NH_full = 2, .dropout = 1,
                                  .segments = 1};
            check_case_tiles(&c, tt);
            const att_case_t md = {.dt = MC_DT_F32, .S = 75, .B = 1, .NH = 1, .HD = 4, .NH_full = 1, .dropout = 1,
                                   .segments = 1, .masked_dominant = 1};
            check_case_tiles(&md, tt);
        }
}

/* ---- every case of the GPU test (test/gpu/test_gpu_attention.c), with its seeds ---- */

static void model_group(int group)
{
    att_case_t cases[ATT_CASES_MAX];
    const int n = att_cases(group, cases);
    assert_true(n > 0 && n <= ATT_CASES_MAX);
    for (int k = 0; k < n; k++) check_case(&cases[k]);
}

static void test_gpu_lengths(void **state) { (void)state, model_group(ATT_LENGTHS); }
static void test_gpu_head_dims(void **state) { (void)state, model_group(ATT_HEAD_DIMS); }
static void test_gpu_dropout(void **state) { (void)state, model_group(ATT_DROPOUT); }
static void test_gpu_segments(void **state) { (void)state, model_group(ATT_SEGMENTS); }
static void test_gpu_peaked(void **state) { (void)state, model_group(ATT_PEAKED); }
static void test_gpu_masked_dominant(void **state) { (void)state, model_group(ATT_MASKED_DOMINANT); }
static void test_gpu_bitwise(void **state) { (void)state, model_group(ATT_BITWISE); }
static void test_gpu_gqa(void **state) { (void)state, model_group(ATT_GQA); }

/* The comparison fails on a wrong result: an output off by one bf16 ulp of its scale times 4
 * is caught, so the tolerances do not hide indexing errors. */
static void test_tolerances_are_tight(void **state)
{
    (void)state;
    const att_case_t c = {.dt = MC_DT_BF16, .S = 4, .B = 1, .NH = 1, .HD = 4, .NH_full = 1};
    float want[4] = {1.0f, -0.5f, 0.25f, 0.0f}, got[4];
    memcpy(got, want, sizeof(got));
    got[3] = 4.0f / 128.0f; /* 4 ulp of bf16 at 1.0 */
    double rtol, atol;
    att_tolerance(MC_DT_BF16, 0, &rtol, &atol);
    assert_true(fabs(got[3] - want[3]) > rtol * fabs(want[3]) + atol * 1.0);
    att_tolerance(MC_DT_F32, 1, &rtol, &atol);
    assert_true(rtol < 1e-4 && atol < 1e-4);
    got[3] = 0.0f;
    assert_true(att_check("out", &c, got, want, 4, 0, NULL) == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tile_ranges),
        cmocka_unit_test(test_kinds_and_rows),
        cmocka_unit_test(test_keep2),
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_model_lengths),
        cmocka_unit_test(test_model_head_dims),
        cmocka_unit_test(test_model_dropout),
        cmocka_unit_test(test_model_segments),
        cmocka_unit_test(test_model_peaked),
        cmocka_unit_test(test_model_any_tiles),
        cmocka_unit_test(test_tolerances_are_tight),
        cmocka_unit_test(test_gpu_lengths),
        cmocka_unit_test(test_gpu_head_dims),
        cmocka_unit_test(test_gpu_dropout),
        cmocka_unit_test(test_gpu_segments),
        cmocka_unit_test(test_gpu_peaked),
        cmocka_unit_test(test_gpu_masked_dominant),
        cmocka_unit_test(test_gpu_bitwise),
        cmocka_unit_test(test_gpu_gqa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
