/* LayerNorm over the last dim: out = (x - mean) * rstd * w + b, biased variance.
 * Row statistics and the backward reductions are summed in double; elementwise math is fp32 and
 * uses the saved fp32 mean/rstd, so forward and backward see the same normalised values. */
#include <math.h>

#include "kernels/cpu/cpu.h"

void mc_cpu_layernorm_forward_f32(const mc_backend_t *be, float *out, float *mean, float *rstd,
                                  const float *x, const float *w, const float *b, int N, int C,
                                  float eps)
{
    (void)be;
    for (int n = 0; n < N; n++) {
        const float *xr = x + (long)n * C;
        float *o = out + (long)n * C;
        double s = 0.0;
        for (int i = 0; i < C; i++) s += xr[i];
        double mu = C > 0 ? s / C : 0.0;
        double v = 0.0;
        for (int i = 0; i < C; i++) {
            double dlt = (double)xr[i] - mu;
            v += dlt * dlt;
        }
        v = C > 0 ? v / C : 0.0;
        float m = (float)mu;
        float r = (float)(1.0 / sqrt(v + (double)eps));
        if (mean) mean[n] = m;
        if (rstd) rstd[n] = r;
        if (b) {
            for (int i = 0; i < C; i++) o[i] = (xr[i] - m) * r * w[i] + b[i];
        } else {
            for (int i = 0; i < C; i++) o[i] = (xr[i] - m) * r * w[i];
        }
    }
}

void mc_cpu_layernorm_backward_acc_f32(const mc_backend_t *be, float *dx, float *dw, float *db,
                                       const float *dout, const float *x, const float *w,
                                       const float *mean, const float *rstd, int N, int C)
{
    (void)be;
    if (C <= 0) return;
    /* dx += rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)), dnorm = dout * w. */
    if (dx) {
        for (int n = 0; n < N; n++) {
            const float *g = dout + (long)n * C, *xr = x + (long)n * C;
            float *d = dx + (long)n * C;
            float m = mean[n], r = rstd[n];
            double sa = 0.0, sc = 0.0;
            for (int i = 0; i < C; i++) {
                float xh = (xr[i] - m) * r;
                float dn = g[i] * w[i];
                sa += dn;
                sc += (double)dn * xh;
            }
            float a = (float)(sa / C), c = (float)(sc / C);
            for (int i = 0; i < C; i++) {
                float xh = (xr[i] - m) * r;
                d[i] += r * (g[i] * w[i] - a - xh * c);
            }
        }
    }
    /* dw += sum_n dout * xhat, db += sum_n dout: a chunk of columns at a time, in double. */
    if (!dw && !db) return;
    enum { CH = 256 };
    double sw[CH], sb[CH];
    for (int c0 = 0; c0 < C; c0 += CH) {
        int c = C - c0 < CH ? C - c0 : CH;
        for (int j = 0; j < c; j++) sw[j] = sb[j] = 0.0;
        for (int n = 0; n < N; n++) {
            const float *g = dout + (long)n * C + c0, *xr = x + (long)n * C + c0;
            float m = mean[n], r = rstd[n];
            for (int j = 0; j < c; j++) {
                float xh = (xr[j] - m) * r;
                sw[j] += (double)(g[j] * xh);
                sb[j] += (double)g[j];
            }
        }
        if (dw)
            for (int j = 0; j < c; j++) dw[c0 + j] = (float)((double)dw[c0 + j] + sw[j]);
        if (db)
            for (int j = 0; j < c; j++) db[c0 + j] = (float)((double)db[c0 + j] + sb[j]);
    }
}
