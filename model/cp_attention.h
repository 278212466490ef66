/* Core attention under context parallelism (model-internal): Transformer Engine's
 * context-parallel attention (context_parallel.py) over the model's cp group, on the backend's
 * block ops (backend.h's attention_block_*) and the comm layer. Each rank holds the queries,
 * keys and values of its two chunks of the sequence (config/cp_layout.h); per layer,
 * --cp-comm-type picks how it meets the others' keys and values:
 *   p2p        a ring: keys and values passed to the next rank while the current block is
 *              computed, blocks the causal mask hides skipped, partial results merged by their
 *              log-sum-exp; the backward passes the key/value gradients around with them
 *              (model/cp_ring.c);
 *   all_gather the keys and values all-gathered, each query chunk against its prefix; the
 *              gradients reduce-scattered back (model/cp_ring.c);
 *   a2a        heads scattered and the sequence gathered by an all-to-all, the whole-sequence
 *              op on this rank's heads, and the output sent back;
 *   a2a+p2p    the all-to-all inside --hierarchical-context-parallel-sizes' first level, then
 *              the ring over the second.
 * Dropout on the probabilities is keyed by global positions and heads, so every layout gives the
 * single rank's masks. */
#ifndef MC_MODEL_CP_ATTENTION_H
#define MC_MODEL_CP_ATTENTION_H

#include "model/block.h"

/* Layer r's core attention: out [S, B, heads/tp*HD] (this rank's rows) from the saved (rotated)
 * s->qkv; the state its backward needs goes to s's cp_* buffers. */
void mc_cp_attention_forward(const mc_layer_run_t *r, void *out, mc_attention_acts_t *s,
                             const mc_dropout_t *d);
/* dqkv (overwritten, this rank's rows) from dout at the output out of the forward. */
void mc_cp_attention_backward(const mc_layer_run_t *r, void *dqkv, const void *dout,
                              const void *out, const mc_attention_acts_t *s, const mc_dropout_t *d);

/* One layer's saved state, and what every layer shares (activations and workspaces), sized for
 * every comm type some layer uses. */
void mc_cp_attention_plan(mc_gpt_t *m, mc_alloc_t *a, mc_attention_acts_t *s);
void mc_cp_attention_plan_shared(mc_gpt_t *m, mc_alloc_t *acts, mc_alloc_t *ws);

/* The comm type global layer `layer` runs, a2a+p2p with a level of one rank taken as the other
 * type (Transformer Engine's attn_forward_func_with_cp). */
int mc_cp_layer_comm(const mc_gpt_config_t *c, int layer);

/* ---- model/cp_ring.c: the ring and the all-gather on the block ops ---- */

/* One ring: its group (size ranks, this one at rank) holds a sequence of 2 * size chunks of C
 * rows; qkv [2C, B, (NH + 2 NG) HD] holds chunks rank and 2 size - 1 - rank, its query heads
 * are heads h0.. of the layer's, in the qkv layout. */
typedef struct {
    const mc_layer_run_t *r;
    mc_group_t *group;
    int size, rank, C, NH, NG, h0;
    const void *qkv;
} mc_cp_ring_t;

/* out (type dt) and lse [2C, B, NH] (the merged statistics). */
void mc_cp_ring_forward(const mc_cp_ring_t *g, void *out, float *lse, const mc_dropout_t *d);
/* dqkv [2C, B, (NH + 2 NG) HD] (type dt) from dout at out. */
void mc_cp_ring_backward(const mc_cp_ring_t *g, void *dqkv, const void *dout, const void *out,
                         const float *lse, const mc_dropout_t *d);
/* The all-gather over the cp group, for the layer's own heads (g->size, rank, C, NH, NG, h0,
 * qkv as for the ring). */
void mc_cp_allgather_forward(const mc_cp_ring_t *g, void *out, float *lse, const mc_dropout_t *d);
void mc_cp_allgather_backward(const mc_cp_ring_t *g, void *dqkv, const void *dout, const void *out,
                              const float *lse, const mc_dropout_t *d);

#endif
