/* Megatron's --qk-layernorm: q_layernorm and k_layernorm normalise each query and key head over
 * its HD channels (LayerNorm or RMSNorm, as --normalization), between linear_qkv and RoPE. The
 * heads lie in linear_qkv's per-group order ([QPG query heads | key | value] per group), so a
 * group's query heads are QPG contiguous rows of HD and its key head one: the row kernels of
 * layernorm.c and rmsnorm.c do the math; the weight gradients are summed here over every head,
 * in double, as those kernels sum theirs over rows. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "kernels/cpu/cpu.h"

static void norm_rows(float *out, float *mean, float *rstd, const float *x, const float *w,
                      const float *b, int rows, int HD, float eps, int rms)
{
    if (rms) mc_cpu_rmsnorm_forward_f32(NULL, out, rstd, x, w, rows, HD, eps);
    else mc_cpu_layernorm_forward_f32(NULL, out, mean, rstd, x, w, b, rows, HD, eps);
}

void mc_cpu_qk_norm_forward_f32(const mc_backend_t *be, float *out, float *mean, float *rstd,
                                const float *x, const float *wq, const float *bq, const float *wk,
                                const float *bk, int T, int NG, int QPG, int HD, float eps, int rms)
{
    (void)be;
    const long G = (long)T * NG, hs = (long)(QPG + 2) * HD;
    for (long i = 0; i < G; i++) {
        const long o = i * hs, s = i * (QPG + 1);
        float *m = rms ? NULL : mean + s;
        norm_rows(out + o, m, rstd + s, x + o, wq, bq, QPG, HD, eps, rms);
        norm_rows(out + o + (long)QPG * HD, m ? m + QPG : NULL, rstd + s + QPG,
                  x + o + (long)QPG * HD, wk, bk, 1, HD, eps, rms);
        if (out != x)
            memcpy(out + o + (long)(QPG + 1) * HD, x + o + (long)(QPG + 1) * HD,
                   (size_t)HD * sizeof(float));
    }
}

/* sw += dout * xhat and sb += dout over one head (xhat from the saved statistics). */
static void head_wgrad(double *sw, double *sb, const float *g, const float *x, float m, float r,
                       int HD, int rms)
{
    for (int j = 0; j < HD; j++) {
        const float xh = rms ? x[j] * r : (x[j] - m) * r;
        sw[j] += (double)(g[j] * xh);
        if (sb) sb[j] += (double)g[j];
    }
}

static void add_to(float *acc, const double *s, int HD)
{
    for (int j = 0; acc && j < HD; j++) acc[j] = (float)((double)acc[j] + s[j]);
}

/* The weight gradients of both norms: every query head into (dwq, dbq), key heads (dwk, dbk). */
static void qk_norm_wgrad(float *dwq, float *dbq, float *dwk, float *dbk, const float *dqkv,
                          const float *x, const float *mean, const float *rstd, long G, int QPG,
                          int HD, int rms)
{
    double *s = calloc((size_t)4 * HD, sizeof(double));
    if (!s) mc_fatal("out of host memory in the q/k layernorm backward");
    double *swq = s, *sbq = s + HD, *swk = s + 2 * HD, *sbk = s + 3 * HD;
    const long hs = (long)(QPG + 2) * HD;
    for (long i = 0; i < G; i++)
        for (int h = 0; h <= QPG; h++) {
            const long o = i * hs + (long)h * HD, si = i * (QPG + 1) + h;
            head_wgrad(h < QPG ? swq : swk,
                       rms       ? NULL
                       : h < QPG ? sbq
                                 : sbk,
                       dqkv + o, x + o, rms ? 0.0f : mean[si], rstd[si], HD, rms);
        }
    add_to(dwq, swq, HD);
    add_to(dwk, swk, HD);
    if (!rms) {
        add_to(dbq, sbq, HD);
        add_to(dbk, sbk, HD);
    }
    free(s);
}

void mc_cpu_qk_norm_backward_f32(const mc_backend_t *be, float *dqkv, float *dwq, float *dbq,
                                 float *dwk, float *dbk, const float *x, const float *wq,
                                 const float *wk, const float *mean, const float *rstd, int T,
                                 int NG, int QPG, int HD, int rms)
{
    (void)be;
    const long G = (long)T * NG, hs = (long)(QPG + 2) * HD, qk = (long)(QPG + 1) * HD;
    qk_norm_wgrad(dwq, dbq, dwk, dbk, dqkv, x, mean, rstd, G, QPG, HD, rms);
    float *g = malloc((size_t)qk * sizeof(float));
    if (!g) mc_fatal("out of host memory in the q/k layernorm backward");
    for (long i = 0; i < G; i++) { /* each group's q/k gradient, then dx = its input gradient */
        float *d = dqkv + i * hs;
        const float *xi = x + i * hs, *r = rstd + i * (QPG + 1);
        const float *m = rms ? NULL : mean + i * (QPG + 1);
        memcpy(g, d, (size_t)qk * sizeof(float));
        memset(d, 0, (size_t)qk * sizeof(float));
        for (int h = 0; h <= QPG; h++) {
            const long o = (long)h * HD;
            const float *w = h < QPG ? wq : wk;
            if (rms)
                mc_cpu_rmsnorm_backward_acc_f32(NULL, d + o, NULL, g + o, xi + o, w, r + h, 1, HD);
            else
                mc_cpu_layernorm_backward_acc_f32(NULL, d + o, NULL, NULL, g + o, xi + o, w, m + h,
                                                  r + h, 1, HD);
        }
    }
    free(g);
}
