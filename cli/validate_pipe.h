/* Megatron's rules for the pipeline's optional overlaps (ModelParallelConfig.__post_init__ and
 * arguments.validate_args): --overlap-param-gather-with-optimizer-step,
 * --defer-embedding-wgrad-compute and --overlap-p2p-communication-warmup-flush, one line each through mc_user_error. Called by
 * cli/validate.c's rule table after the pipeline's own rules. */
#ifndef MC_CLI_VALIDATE_PIPE_H
#define MC_CLI_VALIDATE_PIPE_H

#include "config/args.h"

void mc_validate_pipeline_overlaps(mc_args_t *a);

#endif
