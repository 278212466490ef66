/* The command line of every subcommand: one parser for the flag tables of config/flags.h, with
 * argparse's conventions (`--flag value` and `--flag=value`, the last occurrence wins, a token
 * starting with '-' is a flag unless it reads as a negative number), one --help action, "did you
 * mean" for unknown flags, and one line for every problem: a line's problems are gathered and
 * told together ("megatron-c: error: ..." each), then exit 2 once. */
#ifndef MC_CLI_CLI_H
#define MC_CLI_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "config/args.h"
#include "config/flags.h"
#include "data/source.h"

/* inspect-data: its own table, then training's */
enum { MC_CLI_MAX_SETS = 1 + MC_TRAINING_SETS };

typedef struct {
    const char *prog; /* "megatron-c", "megatron-c preprocess-data": in messages */
    mc_flag_set_t sets[MC_CLI_MAX_SETS]; /* looked up in this order */
    int nsets;
    bool allow_abbrev;    /* a unique prefix of a flag name is that flag (argparse's
                           * default; Megatron's pretrain_gpt.py turns it off) */
    void (*help)(FILE *); /* MC_ACTION_HELP; NULL: training's --help */
} mc_cli_t;

/* Reads argv[0..argc) into the sets' structs (their defaults must be in place: mc_cli_defaults)
 * and checks the required flags; every problem found (unknown flags, refused values, missing
 * flags) is reported, then exit 2. Returns what was given, one entry per flag of the sets in
 * order (the parser's, valid until the next call). Support status is the caller's
 * (mc_cli_check_status). */
mc_flag_seen_t *mc_cli_parse(const mc_cli_t *c, int argc, char **argv);
/* A problem of the command line being read, gathered to be told with the others (the same line
 * twice is told once). */
__attribute__((format(printf, 1, 2))) void mc_cli_problem(const char *fmt, ...);
void mc_cli_defaults(const mc_cli_t *c);
/* The flag a name (or, with allow_abbrev, a unique prefix) stands for; *ambiguous when several. */
const mc_flag_t *mc_cli_resolve(const mc_cli_t *c, const char *name, bool *ambiguous);
const char *mc_cli_suggest(const mc_cli_t *c, const char *name);
/* What was given for a flag by name (exact). */
const mc_flag_seen_t *mc_cli_seen(const mc_cli_t *c, const mc_flag_seen_t *seen, const char *name);
/* Refuses what the support status of sets[first..first+n) does not allow (one line for each,
 * exit 2). */
void mc_cli_check_status(const mc_cli_t *c, const mc_flag_seen_t *seen, int first, int n);
/* A subcommand's flags, grouped as in its table, for its --help (cli/help.c). */
void mc_cli_print_flags(FILE *out, const mc_flag_set_t *set);

/* ---- training (pretrain_gpt.py's command line) ---- */

/* Parse argv (without the program name) into args; the problems of the line (unknown flags,
 * refused values, flags not implemented, old flags that conflict) are told all together, one
 * line each, then exit 2. The old flags Megatron removed are taken as today's (cli/legacy.c),
 * one warning each. Runs the hook below, then validation (whose first violation stops the
 * run), and derives values for world_size (the runtime's). */
void mc_args_parse(mc_args_t *args, int argc, char **argv, int world_size);

/* The flags Megatron removed (MC_FLAG_LEGACY, config/flags_legacy.c) that seen says were given,
 * taken into args as their .modern flags; an old flag that disagrees with a flag given too, or
 * stands for one megatron-c refuses, is a problem (mc_cli_problem). */
void mc_cli_legacy_map(const mc_cli_t *c, const mc_flag_seen_t *seen, mc_args_t *args);
/* One warning line for each old flag mc_cli_legacy_map took, naming today's spelling. */
void mc_cli_legacy_warn(void);

/* Called by mc_args_parse between reading the command line and validating it: Megatron's
 * --use-checkpoint-args takes arguments from a checkpoint there (main.c installs ckpt/args.h's;
 * cli/ does not read checkpoints). */
typedef void (*mc_args_hook_t)(mc_args_t *args, void *ctx);
void mc_args_set_hook(mc_args_hook_t hook, void *ctx);
void mc_args_run_hook(mc_args_t *args);

/* Megatron's validate_args rules and derived values. Exits 2 with one line on violation.
 * Called by mc_args_parse; exposed for tests that fill args by hand (start from
 * mc_args_defaults). Call it once: it derives train_iters from train_samples. */
void mc_args_finalize(mc_args_t *args, int world_size);
/* The same rules without reporting: the number of problems (0: valid), the first one's line in
 * first[0..n). `megatron-c plan --search` tries layouts with it. */
int mc_args_check(mc_args_t *args, int world_size, char *first, size_t n);

/* Training's last step of validation, the one that needs files: opens this rank's data source
 * (the tokenizer and every split's datasets, data/source.h) and derives the padded vocabulary
 * from the tokenizer's as Megatron's build_tokenizer does, or holds --padded-vocab-size against
 * it. Problems are one line, exit 2. The arguments are complete afterwards: nothing writes them
 * again. */
void mc_args_open_data(mc_args_t *args, mc_data_source_t *data);

/* ---- the subcommands: parse their command line, then run the layer that does the work ---- */
int mc_cli_preprocess(int argc, char **argv); /* argv[0] is "preprocess-data" */
int mc_cli_convert(int argc, char **argv);    /* argv[0] is "convert-checkpoint" */
int mc_cli_inspect(int argc, char **argv);    /* argv[0] is "inspect-data" */
int mc_cli_plan(int argc, char **argv);       /* argv[0] is "plan" */
int mc_cli_export_hf(int argc, char **argv);  /* argv[0] is "export-hf" */
int mc_cli_import_hf(int argc, char **argv);  /* argv[0] is "import-hf" */

#endif
