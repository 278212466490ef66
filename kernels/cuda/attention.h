/* The CUDA backend's causal attention, callable from C (the GPU tests call these directly). Built
 * only with CUDA (MC_WITH_CUDA).
 *
 * mc_cuda_attention_*: the op table's entries (kernels/backend.h documents them;
 * kernels/cuda/attention_select.cu): cuDNN's fused flash attention (kernels/cuda/cudnn_sdpa.cu)
 * for the calls whose shapes mc_backend_attention_setup chose it for (kernels/device.h), the
 * project's kernels for every other call. The state is fp32 [2][b, NH, s]: cuDNN keeps each
 * query row's log-sum-exp in its first half, the project's kernels the softmax's row max, then
 * its row sum. The scratch: the project's kernels' D = rowsum(dout * out), fp32 [b, NH, s], or
 * cuDNN's workspace, its dO.O row sums and, with grouped-query attention, the query heads and
 * dQ copied out of and back into qkv's layout (kernels/attention_choice.h).
 *
 * mc_cuda_local_attention_*: the project's kernels alone (kernels/cuda/attention.cu, the algorithm
 * in kernels/cuda/attention_tiles.h): grouped-query attention (NG < NH) needs nothing more, one
 * dK/dV block owns a group's key tile and sums over the group's query heads; head_dim up to 256
 * (padded to 64, 80, 128 or 256); dt fp32 (FMA units), bf16 or fp16 (tensor cores, fp32
 * accumulation and softmax); their sizes are mc_flash_attention_sizes (kernels/device.h). */
#ifndef MC_KERNELS_CUDA_ATTENTION_H
#define MC_KERNELS_CUDA_ATTENTION_H

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/backend.h"

void mc_cuda_attention_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, void *state,
                               void *scratch, const void *qkv, int S, int B, int NH, int NG, int HD,
                               const int32_t *segments, float scale, const mc_dropout_t *d,
                               int head_offset, int NH_full);
void mc_cuda_attention_backward(const mc_backend_t *be, mc_dtype_t dt, void *dqkv, void *scratch,
                                const void *dout, const void *qkv, const void *out,
                                const void *state, int S, int B, int NH, int NG, int HD,
                                const int32_t *segments, float scale, const mc_dropout_t *d,
                                int head_offset, int NH_full);
void mc_cuda_attention_sizes(const mc_backend_t *be, mc_dtype_t dt, int S, int B, int NH, int HD,
                             size_t *state_bytes, size_t *scratch_bytes);

void mc_cuda_local_attention_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, void *state,
                                     const void *qkv, int S, int B, int NH, int NG, int HD,
                                     const int32_t *segments, float scale, const mc_dropout_t *d,
                                     int head_offset, int NH_full);
void mc_cuda_local_attention_backward(const mc_backend_t *be, mc_dtype_t dt, void *dqkv,
                                      void *scratch, const void *dout, const void *qkv,
                                      const void *out, const void *state, int S, int B, int NH,
                                      int NG, int HD, const int32_t *segments, float scale,
                                      const mc_dropout_t *d, int head_offset, int NH_full);

/* Whether the calls of these shapes (segments NULL, dropout p) run on cuDNN after the setup. */
int mc_cuda_attention_uses_cudnn(mc_dtype_t dt, int S, int B, int NH, int NG, int HD, float p);
/* Whether a context-parallel block of these arguments (backend.h's attention_block_*, dropout p)
 * runs on cuDNN after the setup (kernels/cuda/attention_cp_cudnn.cu). */
int mc_cuda_attention_block_uses_cudnn(mc_dtype_t dt, int Sq, int Sk, int B, int NH, int NG, int HD,
                                       int q_pos, int k_pos, int mask, float p);

#ifdef __cplusplus
}
#endif

#endif
