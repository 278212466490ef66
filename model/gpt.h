/* GPT model (MEGATRON.md section 6, MCore local spec) with explicit forward and backward over
 * buffers planned at start-up (DESIGN decision 1). A model is this rank's part: its tp slice of
 * every tensor, and its pipeline model chunks (virtual stages), each a contiguous range of
 * global layers, the first one with the embedding and the last one with the final norm, output
 * layer and loss. The parameter table carries each tensor's global identity (name with the
 * global layer number, full shape), so any layout initialises and trains the same model.
 *
 * Activations live in slots: one slot holds one microbatch's activations through one chunk. The
 * chunks without the loss share one group of slots (sized for the largest of them), the chunk
 * with the loss has its own (its slots also hold the logits); each group has as many as the
 * pipeline schedule keeps in flight at once (parallel/pipeline.c counts them). Workspaces are
 * shared. */
#ifndef MC_MODEL_GPT_H
#define MC_MODEL_GPT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "kernels/moe_route.h"
#include "comm/comm.h"
#include "config/cp_layout.h"
#include "model/param_names.h"
#include "model/tp.h"

/* Activation recomputation (Megatron's --recompute-granularity / --recompute-method). */
typedef enum {
    MC_RECOMPUTE_NONE,
    MC_RECOMPUTE_SELECTIVE,    /* core attention: softmax probabilities are recomputed */
    MC_RECOMPUTE_FULL_UNIFORM, /* chunks of recompute_num_layers layers keep only their input */
    MC_RECOMPUTE_FULL_BLOCK,   /* the first recompute_num_layers layers keep only their input */
} mc_recompute_t;

#define MC_MAX_CHUNKS 64

/* One model chunk of this rank (a virtual pipeline stage). */
typedef struct {
    int first_layer, n_layers; /* global layers [first_layer, first_layer + n_layers) */
    bool pre, post; /* embedding (first virtual stage) / final norm, output, loss (last) */
} mc_chunk_cfg_t;

/* Position embeddings (--position-embedding-type); 0 is the default of a zeroed config. */
typedef enum {
    MC_POS_LEARNED = 0, /* learned_absolute: embedding.position_embeddings */
    MC_POS_ROPE,        /* rotary embeddings on queries and keys */
    MC_POS_NONE,        /* none */
} mc_pos_t;

/* Rotary embeddings (Megatron's RotaryEmbedding): frequencies of rot_dim / 2 pairs. */
typedef struct {
    int rot_dim;      /* int(head_dim * rotary_percent), even */
    bool interleaved; /* pairs (2i, 2i+1); else (i, i + rot_dim/2) */
    double base;      /* rotary_base */
    int interp;       /* seq_len_interpolation_factor; 0 = none */
    double scaling;   /* Llama 3.1 frequency scaling factor (use_rope_scaling); 0 = none */
} mc_rope_cfg_t;

/* The router's losses (router.py; model/moe_loss.c), in the order Megatron's training_log tracks
 * them: aux_loss, seq_aux_loss, global_aux_loss (--moe-router-load-balancing-type) and the
 * z-loss (--moe-z-loss-coeff). */
typedef enum {
    MC_MOE_AUX,
    MC_MOE_SEQ_AUX,
    MC_MOE_GLOBAL_AUX,
    MC_MOE_Z,
    MC_MOE_LOSSES
} mc_moe_loss_t;

/* Mixture of experts (Megatron's MoELayer, model/moe.c): the layers whose MLP is a router and
 * experts. Each rank holds E/ep experts, each split over etp (parallel folding), each layer's tokens
 * (this rank's sequence rows under tensor parallelism) go to their top-k experts (each expert
 * taking at most its capacity of them with --moe-expert-capacity-factor), and the losses enter
 * the router's gradient. */
#define MC_MOE_MAX_LAYERS 1024
typedef struct {
    int num_experts;        /* --num-experts; 0: a dense model */
    int ffn;                /* --moe-ffn-hidden-size */
    mc_moe_router_t router; /* the TopKRouter's settings */
    /* aux-loss-free balancing (--moe-router-enable-expert-bias, sigmoid scores): each MoE layer's
     * expert bias chooses the experts, updated once per global batch by this rate */
    bool expert_bias;
    float bias_update_rate;
    /* token dropping (--moe-expert-capacity-factor, apply_router_token_dropping): each expert
     * keeps at most get_capacity(T * topk, E, capacity_factor) of a microbatch's T tokens on this
     * rank, the best by probability or (drop_by_position) the first; pad_to_capacity
     * (--moe-pad-expert-input-to-capacity): every expert takes exactly that many rows */
    bool drop;
    double capacity_factor;
    bool drop_by_position, pad_to_capacity;
    /* each loss's coefficient (0: not computed, as Megatron's coeff == 0 / None), and whether
     * training_log tracks (logs) it: its track_names */
    double coeff[MC_MOE_LOSSES];
    bool tracked[MC_MOE_LOSSES];
    bool layer[MC_MOE_MAX_LAYERS]; /* --moe-layer-freq: layer i's MLP is an MoE layer */
    /* expert parallelism: this rank holds experts [ep_rank * E/ep, (ep_rank + 1) * E/ep), the
     * token dispatcher's all-to-all runs over mc_gpt_t.ep_group (ep 0 or 1: every expert) */
    int ep, ep_rank;
    /* expert tensor parallelism (--expert-tensor-parallel-size, Megatron's expt_tp): each expert's
     * linear_fc1 rows (each SwiGLU half's) and linear_fc2 columns split over mc_gpt_t.etp_group,
     * this rank holding block etp_rank (etp 0 or 1: whole experts) */
    int etp, etp_rank;
    /* --moe-token-dispatcher-type allgather: with ep or etp > 1 the allgather dispatcher
     * (model/moe_allgather.c: every token gathered over tp_ep = etp x ep) instead of the
     * alltoall one */
    bool allgather;
    /* the shared expert (--moe-shared-expert-intermediate-size; 0: none): a dense tp MLP of
     * this ffn over the layer's input, added to the routed output; gated by sigmoid(x @
     * gate_weight) (--moe-shared-expert-gate); run after the router, not before it
     * (--moe-shared-expert-overlap: the same numbers) */
    int shared_ffn;
    bool shared_gate, shared_overlap;
    /* --calculate-per-token-loss: each loss's gradient times the layer's local tokens (router.py
     * attach_and_log_load_balancing_loss, apply_z_loss), undoing finalize_model_grads' division
     * by the global token count */
    bool per_token_loss;
    /* the router's type (--moe-router-dtype fp32, else the run's): its logits, scores,
     * probabilities and losses, and the probabilities through the dispatcher into the experts
     * (RouterGatingLinearFunction: the 16-bit input and weight cast to it) */
    mc_dtype_t rdt;
} mc_moe_cfg_t;

/* Whether the MoE layer's token dispatcher moves tokens between ranks (ep > 1 or etp > 1). */
static inline bool mc_moe_dispatched(const mc_moe_cfg_t *q) { return q->ep > 1 || q->etp > 1; }

/* Slot groups: the chunks without the loss, and the chunk with it. */
#define MC_SLOT_GROUPS 2

typedef struct {
    int num_layers, hidden, heads, head_dim, ffn; /* num_layers: the whole model's */
    int groups; /* query groups (grouped-query attention); 0 or heads: multi-head attention */
    int seq, max_batch; /* activations are planned for max_batch sequences */
    int vocab;          /* padded vocabulary */
    int max_pos;
    float eps;
    bool bias;             /* add_bias_linear */
    bool qkv_bias;         /* --add-qkv-bias: a linear_qkv bias without the others */
    bool tied;             /* output layer shares the word embeddings */
    bool rms;              /* RMSNorm (weight only) wherever a LayerNorm is */
    bool qk_norm;          /* --qk-layernorm: q_layernorm and k_layernorm on each head */
    bool wd_qk_norm;       /* --apply-wd-to-qk-layernorm: their parameters decay */
    bool norm_1p;          /* --apply-layernorm-1p: every norm computes with (1 + weight) */
    mc_act_t act;          /* the MLP's activation, without swiglu */
    bool swiglu;           /* gated MLP: linear_fc1 gives [gate | up], silu(gate) * up */
    mc_pos_t pos;          /* position embeddings */
    mc_rope_cfg_t rope;    /* with pos == MC_POS_ROPE */
    bool post_ln_residual; /* --apply-residual-connection-post-layernorm */
    float hidden_dropout, attention_dropout;
    float init_std, embedding_init_std;
    /* Maximal Update Parametrization (config/mup.h); 0 = off: the softmax scale is then
     * 1/sqrt(head_dim), no multiplier applies, and an untied output layer starts like the
     * hidden weights (init_std) */
    float softmax_scale, embedding_mult, output_mult, output_layer_init_std;
    uint64_t seed;
    mc_dtype_t dt;          /* parameters and activations: fp32, or bf16/fp16 (--bf16, --fp16) */
    mc_dtype_t gdt;         /* parameter gradients (Megatron's main_grad buffer) */
    int tp, tp_rank;        /* tensor parallelism: this rank's heads, ffn and vocab slice */
    bool sequence_parallel; /* with tp > 1: LayerNorm/dropout regions split along the sequence */
    mc_tp_overlap_t tp_overlap; /* --tp-comm-overlap (chunks 0: off) */
    /* context parallelism: seq is this rank's rows of the seq_full positions, chunks cp_rank
     * and 2cp-1-cp_rank of 2cp (config/cp_layout.h); cp_a2a is a2a+p2p's a2a level */
    int cp, cp_rank, cp_a2a, seq_full;
    int cp_comm_one;                          /* every layer's mc_cp_comm_t, or -1: */
    unsigned char cp_comm[MC_MAX_LAYER_LIST]; /* each global layer's (--cp-comm-type per layer) */
    mc_recompute_t recompute;                 /* activation recomputation */
    int recompute_num_layers; /* uniform: layers per recomputed chunk; block: recomputed layers */
    int n_chunks;             /* model chunks on this rank: vpp (1 without interleaving) */
    mc_chunk_cfg_t chunk[MC_MAX_CHUNKS]; /* default: one chunk of every layer, pre and post */
    int slots[MC_SLOT_GROUPS]; /* activation slots per group (microbatch x chunk in flight) */
    mc_moe_cfg_t moe;          /* mixture of experts */
    /* torch_dist keys per layer (decoder.layers.<l>.<name>, no stacking axis): Megatron's
     * TransformerBlock.sharded_state_dict with non_homogeneous_layers, which --moe-layer-freq
     * as a list or an int > 1 sets */
    bool dist_per_layer;
    /* --defer-embedding-wgrad-compute: the chunk with the loss keeps the output layer's weight
     * gradient of a step's first defer_wgrad_limit microbatches (0: every one) for
     * mc_gpt_drain_output_wgrad, their inputs and output gradients held in defer_wgrad buffers
     * (the most a step defers; 0: off) */
    int defer_wgrad, defer_wgrad_limit;
} mc_gpt_config_t;

/* The attention's softmax scale: Megatron's 1/sqrt(kv_channels), or MuP's */
static inline float mc_gpt_softmax_scale(const mc_gpt_config_t *c)
{
    return c->softmax_scale > 0 ? c->softmax_scale : 1.0f / sqrtf((float)c->head_dim);
}

/* Whether the experts' groups differ from the dense layers' (ep > 1 or etp != tp): their
 * gradients then reduce over edp in buckets of their own and their norms over the expert
 * model-parallel group (Megatron's expert_parallel_buffers and chained optimizer). */
static inline bool mc_moe_folded(const mc_gpt_config_t *c)
{
    const int etp = c->moe.etp > 1 ? c->moe.etp : 1, tp = c->tp > 1 ? c->tp : 1;
    return c->moe.num_experts && (c->moe.ep > 1 || etp != tp);
}

/* The expert-data-parallel size of a dense dp (x cp 1) of dp ranks: dp * tp / (etp * ep). */
static inline int mc_moe_edp(const mc_gpt_config_t *c, int dp)
{
    const int etp = c->moe.etp > 1 ? c->moe.etp : 1, tp = c->tp > 1 ? c->tp : 1;
    const int ep = c->moe.ep > 1 ? c->moe.ep : 1;
    return dp * tp / (etp * ep);
}

static inline int mc_gpt_slot_group(const mc_gpt_config_t *c, int chunk)
{
    return c->chunk[chunk].post ? 1 : 0;
}

/* One parameter tensor: Megatron state-dict name (global layer numbers) and full shape; this
 * rank holds the tp slice given by split. */
typedef struct {
    char name[96];
    mc_pkind_t kind; /* its row of the names table (model/param_names.h) */
    int layer;       /* global layer number; -1 outside the layers */
    int expert;      /* an MoE layer's expert's (model/moe.c): its number; -1 otherwise */
    int ndim;
    int64_t shape[2]; /* full, unsharded */
    mc_split_t split;
    int shard_rank;    /* this rank's block of the split: its tp rank (its etp rank: experts) */
    int64_t local[2];  /* this rank's slice */
    long numel;        /* of the slice */
    bool seq_parallel; /* its gradient is a partial sum, summed over tp per step: a norm's
                          under sequence parallelism (this rank's sequence rows), and
                          q/k_layernorm's always (this rank's heads) */
    long offset;       /* element offset in the flat parameter / gradient buffers */
    float init_std;    /* > 0: N(0, std); otherwise the constant init_value */
    float init_value;
    bool no_wd;            /* Megatron's no-decay group: biases and 1-D params */
    bool shared_embedding; /* tied word embedding split across pipeline stages (Megatron's
                              shared_embedding): the first stage's word embeddings and the last
                              stage's output_layer copy, gradients all-reduced between them */
    bool shared;           /* the last stage's copy: left out of norms and zero counts (Megatron's
                         param_is_not_shared) */
    bool embedding_or_output; /* Megatron's is_embedding_or_output_parameter: the word embeddings
                                 and output_layer.weight (also the last stage's tied copy), which
                                 --decoupled-lr applies to */
    bool mup_hidden;          /* MuP's hidden (matrix-like) parameter: not vector-like, i.e. 2-D and
                        not an embedding parameter (word and position embeddings, the output
                        layer); --use-mup scales its lr and Adam eps by 1/width_mult */
} mc_param_t;

/* The row of the full tensor that local row r of p holds on tp rank tp_rank. */
static inline int64_t mc_param_full_row(const mc_param_t *p, int tp_rank, int64_t r)
{
    const int64_t rows = p->local[0], half = rows / 2;
    if (p->split == MC_SPLIT_ROWS) return tp_rank * rows + r;
    if (p->split == MC_SPLIT_ROWS_GLU)
        return (r < half ? 0 : p->shape[0] / 2 - half) + tp_rank * half + r;
    return r;
}

/* Pointers into a flat buffer (params, of type cfg.dt, or their grads, of type cfg.gdt) by kind
 * of parameter: one transformer layer's, and the model's (the embeddings, final norm and output
 * layer; the output layer's is the word embeddings' when tied). NULL where the model has none. */
typedef struct {
    void *t[MC_PK_COUNT];
} mc_layer_ptrs_t;

typedef struct {
    void *t[MC_PK_COUNT];
    mc_layer_ptrs_t *layers;
} mc_gpt_ptrs_t;

/* ---- saved activations ([s, b, *] layout, of type cfg.dt; norm statistics fp32) ---- */

/* A norm's (model/norm.c): its output and statistics (RMSNorm keeps no mean). */
typedef struct {
    void *out;
    float *mean, *rstd;
} mc_norm_acts_t;

/* Self-attention's (model/attention.c). */
typedef struct {
    void *qkv;                /* linear_qkv's output [S*B*QKV/tp], queries and keys rotated */
    void *qkv_in;             /* --qk-layernorm: linear_qkv's output, the norms' input */
    float *qk_mean, *qk_rstd; /* their statistics, per query and key head */
    void *state; /* what the backend's attention backward needs (the CPU's probabilities) */
    void *out;   /* core attention's output [S*B*A/tp] */
    /* context parallelism's state (model/cp_attention.c): the ring's and the all-gather's
     * merged log-sum-exp [S, B, heads/tp] (fp32); a2a's queries, keys and values after the
     * all-to-all, the output before it, and the whole-sequence op's state */
    float *cp_lse;
    void *cp_qkv, *cp_out, *cp_state;
} mc_attention_acts_t;

/* The dense MLP's (model/mlp.c). */
typedef struct {
    void *fc1; /* linear_fc1's output, the activation's input [S*B*FFN1/tp] */
    void *act; /* the activation's output [S*B*FFN/tp] */
} mc_mlp_acts_t;

/* An MoE layer's (model/moe.c), for T = S*B tokens, E experts and R = T * topk routed rows (padded
 * to capacity: E * capacity, when more). */
typedef struct {
    void *logits, *probs; /* the router's [T, E] (router type: the activations') */
    uint8_t *map;         /* [T, E]: the chosen experts */
    float *aux_counts;    /* [E]: tokens per expert, the aux loss's (fp32) */
    int32_t *rows;        /* [R]: the token of each permuted row (expert by expert) */
    int32_t *row_of;      /* [T, E]: the permuted row of (token, expert), -1 where not routed */
    void *pprobs;         /* [R]: each row's probability */
    void *x;              /* [R, H]: the permuted input */
    void *fc1;            /* [R, FFN1]: the experts' linear_fc1 output */
    void *act;            /* [R, FFN]: the activation's output */
    void *scaled;         /* [R, FFN]: act times the row's probability, linear_fc2's input */
    /* ep > 1: the rows this rank's experts received (Rr of them, local expert by local expert,
     * source rank by source rank), the experts' input and probabilities; x and pprobs at ep 1.
     * fc1, act and scaled are of these rows. */
    void *ex_x, *ex_p;
    /* the allgather dispatcher (model/moe_allgather.c), of the tokens gathered over tp_ep (n T of
     * them): the gathered token of each local expert's row [Rr], the row of each (gathered token,
     * expert) [n T, E] (-1 outside the local experts), the local experts' rows [E/ep] (int32);
     * NULL with the alltoall dispatcher (rows, row_of, pprobs and x are NULL with this one) */
    int32_t *ag_rows, *ag_row_of, *ag_split;
    /* the losses' token counts the backward reads (model/moe_loss.c, fp32): seq_aux_loss's per
     * sequence [B, E] and global_aux_loss's running average [E]; NULL without them */
    float *seq_counts, *global_counts;
    /* with token dropping: the map and probs after it ([T, E]: the capacity's), which the
     * dispatcher and the experts use; map and probs stay the top-k's; NULL without it */
    uint8_t *cap_map;
    void *cap_probs;
    /* the shared expert's (model/moe_shared.c): its MLP's; with its gate, the MLP's output
     * [T, H] and the gate's logits and sigmoid [T] (NULL without) */
    mc_mlp_acts_t shared;
    void *sh_out, *sh_logit, *sh_gate;
} mc_moe_acts_t;

/* One transformer layer's, for the backward pass: the residual stream and the norms (the
 * driver's, model/gpt.c), and each block's own, of the kind the layer's spec picked (a new kind
 * of block adds its struct to the union). x of a chunk's first layer is the slot's input. */
typedef struct {
    void *x;     /* layer input (residual stream) [S/tp-if-SP*B*H] */
    void *x_mid; /* the residual stream after attention */
    mc_norm_acts_t ln1, ln2;
    union {
        mc_attention_acts_t self;
    } attn;
    /* both kinds of MLP: a slot's layer j may be a dense layer in one model chunk and an MoE
     * layer in another (--moe-layer-freq); only the kinds it takes are planned */
    struct {
        mc_mlp_acts_t dense;
        mc_moe_acts_t moe;
    } mlp;
} mc_layer_acts_t;

/* Workspaces of the blocks, shared by every layer of their kind. */
typedef struct {
    void *d_qkv;                /* the gradient at linear_qkv's output */
    void *scratch;              /* the backend's attention backward scratch */
    void *state;                /* selective recomputation: one layer's attention state */
    float *rope_cos, *rope_sin; /* rotary embeddings: [S, rot_dim/2] angle tables (fp32) */
    /* selective recomputation with context parallelism: one layer's cp state */
    float *cp_lse;
    void *cp_qkv, *cp_out, *cp_state;
} mc_attention_ws_t;

/* Context parallelism's workspace (model/cp_attention.c): the ring's key/value buffers and
 * their gradients, the fp32 accumulators of the merge, the all-to-all's staging, the
 * all-gather's whole-sequence keys and values. NULL where no layer's comm type needs them. */
typedef struct {
    void *kv[2];              /* [S, B, 2*groups/tp*HD] (dt): held and arriving */
    float *dkv[2];            /* the same, fp32: the gradient travelling with them */
    float *acc, *dq;          /* [S, B, heads/tp*HD] fp32: merged output, query gradient */
    float *part, *plse;       /* one block's output and statistics (fp32) */
    void *scratch;            /* the block ops' (attention_block_sizes) */
    void *send, *recv;        /* all-to-all staging [S, B, max(qkv, out) width] (dt) */
    void *dout2, *dqkv2;      /* a2a: the output gradient and qkv gradient after the all-to-all */
    void *bwd_scratch;        /* a2a: the whole-sequence op's backward scratch */
    void *kv_all, *kv_seq;    /* all-gather: [seq_full, B, 2*groups/tp*HD] (dt) by rank, in order */
    float *dkv_seq, *dkv_all; /* their gradients (fp32) */
} mc_cp_ws_t;

typedef struct {
    void *d_fc1; /* the gradient at linear_fc1's output [S*B*FFN1/tp] */
    void *d_act; /* SwiGLU: the gradient at the activation's output [S*B*FFN/tp] */
} mc_mlp_ws_t;

/* The MoE layers' (model/moe.c): gradients along the experts' path and the router's, and the
 * host copies of the token counts (the grouped GEMM's sizes). */
typedef struct {
    void *y, *d_y;          /* [R, H]: linear_fc2's output; the gradient at it */
    void *d_scaled, *d_act; /* [R, FFN] */
    void *d_fc1;            /* [R, FFN1] */
    void *d_x;              /* [R, H] */
    void *d_pprobs;         /* [R] */
    void *dprobs, *dlogits; /* [T, E] */
    /* a router type other than the run's: the input and router.weight cast to it [T, H], [E, H],
     * the weight's gradient in it [E, H] and rounded to the weight's type (NULL otherwise) */
    void *r_in, *r_w, *r_dw, *r_dwt;
    float *psum;     /* [E]: the aux loss's summed scores */
    float *seq_psum; /* [B, E]: seq_aux_loss's, per sequence (NULL without it) */
    int32_t *counts; /* [E]: tokens per expert (device) */
    uint8_t *kept;   /* [T, E]: padding to capacity, the routed tokens kept (the log's) */
    long split[MC_MOE_MAX_EXPERTS];
    int32_t counts_host[MC_MOE_MAX_EXPERTS];
    /* each expert's linear_fc1 and linear_fc2 weights and gradients (parameters of their own,
     * wherever the buffers' layout puts them): the grouped GEMMs' pointer arrays */
    void *fc1[MC_MOE_MAX_EXPERTS], *fc2[MC_MOE_MAX_EXPERTS];
    void *dfc1[MC_MOE_MAX_EXPERTS], *dfc2[MC_MOE_MAX_EXPERTS];
    /* ep > 1 or etp > 1 (model/moe.c's dispatcher): two staging buffers of rows [Rmax, H] and
     * their probabilities [Rmax], the gradients at the experts' input and probabilities of the
     * rows they take (Rr), and the host plan of one layer's exchange: each ep rank's counts for
     * this rank's experts [ep][E/ep] (int32, from every rank's counts_host), those of every etp
     * rank [etp][ep][E/ep], the local experts' rows (the grouped GEMM's sizes), rows sent to and
     * received from each ep rank, each etp rank's rows after the all-to-all, and the gathered
     * chunks' sizes and orders (etp-rank, ep-rank, local-expert-major <-> local-expert-major) */
    void *st_h[2], *st_p[2], *d_x_ex, *d_pprobs_ex;
    int32_t all_counts[MC_MOE_MAX_EXPERTS];
    void *host_block;    /* the host arrays below, one allocation */
    int32_t *etp_counts; /* [etp * E] (host) */
    long split_local[MC_MOE_MAX_EXPERTS];
    size_t send_rows[MC_MOE_MAX_EXPERTS], recv_rows[MC_MOE_MAX_EXPERTS];
    size_t *etp_rows;                      /* [etp] (host) */
    long *chunk_by_rank, *chunk_by_expert; /* [etp * E] (host) */
    int *to_expert_major, *to_rank_major;  /* [etp * E] (host) */
    /* the allgather dispatcher's: the gathered tokens' rows [n T, H] (input, output and their
     * gradients in turn), probs [n T, E] (and their gradient), routing map [n T, E] and its host
     * copy (this rank's experts' columns kept; host, allocated at first use) */
    void *ag_h, *ag_probs;
    uint8_t *ag_map, *ag_map_host;
    /* the shared expert's (model/moe_shared.c): its MLP's workspace; [T, H] its (ungated)
     * output in the forward, the gradient at it in the backward; [T, H] the gradient at the
     * layer's input through it, and through the gate; [T] the gate's and its logits' gradients */
    mc_mlp_ws_t shared;
    void *sh_y, *sh_din, *sh_din_gate, *sh_dgate, *sh_dlogit;
    uint8_t *sh_map; /* [T]: the gate's sigmoid runs as a router of one expert; its map */
} mc_moe_ws_t;

/* One microbatch's activations through one chunk. */
typedef struct {
    int batch;                   /* rows of the microbatch */
    uint64_t sample0;            /* its first global sample index (dropout key) */
    int32_t *tokens, *positions; /* [B*S] (pre chunk) */
    int32_t *labels;             /* [B*S] (post chunk) */
    float *loss_mask;            /* [B*S] (post chunk) */
    int32_t *segments_buf;       /* [B*S]: per-document attention (--reset-attention-mask) */
    const int32_t *segments;     /* segments_buf for such a microbatch, else NULL */
    /* activations and their gradients are of type cfg.dt */
    void *in;   /* chunk input [S/tp-if-SP, B, H]: received or the embedding output; after the
                      backward, the gradient w.r.t. it (what is sent to the previous stage) */
    void *out;  /* chunk output (not post): the next layer's input, sent to the next stage */
    void *dout; /* gradient w.r.t. the output, received from the next stage (not post) */
    mc_layer_acts_t *acts;              /* [n_layers]; recomputed layers point into m->rc */
    void *x_final;                      /* post chunk: the last layer's output */
    mc_norm_acts_t lnf;                 /* post chunk: the final norm's */
    void *logits;                       /* [S*B*V/tp], reused for dlogits */
    float *ce_max, *ce_sum, *ce_target; /* [S*B] vocab-parallel loss statistics */
    float *losses;                      /* [B*S] */
    /* the forward formed the loss gradient in logits (ce_fused) with this weight: > 0 */
    float grad_weight;
} mc_gpt_slot_t;

/* Called with a range of parameter table indices [first, first + n). */
typedef void (*mc_param_hook_t)(void *ctx, int first, int n);

struct mc_layer_spec;
struct mc_norm_ops;

typedef struct mc_gpt {
    mc_gpt_config_t cfg;
    const mc_backend_t *be;

    int n_params, cap_params;
    mc_param_t *params;              /* the embeddings (pre chunk), each local layer in chunk order,
                                    then the final norm and the output layer when untied or on a
                                    stage without the embedding (post chunk) */
    long n_elems;                    /* flat buffer length (parameters and padding) */
    int n_local_layers;              /* layers on this rank, chunk after chunk */
    int *layer_no;                   /* [n_local_layers]: global layer index of each */
    int *layer_param;                /* [n_local_layers + 1]: table index of each one's first
                                    parameter, then of the first after the layers */
    int chunk_local0[MC_MAX_CHUNKS]; /* local index of each chunk's first layer */
    /* the blocks of each local layer (model/layer_spec.h), and the final norm */
    const struct mc_layer_spec **spec;
    const struct mc_norm_ops *final_norm;
    /* Data-parallel hooks (parallel/grads.c), NULL when unused. grads_final: during backward, the
     * gradients of these parameters are complete for this microbatch. params_needed: in forward,
     * just before these parameters are first read. */
    mc_param_hook_t grads_final_hook, params_needed_hook;
    void *hook_ctx;
    /* Tensor parallelism: the all-reduces of column/row-parallel layers and the vocab-parallel
     * loss run over tp_group (NULL with tp = 1). */
    mc_comm_t *comm;
    mc_group_t *tp_group;
    /* Context parallelism: the cp group, and --hierarchical-context-parallel-sizes' a2a and p2p
     * levels (NULL without them) */
    mc_group_t *cp_group, *cp_a2a_group, *cp_p2p_group;
    /* Expert parallelism: the MoE dispatcher's ep group (NULL with ep 1) and its etp group
     * (expt_tp: the all-gather and reduce-scatter around the experts; NULL with etp 1) */
    mc_group_t *ep_group, *etp_group;
    /* the allgather dispatcher's group (tp_ep: expt_tp x ep; NULL with ep x etp 1) */
    mc_group_t *tp_ep_group;
    void *param_buf, *grad_buf; /* of types cfg.dt and cfg.gdt */
    mc_gpt_ptrs_t p, g;

    /* activations: slots[g][k] is slot k of group g; cur is the one in flight */
    mc_gpt_slot_t *slots[MC_SLOT_GROUPS];
    mc_gpt_slot_t *cur;
    int cur_chunk;
    float *dloss;        /* [B*S] */
    float loss_scale;    /* the backward starts from the loss times this (fp16) */
    mc_layer_acts_t *rc; /* full recomputation: buffers of one recomputed chunk */
    /* the driver's workspace (type cfg.dt): a whole-sequence row-parallel output and its
     * gradient (tmp_h, dtmp_h, also the blocks' scratch), the gradients at a norm's output (dx)
     * and at the residual stream (dres), and the sequence gathered for a column-parallel layer
     * under sequence parallelism (gath, [S*B*H]) */
    void *tmp_h, *dtmp_h, *dx, *dres, *gath;
    mc_attention_ws_t attn_ws;
    mc_cp_ws_t cp_ws;
    mc_mlp_ws_t mlp_ws;
    mc_moe_ws_t moe_ws;
    /* MoE: the gradient the losses enter the backward with (Megatron's MoEAuxLossAutoScaler
     * scale: the loss scale / the microbatches; the trainer sets it); the tracker of the logged
     * losses (save_to_aux_losses_tracker: loss / coeff summed per global layer in float32,
     * [MC_MOE_LOSSES][num_layers], since the last mc_gpt_moe_take_losses); global_aux_loss's
     * running token counts and steps per local layer ([n_local_layers][E], [n_local_layers],
     * reset by mc_gpt_moe_step_end); the group its counts are summed over (tp x dp x cp) */
    float moe_aux_grad;
    float *moe_tracker;
    float *moe_global_tokens, *moe_ga_steps;
    mc_group_t *tp_dp_cp_group;
    /* --moe-router-enable-expert-bias (model/moe_bias.c): each local layer's expert_bias
     * ([n_local_layers][E] fp32, device; Megatron's persistent buffer) and its
     * local_tokens_per_expert (host, summed over this global batch's training forwards) */
    float *moe_expert_bias, *moe_local_tokens;
    /* token dropping: the routed (token, expert) assignments of this rank's training forwards
     * and those dropped for capacity, since the last mc_gpt_moe_take_dropped (the log's) */
    double moe_routed, moe_dropped;
    /* --apply-layernorm-1p (model/norm.c): the weights the norms compute with, 1 + w, formed
     * from the parameters each time a block's parameters are needed (m->p points there);
     * norm_1p[i] is parameter i's (NULL for the others), norm_1p_ones a vector of ones */
    void **norm_1p;
    void *norm_1p_eff, *norm_1p_ones;
    /* --defer-embedding-wgrad-compute (model/output.c): per deferred microbatch of this step
     * (defer_n of them, in backward order), the output layer's sequence-local input (the final
     * norm's output), its output gradient (dlogits) and its batch; Megatron's
     * embedding_activation_buffer and grad_output_buffer */
    void **defer_in, **defer_dout;
    int *defer_batch, defer_n;
    void **bufs; /* every activation/workspace buffer, for freeing */
    int n_bufs, cap_bufs;
    float *host_losses; /* [B*S] host copy for the loss reduction */
} mc_gpt_t;

/* A microbatch as the dataset yields it: [b, s] row-major, on the host. */
typedef struct {
    int b, s;
    const int32_t *tokens, *labels, *positions;
    const float *loss_mask;
    const int32_t *segments; /* [b, s] document numbers for --reset-attention-mask, or NULL */
    uint64_t sample0;        /* global index of row 0, keys dropout masks */
    /* The weight of this microbatch's loss in the objective when it is known before its forward
     * (d objective / d loss[b,s] = loss_mask * loss_weight): a training forward of the post chunk
     * then forms the loss gradient with the loss, in one pass over the logits, and the backward
     * must be given the same weight. 0: the backward forms it. */
    float loss_weight;
    /* The host arrays above are the backend's alloc_host memory: copied to the device
     * asynchronously (unchanged until the step's next synchronize). */
    bool pinned;
    /* alloc_host memory of [b, s] floats, or NULL. Given, the post chunk's forward copies its
     * per-token losses there asynchronously and returns NAN as the loss sum: after a
     * synchronize, mc_gpt_loss_sum(mb, losses_out) is that sum. NULL: copied and summed at once. */
    float *losses_out;
} mc_microbatch_t;

/* Builds the parameter table and sizes; allocates nothing. */
void mc_gpt_build_params(mc_gpt_t *m, const mc_gpt_config_t *cfg);
/* Bytes needed by mc_gpt_alloc for params, grads, activations, workspace. */
void mc_gpt_memory(const mc_gpt_t *m, const mc_backend_t *be, long *param_bytes, long *grad_bytes,
                   long *act_bytes, long *ws_bytes);
/* Allocates all buffers on the backend; returns 0 or -1 (out of memory). */
int mc_gpt_alloc(mc_gpt_t *m, const mc_backend_t *be);
void mc_gpt_free(mc_gpt_t *m);

/* Sums the LayerNorm gradients over tp under sequence parallelism (Megatron's
 * finalize_model_grads); once per step, after the microbatches. No-op otherwise. */
void mc_gpt_reduce_sequence_parallel_grads(mc_gpt_t *m);

/* Layout-invariant init (DESIGN decision 6). */
void mc_gpt_init_params(mc_gpt_t *m);
const mc_param_t *mc_gpt_find_param(const mc_gpt_t *m, const char *name);
/* Points out->* at the named tensors of a flat buffer of type dt laid out like the parameter
 * table. */
void mc_gpt_bind_ptrs(const mc_gpt_t *m, void *base, mc_dtype_t dt, mc_gpt_ptrs_t *out);
/* Element `offset` of the parameter or gradient buffer. */
static inline void *mc_gpt_param_at(const mc_gpt_t *m, long offset)
{
    return mc_elem(m->param_buf, m->cfg.dt, offset);
}
static inline void *mc_gpt_grad_at(const mc_gpt_t *m, long offset)
{
    return mc_elem(m->grad_buf, m->cfg.gdt, offset);
}

/* Element i of the full tensor `name` drawn from N(0, std), keyed only by (seed, name, i):
 * fills dst[0..count) with elements [start, start+count). */
void mc_init_normal(float *dst, uint64_t seed, const char *name, long start, long count, float std);

/* The default chunking (one chunk with every layer, pre and post, one slot) is what
 * mc_gpt_config_from_args (trainer/config.c) sets; the pipeline replaces it
 * (parallel/pipeline.c). */

/* Forward of one microbatch through chunk c into slot k of the chunk's group. The pre chunk reads mb's tokens,
 * the others read slot->in (received). The post chunk returns the masked loss sum in *loss_sum
 * and the token count in *num_tokens (0 elsewhere); the others leave their output in slot->out.
 * iteration keys the dropout masks; training = false disables dropout. */
void mc_gpt_forward_chunk(mc_gpt_t *m, int c, int k, const mc_microbatch_t *mb, uint32_t iteration,
                          bool training, double *loss_sum, double *num_tokens);
/* The token count of a microbatch (the sum of its loss mask, in double, in index order): what the
 * forward returns in *num_tokens. */
double mc_gpt_mb_tokens(const mc_microbatch_t *mb);
/* The masked loss sum of per-token losses [b, s] (in double, in index order): what the forward
 * returns in *loss_sum. */
double mc_gpt_loss_sum(const mc_microbatch_t *mb, const float *losses);
/* Backward of chunk c on slot k of its group: from the loss with per-token weights (d objective / d loss[b,s]
 * = loss_mask[b,s] * weight) on the post chunk, else from slot->dout. Gradients accumulate into
 * grad_buf; a chunk without the embedding leaves the gradient w.r.t. its input in slot->in. */
void mc_gpt_backward_chunk(mc_gpt_t *m, int c, int k, uint32_t iteration, float weight);

/* --defer-embedding-wgrad-compute's pipeline flush (Megatron's drain_embedding_wgrad_compute):
 * the deferred microbatches' output-layer weight-gradient GEMMs in their backward order (each
 * input gathered over tp first under sequence parallelism), then the data-parallel hook that the
 * final norm's and output layer's gradients are complete. No-op with nothing deferred. */
void mc_gpt_drain_output_wgrad(mc_gpt_t *m);

/* The whole model on one rank (one chunk, slot 0): forward and backward of the last forward. */
void mc_gpt_forward(mc_gpt_t *m, const mc_microbatch_t *mb, uint32_t iteration, bool training,
                    double *loss_sum, double *num_tokens);
void mc_gpt_backward(mc_gpt_t *m, uint32_t iteration, float weight);

/* Table indices [first, first + n) of chunk c's parameters (its layers, and the embeddings or
 * the final norm and output layer on the first or last virtual stage). */
void mc_gpt_chunk_params(const mc_gpt_t *m, int c, int *first, int *n);

/* The MoE losses' tracker since the last call (then zeroed): into out [MC_MOE_LOSSES][num_layers]
 * (float32), each layer's loss / coeff summed over this rank's training forwards. */
void mc_gpt_moe_take_losses(mc_gpt_t *m, float *out);
/* Token dropping's counts since the last call (then zeroed): out[0] the routed (token, expert)
 * assignments of this rank's training forwards, out[1] those dropped for capacity. */
void mc_gpt_moe_take_dropped(mc_gpt_t *m, double out[2]);
/* finalize_model_grads' reset_global_aux_loss_tracker: global_aux_loss's running counts start
 * again (after each training step's backward). */
void mc_gpt_moe_step_end(mc_gpt_t *m);
/* _update_router_expert_bias (finalize_model_grads, once per global batch): the layers' token
 * counts summed over tp x dp x cp, each expert_bias += rate * sign(mean count - count); the
 * counts start again. Nothing without --moe-router-enable-expert-bias. */
void mc_gpt_moe_update_expert_bias(mc_gpt_t *m);
/* Local layer `local`'s expert_bias on the device ([E] fp32), NULL without expert bias. */
float *mc_gpt_moe_expert_bias(mc_gpt_t *m, int local);
/* Megatron's name of each loss in the log line and TensorBoard ("load_balancing_loss",
 * "seq_load_balancing_loss", "global_load_balancing_loss", "z_loss"). */
const char *mc_moe_loss_name(mc_moe_loss_t k);

/* Elements of a chunk boundary tensor ([S/tp-if-SP, b, H]): what the pipeline sends. */
long mc_gpt_boundary_elems(const mc_gpt_t *m, int b);

#endif
