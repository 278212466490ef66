/* The CPU reference of the MoE router and its losses (kernels/moe.h): a loop over tokens of
 * kernels/moe_route.h's per-token arithmetic, which the CUDA kernels run per thread. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "kernels/cpu/cpu.h"
#include "kernels/moe.h"

/* One token's scratch (kernels/moe_route.h). */
static mc_moe_work_t work_new(const mc_moe_router_t *r, int E)
{
    const int G = r ? r->num_groups : 0;
    double *d = malloc((size_t)mc_moe_work_doubles(E, G) * sizeof(double));
    int *i = malloc((size_t)mc_moe_work_ints(G) * sizeof(int));
    uint8_t *b = malloc((size_t)E);
    if (!d || !i || !b) mc_fatal("out of host memory in the MoE router");
    return mc_moe_work(d, i, b, E);
}

static void work_free(mc_moe_work_t *w)
{
    free(w->v);
    free(w->gbest);
    free(w->keep);
}

static void check_router(const mc_moe_router_t *r)
{
    const char *why = mc_moe_router_unsupported(r);
    if (why) mc_fatal("MoE router: %s", why);
}

static void load_row(mc_dtype_t rdt, const void *x, long t, int E, double *v)
{
    for (int e = 0; e < E; e++) v[e] = mc_moe_load(rdt, x, t * E + e);
}

void mc_cpu_moe_route(const mc_backend_t *be, mc_dtype_t rdt, const mc_moe_router_t *r, void *probs,
                      uint8_t *map, const void *logits, const float *bias, long T)
{
    (void)be;
    check_router(r);
    const int E = r->num_experts, k = r->topk;
    mc_moe_work_t w = work_new(r, E);
    int idx[MC_MOE_MAX_TOPK];
    double p[MC_MOE_MAX_TOPK];
    for (long t = 0; t < T; t++) {
        load_row(rdt, logits, t, E, w.v);
        mc_moe_route_one(r, rdt, r->sigmoid ? bias : NULL, &w, idx, p);
        for (int e = 0; e < E; e++) {
            mc_moe_store(rdt, probs, t * E + e, 0);
            map[t * E + e] = 0;
        }
        for (int j = 0; j < k; j++) {
            mc_moe_store(rdt, probs, t * E + idx[j], p[j]);
            map[t * E + idx[j]] = 1;
        }
    }
    work_free(&w);
}

void mc_cpu_moe_route_backward(const mc_backend_t *be, mc_dtype_t rdt, const mc_moe_router_t *r,
                               void *dlogits, const void *dprobs, const void *logits,
                               const float *bias, const uint8_t *keep, long T)
{
    (void)be;
    check_router(r);
    const int E = r->num_experts;
    mc_moe_work_t w = work_new(r, E);
    int idx[MC_MOE_MAX_TOPK];
    double p[MC_MOE_MAX_TOPK], *dp = malloc((size_t)E * sizeof(double));
    if (!dp) mc_fatal("out of host memory in the MoE router");
    for (long t = 0; t < T; t++) {
        load_row(rdt, logits, t, E, w.v);
        mc_moe_route_one(r, rdt, r->sigmoid ? bias : NULL, &w, idx, p);
        load_row(rdt, dprobs, t, E, dp);
        mc_moe_route_one_backward(r, rdt, dp, keep ? keep + t * E : NULL, w.s, w.y, idx, w.d);
        for (int e = 0; e < E; e++) mc_moe_store(rdt, dlogits, t * E + e, w.d[e]);
    }
    free(dp);
    work_free(&w);
}

void mc_cpu_moe_aux_stats(const mc_backend_t *be, mc_dtype_t rdt, int sigmoid, int topk,
                          float *counts, float *psum, const void *logits, long T, int E, int G)
{
    (void)be;
    mc_moe_work_t w = work_new(NULL, E);
    double *acc = calloc((size_t)G * (size_t)E, sizeof(double));
    int idx[MC_MOE_MAX_TOPK];
    if (!acc) mc_fatal("out of host memory in the MoE aux loss");
    for (long i = 0; i < (long)G * E; i++) counts[i] = 0;
    for (long t = 0; t < T; t++) {
        const long g = t % G;
        load_row(rdt, logits, t, E, w.v);
        mc_moe_aux_scores_one(rdt, sigmoid, E, topk, w.v, w.s, idx);
        for (int e = 0; e < E; e++) acc[g * E + e] += w.s[e];
        for (int j = 0; j < topk; j++) counts[g * E + idx[j]] += 1;
    }
    for (long i = 0; i < (long)G * E; i++) psum[i] = (float)acc[i];
    free(acc);
    work_free(&w);
}

void mc_cpu_moe_aux_backward(const mc_backend_t *be, mc_dtype_t rdt, int sigmoid, void *dlogits,
                             const void *logits, const float *counts, float coef, long T, int E,
                             int G)
{
    (void)be;
    mc_moe_work_t w = work_new(NULL, E);
    int idx[MC_MOE_MAX_TOPK];
    for (long t = 0; t < T; t++) {
        const long g = t % G;
        load_row(rdt, logits, t, E, w.v);
        mc_moe_aux_scores_one(rdt, sigmoid, E, 1, w.v, w.s, idx);
        for (int e = 0; e < E; e++) w.y[e] = (double)coef * counts[g * E + e], w.d[e] = 0;
        mc_moe_aux_backward_one(rdt, sigmoid, E, w.v, w.s, w.y, w.d);
        for (int e = 0; e < E; e++) {
            const long i = t * E + e;
            mc_moe_store(
                rdt, dlogits, i,
                mc_moe_round(rdt, mc_moe_load(rdt, dlogits, i) + mc_moe_round(rdt, w.d[e])));
        }
    }
    work_free(&w);
}

void mc_cpu_moe_z_loss(const mc_backend_t *be, mc_dtype_t rdt, float *zsum, const void *logits,
                       long T, int E)
{
    (void)be;
    mc_moe_work_t w = work_new(NULL, E);
    double acc = 0;
    for (long t = 0; t < T; t++) {
        load_row(rdt, logits, t, E, w.v);
        const double lse = mc_moe_lse(rdt, E, w.v);
        acc += mc_moe_round(rdt, lse * lse);
    }
    zsum[0] = (float)acc;
    work_free(&w);
}

void mc_cpu_moe_z_loss_backward(const mc_backend_t *be, mc_dtype_t rdt, void *dlogits,
                                const void *logits, float coef, long T, int E)
{
    (void)be;
    mc_moe_work_t w = work_new(NULL, E);
    for (long t = 0; t < T; t++) {
        load_row(rdt, logits, t, E, w.v);
        const double lse = mc_moe_lse(rdt, E, w.v);
        for (int e = 0; e < E; e++) {
            const long i = t * E + e;
            const double g = mc_moe_round(rdt, 2.0 * coef * lse * exp(w.v[e] - lse));
            mc_moe_store(rdt, dlogits, i, mc_moe_round(rdt, mc_moe_load(rdt, dlogits, i) + g));
        }
    }
    work_free(&w);
}

void mc_cpu_moe_tokens_per_expert(const mc_backend_t *be, int32_t *counts, const uint8_t *map,
                                  long T, int E)
{
    (void)be;
    for (int e = 0; e < E; e++) counts[e] = 0;
    for (long t = 0; t < T; t++)
        for (int e = 0; e < E; e++) counts[e] += map[t * E + e] != 0;
}

void mc_cpu_moe_expert_bias_update(const mc_backend_t *be, float *bias, const float *counts, int E,
                                   float rate)
{
    (void)be;
    float sum = 0;
    for (int e = 0; e < E; e++) sum += counts[e];
    const float mean = sum / (float)E;
    for (int e = 0; e < E; e++) {
        const float off = mean - counts[e];
        const float step = (float)((off > 0) - (off < 0)) * rate;
        bias[e] = bias[e] + step;
    }
}

/* ---- capacity ---- */

typedef struct {
    uint64_t key;
    long t;
} ranked_t;

static int by_key_then_index(const void *a, const void *b)
{
    const ranked_t *x = a, *y = b;
    if (x->key != y->key) return x->key > y->key ? -1 : 1;
    return (x->t > y->t) - (x->t < y->t);
}

void mc_cpu_moe_capacity(const mc_backend_t *be, mc_dtype_t rdt, void *probs_out, uint8_t *keep,
                         const void *probs, const uint8_t *map, long T, int E, long capacity,
                         int by_position, int pad)
{
    (void)be;
    ranked_t *rk = malloc((size_t)(T > 0 ? T : 1) * sizeof(*rk));
    if (!rk) mc_fatal("out of host memory in the MoE capacity");
    const long cap = capacity < T ? capacity : T;
    for (int e = 0; e < E; e++) {
        for (long t = 0; t < T; t++) {
            const double v = by_position ? map[t * E + e] : mc_moe_load(rdt, probs, t * E + e);
            rk[t] = (ranked_t){mc_moe_key(v), t};
            keep[t * E + e] = 0;
        }
        qsort(rk, (size_t)T, sizeof(*rk), by_key_then_index);
        for (long i = 0; i < cap; i++) {
            const long t = rk[i].t;
            keep[t * E + e] = pad ? 1 : map[t * E + e] != 0;
        }
    }
    for (long i = 0; i < T * E; i++)
        mc_moe_store(rdt, probs_out, i, keep[i] ? mc_moe_load(rdt, probs, i) : 0.0);
    free(rk);
}
