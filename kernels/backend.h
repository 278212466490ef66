/* The backend op table (DESIGN decision 2).
 *
 * Model, optimizer and parallel code call compute only through this table. Every pointer is a
 * device pointer of the backend (host memory for `cpu`). Tensors are row-major. Activations use
 * Megatron's [s, b, h] layout: row r = s_i * b + b_i.
 *
 * Precision (DESIGN decision 7): `dt` is the type of the model's parameters and activations
 * (MC_DT_F32, MC_DT_BF16 or MC_DT_F16; `void *` tensors of an op are of that type); `gdt` is the
 * type of the parameter-gradient buffer (Megatron's main_grad: fp32 for bf16 training, the
 * parameter type for fp16 unless --accumulate-allreduce-grads-in-fp32). `float *` tensors are
 * always fp32: LayerNorm statistics, cross-entropy statistics and losses, optimizer state.
 * Every op computes in fp32 whatever it stores, and rounds each 16-bit output once (to nearest
 * even), so a backend's 16-bit results differ from the fp32 op on the same (rounded) inputs only
 * by that final rounding and by summation order.
 *
 * Conventions:
 *  - "_acc" outputs accumulate (+=); all other outputs are overwritten.
 *  - Sizes are in elements; long for element counts, int for dimensions.
 *  - Ops never allocate device memory; scratch comes from the caller (memory is planned at
 *    start-up). The CPU backend converts 16-bit operands through host scratch of its own.
 */
#ifndef MC_KERNELS_BACKEND_H
#define MC_KERNELS_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/dtype.h"

/* Where a dropout mask comes from: Philox keyed by (seed, iteration, layer, site) and counted
 * by (global sample index, element index within that sample's full unsharded activation), so the
 * mask does not depend on how the tensor is sharded or batched (DESIGN decision 6).
 * The tensor is viewed as [d0, b, inner]: sample = sample0 + b_i,
 * element = (d0_i + d0_offset) * inner_full + inner_offset + inner_i.
 * For hidden states [s, b, h]: d0 = s, inner = h. For attention probs [b, heads, s, s] use
 * d0 = 1, inner = heads*s*s (see the attention op, which applies its own dropout). */
typedef struct {
    uint64_t seed;
    uint32_t iteration; /* training iteration (1-based) or 0x80000000|eval step for eval */
    uint32_t layer;     /* global layer number (1-based); 0 for the embedding */
    uint32_t site;      /* MC_DROPOUT_SITE_* */
    uint64_t sample0;   /* global sample index of batch row 0 */
    float p;            /* drop probability; 0 disables */
} mc_dropout_t;

enum {
    MC_DROPOUT_SITE_EMBEDDING = 1,
    MC_DROPOUT_SITE_ATTN_PROBS = 2,
    MC_DROPOUT_SITE_ATTN_OUT = 3,
    MC_DROPOUT_SITE_MLP_OUT = 4,
};

/* The mask of a context-parallel attention block (attention_block_forward). */
enum {
    MC_ATTN_BLOCK_FULL = 0,   /* every query sees every key of the block */
    MC_ATTN_BLOCK_CAUSAL = 1, /* by global position: key k_pos + j seen from q_pos + i iff <= */
};

typedef struct mc_backend mc_backend_t;
struct mc_moe_ops; /* kernels/moe.h */

/* The MLP's activation (Megatron's activation_func), where an op applies one elementwise. */
typedef enum {
    MC_ACT_GELU_ERF = 0,     /* F.gelu (exact erf) */
    MC_ACT_GELU_TANH = 1,    /* Megatron's bias_gelu_impl (tanh approximation) */
    MC_ACT_SQUARED_RELU = 2, /* --squared-relu: relu(x)^2 */
} mc_act_t;

/* One tensor of the multi-tensor Adam step: fp32 master params p, main grads g, moments m and v
 * (n elements each), its weight decay, and the model's copy of p (NULL: none to update). */
typedef struct {
    float *p;
    const float *g;
    float *m, *v;
    void *model;
    long n;
    float wd;
} mc_adam_tensor_t;

struct mc_backend {
    const char *name; /* "cpu", "cuda", "strict" (a test double): for messages only */

    /* ---- what the backend is, set by each backend: code that must treat a backend apart reads
     * these, never its name ---- */
    bool device_memory;     /* its tensors live where the host cannot read them (cuda, strict): the
                         * host copies them (memcpy_d2h/h2d), communicators on host memory stage
                         * them (comm/devmem.h), the memory plan is held against the device's
                         * free memory, not the node's */
    bool has_nccl;          /* NCCL can run collectives on its buffers (cuda) */
    int gpu;                /* the CUDA device it drives; -1: none */
    bool attention_library; /* its attention may run on a fused attention library chosen at
                             * start-up (cuda: cuDNN; mc_backend_attention_setup) */

    /* ---- memory ---- */
    void *(*alloc)(const mc_backend_t *be, size_t bytes); /* zero-filled; NULL on failure */
    void (*free)(const mc_backend_t *be, void *p);
    void (*memcpy_h2d)(const mc_backend_t *be, void *dst, const void *src, size_t bytes);
    void (*memcpy_d2h)(const mc_backend_t *be, void *dst, const void *src, size_t bytes);
    void (*memcpy_d2d)(const mc_backend_t *be, void *dst, const void *src, size_t bytes);
    void (*memset0)(const mc_backend_t *be, void *p, size_t bytes);
    void (*synchronize)(const mc_backend_t *be);
    /* Host memory for the asynchronous copies below (pinned on CUDA; plain memory on the CPU), and
     * its release. alloc_host: NULL on failure; not zero-filled. */
    void *(*alloc_host)(const mc_backend_t *be, size_t bytes);
    void (*free_host)(const mc_backend_t *be, void *p);
    /* Copies in order with the ops, returning at once: the host buffer (from alloc_host) must not
     * be changed (h2d's src) or read (d2h's dst) before the next synchronize (or a call that
     * waits for the stream, as memcpy_d2h does). */
    void (*memcpy_h2d_async)(const mc_backend_t *be, void *dst, const void *src, size_t bytes);
    void (*memcpy_d2h_async)(const mc_backend_t *be, void *dst, const void *src, size_t bytes);
    /* dst[0..n) of type ddt = src[0..n) of type sdt (fp32, bf16, fp16), rounded to nearest even.
     * dst may equal src only when both types have the same size. */
    void (*convert)(const mc_backend_t *be, void *dst, mc_dtype_t ddt, const void *src,
                    mc_dtype_t sdt, long n);

    /* ---- GEMM (fp32) ----
     * C[M,N] = alpha * op(A) @ op(B) + beta * C, row-major, op(X) = X or X^T.
     * A is [M,K] (or [K,M] if transa), B is [K,N] (or [N,K] if transb). */
    void (*gemm)(const mc_backend_t *be, int transa, int transb, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

    /* ---- linear layer (torch Linear: W is [out, in]) ----
     * out[N, out] = in[N, in] @ W^T + bias (bias may be NULL); all of type dt. */
    void (*linear_forward)(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                           const void *W, const void *bias, int N, int in_f, int out_f);
    /* din[N,in] = dout @ W (din may be NULL to skip; type dt); dW[out,in] += dout^T @ in and
     * dbias[out] += column sums of dout (dbias may be NULL), both of type gdt: the weight
     * gradient GEMM accumulates into the gradient buffer (Megatron's gradient accumulation
     * fusion). dW may be NULL to skip the weight gradient (in is then not read; dbias must be
     * NULL too): --defer-embedding-wgrad-compute's input gradient alone. */
    void (*linear_backward)(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *din,
                            void *dW, void *dbias, const void *dout, const void *in, const void *W,
                            int N, int in_f, int out_f);

    /* The MLP's first linear layer with its activation (Megatron's bias_gelu fusion):
     * pre = in @ W^T + bias (kept for the backward), act = gelu(pre); all of type dt.
     * Equal to linear_forward then gelu_forward, except that a backend may compute act from
     * the unrounded pre (a GEMM epilogue): one more rounding of a 16-bit act at most. */
    void (*linear_gelu_forward)(const mc_backend_t *be, mc_dtype_t dt, void *act, void *pre,
                                const void *in, const void *W, const void *bias, int N, int in_f,
                                int out_f, mc_act_t activation);
    /* The MLP's second linear layer backward through the activation: din = (dout @ W) *
     * gelu'(pre) (type dt, the gradient at the first layer's output), dW and dbias as
     * linear_backward with in = act. Equal to linear_backward then gelu_backward up to the one
     * rounding of the product before the activation's gradient. */
    void (*linear_backward_gelu)(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *din,
                                 void *dW, void *dbias, const void *dout, const void *act,
                                 const void *W, const void *pre, int N, int in_f, int out_f,
                                 mc_act_t activation);

    /* ---- embedding (Megatron's VocabParallelEmbedding on one shard) ----
     * wte holds rows [vocab_start, vocab_start + V) of the word embeddings; a token outside them
     * contributes zeros (the tp all-reduce adds the owner's row).
     * out[s, b, h] = wte[tokens[b, s] - vocab_start] + wpe[positions[b, s]] (wpe may be NULL).
     * tokens/positions are [b, s] row-major, as a dataset yields them. */
    void (*embedding_forward)(const mc_backend_t *be, mc_dtype_t dt, void *out,
                              const int32_t *tokens, const int32_t *positions, const void *wte,
                              const void *wpe, int S, int B, int H, int vocab_start, int V);
    /* dwte[tok - vocab_start] += dout for tokens in the shard, dwpe[pos] += dout (dwpe may be
     * NULL, dwte too); dout of type dt, dwte and dwpe of type gdt. */
    void (*embedding_backward)(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dwte,
                               void *dwpe, const void *dout, const int32_t *tokens,
                               const int32_t *positions, int S, int B, int H, int vocab_start,
                               int V);

    /* ---- LayerNorm over the last dim C of N rows ----
     * out = (x - mean) * rstd * w + b; mean/rstd [N] (fp32) are saved for backward. */
    void (*layernorm_forward)(const mc_backend_t *be, mc_dtype_t dt, void *out, float *mean,
                              float *rstd, const void *x, const void *w, const void *b, int N,
                              int C, float eps);
    /* The residual add before a pre-LN block, fused with its LayerNorm: sum = a + b (rounded to
     * dt, as add does; sum may equal a or b), then layernorm_forward(out, sum). Results equal
     * the two ops in sequence; the sum is read once. */
    void (*add_layernorm_forward)(const mc_backend_t *be, mc_dtype_t dt, void *sum, void *out,
                                  float *mean, float *rstd, const void *a, const void *b,
                                  const void *w, const void *bias, int N, int C, float eps);
    /* dx += ... (type dt), dw += ..., db += ... (type gdt). dx accumulating is the backward's
     * fusion with the residual add: the residual's gradient is already in dx. */
    void (*layernorm_backward_acc)(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dx,
                                   void *dw, void *db, const void *dout, const void *x,
                                   const void *w, const float *mean, const float *rstd, int N,
                                   int C);

    /* ---- RMSNorm over the last dim C of N rows (Megatron's --normalization RMSNorm, fp32
     * math): out = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps) [N] (fp32) saved for
     * backward. The three mirror the LayerNorm ops above, without mean and bias. */
    void (*rmsnorm_forward)(const mc_backend_t *be, mc_dtype_t dt, void *out, float *rstd,
                            const void *x, const void *w, int N, int C, float eps);
    /* sum = a + b (rounded to dt; sum may equal a or b), then rmsnorm_forward(out, sum). */
    void (*add_rmsnorm_forward)(const mc_backend_t *be, mc_dtype_t dt, void *sum, void *out,
                                float *rstd, const void *a, const void *b, const void *w, int N,
                                int C, float eps);
    /* dx += ... (type dt: fused with the residual's gradient already in dx), dw += ... (gdt). */
    void (*rmsnorm_backward_acc)(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dx,
                                 void *dw, const void *dout, const void *x, const void *w,
                                 const float *rstd, int N, int C);

    /* ---- rotary position embedding (Megatron's apply_rotary_pos_emb, sbhd), in place on the
     * query and key heads of a qkv tensor ----
     * qkv: [s, b, NG*(QPG+2)*HD], Megatron's linear_qkv layout (see attention_forward): per
     * query group, QPG query heads, then its key head, then its value head. The first rot_dim
     * (even, <= HD) elements of every query and key head are rotated, the rest and the value
     * heads left as they are: element pairs (i, i + rot_dim/2), or (2i, 2i+1) when
     * interleaved, for i < rot_dim/2, turn by the angle of sequence position s_i and frequency
     * i, whose cosine and sine are cos_t/sin_t [S, rot_dim/2] (fp32):
     *   y_a = x_a cos - x_b sin,  y_b = x_b cos + x_a sin     (computed in fp32).
     * inverse: turn by minus the angle, the backward (on dqkv: the transpose of a rotation). */
    void (*rope)(const mc_backend_t *be, mc_dtype_t dt, void *qkv, const float *cos_t,
                 const float *sin_t, int S, int B, int NG, int QPG, int HD, int rot_dim,
                 int interleaved, int inverse);

    /* ---- Megatron's --qk-layernorm: q_layernorm and k_layernorm over each query and key head's
     * HD channels (LayerNorm, or RMSNorm when rms), between linear_qkv and RoPE ----
     * x, out: [T, NG*(QPG+2)*HD] in rope's layout (T = s*b rows; out != x): query heads take
     * (wq, bq), key heads (wk, bk) [HD] (biases NULL with rms), value heads are copied. mean
     * (NULL with rms) and rstd: [T, NG, QPG+1] (fp32), per head in the layout's order. */
    void (*qk_norm_forward)(const mc_backend_t *be, mc_dtype_t dt, void *out, float *mean,
                            float *rstd, const void *x, const void *wq, const void *bq,
                            const void *wk, const void *bk, int T, int NG, int QPG, int HD,
                            float eps, int rms);
    /* In place on dqkv: the query and key heads' gradients taken back to the norms' input (the
     * value heads' left as they are); dwq, dbq, dwk, dbk += the weight gradients (type gdt). */
    void (*qk_norm_backward)(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dqkv,
                             void *dwq, void *dbq, void *dwk, void *dbk, const void *x,
                             const void *wq, const void *wk, const float *mean, const float *rstd,
                             int T, int NG, int QPG, int HD, int rms);

    /* ---- the MLP activation, elementwise (named for GeLU, the first; in place allowed for
     * forward: out may equal x) ---- */
    void (*gelu_forward)(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x, long n,
                         mc_act_t act);
    /* dx = dout * act'(x) (dx may equal dout) */
    void (*gelu_backward)(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                          const void *x, long n, mc_act_t act);

    /* ---- SwiGLU (Megatron's --swiglu: silu(gate) * up, computed in fp32) ----
     * x: [N, 2F], each row [gate | up] (linear_fc1's output on one tp rank); out: [N, F]. */
    void (*swiglu_forward)(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x, int N,
                           int F);
    /* dx [N, 2F] = [dout * up * silu'(gate) | dout * silu(gate)] (overwritten). */
    void (*swiglu_backward)(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                            const void *x, int N, int F);

    /* ---- dropout over a [d0, b, inner] view; out = x * mask / (1-p).
     * out may equal x. p == 0 copies. d0_offset/inner_full/inner_offset place a shard in the
     * full tensor (for a whole tensor: 0, inner, 0). */
    void (*dropout_forward)(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x,
                            const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                            int inner_full, int inner_offset);
    /* The same mask applied to a gradient (regenerated, never stored). */
    void (*dropout_backward)(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                             const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                             int inner_full, int inner_offset);

    /* ---- causal self-attention, with grouped-query attention ----
     * qkv: [s, b, NG*(NH/NG + 2)*HD], Megatron's linear_qkv layout: query group g occupies
     * columns [g*(NH/NG+2)*HD, (g+1)*(NH/NG+2)*HD) as its NH/NG query heads, then its key head,
     * then its value head, HD each; query head i uses the key and value of group i / (NH/NG).
     * NG == NH is multi-head attention (per head [q k v]). NG divides NH.
     * out: [s, b, NH*HD] (head-major within a row: column = head*HD + d).
     * state: what the backward needs besides qkv and out, of attention_sizes' state_bytes: the
     * CPU backend keeps the softmax probabilities [b, NH, s, s] (type dt) before dropout, a fused
     * (flash) kernel only the softmax statistics (cuDNN: each query row's log-sum-exp, fp32
     * [b, NH, s]). scratch: attention_sizes' scratch_bytes of memory the op may use while it
     * runs (a library's workspace; the CPU's forward uses none), free again when it returns.
     * Masked scores are -10000 before the softmax, as in Megatron's attention_mask_func (cuDNN's
     * are -inf: the two differ only where a row's every unmasked score is below -10000).
     * Dropout on the probabilities uses d (site ATTN_PROBS) over the full [NH_full, s, s] per
     * sample: head_offset/NH_full place this rank's heads.
     * segments (Megatron's --reset-attention-mask): NULL = plain causal attention; else a [b, s]
     * row-major array (the layout of tokens) of per-token document numbers, and query i of batch
     * row b attends key j iff j <= i and segments[b*S + j] == segments[b*S + i]. Every masked
     * score (either kind) is exactly -10000 before the softmax and gets no gradient.
     * All-equal segments give results bit-identical to NULL.
     * scale = 1/sqrt(HD) (Megatron's softmax scale; --apply-query-key-layer-scaling divides the
     * scores by the layer number and multiplies them back inside the softmax, which computed in
     * fp32 is the same scale, and Transformer Engine's fused and flash attention ignore it). */
    void (*attention_forward)(const mc_backend_t *be, mc_dtype_t dt, void *out, void *state,
                              void *scratch, const void *qkv, int S, int B, int NH, int NG, int HD,
                              const int32_t *segments, float scale, const mc_dropout_t *d,
                              int head_offset, int NH_full);
    /* dqkv (overwritten; a key or value head gets the sum over its group's query heads) from
     * dout, using saved qkv, out and state; scratch has attention_sizes' scratch_bytes. segments: the same array (or NULL) as the forward pass. */
    void (*attention_backward)(const mc_backend_t *be, mc_dtype_t dt, void *dqkv, void *scratch,
                               const void *dout, const void *qkv, const void *out,
                               const void *state, int S, int B, int NH, int NG, int HD,
                               const int32_t *segments, float scale, const mc_dropout_t *d,
                               int head_offset, int NH_full);
    /* Bytes of the forward's saved state and of the scratch (forward and backward) for these
     * sizes, with the implementation the backend chose for the run's shapes at start-up
     * (kernels/device.h, mc_backend_attention_setup). */
    void (*attention_sizes)(const mc_backend_t *be, mc_dtype_t dt, int S, int B, int NH, int HD,
                            size_t *state_bytes, size_t *scratch_bytes);

    /* ---- context-parallel attention (model/cp_attention.c): causal attention computed by
     * blocks of queries against blocks of keys, whose partial results merge exactly through
     * their softmax statistics (Transformer Engine's context-parallel attention) ----
     * Queries: Sq rows of a qkv tensor in attention_forward's layout ([Sq, b, NG*(NH/NG+2)*HD];
     * only the query heads are read). Keys and values: Sk rows of a kv tensor [Sk, b, NG*2*HD]
     * (group g's key head at columns [2g*HD, (2g+1)*HD), its value head next). Query row i sits
     * at global sequence position q_pos + i, key row j at k_pos + j. mask MC_ATTN_BLOCK_CAUSAL:
     * query i sees key j iff k_pos + j <= q_pos + i; MC_ATTN_BLOCK_FULL: every key. Masked keys
     * are left out (no probability, no gradient; the whole-sequence op's -10000 scores give the
     * same unless a row's every visible score is below about -9900). A row that sees no key gets
     * out 0 and lse -inf, which the merge ignores.
     * Dropout (site ATTN_PROBS) is the whole-sequence op's over S_full positions: element
     * (head_offset + h) * S_full^2 + (q_pos + i) * S_full + (k_pos + j) of sample sample0 + b,
     * applied to the probabilities normalised over the block's keys, so the merged result is the
     * dropout of the probabilities normalised over all keys.
     * out [Sq, b, NH*HD] (fp32): the block's attention output; lse [Sq, b, NH] (fp32): each row's
     * log-sum-exp of its visible scaled scores (natural log). scratch: attention_block_sizes'. */
    void (*attention_block_forward)(const mc_backend_t *be, mc_dtype_t dt, float *out, float *lse,
                                    void *scratch, const void *qkv, const void *kv, int Sq, int Sk,
                                    int B, int NH, int NG, int HD, int q_pos, int k_pos, int S_full,
                                    int mask, float scale, const mc_dropout_t *d, int head_offset,
                                    int NH_full);
    /* Merges a block's result into a running one over rows [rows, NH] (rows = Sq*b), all fp32:
     * L = log(exp(lse) + exp(part_lse)), out = out * exp(lse - L) + part * exp(part_lse - L),
     * lse = L. A running lse of -inf takes the part as it is; a part lse of -inf changes nothing. */
    void (*attention_lse_merge)(const mc_backend_t *be, float *out, float *lse, const float *part,
                                const float *part_lse, long rows, int NH, int HD);
    /* The block's backward from the merged forward: out [Sq, b, NH*HD] (type dt, the merged
     * output), lse [Sq, b, NH] (fp32, the merged statistics) and dout (type dt, out's gradient).
     * With P = exp(scale q.k - lse) over the visible keys, D = rowsum(dout * out) per head and
     * dS = P * (dropout(dout v^T) - D): dq [Sq, b, NH*HD] += scale * dS k, and in dkv
     * [Sk, b, NG*2*HD] each key head += scale * dS^T q and each value head += dropout(P)^T dout,
     * summed over the group's query heads; dq and dkv are fp32 accumulators. */
    void (*attention_block_backward)(const mc_backend_t *be, mc_dtype_t dt, float *dq, float *dkv,
                                     void *scratch, const void *dout, const void *qkv,
                                     const void *kv, const void *out, const float *lse, int Sq,
                                     int Sk, int B, int NH, int NG, int HD, int q_pos, int k_pos,
                                     int S_full, int mask, float scale, const mc_dropout_t *d,
                                     int head_offset, int NH_full);
    /* Bytes of scratch the block forward and backward need for these sizes. */
    void (*attention_block_sizes)(const mc_backend_t *be, mc_dtype_t dt, int Sq, int Sk, int B,
                                  int NH, int HD, size_t *fwd_scratch, size_t *bwd_scratch);
    /* dst[r, 0..cols) (type ddt, rows ld_dst elements apart) = src[r, 0..cols) (type sdt, rows
     * ld_src apart) for r < rows, rounded to nearest even (cudaMemcpy2D with a conversion): the
     * context-parallel packing of key/value heads, head slices and sequence chunks. */
    void (*copy_2d)(const mc_backend_t *be, void *dst, mc_dtype_t ddt, long ld_dst, const void *src,
                    mc_dtype_t sdt, long ld_src, long rows, long cols);

    /* ---- vocab-parallel cross-entropy in fp32 (Megatron's _VocabParallelCrossEntropy on
     * logits.float()) ----
     * logits [N, V] (type dt; rows in [s, b] order: n = s_i*B + b_i) hold this rank's vocab
     * slice [vocab_start, vocab_start + V); targets, losses and dloss are [b, s] (index
     * b_i*S + s_i), as a dataset yields them. Three steps, with tp reductions of the [N]
     * statistics between:
     *   ce_max:  rowmax[n] = max_j logits[n, j]                          (then all-reduce MAX)
     *   ce_sums: sumexp[n] = sum_j exp(logits[n, j] - rowmax[n]) (accumulated in double);
     *            target_logit[n] = logits[n, t - vocab_start] if the target t is in the slice,
     *            else 0                                                  (then all-reduce SUM)
     *   ce_loss: losses[b, s] = log(sumexp[n]) + rowmax[n] - target_logit[n]
     * One rank is the whole vocabulary with no reductions. */
    void (*ce_max)(const mc_backend_t *be, mc_dtype_t dt, float *rowmax, const void *logits, int N,
                   int V);
    void (*ce_sums)(const mc_backend_t *be, mc_dtype_t dt, float *sumexp, float *target_logit,
                    const void *logits, const float *rowmax, const int32_t *targets, int S, int B,
                    int V, int vocab_start);
    void (*ce_loss)(const mc_backend_t *be, float *losses, const float *rowmax, const float *sumexp,
                    const float *target_logit, int S, int B);
    /* dlogits[n, j] = (exp(logits[n, j] - rowmax[n]) / sumexp[n] - [j == t - vocab_start])
     *                 * dloss[b, s], with the reduced statistics. dlogits may equal logits. */
    void (*ce_backward)(const mc_backend_t *be, mc_dtype_t dt, void *dlogits, const void *logits,
                        const float *rowmax, const float *sumexp, const int32_t *targets,
                        const float *dloss, int S, int B, int V, int vocab_start);
    /* ce_loss and ce_backward in one pass over the logits (llm.c's fused classifier), the
     * gradient in place: losses as ce_loss and, when loss_mask is not NULL, logits := dlogits as
     * ce_backward gives them for dloss[b, s] = loss_mask[b, s] * grad_scale (one fp32 product);
     * loss_mask NULL leaves the logits as they are. rowmax, sumexp and target_logit are ce_max's
     * and ce_sums' reduced statistics, or all NULL when this rank holds the whole vocabulary
     * (vocab_start 0, no tp reductions between the steps): then they are formed here as those two
     * ops form them, and the loss and its gradient take one kernel. Values equal to the separate
     * ops'. */
    void (*ce_fused)(const mc_backend_t *be, mc_dtype_t dt, float *losses, void *logits,
                     const float *rowmax, const float *sumexp, const float *target_logit,
                     const int32_t *targets, const float *loss_mask, float grad_scale, int S, int B,
                     int V, int vocab_start);

    /* ---- elementwise / reductions, on buffers of type dt ---- */
    void (*add)(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *a, const void *b,
                long n); /* out = a + b */
    void (*add_inplace)(const mc_backend_t *be, mc_dtype_t dt, void *acc, const void *x,
                        long n);                                                    /* acc += x */
    void (*scale)(const mc_backend_t *be, mc_dtype_t dt, void *x, float s, long n); /* x *= s */
    /* Sum of squares in double (returned to host), for grad and param norms. */
    double (*sumsq)(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n);
    /* sumsq of many tensors at once (the gradient norm's multi-tensor reduction): out[i] (host)
     * = sumsq(x[i], n[i]), the very value sumsq gives, for i < count; the device's work is at
     * most two launches and one read for all of them. */
    void (*sumsq_multi)(const mc_backend_t *be, mc_dtype_t dt, const void *const *x, const long *n,
                        int count, double *out);
    /* Number of elements equal to zero (for --log-num-zeros-in-grad). */
    long (*count_zeros)(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n);
    /* 1 if any element is inf or nan. */
    int (*has_nonfinite)(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n);

    /* ---- Adam (decoupled weight decay, bias correction) on fp32 master params, a list of
     * tensors in one pass (Apex's multi-tensor apply: one launch for many parameters) ----
     * per tensor: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; mh = m/bc1; vh = v/bc2;
     * p -= lr * (mh / (sqrt(vh) + eps) + wd * p), with bc1 = 1-b1^t, bc2 = 1-b2^t; then, where
     * `model` is not NULL, model = p rounded to model_dt (Megatron's
     * _copy_main_params_to_model_params, fused so the master params are read once). */
    void (*adam_step)(const mc_backend_t *be, const mc_adam_tensor_t *t, int count,
                      mc_dtype_t model_dt, float lr, float beta1, float beta2, float eps, int step);

    /* ---- mixture of experts: router, losses, permutation, grouped GEMM (kernels/moe.h) ---- */
    const struct mc_moe_ops *moe;

    /* ---- profiling (--profile): optional, NULL where the backend has no profiler (the CPU's;
     * not in the required op list of kernels/device.c) ----
     * profiler: start (1) or stop (0) the device profiler's capture (cudaProfilerStart/Stop,
     * after the stream's work so far); range_push/range_pop: a named range (NVTX) on the
     * profiler's timeline. */
    void (*profiler)(const mc_backend_t *be, int start);
    void (*range_push)(const mc_backend_t *be, const char *name);
    void (*range_pop)(const mc_backend_t *be);

    /* ---- device memory as the host sees it: optional, NULL without device_memory (not in the
     * required op list of kernels/device.c) ----
     * is_device: p is this backend's memory (not host memory); pinned_alloc/pinned_free: host
     * memory it copies to and from fast (pinned), which communicators stage device buffers
     * through; pinned_alloc returns NULL on failure. */
    int (*is_device)(const mc_backend_t *be, const void *p);
    void *(*pinned_alloc)(const mc_backend_t *be, size_t bytes);
    void (*pinned_free)(const mc_backend_t *be, void *p);

    void *impl; /* backend private state */
};

/* The CPU reference backend (always available). */
const mc_backend_t *mc_backend_cpu(void);

#ifdef MC_WITH_CUDA
/* The CUDA backend on device `device` (kernels/cuda/): NULL with one line in err when it cannot
 * start there. Built only with CUDA (MC_WITH_CUDA). */
const mc_backend_t *mc_backend_cuda(int device, char *err, size_t n);
#endif

#endif
