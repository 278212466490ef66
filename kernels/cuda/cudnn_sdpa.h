// Causal self-attention on cuDNN's fused flash attention (kernels/cuda/cudnn_sdpa.cu): the forward
// and backward graphs of the Graph API's fused flash attention pattern over Megatron's qkv layout,
// built once per shape and cached, and their execution. CUDA C++ only, built with cuDNN
// (MC_WITH_CUDNN). kernels/cuda/attention_select.cu decides when it runs (docs/ARCHITECTURE.md,
// "Attention on cuDNN").
#ifndef MC_KERNELS_CUDA_CUDNN_SDPA_H
#define MC_KERNELS_CUDA_CUDNN_SDPA_H

#ifdef MC_WITH_CUDNN

#include <stdint.h>

#include <string>

#include "kernels/cuda/cuda.h"
extern "C" {
#include "kernels/attention_choice.h"
}

// The shape a plan serves: the op's arguments and the dropout probability (0: none; the RNG
// op's Bernoulli probability is part of the graph). block: a context-parallel block (backend.h's
// attention_block_*): S query rows against Sk key rows of a compact kv tensor [Sk, b, NG*2*HD],
// the statistics in the block ops' [S, b, NH] layout, causal (the ring's diagonal blocks: query i
// sees key j iff j <= i; bottom_right: the all-gather's blocks of S queries against a prefix of
// Sk >= S keys that ends with them, query i sees key j iff j <= i + Sk - S, cuDNN's causal mask
// with bottom-right diagonal alignment) or no mask; otherwise the whole sequence (Sk = S),
// causal.
struct mc_sdpa_key {
    mc_dtype_t dt;
    int S, B, NH, NG, HD;
    float p;
    int Sk;
    bool causal, block;
    bool bottom_right;
    bool operator==(const mc_sdpa_key &o) const
    {
        return dt == o.dt && S == o.S && B == o.B && NH == o.NH && NG == o.NG && HD == o.HD &&
               p == o.p && Sk == o.Sk && causal == o.causal && block == o.block &&
               bottom_right == o.bottom_right;
    }
};

struct mc_sdpa_plans; // a key's forward and backward execution plans (cudnn_sdpa.cu)

// What one forward or backward call reads and writes. q: Q as [B, NH, S, HD] where it lies (in
// qkv for multi-head attention, the scratch's copy with grouped-query attention); dq likewise.
struct mc_sdpa_call {
    const void *qkv, *q;
    const void *kv;   // a block's keys and values (compact kv layout); else they are in qkv
    void *out;        // forward: written; backward: read
    const void *dout; // backward
    float *stats;     // [B, NH, S]: forward writes, backward reads
    void *dqkv, *dq;  // backward: dK and dV into dqkv (a block's: a kv-layout tensor), dQ at dq
    void *scratch;    // the op's scratch (mc_attention_cudnn_scratch's layout; a block's: the
                      // workspace first)
    float *sum;       // a block's backward: the dO.O row sums, fp32 [B, NH, S]
    float scale;      // the softmax scale
    int64_t seed;     // the dropout mask's seed (its offset is 0)
};

// cuDNN on the backend's compute stream, once per process: 0, or -1 with why. version: "9.19.0".
int mc_cudnn_start(const mc_backend_t *be, char *version, size_t vn, char *why, size_t n);
// The key's plans, built and cached the first time: NULL with *why when cuDNN refuses the shape.
const mc_sdpa_plans *mc_cudnn_sdpa_plans(const mc_sdpa_key &key, std::string *why);
// The workspace the key's plans need (the larger of the forward's and the backward's).
size_t mc_cudnn_sdpa_workspace(const mc_sdpa_plans *p);
void mc_cudnn_sdpa_forward(const mc_backend_t *be, const mc_sdpa_plans *p, const mc_sdpa_call &c);
void mc_cudnn_sdpa_backward(const mc_backend_t *be, const mc_sdpa_plans *p, const mc_sdpa_call &c);

#endif
#endif
