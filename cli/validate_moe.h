/* Megatron's rules for the mixture-of-experts flags (arguments.validate_args,
 * TransformerConfig.__post_init__, MoELayer and the router's own asserts), one line each through
 * mc_user_error, and the refusal of what megatron-c does not implement yet, every part at once. Called by
 * cli/validate.c's rule table. */
#ifndef MC_CLI_VALIDATE_MOE_H
#define MC_CLI_VALIDATE_MOE_H

#include "config/args.h"

/* Checks a's MoE flags (world_size and the dense sizes already derived), stopping at the first
 * problem (mc_user_error), then derives as Megatron does: expert_tensor_parallel_size = tp when
 * not given. */
void mc_validate_moe(mc_args_t *a, int world_size);
/* What megatron-c's MoE layer does not do yet, every part a line of its own handed to report
 * (which returns): each MoE flag given whose feature is missing (TODO_CHECKED), and each part of
 * the run the layer cannot serve yet (bf16, tp > 1, --save, ...). */
void mc_moe_unimplemented(const mc_args_t *a, void (*report)(const char *line));

#endif
