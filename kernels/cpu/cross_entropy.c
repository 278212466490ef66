/* Vocab-parallel cross-entropy in fp32 (kernels/backend.h): logits rows in [s, b] order
 * (row n = s_i*B + b_i); targets, losses and dloss are [b, s] (index b_i*S + s_i). exp(x - max)
 * in fp32 (the vector exp of cpu.h) summed in double. A target outside this rank's slice
 * contributes no predicted logit and no one-hot term. */
#include <math.h>
#include <stdlib.h>

#include "base/error.h"
#include "kernels/cpu/cpu.h"

void mc_cpu_ce_max_f32(const mc_backend_t *be, float *rowmax, const float *logits, int N, int V)
{
    (void)be;
    for (long n = 0; n < N; n++) rowmax[n] = V > 0 ? mc_cpu_row_max(logits + n * V, V) : -INFINITY;
}

void mc_cpu_ce_sums_f32(const mc_backend_t *be, float *sumexp, float *target_logit,
                        const float *logits, const float *rowmax, const int32_t *targets, int S,
                        int B, int V, int vocab_start)
{
    (void)be;
    for (int s = 0; s < S; s++)
        for (int b = 0; b < B; b++) {
            const long n = (long)s * B + b;
            const float *x = logits + n * V;
            sumexp[n] = V > 0 ? (float)mc_cpu_exp_shift_sum(NULL, x, V, rowmax[n]) : 0.0f;
            const long t = (long)targets[(long)b * S + s] - vocab_start;
            target_logit[n] = (t >= 0 && t < V) ? x[t] : 0.0f;
        }
}

void mc_cpu_ce_loss(const mc_backend_t *be, float *losses, const float *rowmax, const float *sumexp,
                    const float *target_logit, int S, int B)
{
    (void)be;
    for (int s = 0; s < S; s++)
        for (int b = 0; b < B; b++) {
            const long n = (long)s * B + b;
            losses[(long)b * S + s] =
                (float)(log((double)sumexp[n]) + (double)rowmax[n] - (double)target_logit[n]);
        }
}

void mc_cpu_ce_backward_f32(const mc_backend_t *be, float *dlogits, const float *logits,
                            const float *rowmax, const float *sumexp, const int32_t *targets,
                            const float *dloss, int S, int B, int V, int vocab_start)
{
    (void)be;
    if (V <= 0) return;
    for (int s = 0; s < S; s++)
        for (int b = 0; b < B; b++) {
            const long n = (long)s * B + b, bs = (long)b * S + s;
            const float *x = logits + n * V;
            float *dx = dlogits + n * V; /* may equal x: each element is read before written */
            mc_cpu_exp_shift_sum(dx, x, V, rowmax[n]);
            const float g = dloss[bs];
            const float f = (float)((double)g / (double)sumexp[n]);
            for (int j = 0; j < V; j++) dx[j] *= f;
            const long t = (long)targets[bs] - vocab_start;
            if (t >= 0 && t < V) dx[t] -= g;
        }
}

/* The ops above in sequence (the reference of the fused kernel): the statistics when not given,
 * the loss, then the gradient in place for dloss = loss_mask * grad_scale. */
void mc_cpu_ce_fused(const mc_backend_t *be, mc_dtype_t dt, float *losses, void *logits,
                     const float *rowmax, const float *sumexp, const float *target_logit,
                     const int32_t *targets, const float *loss_mask, float grad_scale, int S, int B,
                     int V, int vocab_start)
{
    const long N = (long)S * B;
    if (N <= 0) return;
    float *own = NULL, *dloss = NULL;
    if (!rowmax) {
        if (!(own = malloc((size_t)N * 3 * sizeof(float)))) mc_fatal("out of host memory");
        mc_cpu_ce_max(be, dt, own, logits, (int)N, V);
        mc_cpu_ce_sums(be, dt, own + N, own + 2 * N, logits, own, targets, S, B, V, vocab_start);
        rowmax = own, sumexp = own + N, target_logit = own + 2 * N;
    }
    mc_cpu_ce_loss(be, losses, rowmax, sumexp, target_logit, S, B);
    if (loss_mask) {
        if (!(dloss = malloc((size_t)N * sizeof(float)))) mc_fatal("out of host memory");
        for (long i = 0; i < N; i++) dloss[i] = loss_mask[i] * grad_scale;
        mc_cpu_ce_backward(be, dt, logits, logits, rowmax, sumexp, targets, dloss, S, B, V,
                           vocab_start);
    }
    free(own);
    free(dloss);
}
