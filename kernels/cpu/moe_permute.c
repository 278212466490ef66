/* The CPU reference of the MoE token permutation and the local experts' GEMMs (kernels/moe.h). */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "kernels/cpu/cpu.h"
#include "kernels/moe.h"

/* An element of an activation (dt) or probability (pdt) buffer, in double. */
static double ld(mc_dtype_t dt, const void *p, long i) { return mc_moe_load(dt, p, i); }

/* x rounded as a kernel of the probs' precision computes it: fp32, or double for F64. */
static double in_precision(mc_dtype_t pdt, double x) { return pdt == MC_DT_F64 ? x : (float)x; }

void mc_cpu_moe_permute_map(const mc_backend_t *be, mc_dtype_t rdt, int32_t *rows, int32_t *row_of,
                            void *pprobs, const void *probs, const uint8_t *map, long T, int E,
                            long N)
{
    (void)be;
    long i = 0;
    for (long t = 0; t < T * E; t++) row_of[t] = -1;
    for (int e = 0; e < E; e++)
        for (long t = 0; t < T; t++) {
            if (!map[t * E + e]) continue;
            if (i >= N) mc_fatal("MoE permute: the map routes more than %ld tokens", N);
            rows[i] = (int32_t)t;
            row_of[t * E + e] = (int32_t)i;
            if (pprobs) mc_moe_store(rdt, pprobs, i, ld(rdt, probs, t * E + e));
            i++;
        }
    if (i != N) mc_fatal("MoE permute: the map routes %ld tokens, not %ld", i, N);
}

void mc_cpu_moe_permute(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                        const int32_t *rows, long N, int H)
{
    (void)be;
    const size_t es = mc_dtype_size(dt), row = es * (size_t)H;
    for (long i = 0; i < N; i++)
        memcpy((char *)out + (size_t)i * row, (const char *)in + (size_t)rows[i] * row, row);
}

void mc_cpu_moe_unpermute(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *out,
                          const void *x, const int32_t *row_of, const void *pprobs, long T, int E,
                          int H)
{
    (void)be;
    for (long t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            double acc = 0;
            for (int e = 0; e < E; e++) {
                const long i = row_of[t * E + e];
                if (i < 0) continue;
                double v = ld(dt, x, i * H + h);
                if (pprobs) v = in_precision(pdt, v * ld(pdt, pprobs, i));
                acc = in_precision(pprobs ? pdt : MC_DT_F32, acc + v);
            }
            mc_moe_store(dt, out, t * H + h, acc);
        }
}

void mc_cpu_moe_unpermute_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *dx,
                                   void *dpprobs, const void *dout, const void *x,
                                   const int32_t *rows, const void *pprobs, long N, int H)
{
    (void)be;
    for (long i = 0; i < N; i++) {
        const long t = rows[i];
        const double p = pprobs ? ld(pdt, pprobs, i) : 1.0;
        double dot = 0;
        for (int h = 0; h < H; h++) {
            const double g = ld(dt, dout, t * H + h);
            if (pprobs) dot = in_precision(pdt, dot + in_precision(pdt, g * ld(dt, x, i * H + h)));
            mc_moe_store(dt, dx, i * H + h, pprobs ? in_precision(pdt, g * p) : g);
        }
        if (pprobs && dpprobs) mc_moe_store(pdt, dpprobs, i, dot);
    }
}

void mc_cpu_moe_sort_chunks(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                            const long *sizes, const int *order, int n, int H)
{
    (void)be;
    const size_t row = mc_dtype_size(dt) * (size_t)H;
    long *start = malloc((size_t)(n > 0 ? n : 1) * sizeof(long));
    if (!start) mc_fatal("out of host memory in the MoE chunk sort");
    for (int c = 0, at = 0; c < n; at += (int)sizes[c], c++) start[c] = at;
    char *dst = out;
    for (int c = 0; c < n; c++) {
        const int k = order[c];
        memcpy(dst, (const char *)in + (size_t)start[k] * row, (size_t)sizes[k] * row);
        dst += (size_t)sizes[k] * row;
    }
    free(start);
}

void mc_cpu_moe_scale_rows(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *out,
                           const void *x, const void *p, long N, int H)
{
    (void)be;
    for (long i = 0; i < N; i++) {
        const double pi = ld(pdt, p, i);
        for (int h = 0; h < H; h++)
            mc_moe_store(dt, out, i * H + h, in_precision(pdt, ld(dt, x, i * H + h) * pi));
    }
}

void mc_cpu_moe_scale_rows_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *dx,
                                    void *dp, const void *dout, const void *x, const void *p,
                                    long N, int H)
{
    (void)be;
    for (long i = 0; i < N; i++) {
        const double pi = ld(pdt, p, i);
        double dot = 0;
        for (int h = 0; h < H; h++) {
            const double g = ld(dt, dout, i * H + h);
            dot = in_precision(pdt, dot + in_precision(pdt, g * ld(dt, x, i * H + h)));
            mc_moe_store(dt, dx, i * H + h, in_precision(pdt, g * pi));
        }
        mc_moe_store(pdt, dp, i, dot);
    }
}

/* ---- grouped GEMM: the CPU's linear ops, expert by expert ---- */

void mc_cpu_moe_grouped_linear_forward(const mc_backend_t *be, mc_dtype_t dt, void *out,
                                       const void *in, const void *const *W, const long *m, int G,
                                       int K, int N)
{
    long row = 0;
    for (int g = 0; g < G; row += m[g], g++)
        if (m[g] > 0)
            be->linear_forward(be, dt, mc_elem(out, dt, row * N), mc_celem(in, dt, row * K), W[g],
                               NULL, (int)m[g], K, N);
}

void mc_cpu_moe_grouped_linear_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt,
                                        void *din, void *const *dW, const void *dout,
                                        const void *in, const void *const *W, const long *m, int G,
                                        int K, int N)
{
    long row = 0;
    for (int g = 0; g < G; row += m[g], g++)
        if (m[g] > 0)
            be->linear_backward(be, dt, gdt, din ? mc_elem(din, dt, row * K) : NULL, dW[g], NULL,
                                mc_celem(dout, dt, row * N), mc_celem(in, dt, row * K), W[g],
                                (int)m[g], K, N);
}
