/* Megatron's rules for the mixture-of-experts flags (arguments.validate_args,
 * TransformerConfig.__post_init__, MoELayer and the router's own asserts), one line each through
 * mc_user_error, then the refusal of what megatron-c does not implement yet. Called by
 * cli/validate.c's rule table. */
#ifndef MC_CLI_VALIDATE_MOE_H
#define MC_CLI_VALIDATE_MOE_H

#include "config/args.h"

/* Checks a's MoE flags (world_size and the dense sizes already derived), refuses any MoE flag
 * given (TODO_CHECKED: the MoE layer is not there yet), then derives as Megatron does:
 * expert_tensor_parallel_size = tp when not given. */
void mc_validate_moe(mc_args_t *a, int world_size);

#endif
