/* The strict test backend's MoE ops (kernels/strict.c): the CPU's, on the host views of its
 * device memory; the size arrays that kernels/moe.h names host memory must be host memory. */
#include "kernels/device.h"
#include "kernels/moe.h"

#define D(p) mc_strict_view((p), __func__)
#define CPU (mc_backend_cpu()->moe)

static void s_route(const mc_backend_t *be, mc_dtype_t rdt, const mc_moe_router_t *r, void *probs,
                    uint8_t *map, const void *logits, const float *bias, long T)
{
    CPU->route(mc_backend_cpu(), rdt, r, D(probs), D(map), D(logits), D(bias), T);
    (void)be;
}

static void s_route_backward(const mc_backend_t *be, mc_dtype_t rdt, const mc_moe_router_t *r,
                             void *dlogits, const void *dprobs, const void *logits,
                             const float *bias, const uint8_t *keep, long T)
{
    CPU->route_backward(mc_backend_cpu(), rdt, r, D(dlogits), D(dprobs), D(logits), D(bias),
                        D(keep), T);
    (void)be;
}

static void s_capacity(const mc_backend_t *be, mc_dtype_t rdt, void *probs_out, uint8_t *keep,
                       const void *probs, const uint8_t *map, long T, int E, long capacity,
                       int by_position, int pad)
{
    CPU->capacity(mc_backend_cpu(), rdt, D(probs_out), D(keep), D(probs), D(map), T, E, capacity,
                  by_position, pad);
    (void)be;
}

static void s_aux_stats(const mc_backend_t *be, mc_dtype_t rdt, int sigmoid, int topk,
                        float *counts, float *psum, const void *logits, long T, int E, int G)
{
    CPU->aux_stats(mc_backend_cpu(), rdt, sigmoid, topk, D(counts), D(psum), D(logits), T, E, G);
    (void)be;
}

static void s_aux_backward(const mc_backend_t *be, mc_dtype_t rdt, int sigmoid, void *dlogits,
                           const void *logits, const float *counts, float coef, long T, int E,
                           int G)
{
    CPU->aux_backward(mc_backend_cpu(), rdt, sigmoid, D(dlogits), D(logits), D(counts), coef, T, E,
                      G);
    (void)be;
}

static void s_z_loss(const mc_backend_t *be, mc_dtype_t rdt, float *zsum, const void *logits,
                     long T, int E)
{
    CPU->z_loss(mc_backend_cpu(), rdt, D(zsum), D(logits), T, E);
    (void)be;
}

static void s_z_loss_backward(const mc_backend_t *be, mc_dtype_t rdt, void *dlogits,
                              const void *logits, float coef, long T, int E)
{
    CPU->z_loss_backward(mc_backend_cpu(), rdt, D(dlogits), D(logits), coef, T, E);
    (void)be;
}

static void s_tokens_per_expert(const mc_backend_t *be, int32_t *counts, const uint8_t *map, long T,
                                int E)
{
    CPU->tokens_per_expert(mc_backend_cpu(), D(counts), D(map), T, E);
    (void)be;
}

static void s_expert_bias_update(const mc_backend_t *be, float *bias, const float *counts, int E,
                                 float rate)
{
    CPU->expert_bias_update(mc_backend_cpu(), D(bias), D(counts), E, rate);
    (void)be;
}

static void s_permute_map(const mc_backend_t *be, mc_dtype_t rdt, int32_t *rows, int32_t *row_of,
                          void *pprobs, const void *probs, const uint8_t *map, long T, int E,
                          long N)
{
    CPU->permute_map(mc_backend_cpu(), rdt, D(rows), D(row_of), D(pprobs), D(probs), D(map), T, E,
                     N);
    (void)be;
}

static void s_permute(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                      const int32_t *rows, long N, int H)
{
    CPU->permute(mc_backend_cpu(), dt, D(out), D(in), D(rows), N, H);
    (void)be;
}

static void s_unpermute(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *out,
                        const void *x, const int32_t *row_of, const void *pprobs, long T, int E,
                        int H)
{
    CPU->unpermute(mc_backend_cpu(), dt, pdt, D(out), D(x), D(row_of), D(pprobs), T, E, H);
    (void)be;
}

static void s_unpermute_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *dx,
                                 void *dpprobs, const void *dout, const void *x,
                                 const int32_t *rows, const void *pprobs, long N, int H)
{
    CPU->unpermute_backward(mc_backend_cpu(), dt, pdt, D(dx), D(dpprobs), D(dout), D(x), D(rows),
                            D(pprobs), N, H);
    (void)be;
}

static void s_sort_chunks(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                          const long *sizes, const int *order, int n, int H)
{
    CPU->sort_chunks(mc_backend_cpu(), dt, D(out), D(in), sizes, order, n, H);
    (void)be;
}

static void s_scale_rows(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *out,
                         const void *x, const void *p, long N, int H)
{
    CPU->scale_rows(mc_backend_cpu(), dt, pdt, D(out), D(x), D(p), N, H);
    (void)be;
}

static void s_scale_rows_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *dx,
                                  void *dp, const void *dout, const void *x, const void *p, long N,
                                  int H)
{
    CPU->scale_rows_backward(mc_backend_cpu(), dt, pdt, D(dx), D(dp), D(dout), D(x), D(p), N, H);
    (void)be;
}

static void s_grouped_linear_forward(const mc_backend_t *be, mc_dtype_t dt, void *out,
                                     const void *in, const void *const *W, const long *m, int G,
                                     int K, int N)
{
    const void *w[MC_MOE_MAX_EXPERTS];
    for (int g = 0; g < G; g++) w[g] = D(W[g]);
    CPU->grouped_linear_forward(mc_backend_cpu(), dt, D(out), D(in), w, m, G, K, N);
    (void)be;
}

static void s_grouped_linear_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt,
                                      void *din, void *const *dW, const void *dout, const void *in,
                                      const void *const *W, const long *m, int G, int K, int N)
{
    const void *w[MC_MOE_MAX_EXPERTS];
    void *dw[MC_MOE_MAX_EXPERTS];
    for (int g = 0; g < G; g++) w[g] = D(W[g]), dw[g] = D(dW[g]);
    CPU->grouped_linear_backward(mc_backend_cpu(), dt, gdt, D(din), dw, D(dout), D(in), w, m, G, K,
                                 N);
    (void)be;
}

const struct mc_moe_ops mc_strict_moe_ops = {
    .route = s_route,
    .route_backward = s_route_backward,
    .capacity = s_capacity,
    .aux_stats = s_aux_stats,
    .aux_backward = s_aux_backward,
    .z_loss = s_z_loss,
    .z_loss_backward = s_z_loss_backward,
    .tokens_per_expert = s_tokens_per_expert,
    .expert_bias_update = s_expert_bias_update,
    .permute_map = s_permute_map,
    .permute = s_permute,
    .unpermute = s_unpermute,
    .unpermute_backward = s_unpermute_backward,
    .sort_chunks = s_sort_chunks,
    .scale_rows = s_scale_rows,
    .scale_rows_backward = s_scale_rows_backward,
    .grouped_linear_forward = s_grouped_linear_forward,
    .grouped_linear_backward = s_grouped_linear_backward,
};
