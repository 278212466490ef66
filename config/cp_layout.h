/* Context parallelism without the arguments: Transformer Engine's comm types and the sequence
 * cut into 2cp chunks of which cp rank r holds chunks r and 2cp-1-r (get_batch_on_this_cp_rank,
 * core/utils.py). The attention (model/), the batch slicing (train/loop.c) and the planner share
 * it; config/context_parallel.h reads the arguments. */
#ifndef MC_CONFIG_CP_LAYOUT_H
#define MC_CONFIG_CP_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* a list flag with one value per transformer layer (--cp-comm-type) */
#define MC_MAX_LAYER_LIST 512

/* Transformer Engine's implementations (context_parallel.py attn_forward_func_with_cp). */
typedef enum {
    MC_CP_P2P,       /* "p2p": keys and values passed around a ring */
    MC_CP_A2A,       /* "a2a": heads scattered, the sequence gathered (Ulysses) */
    MC_CP_ALLGATHER, /* "all_gather": keys and values all-gathered */
    MC_CP_A2A_P2P,   /* "a2a+p2p": a2a inside --hierarchical-context-parallel-sizes' first level,
                        p2p over the second */
} mc_cp_comm_t;

/* The type a --cp-comm-type value names, or -1. Transformer Engine spells the all-gather
 * "all_gather"; Megatron's help says "allgather", which megatron-c takes as the same. */
int mc_cp_comm_parse(const char *s);
/* Transformer Engine's name of a type. */
const char *mc_cp_comm_name(mc_cp_comm_t t);

/* The global sequence position of row i (0 <= i < S_full/cp) of cp rank r: rows [0, C) are
 * chunk r, rows [C, 2C) chunk 2cp-1-r, C = S_full/(2cp). */
static inline int mc_cp_position(int S_full, int cp, int r, int i)
{
    if (cp <= 1) return i;
    const int C = S_full / (2 * cp);
    return i < C ? r * C + i : (2 * cp - 1 - r) * C + (i - C);
}

/* get_batch_on_this_cp_rank on a microbatch's host arrays, in place: each [b, S_full] row keeps
 * chunks r and 2cp-1-r, packed as [b, S_full/cp]. Any array may be NULL. */
void mc_cp_batch_on_this_rank(int32_t *tokens, int32_t *labels, float *loss_mask,
                              int32_t *positions, int b, int S_full, int cp, int r);

#endif
