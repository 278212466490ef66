/* `megatron-c inspect-data`'s command line (data/inspect.h): its own options and training's
 * flags in one parser, training's checks and validation, then the data layer prints. */
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cli/cli.h"
#include "config/flags_table.h"
#include "data/inspect.h"
#include "trainer/config.h"

typedef struct {
    const char *split, *samples, *format;
    int64_t dp_size, dp_rank, iteration;
} raw_t;

#define OPT(x) FIELD_OF(raw_t, x)
#define REF(x) REF_OF(raw_t, x)
#define G .group = "inspect-data"

static const mc_flag_t FLAGS[] = {
    {.name = "--split-name",
     G,
     CHOICE("train", "valid", "test"),
     REF(split),
     .def = "train",
     IMPLEMENTED,
     .help = "the split whose samples are printed"},
    {.name = "--samples",
     G,
     STRING,
     REF(samples),
     IMPLEMENTED,
     .help = "A:B, the samples A, A+1, ..., B-1 (default 0:10, shortened to the split's length); "
             "\"A:\" runs to the split's end, \":B\" starts at 0"},
    {.name = "--format",
     G,
     CHOICE("ids", "text", "sha256"),
     REF(format),
     .def = "ids",
     IMPLEMENTED,
     .help = "ids: the seq_length+1 token ids of the sample (tokens are all but the last, labels "
             "all but the first), separated by single spaces; -1 is the pad that ends a partial "
             "validation sample. text: those ids decoded by the tokenizer, with each backslash "
             "written as \\\\ and each newline as \\n (all other bytes, invalid UTF-8 included, "
             "as they are; trailing pads left out; not available with --mock-data sized by "
             "--vocab-size alone). sha256: the "
             "lowercase hex SHA-256 of those ids as little-endian int64"},
    {.name = "--data-parallel-size",
     G,
     INT64,
     OPT(dp_size),
     .def = "1",
     BETWEEN(1, INT_MAX),
     IMPLEMENTED,
     .help = "data-parallel ranks of the training run (tensor, pipeline and context parallel "
             "sizes are 1): the default --global-batch-size is then --micro-batch-size x D"},
    {.name = "--iteration",
     G,
     INT64,
     OPT(iteration),
     .def = "0",
     GE(0),
     IMPLEMENTED,
     .help = "instead of samples, print the train-split samples that data-parallel rank R "
             "consumes in training iteration I (0-based, less than the number of training "
             "iterations): one line per microbatch, its number, a tab, and the global sample "
             "indices separated by single spaces (needs --micro-batch-size)"},
    {.name = "--data-parallel-rank",
     G,
     INT64,
     OPT(dp_rank),
     .def = "0",
     BETWEEN(0, INT_MAX - 1),
     IMPLEMENTED,
     .help = "the rank R for --iteration, 0 <= R < D"},
    MC_FLAG_HELP_ROW("inspect-data"),
};

static void help(FILE *f)
{
    fputs("usage: megatron-c inspect-data TRAINING-FLAGS [--split-name {train,valid,test}]\n"
          "                               [--samples A:B] [--format {ids,text,sha256}]\n"
          "                               [--data-parallel-size D]\n"
          "                               [--iteration I [--data-parallel-rank R]]\n"
          "\n"
          "Builds the datasets that training with the same flags would build (--data-path and\n"
          "--split, or --train-data-path/--valid-data-path/--test-data-path, or --mock-data; with\n"
          "--seq-length, --seed, --train-iters or --train-samples, --global-batch-size,\n"
          "--eval-interval, --eval-iters, --tokenizer-type, --vocab-file, --merge-file, ...) and\n"
          "prints them. Training's model and optimizer flags are accepted but not needed\n"
          "(--num-layers, --hidden-size, --num-attention-heads, --max-position-embeddings, --lr;\n"
          "--micro-batch-size too when --global-batch-size is given and --iteration is not): they\n"
          "do not change the datasets. See megatron-c --help for the training flags.\n"
          "\n"
          "Output: one header line\n"
          "  # samples: train=N valid=N test=N\n"
          "(the number of samples of each split; 0 when the split has no dataset), then one\n"
          "line per sample: its index, a tab, and per --format.\n",
          f);
    mc_flag_set_t set = {FLAGS, sizeof(FLAGS) / sizeof(FLAGS[0]), NULL};
    mc_cli_print_flags(f, &set);
}

/* A non-negative decimal integer, the whole of s[0..len). */
static bool parse_count(const char *s, size_t len, int64_t *out)
{
    if (len == 0) return false;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i])) return false;
        if (v > (INT64_MAX - (s[i] - '0')) / 10) return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

static void samples_option(mc_inspect_opts_t *o, const char *v)
{
    char b[MC_SHOWN_MAX + 4];
    const char *colon = strchr(v, ':');
    if (!colon)
        mc_user_error("argument --samples: invalid value '%s' (expected A:B, the samples A to B-1)",
                      mc_shown(v, b));
    size_t la = (size_t)(colon - v), lb = strlen(colon + 1);
    o->begin_given = la > 0;
    o->end_given = lb > 0;
    if ((la && !parse_count(v, la, &o->begin)) || (lb && !parse_count(colon + 1, lb, &o->end)) ||
        (!la && !lb))
        mc_user_error("argument --samples: invalid value '%s' (expected A:B with non-negative "
                      "integers A <= B, the samples A to B-1)",
                      mc_shown(v, b));
    if (o->begin_given && o->end_given && o->begin > o->end)
        mc_user_error("argument --samples: invalid value '%s' (A must not exceed B in A:B)",
                      mc_shown(v, b));
    o->samples_given = true;
}

static int index_in(const char *v, const char *const *names)
{
    int i = 0;
    while (strcmp(names[i], v) != 0) i++; /* the parser checked the choice */
    return i;
}

/* The inspect options, checked against each other. */
static void options(mc_inspect_opts_t *o, const raw_t *r, const mc_cli_t *c,
                    const mc_flag_seen_t *seen)
{
    static const char *const formats[] = {"ids", "text", "sha256"};
    memset(o, 0, sizeof(*o));
    o->split = index_in(r->split, mc_inspect_split_names);
    o->format = index_in(r->format, formats);
    if (r->samples) samples_option(o, r->samples);
    o->iteration_given = mc_cli_seen(c, seen, "--iteration")->given;
    o->iteration = r->iteration;
    o->dp_rank = r->dp_rank;
    if (mc_cli_seen(c, seen, "--data-parallel-rank")->given && !o->iteration_given)
        mc_user_error("--data-parallel-rank needs --iteration (the rank's samples of that "
                      "iteration)");
    if (r->dp_rank >= r->dp_size)
        mc_user_error("--data-parallel-rank (%lld) must be less than --data-parallel-size (%lld)",
                      (long long)r->dp_rank, (long long)r->dp_size);
    if (!o->iteration_given) return;
    if (o->samples_given || mc_cli_seen(c, seen, "--format")->given)
        mc_user_error("--iteration prints sample indices per microbatch; --samples and --format do "
                      "not apply to it");
    if (o->split != 0)
        mc_user_error("--iteration is for the train split (training iterations), not "
                      "--split-name %s",
                      mc_inspect_split_names[o->split]);
    if (!mc_cli_seen(c, seen, "--micro-batch-size")->given)
        mc_user_error("--iteration needs --micro-batch-size (the training run's)");
}

/* A value for a training flag the command line lacks, stored as if given. */
static void stand_in(const mc_cli_t *c, mc_flag_seen_t *seen, const char *name, const char *text)
{
    mc_flag_seen_t *s = (mc_flag_seen_t *)mc_cli_seen(c, seen, name);
    if (s->given) return;
    bool ambiguous;
    const mc_flag_t *f = mc_cli_resolve(c, name, &ambiguous);
    void *base = c->sets[1].base;
    mc_flag_set_text(base, f, text);
    if (f->set_size) *((bool *)((char *)base + f->set_field)) = true;
    s->given = true;
    s->value = text;
}

/* Training's required model and optimizer flags do not change the datasets. */
static void stand_ins(const mc_cli_t *c, mc_flag_seen_t *seen, bool sampler)
{
    const bool hidden_given = mc_cli_seen(c, seen, "--hidden-size")->given;
    stand_in(c, seen, "--num-layers", "1");
    stand_in(c, seen, "--hidden-size", "1");
    /* so that a given head count need not divide the stand-in hidden size */
    if (!hidden_given) stand_in(c, seen, "--kv-channels", "1");
    stand_in(c, seen, "--num-attention-heads", "1");
    stand_in(c, seen, "--max-position-embeddings", "2147483647");
    stand_in(c, seen, "--lr", "1e30");
    /* With --global-batch-size the micro-batch size does not change any split's size; without
     * it, it does (gbs = mbs x dp), and the sampler needs the real one. */
    if (!sampler && mc_cli_seen(c, seen, "--global-batch-size")->given)
        stand_in(c, seen, "--micro-batch-size", "1");
}

int mc_cli_inspect(int argc, char **argv)
{
    static mc_args_t args;
    raw_t raw = {0};
    mc_args_defaults(&args);
    mc_cli_t c = {.prog = "megatron-c inspect-data",
                  .sets = {{FLAGS, sizeof(FLAGS) / sizeof(FLAGS[0]), &raw}},
                  .nsets = 1,
                  .help = help};
    c.nsets += mc_flag_training_sets(c.sets + 1, &args);
    for (size_t i = 0; i < sizeof(FLAGS) / sizeof(FLAGS[0]); i++) mc_flag_default(&raw, &FLAGS[i]);
    mc_flag_seen_t *seen = mc_cli_parse(&c, argc - 1, argv + 1);
    mc_inspect_opts_t o;
    options(&o, &raw, &c, seen);
    stand_ins(&c, seen, o.iteration_given);
    mc_cli_check_status(&c, seen, 1, c.nsets - 1);
    mc_args_run_hook(&args);
    mc_args_finalize(&args, (int)raw.dp_size);
    o.train_iters = args.train_iters;
    o.micro_batch_size = args.micro_batch_size;
    o.data_parallel_size = args.data_parallel_size;
    char err[512];
    if (o.iteration_given && mc_microbatches_init(&o.batches, &args, err, sizeof(err)) != 0)
        mc_user_error("%s", err);
    mc_data_config_t dc;
    mc_data_config_from_args(&dc, &args);
    int rc = mc_inspect_run(&dc, &o);
    mc_args_free(&args);
    return rc;
}
