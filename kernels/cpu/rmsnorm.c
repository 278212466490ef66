/* RMSNorm over the last dim (Megatron's --normalization RMSNorm): out = x * rstd * w,
 * rstd = 1 / sqrt(mean(x^2) + eps). As layernorm.c: the row statistic and the backward
 * reductions are summed in double, the elementwise math is fp32 from the saved fp32 rstd. */
#include <math.h>

#include "kernels/cpu/cpu.h"

void mc_cpu_rmsnorm_forward_f32(const mc_backend_t *be, float *out, float *rstd, const float *x,
                                const float *w, int N, int C, float eps)
{
    (void)be;
    for (int n = 0; n < N; n++) {
        const float *xr = x + (long)n * C;
        float *o = out + (long)n * C;
        double q = 0.0;
        for (int i = 0; i < C; i++) q += (double)xr[i] * xr[i];
        const double ms = C > 0 ? q / C : 0.0;
        const float r = (float)(1.0 / sqrt(ms + (double)eps));
        if (rstd) rstd[n] = r;
        for (int i = 0; i < C; i++) o[i] = xr[i] * r * w[i];
    }
}

void mc_cpu_rmsnorm_backward_acc_f32(const mc_backend_t *be, float *dx, float *dw,
                                     const float *dout, const float *x, const float *w,
                                     const float *rstd, int N, int C)
{
    (void)be;
    if (C <= 0) return;
    /* dx += rstd * (dnorm - xhat * mean(dnorm * xhat)), dnorm = dout * w, xhat = x * rstd */
    for (int n = 0; dx && n < N; n++) {
        const float *g = dout + (long)n * C, *xr = x + (long)n * C;
        float *d = dx + (long)n * C;
        const float r = rstd[n];
        double sc = 0.0;
        for (int i = 0; i < C; i++) sc += (double)(g[i] * w[i]) * (xr[i] * r);
        const float c = (float)(sc / C);
        for (int i = 0; i < C; i++) d[i] += r * (g[i] * w[i] - xr[i] * r * c);
    }
    /* dw += sum_n dout * xhat: a chunk of columns at a time, in double */
    if (!dw) return;
    enum { CH = 256 };
    double sw[CH];
    for (int c0 = 0; c0 < C; c0 += CH) {
        const int c = C - c0 < CH ? C - c0 : CH;
        for (int j = 0; j < c; j++) sw[j] = 0.0;
        for (int n = 0; n < N; n++) {
            const float *g = dout + (long)n * C + c0, *xr = x + (long)n * C + c0;
            const float r = rstd[n];
            for (int j = 0; j < c; j++) sw[j] += (double)(g[j] * (xr[j] * r));
        }
        for (int j = 0; j < c; j++) dw[c0 + j] = (float)((double)dw[c0 + j] + sw[j]);
    }
}
