/* The optimizer's rules of validate_args (cli/validate_optim.c), through mc_user_error: one line
 * each. Called by cli/validate.c's rule table. */
#ifndef MC_CLI_VALIDATE_OPTIM_H
#define MC_CLI_VALIDATE_OPTIM_H

#include "config/args.h"

void mc_validate_optimizer(mc_args_t *a);
void mc_validate_muon(const mc_args_t *a);

#endif
