/* The model's blocks, along Megatron-core's modules (model-internal): the embedding
 * (model/embedding.c), the norms (model/norm.c), self-attention (model/attention.c), the MLP
 * (model/mlp.c), the output layer and loss (model/output.c), over the tensor-parallel mappings
 * of model/tp.h. model/gpt.c drives them, running the layers of a chunk through the blocks the
 * layer spec (model/layer_spec.h) picked; model/gpt_memory.c plans and allocates their buffers.
 * Each block has a forward, a backward, its saved activations for the memory plan, and its
 * parameters for the table (kinds of the names table, model/param_names.h). */
#ifndef MC_MODEL_BLOCK_H
#define MC_MODEL_BLOCK_H

#include <stddef.h>

#include "model/gpt.h"
#include "model/tp.h"

/* This rank's slice of the tensor-parallel dimensions (Megatron's column/row-parallel layers):
 * heads, attention width, ffn width and vocabulary, and where its vocabulary starts. */
typedef struct {
    int heads, groups, attn, qkv, ffn, ffn1, vocab, vocab_start, head_start;
    /* sequence parallelism: this rank's sequence rows [seq_start, seq_start + seq) of the norm,
     * dropout and residual regions (the whole sequence without it) */
    bool sp;
    int seq, seq_start;
} mc_tp_dims_t;

mc_tp_dims_t mc_gpt_tp_dims(const mc_gpt_config_t *c);
/* The model's tp group and sequence parallelism, for the mappings. */
mc_tp_t mc_gpt_tp(const mc_gpt_t *m);

/* Every activation and workspace buffer comes from mc_gpt_take, which records it for
 * mc_gpt_free; with m NULL (the sizing pass) it only counts the bytes and hands out NULL. */
typedef struct {
    mc_gpt_t *m;
    long bytes;
    int failed;
} mc_alloc_t;

void *mc_gpt_take(mc_alloc_t *a, long bytes);

/* Appends parameter kind k of global layer `layer` (-1 outside the layers) with full shape
 * [d0, d1] (d1 0: a vector) and its init (N(0, std), or the constant value when std is 0). */
mc_param_t *mc_gpt_add_param(mc_gpt_t *m, mc_pkind_t k, int layer, int64_t d0, int64_t d1,
                             float std, float value);

/* Full recomputation: whether layer j of a model chunk of n layers keeps only its recompute
 * group's input, and the group's layers [first, last]. */
bool mc_gpt_recomputed(const mc_gpt_config_t *c, int n, int j, int *first, int *last);

/* Dropout of a sequence-local activation [seq, B, H] (this rank's rows: the sequence-parallel
 * ones, of context parallelism's chunks) keyed by each row's position in the whole sequence;
 * out may equal x. */
void mc_gpt_seq_dropout(const mc_gpt_t *m, bool backward, void *out, const void *x,
                        const mc_dropout_t *d, int B);

mc_dropout_t mc_gpt_dropout(const mc_gpt_t *m, uint32_t iteration, uint32_t layer, uint32_t site,
                            uint64_t sample0, float p);

/* One layer of the microbatch in flight, as its blocks see it. */
typedef struct {
    mc_gpt_t *m;
    const mc_backend_t *be;
    const mc_gpt_config_t *c;
    mc_tp_dims_t t;
    mc_tp_t tp;
    mc_gpt_slot_t *sl;
    int B, N;           /* the microbatch's sequences; its tokens S * B */
    long NL;            /* elements of a sequence-local [s, b, h] activation */
    uint32_t iteration; /* keys the dropout masks */
    uint32_t layer_no;  /* the global layer number + 1 (the dropout key's layer) */
    bool training;      /* forward: dropout on */
    void *const *w;     /* the layer's parameters by kind (m->p.layers[j].t) */
    void *const *gw;    /* and their gradients */
    int local;          /* its local layer index (m->layer_param[local]: its first parameter) */
} mc_layer_run_t;

/* An MoE layer's tokens: the rows of its sequence-local input (this rank's sequence rows under
 * sequence parallelism). */
static inline long mc_moe_tokens(const mc_layer_run_t *r) { return r->NL / r->c->hidden; }

/* Layer j of the chunk in flight (m->cur, m->cur_chunk) as its blocks see it. */
mc_layer_run_t mc_gpt_layer_run(mc_gpt_t *m, int j, uint32_t iteration, bool training);

/* ---- a layer's parallel linears (model/linear.c): the GEMMs with their tensor-parallel
 * mappings, and with --tp-comm-overlap the sequence-parallel collectives beside them ---- */

/* linear_qkv / linear_fc1 forward from the sequence-local input in (hidden wide): out [N, out_f]
 * = in @ W^T + bias, or with pre the activation fused (linear_gelu_forward: out = act(pre)). */
void mc_linear_column_forward(const mc_layer_run_t *r, void *out, void *pre, const void *in,
                              const void *W, const void *bias, int in_f, int out_f);
/* linear_proj / linear_fc2 forward from in [N, in_f]: the output summed over tp (sequence-local
 * with sequence parallelism) in m->tmp_h or m->dtmp_h, which it returns. */
void *mc_linear_row_forward(const mc_layer_run_t *r, const void *in, const void *W,
                            const void *bias, int in_f);
/* Their backward from the sequence-local dy: din [N, in_f] (through the activation's gradient
 * at pre, with pre: linear_backward_gelu), dW and db accumulate. */
void mc_linear_row_backward(const mc_layer_run_t *r, void *din, void *dW, void *db, const void *dy,
                            const void *in, const void *W, void *pre, int in_f);
/* linear_qkv / linear_fc1 backward from dout [N, out_f]: the sequence-local din, summed over tp
 * (m->tmp_h is its scratch), dW and db accumulate. */
void mc_linear_column_backward(const mc_layer_run_t *r, void *din, void *dW, void *db,
                               const void *dout, const void *in, const void *W, int in_f,
                               int out_f);

/* ---- norms (model/norm.c): LayerNorm and RMSNorm over rows of the hidden size ---- */

typedef struct mc_norm_ops {
    const char *name;
    bool bias; /* has a bias parameter */
    /* a = norm(x) */
    void (*forward)(const mc_gpt_t *m, mc_norm_acts_t *a, const void *x, const void *w,
                    const void *b, int rows);
    /* sum = x + y, then a = norm(sum): the residual add fused with the norm that reads it */
    void (*add_forward)(const mc_gpt_t *m, void *sum, mc_norm_acts_t *a, const void *x,
                        const void *y, const void *w, const void *b, int rows);
    /* dx += the gradient at x of dout at the norm's output; dw, db accumulate */
    void (*backward_acc)(const mc_gpt_t *m, void *dx, void *dw, void *db, const void *dout,
                         const void *x, const void *w, const mc_norm_acts_t *a, int rows);
} mc_norm_ops_t;

extern const mc_norm_ops_t mc_norm_layernorm, mc_norm_rmsnorm;

/* The norm's saved activations over `rows` rows (out, statistics). */
void mc_norm_plan(const mc_norm_ops_t *ops, const mc_gpt_t *m, mc_alloc_t *a, mc_norm_acts_t *acts,
                  long rows);
/* Its parameters: kind `weight` (and weight + 1, the bias, with one) of `size` channels. */
void mc_norm_params(const mc_norm_ops_t *ops, mc_gpt_t *m, mc_pkind_t weight, int layer,
                    int64_t size);

/* --apply-layernorm-1p (Megatron's zero_centered_gamma): the workspace of the (1 + w) copies,
 * pointing m->p's norm weights at them after allocation, and forming them from parameters
 * [first, first + n) when those are about to be read. */
void mc_norm_1p_plan(mc_gpt_t *m, mc_alloc_t *ws);
int mc_norm_1p_setup(mc_gpt_t *m);
void mc_norm_1p_refresh(mc_gpt_t *m, int first, int n);

/* ---- a layer's attention and MLP (one interface: Megatron's self_attention and mlp) ---- */

typedef struct mc_block_ops {
    const char *name;
    /* where its saved activations lie in mc_layer_acts_t (offsetof: its member of attn or mlp) */
    size_t acts_at;
    /* appends its parameters of global layer `layer` to the table, in Megatron's order */
    void (*params)(mc_gpt_t *m, int layer);
    /* one layer's saved activations into acts (its member of mc_layer_acts_t's union) */
    void (*plan)(mc_gpt_t *m, mc_alloc_t *acts_alloc, void *acts);
    /* what every layer of this kind shares: activations (acts_alloc) and workspaces (ws) */
    void (*plan_shared)(mc_gpt_t *m, mc_alloc_t *acts_alloc, mc_alloc_t *ws);
    /* after allocation: fills what never changes (NULL: nothing); 0 or -1 */
    int (*setup)(mc_gpt_t *m);
    /* forward from the layer's norm output `in` (sequence-local); returns its output, summed
     * over tp and sequence-local, in a driver workspace (m->tmp_h or m->dtmp_h) */
    void *(*forward)(mc_layer_run_t *r, void *acts, const void *in);
    /* backward from dy (sequence-local: in m->dtmp_h, or m->dres itself when the dropout before
     * it is the identity, then read only) into din (m->dx) at `in`; parameter gradients
     * accumulate; m->tmp_h and m->dtmp_h are its scratch */
    void (*backward)(mc_layer_run_t *r, void *acts, const void *in, void *dy, void *din);
} mc_block_ops_t;

/* An MLP's tensors (model/mlp.c): the dense MLP's, or the MoE layer's shared expert's. */
typedef struct {
    int ffn;                       /* this rank's activation columns (ffn / tp) */
    const void *w1, *b1, *w2, *b2; /* linear_fc1's and linear_fc2's weights, biases (NULL: none) */
    void *dw1, *db1, *dw2, *db2;   /* their gradients */
    const mc_mlp_ws_t *ws;         /* its backward's workspace */
} mc_mlp_run_t;

/* The MLP's saved activations (of this rank's ffn columns) and its workspace. */
void mc_mlp_run_plan(const mc_gpt_t *m, mc_alloc_t *a, mc_mlp_acts_t *s, int ffn);
void mc_mlp_run_plan_ws(const mc_gpt_t *m, mc_alloc_t *ws, mc_mlp_ws_t *w, int ffn);
/* Its forward and backward, as mc_block_ops_t's. */
void *mc_mlp_run_forward(mc_layer_run_t *r, const mc_mlp_run_t *p, mc_mlp_acts_t *s,
                         const void *in);
void mc_mlp_run_backward(mc_layer_run_t *r, const mc_mlp_run_t *p, mc_mlp_acts_t *s, const void *in,
                         void *dy, void *din);

extern const mc_block_ops_t mc_self_attention; /* model/attention.c */
extern const mc_block_ops_t mc_mlp;            /* model/mlp.c */
extern const mc_block_ops_t mc_moe;            /* model/moe.c: the MoE layer */

/* Block b's saved activations within a layer's. */
static inline void *mc_block_acts(mc_layer_acts_t *a, const mc_block_ops_t *b)
{
    return (char *)a + b->acts_at;
}

/* The MoE layer's losses (model/moe_loss.c), for model/moe.c: their buffers in one layer's
 * activations and in the shared workspace; in a training forward (after the routing), each
 * loss and its record in the tracker; in the backward, each one's gradient added into the
 * router's dlogits. */
void mc_moe_losses_plan(mc_gpt_t *m, mc_alloc_t *a, mc_moe_acts_t *s);
void mc_moe_losses_plan_shared(mc_gpt_t *m, mc_alloc_t *ws);
void mc_moe_losses_forward(mc_layer_run_t *r, mc_moe_acts_t *s);
/* The aux-loss-free balancing's count of a training forward's routed tokens (counts[E], the
 * layer's tokens per expert on the host) into local_tokens_per_expert (model/moe_bias.c). */
void mc_moe_bias_count(mc_layer_run_t *r, const int32_t *counts);
void mc_moe_losses_backward(mc_layer_run_t *r, mc_moe_acts_t *s, void *dlogits);
/* Token dropping (model/moe_capacity.c): the capacity of each expert for T tokens of this rank
 * (get_capacity, at most T); the map the dispatcher uses after it (s->map without dropping, else
 * s->cap_map) and its probs (*probs); in a training forward, the routed assignments and those
 * dropped into the log's counts, given the kept routed ones (the map's count without padding). */
long mc_moe_capacity_tokens(const mc_moe_cfg_t *q, long T);
const uint8_t *mc_moe_drop(mc_layer_run_t *r, mc_moe_acts_t *s, const void **probs);
void mc_moe_count_dropped(mc_layer_run_t *r, const mc_moe_acts_t *s, long kept);
/* The allgather dispatcher (model/moe_allgather.c; with cfg.moe.allgather at ep x etp > 1, plans
 * nothing otherwise): its activations for T tokens and Rr local rows, its workspace; dispatch:
 * the group's tokens (in, probs and map of this rank's T) to this rank's experts' rows (s->ex_x,
 * s->ex_p; split: each local expert's rows, host), returns the rows; combine: the experts'
 * output rows y into this rank's T tokens (out [T, H]). Their backward: the gradient at the
 * layer's output (dy [T, H]) to the experts' rows (d_rows; split as the forward's), returns the
 * rows; the gradients at the experts' input and probabilities (d_x, d_p) to the layer's input
 * (din [T, H]) and to its probs (dprobs [T, E]). */
void mc_moe_allgather_plan(mc_gpt_t *m, mc_alloc_t *a, mc_moe_acts_t *s, long T, long Rr);
void mc_moe_allgather_plan_ws(mc_gpt_t *m, mc_alloc_t *ws, long T);
long mc_moe_allgather_dispatch(mc_layer_run_t *r, mc_moe_acts_t *s, const void *in,
                               const void *probs, const uint8_t *map, long *split);
void mc_moe_allgather_combine(mc_layer_run_t *r, mc_moe_acts_t *s, const void *y, void *out);
long mc_moe_allgather_dispatch_backward(mc_layer_run_t *r, mc_moe_acts_t *s, const void *dy,
                                        void *d_rows, long *split);
void mc_moe_allgather_combine_backward(mc_layer_run_t *r, mc_moe_acts_t *s, const void *d_x,
                                       const void *d_p, void *din, void *dprobs);

/* The MoE layer's shared expert (model/moe_shared.c; nothing without one): its parameters
 * after the experts', its activations and workspace; its forward from the layer's input into
 * moe_ws.sh_y ([T, H], kept until mc_moe_shared_add adds it, gated, to the routed output y);
 * its backward from the layer's output gradient dy, adding the gradient at the input to din. */
void mc_moe_shared_params(mc_gpt_t *m, int layer);
void mc_moe_shared_plan(mc_gpt_t *m, mc_alloc_t *a, mc_moe_acts_t *s);
void mc_moe_shared_plan_ws(mc_gpt_t *m, mc_alloc_t *ws);
void mc_moe_shared_forward(mc_layer_run_t *r, mc_moe_acts_t *s, const void *in);
void mc_moe_shared_add(mc_layer_run_t *r, mc_moe_acts_t *s, void *y);
void mc_moe_shared_backward(mc_layer_run_t *r, mc_moe_acts_t *s, const void *in, const void *dy,
                            void *din);

/* ---- the embedding (model/embedding.c) ---- */

/* word (and learned position) embeddings; shared: the word embeddings have a copy on the last
 * stage (tied over pipeline stages) */
void mc_embedding_params(mc_gpt_t *m, bool shared);
/* slot->in = dropout(the embeddings of the slot's tokens), sequence-local */
void mc_embedding_forward(mc_gpt_t *m, mc_gpt_slot_t *sl, uint32_t iteration, bool training);
/* from the gradient at slot->in in m->dres (overwritten) */
void mc_embedding_backward(mc_gpt_t *m, mc_gpt_slot_t *sl, uint32_t iteration);

/* ---- the output layer and loss (model/output.c) ---- */

/* final norm and output layer (unless tied on this stage) */
void mc_output_params(mc_gpt_t *m, bool shared);
/* the final norm of slot->x_final, when the last layer's residual add did not do it */
void mc_output_norm(mc_gpt_t *m, mc_gpt_slot_t *sl);
/* logits and the vocab-parallel cross-entropy of the normed slot->lnf: the masked loss sum (NAN
 * with mb->losses_out: read later) and the token count of mb; in training with mb->loss_weight,
 * the loss gradient in the logits too (mc_output_backward then checks its weight) */
void mc_output_forward(mc_gpt_t *m, mc_gpt_slot_t *sl, const mc_microbatch_t *mb, bool training,
                       double *loss_sum, double *num_tokens);
/* from the loss (per-token weights mask * weight, times the loss scale) to the gradient at
 * slot->x_final in m->dres */
void mc_output_backward(mc_gpt_t *m, mc_gpt_slot_t *sl, float weight);
/* --defer-embedding-wgrad-compute: the deferred weight-gradient GEMMs (mc_gpt_drain_output_wgrad
 * without the hook); returns how many ran */
int mc_output_drain_wgrad(mc_gpt_t *m);

#endif
