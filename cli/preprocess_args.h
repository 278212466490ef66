/* Command line of `megatron-c preprocess-data`: the flags of Megatron's tools/preprocess_data.py
 * (MEGATRON.md section 10) with their own small table, separate from pretrain_gpt.py's.
 *
 * Parsing follows that script's argparse parser: `--flag value` and `--flag=value`, the last
 * occurrence wins, and (unlike pretrain_gpt.py, whose parser sets allow_abbrev=False) a unique
 * prefix of a flag name is accepted as that flag. Every problem is one line through
 * mc_user_error (exit 2); an unknown flag names the closest known one. */
#ifndef MC_CLI_PREPROCESS_ARGS_H
#define MC_CLI_PREPROCESS_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    /* input data */
    const char *input;              /* required; a glob when partitions > 1 */
    const char **json_keys;         /* default {"text"}; duplicates removed (Megatron keys a
                                     * dict by them, so a repeated key is one output) */
    int n_json_keys;
    bool split_sentences;           /* not implemented yet (needs NLTK punkt) */
    bool keep_newlines;             /* not implemented yet */
    /* tokenization process */
    bool append_eod;
    const char *lang;               /* "english"; only used by sentence splitting */
    /* output data */
    const char *output_prefix;      /* required */
    /* runtime */
    int workers;                    /* required, >= 1, divisible by partitions */
    bool find_optimal_num_workers;  /* not implemented yet */
    int partitions;                 /* 1 */
    int64_t log_interval;           /* 1000 */
    bool keep_sequential_samples;
    int64_t max_documents;          /* -1: no limit (see preprocess.h for the semantics) */
    /* tokenizer */
    const char *tokenizer_type;     /* required (Megatron's default None crashes the script) */
    const char *vocab_file;
    const char *merge_file;
    int64_t vocab_size;             /* -1: not given */
    const char *tokenizer_model;    /* accepted; no tokenizer implemented here reads it */
    bool legacy_tokenizer;          /* accepted, no effect */
    /* megatron-c extension */
    bool skip_malformed;
} mc_preprocess_args_t;

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
