/* The data rules of validate_args (cli/validate_data.c), through mc_user_error: one line each.
 * Called by cli/validate.c's rule table. */
#ifndef MC_CLI_VALIDATE_DATA_H
#define MC_CLI_VALIDATE_DATA_H

#include "config/args.h"

void mc_validate_data(mc_args_t *a);

#endif
