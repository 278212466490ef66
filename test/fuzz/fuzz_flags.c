/* Fuzzes the training flag parser (cli/parse.c, cli/validate.c, config/): argv lists mutated
 * from real recipes (Megatron's GPT-345M example, the suite's small runs) go to mc_args_parse in
 * a child each, since the parser exits on errors. It may exit 0 (the flags are fine; the child
 * then also derives the data configuration from them) or 2 (one usage line); anything else (a
 * sanitizer report, a crash, exit 1, a hang) is a failure.
 *
 *   fuzz_flags [--seconds N] [--seed S] [--crashes DIR] */
#include "test/fuzz/fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "config/args.h"
#include "config/flags.h"
#include "data/gpt_dataset.h"
#include "trainer/config.h"

#define MAX_ARGS 96
#define MAX_ARG_LEN 400

static const char *const RECIPE_345M[] = {
    "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
    "--num-layers", "24", "--hidden-size", "1024", "--num-attention-heads", "16",
    "--seq-length", "1024", "--max-position-embeddings", "1024", "--micro-batch-size", "4",
    "--global-batch-size", "16", "--lr", "0.00015", "--train-iters", "500000",
    "--lr-decay-iters", "320000", "--lr-decay-style", "cosine", "--min-lr", "1.0e-5",
    "--weight-decay", "1e-2", "--lr-warmup-fraction", ".01", "--clip-grad", "1.0", "--fp16",
    "--data-path", "data/my-gpt2_text_document", "--vocab-file", "gpt2-vocab.json",
    "--merge-file", "gpt2-merges.txt", "--split", "949,50,1", "--log-interval", "100",
    "--save-interval", "10000", "--eval-interval", "1000", "--save", "ckpt", "--load", "ckpt",
    "--eval-iters", "10", NULL};
static const char *const RECIPE_SMALL[] = {
    "--device", "cpu", "--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2",
    "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "2",
    "--global-batch-size", "4", "--train-iters", "6", "--lr", "3e-3", "--lr-warmup-iters", "1",
    "--log-interval", "2", "--eval-interval", "3", "--eval-iters", "1", "--seed", "7",
    "--data-path", "0.3", "a", "0.7", "b", "--split", "90,8,2", "--mid-level-dataset-surplus",
    "0.005", NULL};
static const char *const RECIPE_MOCK[] = {
    "--mock-data", "--vocab-size", "256", "--num-layers", "2", "--hidden-size", "64",
    "--num-attention-heads", "4", "--seq-length", "64", "--max-position-embeddings", "64",
    "--micro-batch-size", "4", "--global-batch-size", "16", "--train-iters", "200", "--lr",
    "3e-3", "--lr-decay-style", "cosine", "--lr-warmup-iters", "10", "--min-lr", "3e-4",
    "--bf16", "--use-distributed-optimizer", "--sequence-parallel", "--recompute-activations",
    NULL};
static const char *const *const RECIPES[] = {RECIPE_345M, RECIPE_SMALL, RECIPE_MOCK};

static const char *const VALUES[] = {
    "0", "-1", "1", "2", "3", "-2147483648", "2147483647", "2147483648", "4294967296",
    "9223372036854775807", "9223372036854775808", "-9223372036854775809", "1e300", "-1e300",
    "nan", "inf", "-inf", "1e-320", "0x10", "", " ", "1_000", "true", "False", "None", "--", "-",
    "=", "0.0", "1.5", "969,30,1", "0,100,0", "1,0,0", "0,0,0", "1e308 a 1e308 b", "1.0e-5",
    "/nonexistent/dir", "cosine", "bf16", "-0", "+5", "07", "1e", "..",
};

typedef struct {
    char args[MAX_ARGS][MAX_ARG_LEN + 1];
    int n;
    int world;
} flags_ctx_t;

static void set_arg(flags_ctx_t *c, int i, const char *s)
{
    snprintf(c->args[i], MAX_ARG_LEN + 1, "%s", s);
}

static void insert_arg(flags_ctx_t *c, int at, const char *s)
{
    if (c->n >= MAX_ARGS) return;
    char copy[MAX_ARG_LEN + 1]; /* s may be one of the arguments that move */
    snprintf(copy, sizeof copy, "%s", s);
    memmove(c->args[at + 1], c->args[at], sizeof c->args[0] * (size_t)(c->n - at));
    c->n++;
    memcpy(c->args[at], copy, sizeof copy);
}

static const char *random_flag(void)
{
    const mc_flag_t *f = mc_flag_at(fuzz_below(mc_flag_count()));
    return f->name;
}

static void mutate_arg_bytes(flags_ctx_t *c, int i)
{
    fuzz_buf_t b = {0};
    fuzz_buf_set(&b, c->args[i], strlen(c->args[i]));
    fuzz_mutate(&b, 0, MAX_ARG_LEN);
    size_t k = 0;
    for (size_t j = 0; j < b.n && k < MAX_ARG_LEN; j++)
        if (b.p[j]) c->args[i][k++] = (char)b.p[j];
    c->args[i][k] = '\0';
    fuzz_buf_free(&b);
}

static void mutate_once(flags_ctx_t *c)
{
    int i = c->n ? (int)fuzz_below((uint64_t)c->n) : 0;
    const char *v = VALUES[fuzz_below(sizeof VALUES / sizeof VALUES[0])];
    switch (fuzz_below(8)) {
    case 0: if (c->n) set_arg(c, i, v); break;                        /* a boundary value */
    case 1: insert_arg(c, i, v); insert_arg(c, i, random_flag()); break; /* flag value */
    case 2: insert_arg(c, i, random_flag()); break;                   /* a flag, maybe valueless */
    case 3:                                                           /* drop an argument */
        if (c->n) {
            memmove(c->args[i], c->args[i + 1], sizeof c->args[0] * (size_t)(c->n - i - 1));
            c->n--;
        }
        break;
    case 4: if (c->n) insert_arg(c, i, c->args[i]); break;            /* repeat one */
    case 5: if (c->n) mutate_arg_bytes(c, i); break;
    case 6:                                                           /* --flag=value */
        if (c->n > i + 1 && !strncmp(c->args[i], "--", 2)) {
            char joined[MAX_ARG_LEN + 1];
            snprintf(joined, sizeof joined, "%.190s=%.190s", c->args[i], c->args[i + 1]);
            set_arg(c, i, joined);
        }
        break;
    default:                                                          /* an abbreviation */
        if (c->n && !strncmp(c->args[i], "--", 2) && strlen(c->args[i]) > 3)
            c->args[i][3 + fuzz_below(strlen(c->args[i]) - 3)] = '\0';
        break;
    }
}

static void make(void *ctx, long i)
{
    flags_ctx_t *c = ctx;
    const char *const *r = RECIPES[fuzz_below(sizeof RECIPES / sizeof RECIPES[0])];
    c->n = 0;
    for (; r[c->n] && c->n < MAX_ARGS; c->n++) set_arg(c, c->n, r[c->n]);
    int k = 1 + (int)fuzz_below(4);
    for (int j = 0; j < k; j++) mutate_once(c);
    static const int worlds[] = {1, 1, 2, 4, 8};
    c->world = worlds[fuzz_below(5)];
}

static void run(void *ctx)
{
    flags_ctx_t *c = ctx;
    char *argv[MAX_ARGS + 1];
    for (int i = 0; i < c->n; i++) argv[i] = c->args[i];
    argv[c->n] = NULL;
    mc_args_t a;
    mc_args_parse(&a, c->n, argv, c->world);
    mc_gpt_data_config_t dc;
    char err[512];
    mc_gpt_data_config_from_args(&dc, &a, 0, MC_PAD_TOKEN_ID);
    mc_gpt_check_train_split(&dc, err, sizeof err);
    mc_args_free(&a);
}

static void save(void *ctx, const char *prefix)
{
    flags_ctx_t *c = ctx;
    char path[4300];
    snprintf(path, sizeof path, "%s.argv", prefix); /* one argument per line */
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "# world size %d; megatron-c with these arguments:\n", c->world);
    for (int i = 0; i < c->n; i++) fprintf(f, "%s\n", c->args[i]);
    fclose(f);
}

int main(int argc, char **argv)
{
    fuzz_opts_t o;
    fuzz_parse(&o, argc, argv, "");
    static flags_ctx_t c;
    static const int allowed[] = {0, 2};
    fuzz_target_t t = {"flags", make, run, save, allowed, 2, &c};
    return fuzz_loop(&o, &t) ? 1 : 0;
}
