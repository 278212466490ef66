/* torch.nn.Linear on OpenBLAS: W is [out, in]. */
#include <cblas.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

void mc_cpu_linear_forward_f32(const mc_backend_t *be, float *out, const float *in, const float *W,
                               const float *bias, int N, int in_f, int out_f)
{
    (void)be;
    if (N <= 0 || out_f <= 0) return;
    float beta = 0.0f;
    if (bias) { /* out = bias, then out += in @ W^T */
        for (int n = 0; n < N; n++)
            memcpy(out + (long)n * out_f, bias, (size_t)out_f * sizeof(float));
        beta = 1.0f;
    }
    if (in_f <= 0) {
        if (!bias) memset(out, 0, (size_t)N * (size_t)out_f * sizeof(float));
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, out_f, in_f, 1.0f, in, in_f, W, in_f,
                beta, out, out_f);
}

/* Column sums in double, a chunk of columns at a time so the inner loop runs along a row and
 * vectorises; the chunk's partial sums live on the stack (ops never allocate). */
void mc_cpu_colsum_acc(float *acc, const float *x, int N, int C)
{
    enum { CH = 512 };
    double s[CH];
    for (int c0 = 0; c0 < C; c0 += CH) {
        int c = C - c0 < CH ? C - c0 : CH;
        for (int j = 0; j < c; j++) s[j] = 0.0;
        for (int n = 0; n < N; n++) {
            const float *r = x + (long)n * C + c0;
            for (int j = 0; j < c; j++) s[j] += (double)r[j];
        }
        for (int j = 0; j < c; j++) acc[c0 + j] = (float)((double)acc[c0 + j] + s[j]);
    }
}

void mc_cpu_linear_backward_f32(const mc_backend_t *be, float *din, float *dW, float *dbias,
                                const float *dout, const float *in, const float *W, int N, int in_f,
                                int out_f)
{
    (void)be;
    if (in_f <= 0 || out_f <= 0) return;
    if (N <= 0) return; /* nothing to accumulate; din has no rows */
    if (din)            /* din[N, in] = dout[N, out] @ W[out, in] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, in_f, out_f, 1.0f, dout, out_f, W,
                    in_f, 0.0f, din, in_f);
    /* dW[out, in] += dout^T @ in */
    if (dW)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_f, in_f, N, 1.0f, dout, out_f, in,
                    in_f, 1.0f, dW, in_f);
    if (dbias) mc_cpu_colsum_acc(dbias, dout, N, out_f);
}
