/* The CPU backend's ops for every precision: fp32 tensors go straight to the fp32 kernels of
 * this folder; 16-bit operands are converted to fp32 in host scratch, the fp32 kernel runs, and
 * each 16-bit output is rounded once on the way back. That is the contract of backend.h (compute
 * in fp32, round each stored output), so the CPU backend is the reference for a GPU's 16-bit
 * kernels and runs the mixed-precision logic of the rest of the program in CI.
 *
 * The scratch is the CPU backend's own: slots that grow to the largest operand seen and are kept
 * (the first iteration sizes them), since the 16-bit CPU path exists to test the logic, not to
 * be planned to the byte; the fp32 path never touches them. Only the thread that runs the model
 * calls ops. */
#include <stdbool.h>
#include <stdlib.h>

#include "base/error.h"
#include "kernels/cpu/cpu.h"

enum { SLOTS = 8 };
static float *g_tmp[SLOTS];
static size_t g_cap[SLOTS];

static float *tmp(int k, long n)
{
    size_t need = (size_t)(n > 0 ? n : 1);
    if (need > g_cap[k]) {
        float *p = realloc(g_tmp[k], need * sizeof(float));
        if (!p) mc_fatal("out of host memory converting a %ld-element 16-bit tensor", n);
        g_tmp[k] = p;
        g_cap[k] = need;
    }
    return g_tmp[k];
}

/* An fp32 view of input x of type dt (NULL stays NULL). */
static const float *in32(int k, const void *x, mc_dtype_t dt, long n)
{
    if (!x || dt == MC_DT_F32) return x;
    float *t = tmp(k, n);
    mc_convert(t, MC_DT_F32, x, dt, n);
    return t;
}

/* An fp32 buffer for output y of type dt: y itself, or scratch holding y's values when the op
 * accumulates into it. */
static float *out32(int k, void *y, mc_dtype_t dt, long n, bool acc)
{
    if (!y || dt == MC_DT_F32) return y;
    float *t = tmp(k, n);
    if (acc) mc_convert(t, MC_DT_F32, y, dt, n);
    return t;
}

/* Stores an output computed in f (from out32) into y. */
static void put(void *y, mc_dtype_t dt, const float *f, long n)
{
    if (y && dt != MC_DT_F32) mc_convert(y, dt, f, MC_DT_F32, n);
}

void mc_cpu_convert(const mc_backend_t *be, void *dst, mc_dtype_t ddt, const void *src,
                    mc_dtype_t sdt, long n)
{
    (void)be;
    mc_convert(dst, ddt, src, sdt, n);
}

void mc_cpu_linear_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                           const void *W, const void *bias, int N, int in_f, int out_f)
{
    const long no = (long)N * out_f;
    float *o = out32(0, out, dt, no, false);
    mc_cpu_linear_forward_f32(be, o, in32(1, in, dt, (long)N * in_f),
                              in32(2, W, dt, (long)out_f * in_f), in32(3, bias, dt, out_f), N, in_f,
                              out_f);
    put(out, dt, o, no);
}

void mc_cpu_linear_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *din,
                            void *dW, void *dbias, const void *dout, const void *in, const void *W,
                            int N, int in_f, int out_f)
{
    const long ni = (long)N * in_f, nw = (long)out_f * in_f;
    float *di = out32(0, din, dt, ni, false), *dw = out32(1, dW, gdt, nw, true),
          *db = out32(2, dbias, gdt, out_f, true);
    mc_cpu_linear_backward_f32(be, di, dw, db, in32(3, dout, dt, (long)N * out_f),
                               in32(4, in, dt, ni), in32(5, W, dt, nw), N, in_f, out_f);
    put(din, dt, di, ni);
    put(dW, gdt, dw, nw);
    put(dbias, gdt, db, out_f);
}

void mc_cpu_embedding_forward(const mc_backend_t *be, mc_dtype_t dt, void *out,
                              const int32_t *tokens, const int32_t *positions, const void *wte,
                              const void *wpe, int S, int B, int H, int vocab_start, int V)
{
    const long no = (long)S * B * H;
    float *o = out32(0, out, dt, no, false);
    /* wpe has as many rows as the largest position needs; the whole table is not known here, so
     * the positions give its extent */
    long rows = 0;
    for (long i = 0; wpe && i < (long)S * B; i++)
        if (positions[i] + 1L > rows) rows = positions[i] + 1L;
    mc_cpu_embedding_forward_f32(be, o, tokens, positions, in32(1, wte, dt, (long)V * H),
                                 in32(2, wpe, dt, rows * H), S, B, H, vocab_start, V);
    put(out, dt, o, no);
}

void mc_cpu_embedding_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dwte,
                               void *dwpe, const void *dout, const int32_t *tokens,
                               const int32_t *positions, int S, int B, int H, int vocab_start,
                               int V)
{
    long rows = 0;
    for (long i = 0; dwpe && i < (long)S * B; i++)
        if (positions[i] + 1L > rows) rows = positions[i] + 1L;
    float *dw = out32(0, dwte, gdt, (long)V * H, true), *dp = out32(1, dwpe, gdt, rows * H, true);
    mc_cpu_embedding_backward_f32(be, dw, dp, in32(2, dout, dt, (long)S * B * H), tokens, positions,
                                  S, B, H, vocab_start, V);
    put(dwte, gdt, dw, (long)V * H);
    put(dwpe, gdt, dp, rows * H);
}

void mc_cpu_layernorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, float *mean,
                              float *rstd, const void *x, const void *w, const void *b, int N,
                              int C, float eps)
{
    const long n = (long)N * C;
    float *o = out32(0, out, dt, n, false);
    mc_cpu_layernorm_forward_f32(be, o, mean, rstd, in32(1, x, dt, n), in32(2, w, dt, C),
                                 in32(3, b, dt, C), N, C, eps);
    put(out, dt, o, n);
}

/* The fused ops of the table are their parts in sequence on the CPU: nothing to save there, and
 * the CUDA backend's fused versions are tested against exactly these. */
void mc_cpu_linear_gelu_forward(const mc_backend_t *be, mc_dtype_t dt, void *act, void *pre,
                                const void *in, const void *W, const void *bias, int N, int in_f,
                                int out_f, mc_act_t activation)
{
    mc_cpu_linear_forward(be, dt, pre, in, W, bias, N, in_f, out_f);
    mc_cpu_gelu_forward(be, dt, act, pre, (long)N * out_f, activation);
}

void mc_cpu_linear_backward_gelu(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *din,
                                 void *dW, void *dbias, const void *dout, const void *act,
                                 const void *W, const void *pre, int N, int in_f, int out_f,
                                 mc_act_t activation)
{
    mc_cpu_linear_backward(be, dt, gdt, din, dW, dbias, dout, act, W, N, in_f, out_f);
    if (din) mc_cpu_gelu_backward(be, dt, din, din, pre, (long)N * in_f, activation);
}


void mc_cpu_add_layernorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *sum, void *out,
                                  float *mean, float *rstd, const void *a, const void *b,
                                  const void *w, const void *bias, int N, int C, float eps)
{
    mc_cpu_add(be, dt, sum, a, b, (long)N * C);
    mc_cpu_layernorm_forward(be, dt, out, mean, rstd, sum, w, bias, N, C, eps);
}

void mc_cpu_layernorm_backward_acc(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dx,
                                   void *dw, void *db, const void *dout, const void *x,
                                   const void *w, const float *mean, const float *rstd, int N,
                                   int C)
{
    const long n = (long)N * C;
    float *d = out32(0, dx, dt, n, true), *gw = out32(1, dw, gdt, C, true),
          *gb = out32(2, db, gdt, C, true);
    mc_cpu_layernorm_backward_acc_f32(be, d, gw, gb, in32(3, dout, dt, n), in32(4, x, dt, n),
                                      in32(5, w, dt, C), mean, rstd, N, C);
    put(dx, dt, d, n);
    put(dw, gdt, gw, C);
    put(db, gdt, gb, C);
}

void mc_cpu_gelu_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x, long n,
                         mc_act_t act)
{
    float *o = out32(0, out, dt, n, false);
    mc_cpu_gelu_forward_f32(be, o, in32(1, x, dt, n), n, act);
    put(out, dt, o, n);
}

void mc_cpu_gelu_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                          const void *x, long n, mc_act_t act)
{
    float *d = out32(0, dx, dt, n, false);
    mc_cpu_gelu_backward_f32(be, d, in32(1, dout, dt, n), in32(2, x, dt, n), n, act);
    put(dx, dt, d, n);
}

/* ---- RMSNorm and SwiGLU (the Llama block) ---- */

void mc_cpu_rmsnorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, float *rstd,
                            const void *x, const void *w, int N, int C, float eps)
{
    const long n = (long)N * C;
    float *o = out32(0, out, dt, n, false);
    mc_cpu_rmsnorm_forward_f32(be, o, rstd, in32(1, x, dt, n), in32(2, w, dt, C), N, C, eps);
    put(out, dt, o, n);
}

/* The add op then the RMSNorm of its rounded sum, as add_layernorm_forward. */
void mc_cpu_add_rmsnorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *sum, void *out,
                                float *rstd, const void *a, const void *b, const void *w, int N,
                                int C, float eps)
{
    mc_cpu_add(be, dt, sum, a, b, (long)N * C);
    mc_cpu_rmsnorm_forward(be, dt, out, rstd, sum, w, N, C, eps);
}

void mc_cpu_rmsnorm_backward_acc(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dx,
                                 void *dw, const void *dout, const void *x, const void *w,
                                 const float *rstd, int N, int C)
{
    const long n = (long)N * C;
    float *d = out32(0, dx, dt, n, true), *gw = out32(1, dw, gdt, C, true);
    mc_cpu_rmsnorm_backward_acc_f32(be, d, gw, in32(2, dout, dt, n), in32(3, x, dt, n),
                                    in32(4, w, dt, C), rstd, N, C);
    put(dx, dt, d, n);
    put(dw, gdt, gw, C);
}

void mc_cpu_rope(const mc_backend_t *be, mc_dtype_t dt, void *qkv, const float *cos_t,
                 const float *sin_t, int S, int B, int NG, int QPG, int HD, int rot_dim,
                 int interleaved, int inverse)
{
    const long n = (long)S * B * NG * (QPG + 2) * HD;
    float *x = out32(0, qkv, dt, n, true);
    mc_cpu_rope_f32(be, x, cos_t, sin_t, S, B, NG, QPG, HD, rot_dim, interleaved, inverse);
    put(qkv, dt, x, n);
}

void mc_cpu_qk_norm_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, float *mean,
                            float *rstd, const void *x, const void *wq, const void *bq,
                            const void *wk, const void *bk, int T, int NG, int QPG, int HD,
                            float eps, int rms)
{
    const long n = (long)T * NG * (QPG + 2) * HD;
    float *o = out32(0, out, dt, n, false);
    mc_cpu_qk_norm_forward_f32(be, o, mean, rstd, in32(1, x, dt, n), in32(2, wq, dt, HD),
                               in32(3, bq, dt, HD), in32(4, wk, dt, HD), in32(5, bk, dt, HD), T, NG,
                               QPG, HD, eps, rms);
    put(out, dt, o, n);
}

void mc_cpu_qk_norm_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dqkv,
                             void *dwq, void *dbq, void *dwk, void *dbk, const void *x,
                             const void *wq, const void *wk, const float *mean, const float *rstd,
                             int T, int NG, int QPG, int HD, int rms)
{
    const long n = (long)T * NG * (QPG + 2) * HD;
    float *d = out32(0, dqkv, dt, n, true);
    float *gwq = out32(1, dwq, gdt, HD, true), *gbq = out32(2, dbq, gdt, HD, true);
    float *gwk = out32(3, dwk, gdt, HD, true), *gbk = out32(4, dbk, gdt, HD, true);
    mc_cpu_qk_norm_backward_f32(be, d, gwq, gbq, gwk, gbk, in32(5, x, dt, n), in32(6, wq, dt, HD),
                                in32(7, wk, dt, HD), mean, rstd, T, NG, QPG, HD, rms);
    put(dqkv, dt, d, n);
    put(dwq, gdt, gwq, HD);
    put(dbq, gdt, gbq, HD);
    put(dwk, gdt, gwk, HD);
    put(dbk, gdt, gbk, HD);
}

void mc_cpu_swiglu_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x, int N,
                           int F)
{
    const long n = (long)N * F;
    float *o = out32(0, out, dt, n, false);
    mc_cpu_swiglu_forward_f32(be, o, in32(1, x, dt, 2 * n), N, F);
    put(out, dt, o, n);
}

void mc_cpu_swiglu_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                            const void *x, int N, int F)
{
    const long n = (long)N * F;
    float *d = out32(0, dx, dt, 2 * n, false);
    mc_cpu_swiglu_backward_f32(be, d, in32(1, dout, dt, n), in32(2, x, dt, 2 * n), N, F);
    put(dx, dt, d, 2 * n);
}

void mc_cpu_dropout_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x,
                            const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                            int inner_full, int inner_offset)
{
    const long n = (long)d0 * B * inner;
    float *o = out32(0, out, dt, n, false);
    mc_cpu_dropout_forward_f32(be, o, in32(1, x, dt, n), d, d0, B, inner, d0_offset, inner_full,
                               inner_offset);
    put(out, dt, o, n);
}

void mc_cpu_dropout_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                             const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                             int inner_full, int inner_offset)
{
    const long n = (long)d0 * B * inner;
    float *o = out32(0, dx, dt, n, false);
    mc_cpu_dropout_backward_f32(be, o, in32(1, dout, dt, n), d, d0, B, inner, d0_offset, inner_full,
                                inner_offset);
    put(dx, dt, o, n);
}

/* The CPU attention saves the probabilities before dropout, in the model's type. */
void mc_cpu_attention_sizes(const mc_backend_t *be, mc_dtype_t dt, int S, int B, int NH, int HD,
                            size_t *state_bytes, size_t *scratch_bytes)
{
    (void)be, (void)HD;
    const size_t probs = (size_t)B * (size_t)NH * (size_t)S * (size_t)S;
    *state_bytes = probs * mc_dtype_size(dt);
    *scratch_bytes = probs * sizeof(float);
}

void mc_cpu_attention_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, void *state,
                              void *scratch, const void *qkv, int S, int B, int NH, int NG, int HD,
                              const int32_t *segments, float scale, const mc_dropout_t *d,
                              int head_offset, int NH_full)
{
    (void)scratch; /* the CPU's forward needs none */
    const long no = (long)S * B * NH * HD, np = (long)B * NH * S * S;
    const long nq = (long)S * B * mc_cpu_qkv_width(NH, NG, HD);
    float *o = out32(0, out, dt, no, false), *p = out32(1, state, dt, np, false);
    mc_cpu_attention_forward_f32(be, o, p, in32(2, qkv, dt, nq), S, B, NH, NG, HD, segments, scale,
                                 d, head_offset, NH_full);
    put(out, dt, o, no);
    put(state, dt, p, np);
}

void mc_cpu_attention_backward(const mc_backend_t *be, mc_dtype_t dt, void *dqkv, void *scratch,
                               const void *dout, const void *qkv, const void *out,
                               const void *state, int S, int B, int NH, int NG, int HD,
                               const int32_t *segments, float scale, const mc_dropout_t *d,
                               int head_offset, int NH_full)
{
    (void)out; /* the probabilities are saved: the output is not needed */
    const long no = (long)S * B * NH * HD, np = (long)B * NH * S * S;
    const long nq = (long)S * B * mc_cpu_qkv_width(NH, NG, HD);
    float *dq = out32(0, dqkv, dt, nq, false);
    mc_cpu_attention_backward_f32(be, dq, scratch, in32(1, dout, dt, no), in32(2, qkv, dt, nq),
                                  in32(3, state, dt, np), S, B, NH, NG, HD, segments, scale, d,
                                  head_offset, NH_full);
    put(dqkv, dt, dq, nq);
}

/* The context-parallel attention blocks: 16-bit queries, keys, values, outputs and their
 * gradients converted to fp32; the statistics and accumulators are fp32 already. */
void mc_cpu_attention_block_forward(const mc_backend_t *be, mc_dtype_t dt, float *out, float *lse,
                                    void *scratch, const void *qkv, const void *kv, int Sq, int Sk,
                                    int B, int NH, int NG, int HD, int q_pos, int k_pos, int S_full,
                                    int mask, float scale, const mc_dropout_t *d, int head_offset,
                                    int NH_full)
{
    const long nq = (long)Sq * B * mc_cpu_qkv_width(NH, NG, HD), nkv = 2L * Sk * B * NG * HD;
    mc_cpu_attention_block_forward_f32(be, out, lse, scratch, in32(0, qkv, dt, nq),
                                       in32(1, kv, dt, nkv), Sq, Sk, B, NH, NG, HD, q_pos, k_pos,
                                       S_full, mask, scale, d, head_offset, NH_full);
}

void mc_cpu_attention_block_backward(const mc_backend_t *be, mc_dtype_t dt, float *dq, float *dkv,
                                     void *scratch, const void *dout, const void *qkv,
                                     const void *kv, const void *out, const float *lse, int Sq,
                                     int Sk, int B, int NH, int NG, int HD, int q_pos, int k_pos,
                                     int S_full, int mask, float scale, const mc_dropout_t *d,
                                     int head_offset, int NH_full)
{
    const long nq = (long)Sq * B * mc_cpu_qkv_width(NH, NG, HD), nkv = 2L * Sk * B * NG * HD;
    const long no = (long)Sq * B * NH * HD;
    mc_cpu_attention_block_backward_f32(be, dq, dkv, scratch, in32(0, dout, dt, no),
                                        in32(1, qkv, dt, nq), in32(2, kv, dt, nkv),
                                        in32(3, out, dt, no), lse, Sq, Sk, B, NH, NG, HD, q_pos,
                                        k_pos, S_full, mask, scale, d, head_offset, NH_full);
}

void mc_cpu_copy_2d(const mc_backend_t *be, void *dst, mc_dtype_t ddt, long ld_dst, const void *src,
                    mc_dtype_t sdt, long ld_src, long rows, long cols)
{
    (void)be;
    for (long r = 0; r < rows; r++)
        mc_convert(mc_elem(dst, ddt, r * ld_dst), ddt, mc_celem(src, sdt, r * ld_src), sdt, cols);
}

void mc_cpu_ce_max(const mc_backend_t *be, mc_dtype_t dt, float *rowmax, const void *logits, int N,
                   int V)
{
    mc_cpu_ce_max_f32(be, rowmax, in32(0, logits, dt, (long)N * V), N, V);
}

void mc_cpu_ce_sums(const mc_backend_t *be, mc_dtype_t dt, float *sumexp, float *target_logit,
                    const void *logits, const float *rowmax, const int32_t *targets, int S, int B,
                    int V, int vocab_start)
{
    mc_cpu_ce_sums_f32(be, sumexp, target_logit, in32(0, logits, dt, (long)S * B * V), rowmax,
                       targets, S, B, V, vocab_start);
}

void mc_cpu_ce_backward(const mc_backend_t *be, mc_dtype_t dt, void *dlogits, const void *logits,
                        const float *rowmax, const float *sumexp, const int32_t *targets,
                        const float *dloss, int S, int B, int V, int vocab_start)
{
    const long n = (long)S * B * V;
    const float *l = in32(0, logits, dt, n);
    float *o = out32(1, dlogits, dt, n, false);
    mc_cpu_ce_backward_f32(be, o, l, rowmax, sumexp, targets, dloss, S, B, V, vocab_start);
    put(dlogits, dt, o, n);
}

void mc_cpu_add(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *a, const void *b,
                long n)
{
    float *o = out32(0, out, dt, n, false);
    mc_cpu_add_f32(be, o, in32(1, a, dt, n), in32(2, b, dt, n), n);
    put(out, dt, o, n);
}

void mc_cpu_add_inplace(const mc_backend_t *be, mc_dtype_t dt, void *acc, const void *x, long n)
{
    float *o = out32(0, acc, dt, n, true);
    mc_cpu_add_inplace_f32(be, o, in32(1, x, dt, n), n);
    put(acc, dt, o, n);
}

void mc_cpu_scale(const mc_backend_t *be, mc_dtype_t dt, void *x, float s, long n)
{
    float *o = out32(0, x, dt, n, true);
    mc_cpu_scale_f32(be, o, s, n);
    put(x, dt, o, n);
}

double mc_cpu_sumsq(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n)
{
    return mc_cpu_sumsq_f32(be, in32(0, x, dt, n), n);
}

void mc_cpu_sumsq_multi(const mc_backend_t *be, mc_dtype_t dt, const void *const *x, const long *n,
                        int count, double *out)
{
    for (int i = 0; i < count; i++) out[i] = mc_cpu_sumsq(be, dt, x[i], n[i]);
}

long mc_cpu_count_zeros(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n)
{
    return mc_cpu_count_zeros_f32(be, in32(0, x, dt, n), n);
}

int mc_cpu_has_nonfinite(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n)
{
    return mc_cpu_has_nonfinite_f32(be, in32(0, x, dt, n), n);
}
