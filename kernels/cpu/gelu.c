/* The MLP's elementwise activation, fp32. MC_ACT_GELU_TANH: Megatron's bias_gelu_impl /
 * bias_gelu_back (fused_bias_gelu.py) with the vector tanh of cpu.h; MC_ACT_GELU_ERF: exact erf
 * GeLU (F.gelu) with libm's erff/expf; MC_ACT_SQUARED_RELU: Megatron's squared_relu, relu(x)^2,
 * whose gradient is 2 relu(x) dout (exact products: the CUDA kernels match it bit for bit). */
#include <math.h>

#include "kernels/cpu/cpu.h"

#define GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_K1 0.044715f
#define GELU_K2 0.1070322243f /* 3 * 0.044715 * sqrt(2/pi) */
#define GELU_RSQRT2 0.70710678118654752f
#define GELU_RSQRT2PI 0.3989422804014327f

/* 0.5 x (1 + tanh(k0 x (1 + k1 x^2))) */
static inline mc_v4f gelu_tanh4(mc_v4f v)
{
    return 0.5f * v * (1.0f + mc_v4_tanh(GELU_K0 * v * (1.0f + GELU_K1 * v * v)));
}

/* g * (0.5 x (1 - t^2) (k0 + k2 x^2) + 0.5 (1 + t)), t = tanh(k0 x (1 + k1 x^2)) */
static inline mc_v4f gelu_tanh_grad4(mc_v4f v, mc_v4f g)
{
    const mc_v4f t = mc_v4_tanh(GELU_K0 * v * (1.0f + GELU_K1 * v * v));
    const mc_v4f ff = 0.5f * v * ((1.0f - t * t) * (GELU_K0 + GELU_K2 * v * v)) + 0.5f * (1.0f + t);
    return ff * g;
}

/* relu(x) keeping NaN (torch's relu propagates it): x < 0 is false for NaN */
static inline float relu(float v) { return v < 0.0f ? 0.0f : v; }

static void gelu_tanh_forward(float *out, const float *x, long n)
{
    long i = 0; /* out may equal x: each vector is loaded before it is stored */
    for (; i + 4 <= n; i += 4) mc_v4_store(out + i, gelu_tanh4(mc_v4_load(x + i)));
    if (i < n)
        mc_v4_store_part(out + i, gelu_tanh4(mc_v4_load_part(x + i, (int)(n - i))), (int)(n - i));
}

static void gelu_tanh_backward(float *dx, const float *dout, const float *x, long n)
{
    long i = 0; /* dx may equal dout */
    for (; i + 4 <= n; i += 4)
        mc_v4_store(dx + i, gelu_tanh_grad4(mc_v4_load(x + i), mc_v4_load(dout + i)));
    if (i < n) {
        const int r = (int)(n - i);
        mc_v4_store_part(
            dx + i, gelu_tanh_grad4(mc_v4_load_part(x + i, r), mc_v4_load_part(dout + i, r)), r);
    }
}

void mc_cpu_gelu_forward_f32(const mc_backend_t *be, float *out, const float *x, long n,
                             mc_act_t act)
{
    (void)be;
    switch (act) {
    case MC_ACT_GELU_TANH: gelu_tanh_forward(out, x, n); break;
    case MC_ACT_SQUARED_RELU:
        for (long i = 0; i < n; i++) {
            const float r = relu(x[i]);
            out[i] = r * r;
        }
        break;
    default:
        for (long i = 0; i < n; i++) {
            float v = x[i];
            out[i] = 0.5f * v * (1.0f + erff(v * GELU_RSQRT2));
        }
    }
}

void mc_cpu_gelu_backward_f32(const mc_backend_t *be, float *dx, const float *dout, const float *x,
                              long n, mc_act_t act)
{
    (void)be;
    switch (act) {
    case MC_ACT_GELU_TANH: gelu_tanh_backward(dx, dout, x, n); break;
    case MC_ACT_SQUARED_RELU:
        for (long i = 0; i < n; i++) dx[i] = 2.0f * relu(x[i]) * dout[i];
        break;
    default:
        for (long i = 0; i < n; i++) {
            float v = x[i];
            float ff =
                0.5f * (1.0f + erff(v * GELU_RSQRT2)) + v * expf(-0.5f * v * v) * GELU_RSQRT2PI;
            dx[i] = ff * dout[i];
        }
    }
}
