/* `megatron-c plan`: memory and time per iteration of a training command line on a stated
 * cluster, before a GPU is spent (the paper's sections 3 and 5 as arithmetic).
 *
 * Memory is mc_trainer_memory's, the start-up memory plan itself, on a sizing backend of the
 * GPU's kind (kernels/device.h), so the two cannot disagree. Time is a model with its constants
 * stated once (plan/hw.c): GEMMs on a roofline with a cuBLAS ceiling and wave quantisation,
 * memory-bound ops at a fraction of HBM bandwidth, collectives as rings on the link each
 * dimension uses (Megatron's rank order: tp fastest, then dp, then pp), the pipeline bubble
 * (p-1)/(v*m), the data-parallel reduction with what --overlap-grad-reduce hides, and the
 * optimizer step as memory traffic. */
#ifndef MC_PLAN_PLAN_H
#define MC_PLAN_PLAN_H

#include <stdbool.h>
#include <stdio.h>

#include "config/args.h"
#include "trainer/trainer.h"

/* A GPU and its node: peaks from the vendors' datasheets, achieved fractions stated once. */
typedef struct {
    const char *name;      /* "a100", "h100", "h200" */
    const char *long_name; /* "A100 SXM4 80 GB" */
    double peak_tflops;    /* dense bf16/fp16 tensor-core peak */
    double memory_gb;      /* HBM, 10^9 bytes */
    double hbm_gbps;       /* HBM bandwidth, GB/s */
    int sms;               /* streaming multiprocessors (wave quantisation) */
    double intra_gbps;     /* NVLink/NVSwitch, per GPU and direction, GB/s */
    double inter_gbps;     /* the node's network, per GPU and direction, GB/s */
    double gemm_ceiling;   /* fraction of peak cuBLAS reaches on large GEMMs */
    const char *source;    /* where the numbers come from */
    int cc_major;          /* compute capability: 8 Ampere, 9 Hopper (what cuDNN supports) */
    /* causal attention, TFLOP/s of the causal half (forward: 2 matmuls, backward: 5) with
     * cuDNN's fused flash attention and with the project's kernels (kernels/cuda/attention.cu),
     * and where the figures come from (plan/hw.c) */
    double cudnn_fwd_tflops, cudnn_bwd_tflops, kernels_fwd_tflops, kernels_bwd_tflops;
    const char *cudnn_source, *kernels_source;
} mc_gpu_t;

/* The fractions every GPU shares (plan/hw.c says why each). */
#define MC_PLAN_HBM_FRACTION 0.80    /* memory-bound kernels reach this much of HBM bandwidth */
#define MC_PLAN_LINK_FRACTION 0.80   /* NCCL rings reach this much of a link's bandwidth */
#define MC_PLAN_STEP_LATENCY_S 10e-6 /* one step of a ring collective or one p2p transfer */
#define MC_PLAN_RESERVED_GB 3.0      /* CUDA context, NCCL and cuBLAS buffers per GPU */

const mc_gpu_t *mc_gpu_find(const char *name);
/* "a100, h100, h200" */
const char *mc_gpu_names(void);

/* How the attention is computed: what the run would choose (auto: cuDNN's fused flash attention
 * where --attention-backend and cuDNN's support take the shapes, else the project's kernels,
 * kernels/attention_choice.h), one of those two, or with the [s, s] scores and probabilities
 * written to memory, as Megatron's 2021 fused softmax did (the paper's runs). */
typedef enum {
    MC_ATTN_AUTO,
    MC_ATTN_CUDNN,
    MC_ATTN_KERNELS,
    MC_ATTN_MATERIALIZED
} mc_attn_kernel_t;

/* The cluster a plan is for. */
typedef struct {
    mc_gpu_t gpu; /* after overrides */
    int num_gpus, gpus_per_node;
    mc_attn_kernel_t attn;
    bool pp_scatter_gather; /* the paper's p2p optimisation: each tp rank sends 1/t of a
                               stage's output (sequence parallelism does so by itself) */
} mc_cluster_t;

/* The attention a plan assumes: the implementation (never AUTO), its rates (TFLOP/s of the
 * causal half; 0 when materialised: GEMMs and memory passes) and a phrase with their source. */
typedef struct {
    mc_attn_kernel_t kind;
    double fwd_tflops, bwd_tflops;
    char what[320];
} mc_plan_attention_t;
void mc_plan_attention(const mc_args_t *args, const mc_cluster_t *cl, mc_plan_attention_t *out);

/* Seconds per iteration, by part, of the slowest pipeline stage. */
typedef struct {
    double compute;   /* GEMMs and memory-bound ops of m microbatches, recomputation included */
    double attention; /* of which core attention (forward, backward, recomputed) */
    mc_plan_attention_t attn;
    double tp_comm;    /* tensor-parallel collectives (not overlapped) */
    double pp_comm;    /* pipeline p2p transfers */
    double bubble;     /* the pipeline's idle time, (p-1)/v of a microbatch's work */
    double dp_comm;    /* the data-parallel reduction (and the distributed optimizer's gather) */
    double dp_exposed; /* the part of dp_comm not hidden behind the backward */
    double optimizer;  /* the optimizer step */
    double iteration;  /* compute + tp_comm + ep_comm + pp_comm + cp_exposed + bubble +
                          dp_exposed + optimizer */
    double bubble_fraction; /* the paper's (p-1)/(v*m) */
    int microbatches;       /* m */
    /* volumes per iteration and GPU, bytes, as the comm layer counts them (per call the larger
     * of a rank's input and output) */
    double tp_bytes, pp_bytes, dp_bytes;
    int tp_calls;
    /* mixture of experts: the dispatcher's all-to-alls over ep and its all-gathers and
     * reduce-scatters over etp (not overlapped, counted in iteration), their volume per GPU;
     * of dp_comm, the experts' gradient reduction over edp and its bytes */
    double ep_comm, ep_bytes, edp_comm, edp_bytes;
    int ep_calls;
    /* context parallelism's attention traffic (ring passes, all-to-alls, all-gathers) of the
     * slowest stage: all of it, the part the ring does not hide behind its blocks' compute
     * (counted in iteration), and its volume per GPU as the comm layer counts it */
    double cp_comm, cp_exposed, cp_bytes;
    int cp_calls;
    /* floating-point operations per iteration, all GPUs: Megatron's count (the log line's) and
     * the hardware's (with the recomputed forward, the paper's Table 1 count) */
    double model_flops, hw_flops;
    double tokens_per_s, model_tflops_per_gpu, hw_tflops_per_gpu, mfu;
} mc_plan_time_t;

/* The time model for args (validated at the cluster's world size, padded vocabulary set) with
 * its memory plan mem (the parameter and gradient buffers the reduction and optimizer move). */
void mc_plan_time(const mc_args_t *args, const mc_cluster_t *cl, const mc_memory_plan_t *mem,
                  mc_plan_time_t *out);

/* A ring collective (or p2p pass) over the links at gbps moving `sent` bytes per rank in
 * `steps` steps. */
double mc_plan_ring_seconds(double sent, int steps, double gbps);

/* Context parallelism's traffic of one layer (global `layer`) for one microbatch (plan/cp.c):
 * seconds on the links forward and backward, the part not hidden (the ring overlaps each pass
 * with a step's blocks, core_f / cp forward, core_b / cp backward; the all-to-alls and
 * all-gathers are not overlapped), and the bytes and calls the comm layer counts. Zero at cp 1. */
typedef struct {
    double fwd, bwd, fwd_exposed, bwd_exposed, fwd_bytes, bwd_bytes;
    int fwd_calls, bwd_calls;
} mc_plan_cp_t;
void mc_plan_cp_layer(const mc_args_t *a, const mc_cluster_t *cl, int layer, double core_f,
                      double core_b, mc_plan_cp_t *out);

/* Seconds of `batch` GEMMs [M,K] x [K,N] in e-byte values: the slower of the tensor cores
 * (the cuBLAS ceiling times the wave quantisation of 256x128 output tiles over the SMs) and
 * the memory traffic. *eff (may be NULL): the fraction of peak reached. */
double mc_plan_gemm_seconds(const mc_gpu_t *g, double batch, double M, double N, double K, double e,
                            double *eff);

/* One layer's forward GEMMs on one GPU (M x N x K: linear_qkv, linear_proj, linear_fc1,
 * linear_fc2 with this tp's slices): what the time model charges and the report lists. */
#define MC_PLAN_LAYER_GEMMS 4
extern const char *const mc_plan_layer_gemm_names[MC_PLAN_LAYER_GEMMS];
void mc_plan_layer_gemms(const mc_args_t *args, double shapes[MC_PLAN_LAYER_GEMMS][3]);

/* --tp-comm-overlap (plan/tp_overlap.c): the seconds one layer's sequence-parallel collectives
 * add beyond its GEMMs, forward, backward and the recomputed forward (rc), with Transformer
 * Engine's default userbuffers methods; share < 1: an MoE layer, the attention pair alone. */
double mc_plan_tp_overlap_layer(const mc_args_t *a, const mc_gpu_t *g, double gbps, double e,
                                double share, bool rc);

/* The model's parameters (plan/moe.c), counted from the flags as Megatron's modules hold them:
 * all of them, those one token goes through (top-k of each MoE layer's experts), and of the
 * total the routed experts'; the MoE layers of --moe-layer-freq. */
typedef struct {
    double total, active, experts;
    int moe_layers;
} mc_plan_params_t;
void mc_plan_params(const mc_args_t *args, mc_plan_params_t *out);
/* The expert parameters on one rank of pipeline stage pp_rank: E/ep experts of 1/etp each in
 * each of its MoE layers (*moe_layers, may be NULL). */
double mc_plan_rank_expert_params(const mc_args_t *args, int pp_rank, int *moe_layers);
/* The expert-data-parallel size: dp x cp x tp / (ep x etp) (Megatron's parallel folding). */
int mc_plan_edp(const mc_args_t *args);

/* One MoE layer's forward for one microbatch on one GPU, balanced routing (plan/moe.c): the
 * router's and the experts' (and a shared expert's) GEMMs, the permutation's memory traffic,
 * the dispatcher's all-to-alls over ep and its all-gather/reduce-scatter over etp, or the allgather
 * dispatcher's collectives over etp x ep (seconds, bytes and calls as the comm layer counts them,
 * the larger of a rank's input and output). The backward repeats the traffic (without the
 * allgather dispatcher's map) and doubles the GEMMs. */
typedef struct {
    double gemm_f, mem_f, a2a_f, etp_f;
    double a2a_bytes, etp_bytes;
    int a2a_calls, etp_calls;
    /* the allgather dispatcher's (--moe-token-dispatcher-type allgather, its collectives in the
     * a2a fields): the routing map's all-gather, a forward-only call (0 with alltoall) */
    double map_bytes;
} mc_plan_moe_t;
void mc_plan_moe_layer(const mc_args_t *args, const mc_cluster_t *cl, mc_plan_moe_t *out);

/* The memory plan on the cluster's GPU (mc_trainer_memory on the sizing backend) and its total
 * in bytes. */
double mc_plan_memory(const mc_args_t *args, const char *device, mc_memory_plan_t *out);

/* Validation as the command line's: the number of problems, the first in first[0..n). */
typedef int (*mc_plan_check_fn)(mc_args_t *args, int world_size, char *first, size_t n);

typedef struct {
    mc_args_t args; /* the candidate, validated */
    mc_memory_plan_t mem;
    mc_plan_time_t time;
    double memory; /* bytes per GPU, the largest stage */
} mc_plan_candidate_t;

/* --search: every layout of the model and batch on the cluster that validates and fits,
 * ranked by predicted tokens/s; the best `top` in best[] (count returned), *tried and *fitting
 * counted. base: the command line's arguments before validation (its layout is replaced);
 * vocab: the tokenizer's vocabulary, padded per tp size (0: base's --padded-vocab-size). */
int mc_plan_search(const mc_args_t *base, const mc_cluster_t *cl, mc_plan_check_fn check,
                   int64_t vocab, int top, mc_plan_candidate_t *best, int *tried, int *fitting);

/* Printing: the memory and time of one plan; the flags that select a candidate's layout. */
void mc_plan_print(FILE *out, const mc_args_t *args, const mc_cluster_t *cl, const char *device,
                   const mc_memory_plan_t *mem, const mc_plan_time_t *t);
void mc_plan_layout_flags(const mc_args_t *a, char *buf, size_t n);

#endif
