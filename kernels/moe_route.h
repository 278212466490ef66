/* The router's arithmetic for one token (Megatron core_v0.15.0's moe_utils.py and router.py),
 * shared by the CPU op (a loop over tokens, kernels/cpu/moe_route.c) and the CUDA kernel (one
 * thread per token, kernels/cuda/moe_route.cu), so both make the same routing decisions from the
 * same logits. Plain C and __host__ __device__.
 *
 * Precision: values are computed in double and rounded to the router type rdt (Megatron's
 * --moe-router-dtype fp32 | fp64, or the input's bf16/fp16 when it is not given) wherever torch
 * materialises a tensor of that type; torch's softmax(..., dtype=float32) is fp32 whatever rdt.
 *
 * Top-k, as CUDA's torch.topk selects (aten/src/ATen/native/cuda/TensorTopK.cu, gatherTopK):
 * the k largest values under the radix order of the values' bits (NaN largest, -0 below +0),
 * and among values equal to the k-th, the lowest indices. The order in which the k come out
 * never matters here: they are scattered back to [tokens, experts]. */
#ifndef MC_KERNELS_MOE_ROUTE_H
#define MC_KERNELS_MOE_ROUTE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/dtype.h"

/* Limits of the per-token arithmetic's stack arrays (the ops refuse larger settings). */
enum { MC_MOE_MAX_EXPERTS = 1024, MC_MOE_MAX_TOPK = 32, MC_MOE_MAX_GROUPS = 1024 };

/* Megatron's TopKRouter settings (topk_routing_with_score_function's arguments). */
typedef struct {
    int num_experts, topk;
    int sigmoid;                /* the score function: 0 softmax, 1 sigmoid */
    int pre_softmax;            /* softmax over all experts, then the top-k (else after it) */
    int num_groups, group_topk; /* group-limited routing when group_topk > 0 */
    double scaling_factor;      /* probs *= it; 0: none (Megatron's None) */
} mc_moe_router_t;

/* ---- element access in the router type (F32, F64, BF16, F16) ---- */
MC_HD double mc_moe_load(mc_dtype_t dt, const void *p, long i)
{
    switch (dt) {
    case MC_DT_F64: return ((const double *)p)[i];
    case MC_DT_BF16: return mc_f32_from_bf16(((const uint16_t *)p)[i]);
    case MC_DT_F16: return mc_f32_from_f16(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}
MC_HD void mc_moe_store(mc_dtype_t dt, void *p, long i, double x)
{
    switch (dt) {
    case MC_DT_F64: ((double *)p)[i] = x; break;
    case MC_DT_BF16: ((uint16_t *)p)[i] = mc_bf16_from_f32((float)x); break;
    case MC_DT_F16: ((uint16_t *)p)[i] = mc_f16_from_f32((float)x); break;
    default: ((float *)p)[i] = (float)x; break;
    }
}
/* x as a tensor of type dt holds it (16-bit types through fp32, as torch computes them). */
MC_HD double mc_moe_round(mc_dtype_t dt, double x)
{
    switch (dt) {
    case MC_DT_F64: return x;
    case MC_DT_BF16: return mc_f32_from_bf16(mc_bf16_from_f32((float)x));
    case MC_DT_F16: return mc_f32_from_f16(mc_f16_from_f32((float)x));
    default: return (float)x;
    }
}

/* ---- top-k ---- */

/* The radix order of torch's TopKTypeConfig: larger value, larger key; NaN the largest. */
MC_HD uint64_t mc_moe_key(double x)
{
    if (x != x) return ~(uint64_t)0;
    uint64_t u;
    memcpy(&u, &x, 8);
    return (u >> 63) ? ~u : u | ((uint64_t)1 << 63);
}

/* The k largest of v[0..n) (skipping those with allowed[i] == 0 when allowed is given) into
 * idx[0..k), by key descending, lowest index first among equal keys. */
MC_HD void mc_moe_topk(const double *v, int n, int k, const uint8_t *allowed, int *idx)
{
    for (int j = 0; j < k; j++) {
        int best = -1;
        uint64_t bk = 0;
        for (int i = 0; i < n; i++) {
            if (allowed && !allowed[i]) continue;
            int taken = 0;
            for (int q = 0; q < j && !taken; q++) taken = idx[q] == i;
            if (taken) continue;
            const uint64_t key = mc_moe_key(v[i]);
            if (best < 0 || key > bk) best = i, bk = key;
        }
        idx[j] = best;
    }
}

/* compute_topk over s (values of type sdt: group sums round to it): plain top-k, or
 * group_limited_topk: each group's score is the sum of its top-(k / group_topk) members (largest
 * first), the group_topk best groups are kept and the others' members masked to -inf. Scratch:
 * keep (E bytes), gs (num_groups doubles), gbest (num_groups ints). */
MC_HD void mc_moe_select(const mc_moe_router_t *r, const double *s, mc_dtype_t sdt, uint8_t *keep,
                         double *gs, int *gbest, int *idx)
{
    const int E = r->num_experts, k = r->topk;
    if (r->group_topk <= 0) {
        mc_moe_topk(s, E, k, 0, idx);
        return;
    }
    const int G = r->num_groups, per = E / G, inner = k / r->group_topk;
    int gi[MC_MOE_MAX_TOPK];
    for (int g = 0; g < G; g++) {
        mc_moe_topk(s + g * per, per, inner, 0, gi);
        double sum = 0;
        for (int j = 0; j < inner; j++) sum = mc_moe_round(sdt, sum + s[g * per + gi[j]]);
        gs[g] = sum;
    }
    mc_moe_topk(gs, G, r->group_topk, 0, gbest);
    for (int e = 0; e < E; e++) keep[e] = 0;
    for (int j = 0; j < r->group_topk; j++)
        for (int e = gbest[j] * per; e < (gbest[j] + 1) * per; e++) keep[e] = 1;
    /* the masked ones are -inf: never chosen while k kept members exist (validation's rule) */
    mc_moe_topk(s, E, k, keep, idx);
}

/* One token's scratch for the router: doubles, ints and bytes, of mc_moe_work_* sizes. */
typedef struct {
    double *v, *s, *y, *d, *gs; /* logits, scores, fp32 outputs (2E), gradients, group sums */
    int *gbest;
    uint8_t *keep;
} mc_moe_work_t;

MC_HD long mc_moe_work_doubles(int E, int G) { return 5L * E + (G > 0 ? G : 1); }
MC_HD long mc_moe_work_ints(int G) { return G > 0 ? G : 1; }
MC_HD mc_moe_work_t mc_moe_work(double *d, int *i, uint8_t *b, int E)
{
    mc_moe_work_t w;
    w.v = d, w.s = d + E, w.y = d + 2 * E, w.d = d + 4 * E, w.gs = d + 5 * E;
    w.gbest = i, w.keep = b;
    return w;
}

/* torch.softmax(x[idx[0..n)] or x[0..n), dtype=float32): the input cast to fp32, the result fp32
 * (into y). */
MC_HD void mc_moe_softmax32(const double *x, const int *idx, int n, double *y)
{
    double m = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++) {
        const double v = (float)x[idx ? idx[i] : i];
        m = v > m ? v : m;
    }
    for (int i = 0; i < n; i++) sum += y[i] = exp((double)(float)x[idx ? idx[i] : i] - m);
    for (int i = 0; i < n; i++) y[i] = (float)(y[i] / sum);
}

/* sigmoid of x computed in fp32, as torch.sigmoid of an fp32 tensor */
MC_HD double mc_moe_sigmoid32(double x) { return (float)(1.0 / (1.0 + exp(-(double)(float)x))); }

/* The routing decision of one token (topk_routing_with_score_function): w->v[0..E) its logits
 * (rdt values), bias the expert bias (sigmoid: selection only) or NULL. Writes the chosen experts
 * to idx[0..k) and their probabilities (rdt values, scaled) to p[0..k); keeps the fp32 softmax or
 * sigmoid outputs the backward needs in w->y, the scores in w->s. */
MC_HD void mc_moe_route_one(const mc_moe_router_t *r, mc_dtype_t rdt, const float *bias,
                            const mc_moe_work_t *w, int *idx, double *p)
{
    const int E = r->num_experts, k = r->topk;
    const double *v = w->v;
    double *s = w->s, *y = w->y;
    if (!r->sigmoid && r->pre_softmax) {
        mc_moe_softmax32(v, 0, E, y);
        for (int e = 0; e < E; e++) s[e] = mc_moe_round(rdt, y[e]);
        mc_moe_select(r, s, rdt, w->keep, w->gs, w->gbest, idx);
        for (int j = 0; j < k; j++) p[j] = s[idx[j]];
    } else if (!r->sigmoid) {
        mc_moe_select(r, v, rdt, w->keep, w->gs, w->gbest, idx);
        mc_moe_softmax32(v, idx, k, y);
        for (int j = 0; j < k; j++) p[j] = mc_moe_round(rdt, y[j]);
    } else {
        for (int e = 0; e < E; e++) y[e] = mc_moe_sigmoid32(v[e]);
        for (int e = 0; e < E; e++) s[e] = mc_moe_round(rdt, y[e]);
        if (bias) { /* scores + expert_bias: an fp32 sum chooses; the unbiased scores weigh */
            double *b = y + E;
            for (int e = 0; e < E; e++) b[e] = (float)(s[e] + bias[e]);
            mc_moe_select(r, b, MC_DT_F32, w->keep, w->gs, w->gbest, idx);
        } else {
            mc_moe_select(r, s, rdt, w->keep, w->gs, w->gbest, idx);
        }
        for (int j = 0; j < k; j++) p[j] = s[idx[j]];
        if (k > 1) {
            double sum = 0;
            for (int j = 0; j < k; j++) sum += p[j];
            const double den = mc_moe_round(rdt, mc_moe_round(rdt, sum) + 1e-20);
            for (int j = 0; j < k; j++) p[j] = mc_moe_round(rdt, p[j] / den);
        }
    }
    if (r->scaling_factor != 0)
        for (int j = 0; j < k; j++) p[j] = mc_moe_round(rdt, p[j] * r->scaling_factor);
}

/* The gradient of one token's logits (rdt values into dl[0..E), overwritten) from the gradient
 * of its dense probs dp[0..E) (rdt values), given what mc_moe_route_one computed: the inverse
 * of each step above in fp32 (softmax, sigmoid) or rdt (the rest). keep (E bytes or NULL): the
 * capacity's map, outside which probs were dropped (no gradient). */
MC_HD void mc_moe_route_one_backward(const mc_moe_router_t *r, mc_dtype_t rdt, const double *dp,
                                     const uint8_t *kept, const double *s, const double *y,
                                     const int *idx, double *dl)
{
    const int E = r->num_experts, k = r->topk;
    double g[MC_MOE_MAX_TOPK], dot = 0;
    for (int j = 0; j < k; j++) {
        g[j] = kept && !kept[idx[j]] ? 0 : dp[idx[j]];
        if (r->scaling_factor != 0) g[j] = mc_moe_round(rdt, g[j] * r->scaling_factor);
    }
    for (int e = 0; e < E; e++) dl[e] = 0;
    if (!r->sigmoid && r->pre_softmax) {
        for (int j = 0; j < k; j++) dot += g[j] * y[idx[j]];
        for (int e = 0; e < E; e++) dl[e] = (float)(-y[e] * dot);
        for (int j = 0; j < k; j++) dl[idx[j]] = (float)(y[idx[j]] * (g[j] - dot));
    } else if (!r->sigmoid) {
        for (int j = 0; j < k; j++) dot += g[j] * y[j];
        for (int j = 0; j < k; j++) dl[idx[j]] = (float)(y[j] * (g[j] - dot));
    } else {
        double sum = 0, gs = 0, ds[MC_MOE_MAX_TOPK];
        for (int j = 0; j < k; j++) sum += s[idx[j]];
        const double den = mc_moe_round(rdt, mc_moe_round(rdt, sum) + 1e-20);
        for (int j = 0; j < k; j++) gs += g[j] * s[idx[j]];
        for (int j = 0; j < k; j++)
            ds[j] = k > 1 ? mc_moe_round(rdt, g[j] / den - gs / (den * den)) : g[j];
        for (int j = 0; j < k; j++) {
            const double u = y[idx[j]];
            dl[idx[j]] = (float)(ds[j] * u * (1.0 - u));
        }
    }
    for (int e = 0; e < E; e++) dl[e] = mc_moe_round(rdt, dl[e]);
}

/* compute_routing_scores_for_aux_loss for one token: the aux loss's scores sc[0..E) (softmax:
 * fp32 over all experts; sigmoid: in rdt, normalised to sum 1) and their plain top-k idx. */
MC_HD void mc_moe_aux_scores_one(mc_dtype_t rdt, int sigmoid, int E, int k, const double *v,
                                 double *sc, int *idx)
{
    if (!sigmoid) {
        mc_moe_softmax32(v, 0, E, sc);
    } else {
        double sum = 0;
        for (int e = 0; e < E; e++) sum += sc[e] = mc_moe_round(rdt, 1.0 / (1.0 + exp(-v[e])));
        const double den = mc_moe_round(rdt, mc_moe_round(rdt, sum) + 1e-20);
        for (int e = 0; e < E; e++) sc[e] = mc_moe_round(rdt, sc[e] / den);
    }
    mc_moe_topk(sc, E, k, 0, idx);
}

/* The aux loss's gradient at one token's logits: dsc[0..E) the loss's gradient at its scores,
 * added into dl[0..E) (doubles); v its logits, sc its scores (mc_moe_aux_scores_one). */
MC_HD void mc_moe_aux_backward_one(mc_dtype_t rdt, int sigmoid, int E, const double *v,
                                   const double *sc, const double *dsc, double *dl)
{
    double dot = 0;
    for (int e = 0; e < E; e++) dot += dsc[e] * sc[e];
    if (!sigmoid) {
        for (int e = 0; e < E; e++) dl[e] += (float)(sc[e] * (dsc[e] - dot));
        return;
    }
    double sum = 0;
    for (int e = 0; e < E; e++) sum += mc_moe_round(rdt, 1.0 / (1.0 + exp(-v[e])));
    const double den = mc_moe_round(rdt, mc_moe_round(rdt, sum) + 1e-20);
    for (int e = 0; e < E; e++) {
        const double u = mc_moe_round(rdt, 1.0 / (1.0 + exp(-v[e])));
        const double du = mc_moe_round(rdt, (dsc[e] - dot) / den);
        dl[e] += mc_moe_round(rdt, du * u * (1.0 - u));
    }
}

/* logsumexp of one token's logits (z-loss), rounded to rdt as torch.logsumexp returns it. */
MC_HD double mc_moe_lse(mc_dtype_t rdt, int E, const double *v)
{
    double m = -INFINITY, sum = 0;
    for (int e = 0; e < E; e++) m = v[e] > m ? v[e] : m;
    for (int e = 0; e < E; e++) sum += exp(v[e] - m);
    return mc_moe_round(rdt, m + log(sum));
}

#endif
