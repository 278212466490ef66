/* Context parallelism as arithmetic on the configuration (Megatron's --context-parallel-size
 * with Transformer Engine's attention): the sequence cut into 2cp chunks of which cp rank r holds
 * chunks r and 2cp-1-r (get_batch_on_this_cp_rank, core/utils.py), the comm type of each layer
 * (--cp-comm-type), and Megatron's and Transformer Engine's checks of them. Below model/ and
 * data/ so that the command line's checks (cli/validate.c), the batch slicing (train/loop.c) and
 * the attention (model/cp_attention.c) share them. */
#ifndef MC_CONFIG_CONTEXT_PARALLEL_H
#define MC_CONFIG_CONTEXT_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

#include "config/args.h"

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

/* The comm type of global layer `layer` (0-based): the one value of --cp-comm-type, or the
 * layer's own when it lists one per layer (Megatron main's indexing; core_v0.15.0 reads the list
 * at the 1-based layer number, which fails at the last layer). p2p when none is given. */
mc_cp_comm_t mc_cp_comm_of_layer(const mc_args_t *a, int layer);

/* The sizes of a+p2p's two levels (--hierarchical-context-parallel-sizes a p): *a2a and *p2p,
 * or cp and 1 without the flag. */
void mc_cp_levels(const mc_args_t *a, int *a2a, int *p2p);

/* Megatron's and Transformer Engine's rules for context parallelism (arguments.py, the
 * TransformerConfig, TEDotProductAttention, attn_forward_func_with_cp), with the flags that
 * break each. Returns 0, or -1 with one line in err. */
int mc_cp_validate(const mc_args_t *a, char *err, size_t n);

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
