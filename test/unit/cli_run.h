/* Running the training command-line parser as a user would meet it: in a child process (the
 * parser exits on errors), its exit status, stdout and stderr captured. Shared by the tests of
 * the command line (test_cli.c, test_cli_recipes.c). */
#ifndef MC_TEST_CLI_RUN_H
#define MC_TEST_CLI_RUN_H

#include <stddef.h>

#include "config/args.h"

enum { MC_RUN_MAX_ARGS = 160 };

typedef struct {
    int status;        /* exit status, or -1 if the child did not exit normally */
    char out[1 << 20]; /* stdout (--help is long: the whole of Megatron's surface) */
    char err[8192];
} mc_run_t;

/* Splits `line` (copied into buf) on spaces into argv; returns argc. */
int mc_run_split(const char *line, char *buf, size_t n, char **argv);
/* mc_args_parse of `line` for a job of world_size ranks, in this process. */
/* a: static storage (zeroes, or a previous parse, whose lists are freed first). */
void mc_run_parse_here(mc_args_t *a, const char *line, int world_size);
/* The same in a child, which exits 0 when parsing passes. */
void mc_run_parse(mc_run_t *r, const char *line, int world_size);
/* The number of lines of text. */
int mc_run_lines(const char *text);

/* The contract for bad input: exit 2, exactly one stderr line "megatron-c: error: ...",
 * containing `what`, and nothing on stdout. */
void mc_expect_error_world(const char *line, int world_size, const char *what);
void mc_expect_error(const char *line, const char *what);
/* Several problems in one line: exit 2 once, exactly n stderr lines, each "megatron-c: error:
 * ...", line k containing what[k], nothing on stdout. */
void mc_expect_errors(const char *line, int n, const char *const *what);
void mc_expect_errors_world(const char *line, int world_size, int n, const char *const *what);

#endif
