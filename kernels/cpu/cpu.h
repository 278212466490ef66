/* Internal declarations of the CPU reference backend (kernels/backend.h documents every op).
 * Each op's fp32 kernel (mc_cpu_*_f32) lives in the file named after its concern; precision.c
 * wraps them for every precision, and backend_cpu.c builds the table. */
#ifndef MC_KERNELS_CPU_CPU_H
#define MC_KERNELS_CPU_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#elif defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#endif

/* ---- fast elementwise math on 4-float vectors (GCC/clang vector extensions: SSE on x86-64,
 * NEON on arm64, scalar code elsewhere) ----
 * libm's expf and tanhf are scalar calls and dominated a training step's profile. Every element
 * goes through the same vector code (tails are zero-padded into a vector), so a value never
 * depends on its position in a buffer. */
typedef float mc_v4f __attribute__((vector_size(16)));
typedef uint32_t mc_v4u __attribute__((vector_size(16)));
typedef int32_t mc_v4i __attribute__((vector_size(16)));

static inline mc_v4f mc_v4_load(const float *p)
{
    mc_v4f v;
    __builtin_memcpy(&v, p, sizeof(v));
    return v;
}
static inline void mc_v4_store(float *p, mc_v4f v) { __builtin_memcpy(p, &v, sizeof(v)); }
/* The first n (< 4) elements, the rest zero. */
static inline mc_v4f mc_v4_load_part(const float *p, int n)
{
    mc_v4f v = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k = 0; k < n; k++) v[k] = p[k];
    return v;
}
static inline void mc_v4_store_part(float *p, mc_v4f v, int n)
{
    for (int k = 0; k < n; k++) p[k] = v[k];
}
static inline mc_v4f mc_v4_splat(float x) { return (mc_v4f){x, x, x, x}; }
/* m ? a : b, lane-wise, m from a vector comparison (all ones or zero per lane). */
static inline mc_v4f mc_v4_select(mc_v4i m, mc_v4f a, mc_v4f b)
{
    return (mc_v4f)(((mc_v4u)a & (mc_v4u)m) | ((mc_v4u)b & ~(mc_v4u)m));
}

/* exp(x) within 2 ulp for x in [-87.33, 88.37] (Cody-Waite reduction, Cephes' degree-6
 * polynomial); 0 below that range (where libm gives denormals); saturates above it. */
static inline mc_v4f mc_v4_exp(mc_v4f x)
{
    const mc_v4f lo = mc_v4_splat(-87.3365447505531f), hi = mc_v4_splat(88.3762626647949f);
    const mc_v4f magic = mc_v4_splat(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
    const mc_v4i under = x < lo;
    mc_v4f xc = mc_v4_select(under, lo, x);
    xc = mc_v4_select(xc > hi, hi, xc);
    const mc_v4f t = xc * 1.44269504088896341f + magic;
    const mc_v4f n = t - magic;
    const mc_v4u ni = (mc_v4u)t - (mc_v4u)magic;
    mc_v4f r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    mc_v4f p = mc_v4_splat(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const mc_v4f y = p * r * r + r + 1.0f;
    const mc_v4f res = (mc_v4f)((mc_v4u)y + (ni << 23));
    return mc_v4_select(under, mc_v4_splat(0.0f), res);
}

/* tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|): absolute error about 1e-7 (relative
 * error grows as |x| -> 0, where GeLU multiplies it by x). */
static inline mc_v4f mc_v4_tanh(mc_v4f x)
{
    const mc_v4u sign = (mc_v4u)x & 0x80000000u;
    const mc_v4f ax = (mc_v4f)((mc_v4u)x & 0x7fffffffu);
    const mc_v4f e = mc_v4_exp(ax * -2.0f);
    const mc_v4f t = (1.0f - e) / (1.0f + e);
    return (mc_v4f)((mc_v4u)t | sign);
}

/* Correctly rounded square root (identical to sqrtf on every path). */
static inline mc_v4f mc_v4_sqrt(mc_v4f x)
{
#if defined(__SSE__)
    return (mc_v4f)_mm_sqrt_ps((__m128)x);
#elif defined(__ARM_NEON) && defined(__aarch64__)
    return (mc_v4f)vsqrtq_f32((float32x4_t)x);
#else
    return (mc_v4f){__builtin_sqrtf(x[0]), __builtin_sqrtf(x[1]), __builtin_sqrtf(x[2]),
                    __builtin_sqrtf(x[3])};
#endif
}

static inline mc_v4f mc_v4_max(mc_v4f a, mc_v4f b) { return mc_v4_select(a > b, a, b); }
static inline float mc_v4_hmax(mc_v4f a)
{
    float m = a[0];
    for (int k = 1; k < 4; k++) m = a[k] > m ? a[k] : m;
    return m;
}

/* backend_cpu.c: memory */
void *mc_cpu_alloc(const mc_backend_t *be, size_t bytes);
void mc_cpu_free(const mc_backend_t *be, void *p);
void mc_cpu_memcpy(const mc_backend_t *be, void *dst, const void *src, size_t bytes);
void mc_cpu_memset0(const mc_backend_t *be, void *p, size_t bytes);
void mc_cpu_synchronize(const mc_backend_t *be);

/* gemm.c */
void mc_cpu_gemm(const mc_backend_t *be, int transa, int transb, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* linear.c */
void mc_cpu_linear_forward_f32(const mc_backend_t *be, float *out, const float *in, const float *W,
                               const float *bias, int N, int in_f, int out_f);
void mc_cpu_linear_backward_f32(const mc_backend_t *be, float *din, float *dW, float *dbias,
                                const float *dout, const float *in, const float *W, int N, int in_f,
                                int out_f);
/* acc[j] += sum over n of x[n, j] for j < C (x is [N, C]), summed in double. */
void mc_cpu_colsum_acc(float *acc, const float *x, int N, int C);

/* embedding.c */
void mc_cpu_embedding_forward_f32(const mc_backend_t *be, float *out, const int32_t *tokens,
                                  const int32_t *positions, const float *wte, const float *wpe,
                                  int S, int B, int H, int vocab_start, int V);
void mc_cpu_embedding_backward_f32(const mc_backend_t *be, float *dwte, float *dwpe,
                                   const float *dout, const int32_t *tokens,
                                   const int32_t *positions, int S, int B, int H, int vocab_start,
                                   int V);

/* layernorm.c */
void mc_cpu_layernorm_forward_f32(const mc_backend_t *be, float *out, float *mean, float *rstd,
                                  const float *x, const float *w, const float *b, int N, int C,
                                  float eps);
void mc_cpu_layernorm_backward_acc_f32(const mc_backend_t *be, float *dx, float *dw, float *db,
                                       const float *dout, const float *x, const float *w,
                                       const float *mean, const float *rstd, int N, int C);

/* rmsnorm.c */
void mc_cpu_rmsnorm_forward_f32(const mc_backend_t *be, float *out, float *rstd, const float *x,
                                const float *w, int N, int C, float eps);
void mc_cpu_rmsnorm_backward_acc_f32(const mc_backend_t *be, float *dx, float *dw,
                                     const float *dout, const float *x, const float *w,
                                     const float *rstd, int N, int C);

/* rope.c */
void mc_cpu_rope_f32(const mc_backend_t *be, float *qkv, const float *cos_t, const float *sin_t,
                     int S, int B, int NG, int QPG, int HD, int rot_dim, int interleaved,
                     int inverse);

/* qk_norm.c */
void mc_cpu_qk_norm_forward_f32(const mc_backend_t *be, float *out, float *mean, float *rstd,
                                const float *x, const float *wq, const float *bq, const float *wk,
                                const float *bk, int T, int NG, int QPG, int HD, float eps,
                                int rms);
void mc_cpu_qk_norm_backward_f32(const mc_backend_t *be, float *dqkv, float *dwq, float *dbq,
                                 float *dwk, float *dbk, const float *x, const float *wq,
                                 const float *wk, const float *mean, const float *rstd, int T,
                                 int NG, int QPG, int HD, int rms);

/* gelu.c: the MLP's elementwise activation (GeLU or squared ReLU) */
void mc_cpu_gelu_forward_f32(const mc_backend_t *be, float *out, const float *x, long n,
                             mc_act_t act);
void mc_cpu_gelu_backward_f32(const mc_backend_t *be, float *dx, const float *dout, const float *x,
                              long n, mc_act_t act);

/* swiglu.c */
void mc_cpu_swiglu_forward_f32(const mc_backend_t *be, float *out, const float *x, int N, int F);
void mc_cpu_swiglu_backward_f32(const mc_backend_t *be, float *dx, const float *dout,
                                const float *x, int N, int F);

/* dropout.c */
void mc_cpu_dropout_forward_f32(const mc_backend_t *be, float *out, const float *x,
                                const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                                int inner_full, int inner_offset);
void mc_cpu_dropout_backward_f32(const mc_backend_t *be, float *dx, const float *dout,
                                 const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                                 int inner_full, int inner_offset);
/* dst[i] = keep(e0 + i) ? src[i] * scale : 0 for i in [0, n), with keep = mc_dropout_keep for
 * (d's seed/iteration/layer/site, sample). One Philox block serves four consecutive elements.
 * dst may equal src. */
void mc_cpu_dropout_span(float *dst, const float *src, long n, const mc_dropout_t *d,
                         uint64_t sample, uint64_t e0, float scale);
/* The factor kept values are multiplied by: 1/(1-p) in fp32 (0 when p >= 1). */
float mc_cpu_dropout_scale(float p);

/* attention.c */
/* Megatron's linear_qkv layout with NG query groups (backend.h's attention_forward): the width
 * of one [s, b] row of one batch row, and the offsets in row s = 0 of query head h's q and of
 * its group's k (v follows k). */
static inline long mc_cpu_qkv_width(int NH, int NG, int HD) { return (long)(NH + 2 * NG) * HD; }
static inline long mc_cpu_qkv_q(int b, int h, int NH, int NG, int HD)
{
    const int qpg = NH / NG;
    return b * mc_cpu_qkv_width(NH, NG, HD) + ((long)(h / qpg) * (qpg + 2) + h % qpg) * HD;
}
static inline long mc_cpu_qkv_k(int b, int h, int NH, int NG, int HD)
{
    const int qpg = NH / NG;
    return b * mc_cpu_qkv_width(NH, NG, HD) + ((long)(h / qpg) * (qpg + 2) + qpg) * HD;
}
void mc_cpu_attention_forward_f32(const mc_backend_t *be, float *out, float *probs,
                                  const float *qkv, int S, int B, int NH, int NG, int HD,
                                  const int32_t *segments, float scale, const mc_dropout_t *d,
                                  int head_offset, int NH_full);
void mc_cpu_attention_backward_f32(const mc_backend_t *be, float *dqkv, float *scratch,
                                   const float *dout, const float *qkv, const float *probs, int S,
                                   int B, int NH, int NG, int HD, const int32_t *segments,
                                   float scale, const mc_dropout_t *d, int head_offset,
                                   int NH_full);

/* attention_block.c: the context-parallel attention blocks (backend.h) */
void mc_cpu_attention_block_forward_f32(const mc_backend_t *be, float *out, float *lse,
                                        float *scratch, const float *qkv, const float *kv, int Sq,
                                        int Sk, int B, int NH, int NG, int HD, int q_pos, int k_pos,
                                        int S_full, int mask, float scale, const mc_dropout_t *d,
                                        int head_offset, int NH_full);
void mc_cpu_attention_block_backward_f32(const mc_backend_t *be, float *dq, float *dkv,
                                         float *scratch, const float *dout, const float *qkv,
                                         const float *kv, const float *out, const float *lse,
                                         int Sq, int Sk, int B, int NH, int NG, int HD, int q_pos,
                                         int k_pos, int S_full, int mask, float scale,
                                         const mc_dropout_t *d, int head_offset, int NH_full);
void mc_cpu_attention_lse_merge(const mc_backend_t *be, float *out, float *lse, const float *part,
                                const float *part_lse, long rows, int NH, int HD);
void mc_cpu_attention_block_sizes(const mc_backend_t *be, mc_dtype_t dt, int Sq, int Sk, int B,
                                  int NH, int HD, size_t *fwd_scratch, size_t *bwd_scratch);

/* cross_entropy.c */
void mc_cpu_ce_max_f32(const mc_backend_t *be, float *rowmax, const float *logits, int N, int V);
void mc_cpu_ce_sums_f32(const mc_backend_t *be, float *sumexp, float *target_logit,
                        const float *logits, const float *rowmax, const int32_t *targets, int S,
                        int B, int V, int vocab_start);
void mc_cpu_ce_loss(const mc_backend_t *be, float *losses, const float *rowmax, const float *sumexp,
                    const float *target_logit, int S, int B);
void mc_cpu_ce_backward_f32(const mc_backend_t *be, float *dlogits, const float *logits,
                            const float *rowmax, const float *sumexp, const int32_t *targets,
                            const float *dloss, int S, int B, int V, int vocab_start);

/* elementwise.c */
void mc_cpu_add_f32(const mc_backend_t *be, float *out, const float *a, const float *b, long n);
void mc_cpu_add_inplace_f32(const mc_backend_t *be, float *acc, const float *x, long n);
void mc_cpu_scale_f32(const mc_backend_t *be, float *x, float s, long n);
double mc_cpu_sumsq_f32(const mc_backend_t *be, const float *x, long n);
long mc_cpu_count_zeros_f32(const mc_backend_t *be, const float *x, long n);
int mc_cpu_has_nonfinite_f32(const mc_backend_t *be, const float *x, long n);

/* Row helpers (elementwise.c) for softmax and cross-entropy. */
/* max of x[0..n), n >= 1 */
float mc_cpu_row_max(const float *x, long n);
/* out[j] = exp(x[j] - m) with cpu.h's vector exp (out may equal x, or be NULL to only sum);
 * returns the sum of the exps in double. */
double mc_cpu_exp_shift_sum(float *out, const float *x, long n, float m);

/* adam.c */
void mc_cpu_adam_step(const mc_backend_t *be, const mc_adam_tensor_t *t, int count,
                      mc_dtype_t model_dt, float lr, float beta1, float beta2, float eps, int step);

/* precision.c: the op table's entries for every precision (16-bit operands through fp32 host
 * scratch around the fp32 kernels above); backend.h documents them. */
void mc_cpu_convert(const mc_backend_t *be, void *dst, mc_dtype_t ddt, const void *src,
                    mc_dtype_t sdt, long n);
void mc_cpu_linear_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                           const void *W, const void *bias, int N, int in_f, int out_f);
void mc_cpu_linear_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *din,
                            void *dW, void *dbias, const void *dout, const void *in, const void *W,
                            int N, int in_f, int out_f);
void mc_cpu_embedding_forward(const mc_backend_t *be, mc_dtype_t dt, void *out,
                              const int32_t *tokens, const int32_t *positions, const void *wte,
                              const void *wpe, int S, int B, int H, int vocab_start, int V);
void mc_cpu_embedding_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dwte,
                               void *dwpe, const void *dout, const int32_t *tokens,
                               const int32_t *positions, int S, int B, int H, int vocab_start,
                               int V);
void mc_cpu_layernorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, float *mean,
                              float *rstd, const void *x, const void *w, const void *b, int N,
                              int C, float eps);
void mc_cpu_linear_gelu_forward(const mc_backend_t *be, mc_dtype_t dt, void *act, void *pre,
                                const void *in, const void *W, const void *bias, int N, int in_f,
                                int out_f, mc_act_t activation);
void mc_cpu_linear_backward_gelu(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *din,
                                 void *dW, void *dbias, const void *dout, const void *act,
                                 const void *W, const void *pre, int N, int in_f, int out_f,
                                 mc_act_t activation);
void mc_cpu_add_layernorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *sum, void *out,
                                  float *mean, float *rstd, const void *a, const void *b,
                                  const void *w, const void *bias, int N, int C, float eps);
void mc_cpu_layernorm_backward_acc(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dx,
                                   void *dw, void *db, const void *dout, const void *x,
                                   const void *w, const float *mean, const float *rstd, int N,
                                   int C);
void mc_cpu_gelu_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x, long n,
                         mc_act_t act);
void mc_cpu_gelu_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                          const void *x, long n, mc_act_t act);
/* precision.c: RMSNorm and SwiGLU */
void mc_cpu_rmsnorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, float *rstd,
                            const void *x, const void *w, int N, int C, float eps);
void mc_cpu_add_rmsnorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *sum, void *out,
                                float *rstd, const void *a, const void *b, const void *w, int N,
                                int C, float eps);
void mc_cpu_rmsnorm_backward_acc(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dx,
                                 void *dw, const void *dout, const void *x, const void *w,
                                 const float *rstd, int N, int C);
void mc_cpu_rope(const mc_backend_t *be, mc_dtype_t dt, void *qkv, const float *cos_t,
                 const float *sin_t, int S, int B, int NG, int QPG, int HD, int rot_dim,
                 int interleaved, int inverse);
void mc_cpu_qk_norm_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, float *mean,
                            float *rstd, const void *x, const void *wq, const void *bq,
                            const void *wk, const void *bk, int T, int NG, int QPG, int HD,
                            float eps, int rms);
void mc_cpu_qk_norm_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dqkv,
                             void *dwq, void *dbq, void *dwk, void *dbk, const void *x,
                             const void *wq, const void *wk, const float *mean, const float *rstd,
                             int T, int NG, int QPG, int HD, int rms);
void mc_cpu_swiglu_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x, int N,
                           int F);
void mc_cpu_swiglu_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                            const void *x, int N, int F);
void mc_cpu_dropout_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x,
                            const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                            int inner_full, int inner_offset);
void mc_cpu_dropout_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                             const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                             int inner_full, int inner_offset);
void mc_cpu_attention_sizes(const mc_backend_t *be, mc_dtype_t dt, int S, int B, int NH, int HD,
                            size_t *state_bytes, size_t *scratch_bytes);
void mc_cpu_attention_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, void *state,
                              void *scratch, const void *qkv, int S, int B, int NH, int NG, int HD,
                              const int32_t *segments, float scale, const mc_dropout_t *d,
                              int head_offset, int NH_full);
void mc_cpu_attention_backward(const mc_backend_t *be, mc_dtype_t dt, void *dqkv, void *scratch,
                               const void *dout, const void *qkv, const void *out,
                               const void *state, int S, int B, int NH, int NG, int HD,
                               const int32_t *segments, float scale, const mc_dropout_t *d,
                               int head_offset, int NH_full);
void mc_cpu_attention_block_forward(const mc_backend_t *be, mc_dtype_t dt, float *out, float *lse,
                                    void *scratch, const void *qkv, const void *kv, int Sq, int Sk,
                                    int B, int NH, int NG, int HD, int q_pos, int k_pos, int S_full,
                                    int mask, float scale, const mc_dropout_t *d, int head_offset,
                                    int NH_full);
void mc_cpu_attention_block_backward(const mc_backend_t *be, mc_dtype_t dt, float *dq, float *dkv,
                                     void *scratch, const void *dout, const void *qkv,
                                     const void *kv, const void *out, const float *lse, int Sq,
                                     int Sk, int B, int NH, int NG, int HD, int q_pos, int k_pos,
                                     int S_full, int mask, float scale, const mc_dropout_t *d,
                                     int head_offset, int NH_full);
void mc_cpu_copy_2d(const mc_backend_t *be, void *dst, mc_dtype_t ddt, long ld_dst, const void *src,
                    mc_dtype_t sdt, long ld_src, long rows, long cols);
void mc_cpu_ce_max(const mc_backend_t *be, mc_dtype_t dt, float *rowmax, const void *logits, int N,
                   int V);
void mc_cpu_ce_sums(const mc_backend_t *be, mc_dtype_t dt, float *sumexp, float *target_logit,
                    const void *logits, const float *rowmax, const int32_t *targets, int S, int B,
                    int V, int vocab_start);
void mc_cpu_ce_backward(const mc_backend_t *be, mc_dtype_t dt, void *dlogits, const void *logits,
                        const float *rowmax, const float *sumexp, const int32_t *targets,
                        const float *dloss, int S, int B, int V, int vocab_start);
void mc_cpu_add(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *a, const void *b,
                long n);
void mc_cpu_add_inplace(const mc_backend_t *be, mc_dtype_t dt, void *acc, const void *x, long n);
void mc_cpu_scale(const mc_backend_t *be, mc_dtype_t dt, void *x, float s, long n);
double mc_cpu_sumsq(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n);
void mc_cpu_sumsq_multi(const mc_backend_t *be, mc_dtype_t dt, const void *const *x, const long *n,
                        int count, double *out);
void mc_cpu_ce_fused(const mc_backend_t *be, mc_dtype_t dt, float *losses, void *logits,
                     const float *rowmax, const float *sumexp, const float *target_logit,
                     const int32_t *targets, const float *loss_mask, float grad_scale, int S, int B,
                     int V, int vocab_start);
long mc_cpu_count_zeros(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n);
int mc_cpu_has_nonfinite(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n);

/* ---- mixture of experts (kernels/moe.h; moe_route.c, moe_permute.c) ---- */
#include "kernels/moe.h"
void mc_cpu_moe_route(const mc_backend_t *be, mc_dtype_t rdt, const mc_moe_router_t *r, void *probs,
                      uint8_t *map, const void *logits, const float *bias, long T);
void mc_cpu_moe_route_backward(const mc_backend_t *be, mc_dtype_t rdt, const mc_moe_router_t *r,
                               void *dlogits, const void *dprobs, const void *logits,
                               const float *bias, const uint8_t *keep, long T);
void mc_cpu_moe_capacity(const mc_backend_t *be, mc_dtype_t rdt, void *probs_out, uint8_t *keep,
                         const void *probs, const uint8_t *map, long T, int E, long capacity,
                         int by_position, int pad);
void mc_cpu_moe_aux_stats(const mc_backend_t *be, mc_dtype_t rdt, int sigmoid, int topk,
                          float *counts, float *psum, const void *logits, long T, int E, int G);
void mc_cpu_moe_aux_backward(const mc_backend_t *be, mc_dtype_t rdt, int sigmoid, void *dlogits,
                             const void *logits, const float *counts, float coef, long T, int E,
                             int G);
void mc_cpu_moe_z_loss(const mc_backend_t *be, mc_dtype_t rdt, float *zsum, const void *logits,
                       long T, int E);
void mc_cpu_moe_z_loss_backward(const mc_backend_t *be, mc_dtype_t rdt, void *dlogits,
                                const void *logits, float coef, long T, int E);
void mc_cpu_moe_tokens_per_expert(const mc_backend_t *be, int32_t *counts, const uint8_t *map,
                                  long T, int E);
void mc_cpu_moe_expert_bias_update(const mc_backend_t *be, float *bias, const float *counts, int E,
                                   float rate);
void mc_cpu_moe_permute_map(const mc_backend_t *be, mc_dtype_t rdt, int32_t *rows, int32_t *row_of,
                            void *pprobs, const void *probs, const uint8_t *map, long T, int E,
                            long N);
void mc_cpu_moe_permute(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                        const int32_t *rows, long N, int H);
void mc_cpu_moe_unpermute(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *out,
                          const void *x, const int32_t *row_of, const void *pprobs, long T, int E,
                          int H);
void mc_cpu_moe_unpermute_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *dx,
                                   void *dpprobs, const void *dout, const void *x,
                                   const int32_t *rows, const void *pprobs, long N, int H);
void mc_cpu_moe_sort_chunks(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                            const long *sizes, const int *order, int n, int H);
void mc_cpu_moe_scale_rows(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *out,
                           const void *x, const void *p, long N, int H);
void mc_cpu_moe_scale_rows_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *dx,
                                    void *dp, const void *dout, const void *x, const void *p,
                                    long N, int H);
void mc_cpu_moe_grouped_linear_forward(const mc_backend_t *be, mc_dtype_t dt, void *out,
                                       const void *in, const void *const *W, const long *m, int G,
                                       int K, int N);
void mc_cpu_moe_grouped_linear_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt,
                                        void *din, void *const *dW, const void *dout,
                                        const void *in, const void *const *W, const long *m, int G,
                                        int K, int N);

#endif
