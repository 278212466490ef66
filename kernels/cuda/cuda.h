// Internal header of the CUDA backend (kernels/backend.h documents every op). CUDA C++ only:
// the rest of the program sees the backend through mc_backend_cuda() and the op table.
//
// Every op is enqueued on the backend's one compute stream and returns without waiting, except
// those that hand a value to the host (sumsq, count_zeros, has_nonfinite, memcpy_d2h), which
// synchronize the stream. The communication layer orders its own stream against this one.
//
// Only the thread that runs the model calls ops (as on the CPU backend): the GEMM plan cache and
// the scratch are not locked.
#ifndef MC_KERNELS_CUDA_CUDA_H
#define MC_KERNELS_CUDA_CUDA_H

#include <cuda_runtime.h>
#include <stdio.h>

extern "C" {
#include "kernels/attention_choice.h"
#include "kernels/backend.h"
}
#include "kernels/cuda/gemm_map.h"

typedef struct {
    int device;
    cudaStream_t stream;  // every op of the table runs here
    cudaDeviceProp prop;  // SM count, shared memory per block, L2 size
    void *cublaslt;       // cublasLtHandle_t (kernels/cuda/gemm.cu)
    void *gemm_workspace; // cuBLASLt workspace on the device
    size_t gemm_workspace_bytes;
    // Device scratch of the ops themselves (reduction partials, the embedding backward's sort),
    // used only inside one op on the stream, so consecutive ops share it. Ops that need more
    // than this split their work (each op's comment says how).
    void *scratch;
    size_t scratch_bytes;
    void *host_scratch; // pinned host memory that reductions copy their result into
    size_t host_scratch_bytes;
} mc_cuda_t;

static inline const mc_cuda_t *mc_cuda(const mc_backend_t *be)
{
    return (const mc_cuda_t *)be->impl;
}
static inline cudaStream_t mc_cuda_stream(const mc_backend_t *be) { return mc_cuda(be)->stream; }

// Every kernel launch and every dynamic shared-memory array goes through these two macros, so
// the kernels compile unchanged for the emulated device of the tests (test/emu: the host C++
// compiler, MC_CUDA_EMU), where they expand to its launcher; under nvcc they are CUDA's syntax:
//   MC_LAUNCH(grid, block, smem bytes, stream, kernel)(args...)  is  kernel<<<grid, block, smem, stream>>>(args...)
#ifdef MC_CUDA_EMU
#define MC_LAUNCH(grid, block, smem, stream, ...)                                                  \
    mc_emu_launch(grid, block, smem, stream, __VA_ARGS__, #__VA_ARGS__, __FILE__, __LINE__)
#define MC_DYNAMIC_SMEM(type, name) type *name = (type *)mc_emu::dynamic_smem()
#else
#define MC_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#define MC_DYNAMIC_SMEM(type, name) extern __shared__ __align__(128) type name[]
#endif

// A CUDA error inside an op is a runtime error of this rank: one line naming the call, then the
// job ends (mc_fatal through the C side).
extern "C" void mc_cuda_die(const char *what, cudaError_t e, const char *file, int line);
#define MC_CUDA_CHECK(call)                                                                        \
    do {                                                                                           \
        cudaError_t mc_e_ = (call);                                                                \
        if (mc_e_ != cudaSuccess) mc_cuda_die(#call, mc_e_, __FILE__, __LINE__);                   \
    } while (0)
// After a kernel launch: launch configuration errors surface here, execution errors at the
// next synchronizing call.
#define MC_CUDA_LAUNCHED() MC_CUDA_CHECK(cudaGetLastError())
// An op called with a type it does not take (a bug of the caller): one line, then the job ends.
extern "C" __attribute__((noreturn)) void mc_cuda_bad_dtype(const char *op, mc_dtype_t dt);

static inline unsigned mc_cuda_blocks(long n, int threads)
{
    long b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 65535L * 32 ? 65535L * 32 : b);
}

// ---- the ops (kernels/backend.h documents each); one file per concern ----

// backend_cuda.cu: memory ops, the table
// gemm.cu: cuBLASLt, its plan cache, and the fallback kernel
// Sets up cuBLASLt on c (handle, workspace): 0, or -1 with one line in err.
int mc_cuda_gemm_init(mc_cuda_t *c, char *err, size_t n);
void mc_cuda_gemm(const mc_backend_t *be, int transa, int transb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
// One matmul in cuBLAS's column-major terms (kernels/cuda/gemm_map.h derives them from the
// row-major ops): D[m,n] = alpha * op(A) op(B) + beta * D (+ bias[m] broadcast over columns
// when bias is not NULL; bias has D's type). A and B of type ab, D of type d; fp32 compute.
typedef struct {
    int opa, opb, m, n, k;
    const void *A;
    int lda;
    const void *B;
    int ldb;
    void *D;
    int ldd;
    const void *bias;
    float alpha, beta;
    mc_dtype_t ab, d;
    // GeLU epilogues (tanh approximation, cuBLASLt's GELU), with aux an m x n matrix of D's type
    // and layout (leading dimension ldaux, a multiple of 8; 16-byte aligned):
    //   MC_GEMM_GELU:  aux = acc (+ bias), D = gelu(aux)          (fc1 forward, pre-activation kept)
    //   MC_GEMM_DGELU: D = acc * gelu'(aux)                       (fc2's input gradient)
    int gelu;
    void *aux;
    int ldaux;
    // Bias gradient (cuBLASLt's BGRADB, with gelu PLAIN and no bias): bgradb[j] = the sum over k
    // of op(B)[., j], n values of D's type, stored (not accumulated); 16-byte aligned.
    void *bgradb;
} mc_cuda_matmul_t;
enum { MC_GEMM_PLAIN = 0, MC_GEMM_GELU = 1, MC_GEMM_DGELU = 2 };
void mc_cuda_matmul(const mc_backend_t *be, const mc_cuda_matmul_t *g);
// A matmul with a GeLU or bias-gradient epilogue through cuBLASLt: false, computing nothing, when
// cuBLASLt has no algorithm for it (or MC_CUDA_GEMM=fallback): the caller then runs the unfused
// ops.
bool mc_cuda_matmul_fused(const mc_backend_t *be, const mc_cuda_matmul_t *g);
// The row-major product r (gemm_map.h) as a matmul: C = alpha * op(A) op(B) + beta * C (+ bias[N]
// added to every row when bias is not NULL). A and B of type ab, C (and bias) of type c. Every
// dimension of r must be positive.
mc_cuda_matmul_t mc_cuda_matmul_of(mc_rowmajor_gemm_t r, const void *A, const void *B, void *C,
                                   mc_dtype_t ab, mc_dtype_t c, float alpha, float beta,
                                   const void *bias);
void mc_cuda_matmul_rowmajor(const mc_backend_t *be, mc_rowmajor_gemm_t r, const void *A,
                             const void *B, void *C, mc_dtype_t ab, mc_dtype_t c, float alpha,
                             float beta, const void *bias);

// convert.cu
void mc_cuda_convert(const mc_backend_t *be, void *dst, mc_dtype_t ddt, const void *src,
                     mc_dtype_t sdt, long n);

// linear.cu
void mc_cuda_linear_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                            const void *W, const void *bias, int N, int in_f, int out_f);
void mc_cuda_linear_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *din,
                             void *dW, void *dbias, const void *dout, const void *in, const void *W,
                             int N, int in_f, int out_f);
void mc_cuda_linear_gelu_forward(const mc_backend_t *be, mc_dtype_t dt, void *act, void *pre,
                                 const void *in, const void *W, const void *bias, int N, int in_f,
                                 int out_f, mc_act_t activation);
void mc_cuda_linear_backward_gelu(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *din,
                                  void *dW, void *dbias, const void *dout, const void *act,
                                  const void *W, const void *pre, int N, int in_f, int out_f,
                                  mc_act_t activation);

// embedding.cu
void mc_cuda_embedding_forward(const mc_backend_t *be, mc_dtype_t dt, void *out,
                               const int32_t *tokens, const int32_t *positions, const void *wte,
                               const void *wpe, int S, int B, int H, int vocab_start, int V);
void mc_cuda_embedding_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dwte,
                                void *dwpe, const void *dout, const int32_t *tokens,
                                const int32_t *positions, int S, int B, int H, int vocab_start,
                                int V);

// layernorm.cu
void mc_cuda_layernorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, float *mean,
                               float *rstd, const void *x, const void *w, const void *b, int N,
                               int C, float eps);
void mc_cuda_add_layernorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *sum, void *out,
                                   float *mean, float *rstd, const void *a, const void *b,
                                   const void *w, const void *bias, int N, int C, float eps);
void mc_cuda_layernorm_backward_acc(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dx,
                                    void *dw, void *db, const void *dout, const void *x,
                                    const void *w, const float *mean, const float *rstd, int N,
                                    int C);

// qk_norm.cu: --qk-layernorm, LayerNorm or RMSNorm over each query and key head
void mc_cuda_qk_norm_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, float *mean,
                             float *rstd, const void *x, const void *wq, const void *bq,
                             const void *wk, const void *bk, int T, int NG, int QPG, int HD,
                             float eps, int rms);
void mc_cuda_qk_norm_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dqkv,
                              void *dwq, void *dbq, void *dwk, void *dbk, const void *x,
                              const void *wq, const void *wk, const float *mean, const float *rstd,
                              int T, int NG, int QPG, int HD, int rms);

// gelu.cu: the MLP's elementwise activation (GeLU or squared ReLU)
void mc_cuda_gelu_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x, long n,
                          mc_act_t act);
void mc_cuda_gelu_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                           const void *x, long n, mc_act_t act);

// rmsnorm.cu
void mc_cuda_rmsnorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, float *rstd,
                             const void *x, const void *w, int N, int C, float eps);
void mc_cuda_add_rmsnorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *sum, void *out,
                                 float *rstd, const void *a, const void *b, const void *w, int N,
                                 int C, float eps);
void mc_cuda_rmsnorm_backward_acc(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dx,
                                  void *dw, const void *dout, const void *x, const void *w,
                                  const float *rstd, int N, int C);

// swiglu.cu
void mc_cuda_swiglu_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x, int N,
                            int F);
void mc_cuda_swiglu_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                             const void *x, int N, int F);

// rope.cu
void mc_cuda_rope(const mc_backend_t *be, mc_dtype_t dt, void *qkv, const float *cos_t,
                  const float *sin_t, int S, int B, int NG, int QPG, int HD, int rot_dim,
                  int interleaved, int inverse);

// dropout.cu
void mc_cuda_dropout_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x,
                             const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                             int inner_full, int inner_offset);
void mc_cuda_dropout_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                              const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                              int inner_full, int inner_offset);

// cross_entropy.cu
void mc_cuda_ce_max(const mc_backend_t *be, mc_dtype_t dt, float *rowmax, const void *logits, int N,
                    int V);
void mc_cuda_ce_sums(const mc_backend_t *be, mc_dtype_t dt, float *sumexp, float *target_logit,
                     const void *logits, const float *rowmax, const int32_t *targets, int S, int B,
                     int V, int vocab_start);
void mc_cuda_ce_loss(const mc_backend_t *be, float *losses, const float *rowmax,
                     const float *sumexp, const float *target_logit, int S, int B);
void mc_cuda_ce_backward(const mc_backend_t *be, mc_dtype_t dt, void *dlogits, const void *logits,
                         const float *rowmax, const float *sumexp, const int32_t *targets,
                         const float *dloss, int S, int B, int V, int vocab_start);
void mc_cuda_ce_fused(const mc_backend_t *be, mc_dtype_t dt, float *losses, void *logits,
                      const float *rowmax, const float *sumexp, const float *target_logit,
                      const int32_t *targets, const float *loss_mask, float grad_scale, int S,
                      int B, int V, int vocab_start);

// elementwise.cu
void mc_cuda_add(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *a, const void *b,
                 long n);
void mc_cuda_add_inplace(const mc_backend_t *be, mc_dtype_t dt, void *acc, const void *x, long n);
void mc_cuda_scale(const mc_backend_t *be, mc_dtype_t dt, void *x, float s, long n);

// reduce.cu
double mc_cuda_sumsq(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n);
void mc_cuda_sumsq_multi(const mc_backend_t *be, mc_dtype_t dt, const void *const *x, const long *n,
                         int count, double *out);
long mc_cuda_count_zeros(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n);
int mc_cuda_has_nonfinite(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n);

// attention_cp_cudnn.cu: context parallelism's attention blocks, on cuDNN where the setup chose it
// and cuDNN can do the block, else attention_cp.cu's kernels (mc_cuda_local_attention_block_*);
// their sizes: kernels/device.c's mc_cuda_attention_block_sizes (the project's kernels', which
// plans use without a GPU) with cuDNN's layout when it runs blocks
void mc_cuda_attention_block_forward(const mc_backend_t *be, mc_dtype_t dt, float *out, float *lse,
                                     void *scratch, const void *qkv, const void *kv, int Sq, int Sk,
                                     int B, int NH, int NG, int HD, int q_pos, int k_pos,
                                     int S_full, int mask, float scale, const mc_dropout_t *d,
                                     int head_offset, int NH_full);
void mc_cuda_attention_block_backward(const mc_backend_t *be, mc_dtype_t dt, float *dq, float *dkv,
                                      void *scratch, const void *dout, const void *qkv,
                                      const void *kv, const void *out, const float *lse, int Sq,
                                      int Sk, int B, int NH, int NG, int HD, int q_pos, int k_pos,
                                      int S_full, int mask, float scale, const mc_dropout_t *d,
                                      int head_offset, int NH_full);
void mc_cuda_attention_block_sizes_cudnn(const mc_backend_t *be, mc_dtype_t dt, int Sq, int Sk,
                                         int B, int NH, int HD, size_t *fwd_scratch,
                                         size_t *bwd_scratch);
// The run's blocks on cuDNN (after mc_cudnn_start): NULL, or why not (into why); s NULL: none.
const char *mc_cuda_cp_cudnn_setup(const mc_attention_spec_t *s, char *why, size_t n);
// attention_cp.cu: the project's block kernels, the merge and copy_2d
void mc_cuda_local_attention_block_forward(const mc_backend_t *be, mc_dtype_t dt, float *out,
                                           float *lse, void *scratch, const void *qkv,
                                           const void *kv, int Sq, int Sk, int B, int NH, int NG,
                                           int HD, int q_pos, int k_pos, int S_full, int mask,
                                           float scale, const mc_dropout_t *d, int head_offset,
                                           int NH_full);
void mc_cuda_local_attention_block_backward(const mc_backend_t *be, mc_dtype_t dt, float *dq,
                                            float *dkv, void *scratch, const void *dout,
                                            const void *qkv, const void *kv, const void *out,
                                            const float *lse, int Sq, int Sk, int B, int NH, int NG,
                                            int HD, int q_pos, int k_pos, int S_full, int mask,
                                            float scale, const mc_dropout_t *d, int head_offset,
                                            int NH_full);
void mc_cuda_attention_lse_merge(const mc_backend_t *be, float *out, float *lse, const float *part,
                                 const float *part_lse, long rows, int NH, int HD);
void mc_cuda_copy_2d(const mc_backend_t *be, void *dst, mc_dtype_t ddt, long ld_dst,
                     const void *src, mc_dtype_t sdt, long ld_src, long rows, long cols);

// adam.cu
void mc_cuda_adam_step(const mc_backend_t *be, const mc_adam_tensor_t *t, int count,
                       mc_dtype_t model_dt, float lr, float beta1, float beta2, float eps,
                       int step);

// moe_route.cu, moe_permute.cu, moe_gemm.cu: the mixture-of-experts ops (kernels/moe.h); the
// table is mc_cuda_moe_ops (moe_route.cu)
extern "C" {
#include "kernels/moe.h"
}
extern const mc_moe_ops_t mc_cuda_moe_ops;
void mc_cuda_moe_tokens_per_expert(const mc_backend_t *be, int32_t *counts, const uint8_t *map,
                                   long T, int E);
void mc_cuda_moe_permute_map(const mc_backend_t *be, mc_dtype_t rdt, int32_t *rows, int32_t *row_of,
                             void *pprobs, const void *probs, const uint8_t *map, long T, int E,
                             long N);
void mc_cuda_moe_permute(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                         const int32_t *rows, long N, int H);
void mc_cuda_moe_unpermute(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *out,
                           const void *x, const int32_t *row_of, const void *pprobs, long T, int E,
                           int H);
void mc_cuda_moe_unpermute_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *dx,
                                    void *dpprobs, const void *dout, const void *x,
                                    const int32_t *rows, const void *pprobs, long N, int H);
void mc_cuda_moe_sort_chunks(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                             const long *sizes, const int *order, int n, int H);
void mc_cuda_moe_scale_rows(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt, void *out,
                            const void *x, const void *p, long N, int H);
void mc_cuda_moe_scale_rows_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t pdt,
                                     void *dx, void *dp, const void *dout, const void *x,
                                     const void *p, long N, int H);
void mc_cuda_moe_grouped_linear_forward(const mc_backend_t *be, mc_dtype_t dt, void *out,
                                        const void *in, const void *const *W, const long *m, int G,
                                        int K, int N);
void mc_cuda_moe_grouped_linear_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt,
                                         void *din, void *const *dW, const void *dout,
                                         const void *in, const void *const *W, const long *m, int G,
                                         int K, int N);

#endif
