/* Command line of `megatron-c preprocess-data`: the flags of Megatron's tools/preprocess_data.py
 * (MEGATRON.md section 10): a table of the shared flag type (config/flags.h), read by the shared
 * parser (cli/cli.h) into data/preprocess.h's options.
 *
 * Parsing follows that script's argparse parser: `--flag value` and `--flag=value`, the last
 * occurrence wins, and (unlike pretrain_gpt.py, whose parser sets allow_abbrev=False) a unique
 * prefix of a flag name is accepted as that flag. Every problem is one line through
 * mc_user_error (exit 2); an unknown flag names the closest known one. */
#ifndef MC_CLI_PREPROCESS_ARGS_H
#define MC_CLI_PREPROCESS_ARGS_H

#include <stdbool.h>
#include <stdio.h>

#include "data/preprocess.h"


/* Parses argv[0..argc) (the arguments after "preprocess-data"). Fills *a (pointers into argv
 * or static strings; free with mc_preprocess_args_free). Exits 0 after --help, exits 2 with one
 * line on any error. */
void mc_preprocess_args_parse(mc_preprocess_args_t *a, int argc, char **argv);
void mc_preprocess_args_free(mc_preprocess_args_t *a);

/* The flag list, as `megatron-c preprocess-data --help` prints it. */
void mc_preprocess_args_help(FILE *f);

/* For tests: the flag a (possibly abbreviated) name resolves to, or NULL; *ambiguous is set
 * when several flags start with it. */
const char *mc_preprocess_flag_resolve(const char *name, bool *ambiguous);
/* The closest known flag by edit distance, or NULL when none is a plausible typo. */
const char *mc_preprocess_flag_suggest(const char *name);

#endif
