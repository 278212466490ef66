/* The CUDA backend's fused causal attention (kernels/cuda/attention.cu): the op table's
 * attention_forward, attention_backward and attention_sizes (kernels/backend.h documents them;
 * kernels/cuda/attention_tiles.h describes the algorithm). C linkage, callable from C (the GPU
 * tests call them directly). Built only with CUDA (MC_WITH_CUDA).
 *
 * The saved state is fp32 [2][b, NH, s]: the softmax's row max, then its row sum. The backward's
 * scratch is fp32 [b, NH, s]: D = rowsum(dout * out). Grouped-query attention (NG < NH) needs
 * nothing more: one dK/dV block owns a group's key tile and sums over the group's query heads. head_dim up to 256 (padded to 64, 80, 128
 * or 256); dt fp32 (FMA units), bf16 or fp16 (tensor cores, fp32 accumulation and softmax). */
#ifndef MC_KERNELS_CUDA_ATTENTION_H
#define MC_KERNELS_CUDA_ATTENTION_H

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/backend.h"

void mc_cuda_attention_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, void *state,
                               const void *qkv, int S, int B, int NH, int NG, int HD,
                               const int32_t *segments, float scale, const mc_dropout_t *d,
                               int head_offset, int NH_full);
void mc_cuda_attention_backward(const mc_backend_t *be, mc_dtype_t dt, void *dqkv, void *scratch,
                                const void *dout, const void *qkv, const void *out,
                                const void *state, int S, int B, int NH, int NG, int HD,
                                const int32_t *segments, float scale, const mc_dropout_t *d,
                                int head_offset, int NH_full);
void mc_cuda_attention_sizes(const mc_backend_t *be, mc_dtype_t dt, int S, int B, int NH, int HD,
                             size_t *state_bytes, size_t *scratch_bytes);

#ifdef __cplusplus
}
#endif

#endif
