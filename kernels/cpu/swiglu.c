/* SwiGLU (Megatron's --swiglu, fused_bias_swiglu.py), fp32: rows of x are [gate | up],
 * out = silu(gate) * up with silu(g) = g s, s = sigmoid(g) = 1 / (1 + exp(-g)) from cpu.h's
 * vector exp; the backward is swiglu_back's formula in its order:
 *   dgate = dout s (1 + g (1 - s)) up,  dup = dout silu(g). */
#include "kernels/cpu/cpu.h"

static inline mc_v4f sigmoid4(mc_v4f g) { return 1.0f / (1.0f + mc_v4_exp(-g)); }

/* out[0..n) = silu(gate) * up */
static inline mc_v4f swiglu4(mc_v4f g, mc_v4f u) { return g * sigmoid4(g) * u; }

static void swiglu_row(float *out, const float *gate, const float *up, int F)
{
    int j = 0;
    for (; j + 4 <= F; j += 4)
        mc_v4_store(out + j, swiglu4(mc_v4_load(gate + j), mc_v4_load(up + j)));
    if (j < F) {
        const int r = F - j;
        mc_v4_store_part(out + j, swiglu4(mc_v4_load_part(gate + j, r), mc_v4_load_part(up + j, r)),
                         r);
    }
}

void mc_cpu_swiglu_forward_f32(const mc_backend_t *be, float *out, const float *x, int N, int F)
{
    (void)be;
    for (int n = 0; n < N; n++) {
        const float *xr = x + 2L * n * F;
        swiglu_row(out + (long)n * F, xr, xr + F, F);
    }
}

/* The gradients of the four lanes: *dg and *du from dout d, gate g and up u. */
static inline void swiglu_grad4(mc_v4f d, mc_v4f g, mc_v4f u, mc_v4f *dg, mc_v4f *du)
{
    const mc_v4f s = sigmoid4(g);
    *dg = d * s * (1.0f + g * (1.0f - s)) * u;
    *du = d * (g * s);
}

static void swiglu_back_row(float *dgate, float *dup, const float *dout, const float *gate,
                            const float *up, int F)
{
    mc_v4f dg, du;
    int j = 0;
    for (; j + 4 <= F; j += 4) {
        swiglu_grad4(mc_v4_load(dout + j), mc_v4_load(gate + j), mc_v4_load(up + j), &dg, &du);
        mc_v4_store(dgate + j, dg);
        mc_v4_store(dup + j, du);
    }
    if (j < F) {
        const int r = F - j;
        swiglu_grad4(mc_v4_load_part(dout + j, r), mc_v4_load_part(gate + j, r),
                     mc_v4_load_part(up + j, r), &dg, &du);
        mc_v4_store_part(dgate + j, dg, r);
        mc_v4_store_part(dup + j, du, r);
    }
}

void mc_cpu_swiglu_backward_f32(const mc_backend_t *be, float *dx, const float *dout,
                                const float *x, int N, int F)
{
    (void)be;
    for (int n = 0; n < N; n++) {
        const float *xr = x + 2L * n * F;
        float *d = dx + 2L * n * F;
        swiglu_back_row(d, d + F, dout + (long)n * F, xr, xr + F, F);
    }
}
