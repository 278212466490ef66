/* Cross-entropy in fp32 over logits rows in [s, b] order (row n = s_i*B + b_i); targets, losses
 * and dloss are [b, s] (index b_i*S + s_i). Per row: the max in fp32, exp(x - max) in fp32 (the
 * vector exp of cpu.h) summed in double, logsumexp = max + log(sum) in double.
 * A target outside [0, V) (not in this rank's vocab shard) contributes no predicted logit and no
 * one-hot term, as in Megatron's vocab-parallel cross-entropy on one shard. */
#include <math.h>

#include "kernels/cpu/cpu.h"

void mc_cpu_cross_entropy_forward(const mc_backend_t *be, float *losses, const float *logits,
                                  const int32_t *targets, int S, int B, int V)
{
    (void)be;
    if (V <= 0) return;
    for (int s = 0; s < S; s++)
        for (int b = 0; b < B; b++) {
            const float *x = logits + ((long)s * B + b) * V;
            const long bs = (long)b * S + s;
            const float mx = mc_cpu_row_max(x, V);
            const double sum = mc_cpu_exp_shift_sum(NULL, x, V, mx);
            const double lse = (double)mx + log(sum);
            const int32_t t = targets[bs];
            const double pred = (t >= 0 && t < V) ? (double)x[t] : 0.0;
            losses[bs] = (float)(lse - pred);
        }
}

void mc_cpu_cross_entropy_backward(const mc_backend_t *be, float *dlogits, const float *logits,
                                   const int32_t *targets, const float *dloss, int S, int B, int V)
{
    (void)be;
    if (V <= 0) return;
    for (int s = 0; s < S; s++)
        for (int b = 0; b < B; b++) {
            const long n = (long)s * B + b, bs = (long)b * S + s;
            const float *x = logits + n * V;
            float *dx = dlogits + n * V; /* may equal x: each element is read before written */
            const float mx = mc_cpu_row_max(x, V);
            const double sum = mc_cpu_exp_shift_sum(dx, x, V, mx);
            const float g = dloss[bs];
            const float f = (float)((double)g / sum);
            for (int j = 0; j < V; j++) dx[j] *= f;
            const int32_t t = targets[bs];
            if (t >= 0 && t < V) dx[t] -= g;
        }
}
