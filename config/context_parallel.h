/* Context parallelism as arithmetic on the configuration (Megatron's --context-parallel-size
 * with Transformer Engine's attention): the sequence cut into 2cp chunks of which cp rank r holds
 * chunks r and 2cp-1-r (get_batch_on_this_cp_rank, core/utils.py), the comm type of each layer
 * (--cp-comm-type), and Megatron's and Transformer Engine's checks of them, read from the
 * arguments (cli/validate.c, trainer/config.c, the planner); the arithmetic without them is
 * config/cp_layout.h. */
#ifndef MC_CONFIG_CONTEXT_PARALLEL_H
#define MC_CONFIG_CONTEXT_PARALLEL_H

#include <stddef.h>

#include "config/args.h"
#include "config/cp_layout.h"

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

#endif
