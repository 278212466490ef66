/* Which attention runs (issue 29): Megatron's --attention-backend, the shapes of a run's
 * attention, cuDNN's documented support of them, and the layout of the op's scratch when cuDNN
 * runs it. Plain C shared by the CUDA backend (kernels/cuda/attention_select.cu) and the sizing
 * backend of `megatron-c plan` (kernels/device.c), so the plan and the run choose alike. */
#ifndef MC_KERNELS_ATTENTION_CHOICE_H
#define MC_KERNELS_ATTENTION_CHOICE_H

#include <stdbool.h>
#include <stddef.h>

#include "config/args.h"
#include "kernels/dtype.h"

/* Megatron's AttnBackend (megatron/core/transformer/enums.py): auto, flash and fused take
 * cuDNN's fused attention where it supports the case; unfused and local the project's kernels
 * (on the CPU backend every choice is the CPU's reference op). */
typedef enum {
    MC_ATTENTION_AUTO = 0,
    MC_ATTENTION_FLASH,
    MC_ATTENTION_FUSED,
    MC_ATTENTION_UNFUSED,
    MC_ATTENTION_LOCAL,
} mc_attention_backend_t;

/* The attention of a run on one rank. */
typedef struct {
    mc_attention_backend_t backend;
    mc_dtype_t dt;
    int S;         /* sequence length */
    int B, B_eval; /* micro-batch rows in training and in evaluation */
    int NH, NG;    /* this rank's query heads and query groups (tp's share) */
    int HD;        /* head dim (kv_channels) */
    float dropout; /* attention dropout in training */
    bool segments; /* --reset-attention-mask: document masks */
    int cp;        /* --context-parallel-size: above 1 the block ops run attention */
} mc_attention_spec_t;

/* "auto" ... "local"; MC_ATTENTION_AUTO for an unknown name (the flag table allows only these). */
mc_attention_backend_t mc_attention_backend_of(const char *name);
const char *mc_attention_backend_name(mc_attention_backend_t b);
/* The value of Megatron's AttnBackend member (flash 1, fused 2, unfused 3, local 4, auto 5: the
 * enum its checkpoints pickle), and the choice of one (-1 for no member). */
int mc_attention_backend_megatron(mc_attention_backend_t b);
int mc_attention_backend_of_megatron(int value);
/* The run's attention from validated arguments. */
void mc_attention_spec_from_args(const mc_args_t *a, mc_attention_spec_t *s);

/* Why cuDNN's fused flash attention cannot run the spec on a GPU of compute capability cc_major
 * (8 for A100, 9 for H100/H200), by the cuDNN documentation's support matrix: NULL when it can;
 * else a phrase (into buf) naming the reason, for the start-up log. The choice local/unfused is
 * a reason too. */
const char *mc_attention_cudnn_refusal(const mc_attention_spec_t *s, int cc_major, char *buf,
                                       size_t n);

/* The op's scratch when cuDNN runs a call of B rows (offsets in bytes, 256-aligned): the execution
 * plan's workspace first (the larger of the forward's and the backward's, ws), then the RNG seed
 * and offset (two int64), the backward's dO.O row sums (fp32 [B, NH, S]), and with grouped-query
 * attention the query heads copied out of qkv and dQ before it is scattered back (type dt,
 * [S, B, NH, HD] each). */
typedef struct {
    size_t rng, sum, q, dq, bytes;
} mc_attention_scratch_t;
void mc_attention_cudnn_scratch(const mc_attention_spec_t *s, int B, size_t ws,
                                mc_attention_scratch_t *out);
/* cuDNN's workspace for B rows as `megatron-c plan` assumes it without a GPU to ask: the
 * backward's fp32 accumulator of dQ, B*NH*S*HD*4 bytes, the largest a FlashAttention-2-style
 * backward keeps (the run asks cuDNN's plans and logs their figure). */
size_t mc_attention_cudnn_workspace_model(const mc_attention_spec_t *s, int B);

#endif
