/* `megatron-c inspect-data` (data/inspect.h): training's datasets, printed. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/args.h"
#include "base/error.h"
#include "data/inspect.h"
#include "data/sampler.h"
#include "data/sha256.h"
#include "data/source.h"

enum { FMT_IDS, FMT_TEXT, FMT_SHA256 };

static const char *const SPLIT_NAMES[3] = {"train", "valid", "test"};
static const char *const FORMAT_NAMES[3] = {"ids", "text", "sha256"};

typedef struct {
    int split;
    int format;
    bool samples_given, format_given, split_given;
    bool begin_given, end_given;    /* "A:B"; ":B" and "A:" leave one out */
    int64_t begin, end;
    int64_t dp_size;
    bool dp_rank_given;
    int64_t dp_rank;
    bool iteration_given;
    int64_t iteration;
} inspect_opts_t;

static void print_help(void)
{
    fputs(
        "usage: megatron-c inspect-data TRAINING-FLAGS [--split-name {train,valid,test}]\n"
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
        "--micro-batch-size too when --global-batch-size is given and --iteration is not): they do\n"
        "not change the datasets. See megatron-c --help for the training flags.\n"
        "\n"
        "Output: one header line\n"
        "  # samples: train=N valid=N test=N\n"
        "(the number of samples of each split; 0 when the split has no dataset; \"unbounded\" with\n"
        "--mock-data), then one line per sample: its index, a tab, and per --format.\n"
        "\n"
        "options:\n"
        "  --split-name {train,valid,test}\n"
        "                        the split whose samples are printed (default train)\n"
        "  --samples A:B         samples A, A+1, ..., B-1 (default 0:10, shortened to the split's\n"
        "                        length); \"A:\" runs to the split's end, \":B\" starts at 0\n"
        "  --format {ids,text,sha256}\n"
        "                        ids (default): the seq_length+1 token ids of the sample (tokens\n"
        "                        are all but the last, labels all but the first), separated by\n"
        "                        single spaces; -1 is the pad that ends a partial validation\n"
        "                        sample. text: those ids decoded by the tokenizer, with each\n"
        "                        backslash written as \\\\ and each newline as \\n (all other bytes,\n"
        "                        invalid UTF-8 included, as they are; trailing pads left out; not\n"
        "                        available with --mock-data). sha256: the lowercase hex SHA-256\n"
        "                        of those ids as little-endian int64\n"
        "  --data-parallel-size D\n"
        "                        data-parallel ranks of the training run (default 1; tensor,\n"
        "                        pipeline and context parallel sizes are 1): the default\n"
        "                        --global-batch-size is then --micro-batch-size x D\n"
        "  --iteration I         instead of samples, print the train-split samples that data-\n"
        "                        parallel rank R consumes in training iteration I (0-based, less\n"
        "                        than the number of training iterations): one line per\n"
        "                        microbatch, its number, a tab, and the global sample indices\n"
        "                        separated by single spaces (needs --micro-batch-size)\n"
        "  --data-parallel-rank R\n"
        "                        the rank R for --iteration, 0 <= R < D (default 0)\n"
        "  -h, --help            show this help message and exit\n",
        stdout);
}

/* ---- inspect-only options ---- */

/* A non-negative decimal integer, the whole of s. */
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

/* User text in a one-line message: at most 80 characters, control characters replaced. */
static const char *shown(const char *s, char buf[84])
{
    size_t n = 0;
    for (; s[n] && n < 80; n++) buf[n] = iscntrl((unsigned char)s[n]) ? '?' : s[n];
    if (s[n]) memcpy(buf + n, "...", 3), n += 3;
    buf[n] = '\0';
    return buf;
}

static int64_t int_option(const char *name, const char *v, int64_t min, int64_t max)
{
    char b[84];
    int64_t x;
    if (!parse_count(v, strlen(v), &x))
        mc_user_error("argument %s: invalid int value: '%s' (a non-negative integer below 2^63)",
                      name, shown(v, b));
    if (x < min || x > max)
        mc_user_error("argument %s: invalid value '%s' (must be in [%lld, %lld])", name, shown(v, b),
                      (long long)min, (long long)max);
    return x;
}

static int choice_option(const char *name, const char *v, const char *const *names, int n)
{
    char b[84];
    for (int i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0) return i;
    mc_user_error("argument %s: invalid choice: '%s' (choose from %s, %s, %s)", name, shown(v, b),
                  names[0], names[1], names[2]);
}

static void samples_option(inspect_opts_t *o, const char *v)
{
    char b[84];
    const char *colon = strchr(v, ':');
    if (!colon)
        mc_user_error("argument --samples: invalid value '%s' (expected A:B, the samples A to B-1)",
                      shown(v, b));
    size_t la = (size_t)(colon - v), lb = strlen(colon + 1);
    o->begin = 0;
    o->end = 0;
    o->begin_given = la > 0;
    o->end_given = lb > 0;
    if ((la && !parse_count(v, la, &o->begin)) || (lb && !parse_count(colon + 1, lb, &o->end)) ||
        (!la && !lb))
        mc_user_error("argument --samples: invalid value '%s' (expected A:B with non-negative "
                      "integers A <= B, the samples A to B-1)", shown(v, b));
    if (o->begin_given && o->end_given && o->begin > o->end)
        mc_user_error("argument --samples: invalid value '%s' (A must not exceed B in A:B)", shown(v, b));
    o->samples_given = true;
}

/* Which inspect option tok is (exact name, or name=value); -1 for none. */
static const char *const OPTION_NAMES[] = {"--split-name", "--samples", "--format",
                                           "--data-parallel-size", "--data-parallel-rank",
                                           "--iteration"};
enum { OPT_SPLIT, OPT_SAMPLES, OPT_FORMAT, OPT_DP_SIZE, OPT_DP_RANK, OPT_ITERATION, OPT_COUNT };

static int option_of(const char *tok, const char **eq)
{
    for (int k = 0; k < OPT_COUNT; k++) {
        size_t n = strlen(OPTION_NAMES[k]);
        if (strncmp(tok, OPTION_NAMES[k], n) != 0) continue;
        if (tok[n] == '\0') {
            *eq = NULL;
            return k;
        }
        if (tok[n] == '=') {
            *eq = tok + n + 1;
            return k;
        }
    }
    return -1;
}

static void set_option(inspect_opts_t *o, int k, const char *v)
{
    const char *name = OPTION_NAMES[k];
    switch (k) {
    case OPT_SPLIT:
        o->split = choice_option(name, v, SPLIT_NAMES, 3);
        o->split_given = true;
        break;
    case OPT_SAMPLES: samples_option(o, v); break;
    case OPT_FORMAT:
        o->format = choice_option(name, v, FORMAT_NAMES, 3);
        o->format_given = true;
        break;
    case OPT_DP_SIZE: o->dp_size = int_option(name, v, 1, INT_MAX); break;
    case OPT_DP_RANK:
        o->dp_rank = int_option(name, v, 0, INT_MAX - 1);
        o->dp_rank_given = true;
        break;
    case OPT_ITERATION:
        o->iteration = int_option(name, v, 0, INT64_MAX);
        o->iteration_given = true;
        break;
    }
}

/* Whether a training flag is on the command line (as "--name" or "--name=value"). */
static bool has_flag(char **rest, int n, const char *name)
{
    size_t len = strlen(name);
    for (int i = 0; i < n; i++)
        if (strncmp(rest[i], name, len) == 0 && (rest[i][len] == '\0' || rest[i][len] == '='))
            return true;
    return false;
}

/* Stand-ins for training's required model and optimizer flags, which do not change the datasets,
 * added only when the command line lacks them. */
static char P_LAYERS[] = "--num-layers", P_ONE[] = "1", P_HIDDEN[] = "--hidden-size",
            P_KV[] = "--kv-channels", P_HEADS[] = "--num-attention-heads",
            P_MAXPOS[] = "--max-position-embeddings", P_INTMAX[] = "2147483647",
            P_LR[] = "--lr", P_BIG[] = "1e30", P_MBS[] = "--micro-batch-size";

static int add_stand_ins(char **rest, int n, bool sampler)
{
    const int given = n;
    if (!has_flag(rest, given, P_LAYERS)) rest[n++] = P_LAYERS, rest[n++] = P_ONE;
    if (!has_flag(rest, given, P_HIDDEN)) {
        rest[n++] = P_HIDDEN, rest[n++] = P_ONE;
        /* so that a given head count need not divide the stand-in hidden size */
        if (!has_flag(rest, given, P_KV)) rest[n++] = P_KV, rest[n++] = P_ONE;
    }
    if (!has_flag(rest, given, P_HEADS)) rest[n++] = P_HEADS, rest[n++] = P_ONE;
    if (!has_flag(rest, given, P_MAXPOS)) rest[n++] = P_MAXPOS, rest[n++] = P_INTMAX;
    if (!has_flag(rest, given, P_LR)) rest[n++] = P_LR, rest[n++] = P_BIG;
    /* With --global-batch-size the micro-batch size does not change any split's size; without
     * it, it does (gbs = mbs x dp), and the sampler needs the real one. */
    if (!sampler && has_flag(rest, given, "--global-batch-size") &&
        !has_flag(rest, given, P_MBS))
        rest[n++] = P_MBS, rest[n++] = P_ONE;
    return n;
}

/* ---- output ---- */

static void put_escaped(const char *s, size_t n, FILE *out)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' && s[i] != '\n') continue;
        fwrite(s + run, 1, i - run, out);
        fputs(s[i] == '\\' ? "\\\\" : "\\n", out);
        run = i + 1;
    }
    fwrite(s + run, 1, n - run, out);
}

static void sha256_of_ids(const int32_t *ids, int count, char hex[65])
{
    mc_sha256_t c;
    uint8_t le[8 * 64], digest[32];
    mc_sha256_init(&c);
    for (int i = 0; i < count;) {
        int k = 0;
        for (; k < 64 && i < count; k++, i++) {
            uint64_t v = (uint64_t)(int64_t)ids[i];
            for (int b = 0; b < 8; b++) le[8 * k + b] = (uint8_t)(v >> (8 * b));
        }
        mc_sha256_update(&c, le, (size_t)k * 8);
    }
    mc_sha256_final(&c, digest);
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) hex[2 * i] = digits[digest[i] >> 4], hex[2 * i + 1] = digits[digest[i] & 15];
    hex[64] = '\0';
}

static void print_length(FILE *out, const mc_data_source_t *s, int split)
{
    int64_t len = mc_data_source_len(s, split);
    if (s->is_mock && len > 0)
        fprintf(out, " %s=unbounded", SPLIT_NAMES[split]);
    else
        fprintf(out, " %s=%lld", SPLIT_NAMES[split], (long long)len);
}

static void print_header(FILE *out, const mc_data_source_t *s)
{
    fputs("# samples:", out);
    for (int k = 0; k < 3; k++) print_length(out, s, k);
    fputc('\n', out);
}

/* Prints sample i of a split; the header first when *header_due (so that an error on the
 * first sample leaves nothing on stdout). */
static void print_sample(FILE *out, mc_data_source_t *s, int split, int64_t i, int format,
                         int32_t *text, bool *header_due)
{
    const int S = s->seq_length;
    char err[512];
    if (s->is_mock) {
        if (mc_mock_sample(&s->mock, split, i, S, text) != 0)
            mc_fatal("the %s split of the mock data is empty", SPLIT_NAMES[split]);
    } else {
        int rc = mc_gpt_datasets_text(s->gpt, split, i, text, err, sizeof(err));
        if (rc == MC_DATA_BAD_TOKENS) mc_user_error("%s", err);
        if (rc != 0) mc_fatal("sample %lld of the %s split: %s", (long long)i, SPLIT_NAMES[split], err);
    }
    char *bytes = NULL;
    size_t len = 0;
    if (format == FMT_TEXT) {
        int n = S + 1;
        while (n > 0 && text[n - 1] == s->opts.pad) n--;
        bytes = mc_tokenizer_decode(s->tokenizer, text, (size_t)n, &len);
        if (!bytes) {
            const int64_t v = mc_tokenizer_vocab_size(s->tokenizer);
            int k = 0;
            while (k < n && text[k] >= 0 && text[k] < v) k++;
            if (k == n) mc_fatal("out of host memory decoding sample %lld", (long long)i);
            const int bad = text[k];
            mc_user_error("sample %lld of the %s split holds id %d, outside the tokenizer's "
                          "vocabulary of %lld ids (is the tokenizer the one that made the dataset?)",
                          (long long)i, SPLIT_NAMES[split], bad, (long long)v);
        }
    }
    if (*header_due) print_header(out, s);
    *header_due = false;
    fprintf(out, "%lld\t", (long long)i);
    if (format == FMT_IDS) {
        for (int k = 0; k <= S; k++) fprintf(out, k ? " %d" : "%d", (int)text[k]);
    } else if (format == FMT_SHA256) {
        char hex[65];
        sha256_of_ids(text, S + 1, hex);
        fputs(hex, out);
    } else {
        put_escaped(bytes, len, out);
        free(bytes);
    }
    fputc('\n', out);
}

/* ---- the two modes ---- */

static void run_samples(mc_data_source_t *s, const inspect_opts_t *o)
{
    const int split = o->split;
    const int64_t len = mc_data_source_len(s, split);
    if (len == 0)
        mc_user_error("the %s split has no dataset (its --split weight is 0, or its "
                      "--%s-data-path is not given)", SPLIT_NAMES[split], SPLIT_NAMES[split]);
    if (o->format == FMT_TEXT && s->is_mock)
        mc_user_error("--format text needs a tokenizer to decode with, and --mock-data has none "
                      "(use --format ids or sha256)");
    /* Mock splits are unbounded; sample i starts at token i x seq_length, so stop before that
     * overflows. */
    const int64_t limit = s->is_mock ? INT64_MAX / (s->seq_length + 1) : len;
    int64_t begin = o->begin, end;
    if (!o->samples_given) {
        begin = 0;
        end = limit < 10 ? limit : 10;
    } else if (o->end_given) {
        end = o->end;
    } else if (s->is_mock) {
        mc_user_error("--samples %lld: needs an end with --mock-data (its splits are unbounded)",
                      (long long)begin);
    } else {
        end = len;
    }
    if (begin > end) /* "A:" with A past the end */
        mc_user_error("--samples %lld: starts past the end of the %s split (%lld samples)",
                      (long long)begin, SPLIT_NAMES[split], (long long)len);
    if (end > limit) {
        if (s->is_mock)
            mc_user_error("--samples %lld:%lld is too large for the mock data at --seq-length %d "
                          "(indices must stay below %lld)", (long long)begin, (long long)end,
                          s->seq_length, (long long)limit);
        mc_user_error("--samples %lld:%lld is out of range: the %s split has %lld samples "
                      "(0:%lld)", (long long)begin, (long long)end, SPLIT_NAMES[split],
                      (long long)len, (long long)len);
    }

    int32_t *text = malloc(((size_t)s->seq_length + 1) * sizeof(int32_t));
    if (!text) mc_fatal("out of host memory");
    bool header_due = true;
    for (int64_t i = begin; i < end; i++) print_sample(stdout, s, split, i, o->format, text, &header_due);
    if (header_due) print_header(stdout, s);
    free(text);
}

static void run_sampler(mc_data_source_t *s, const mc_args_t *a, const inspect_opts_t *o)
{
    const int64_t total = mc_data_source_len(s, MC_SPLIT_TRAIN);
    if (total == 0) mc_user_error("--iteration: the train split has no dataset");
    if (o->iteration >= a->train_iters)
        mc_user_error("--iteration %lld is past the end of training (iterations 0 to %lld of "
                      "--train-iters %lld)", (long long)o->iteration, (long long)a->train_iters - 1,
                      (long long)a->train_iters);
    const int mbs = a->micro_batch_size, dp = a->data_parallel_size, m = a->num_microbatches;
    const int64_t consumed = o->iteration * a->global_batch_size;
    mc_sampler_t smp;
    char err[512];
    if (mc_sampler_init(&smp, total, consumed, mbs, dp, (int)o->dp_rank, err, sizeof(err)) != 0)
        mc_user_error("--iteration %lld: %s", (long long)o->iteration, err);
    int64_t *idx = malloc((size_t)m * mbs * sizeof(int64_t));
    if (!idx) mc_fatal("out of host memory");
    for (int k = 0; k < m; k++)
        if (!mc_sampler_next(&smp, idx + (size_t)k * mbs))
            mc_user_error("--iteration %lld needs train samples up to %lld, but the train split "
                          "has %lld (the sampler drops an incomplete last block)",
                          (long long)o->iteration,
                          (long long)(consumed + (int64_t)m * mbs * dp - 1), (long long)total);
    print_header(stdout, s);
    for (int k = 0; k < m; k++) {
        printf("%d\t", k);
        for (int j = 0; j < mbs; j++) printf(j ? " %lld" : "%lld", (long long)idx[(size_t)k * mbs + j]);
        putchar('\n');
    }
    free(idx);
}

int mc_inspect_main(int argc, char **argv)
{
    inspect_opts_t o = {.split = MC_SPLIT_TRAIN, .format = FMT_IDS, .dp_size = 1};
    /* room for the stand-ins (add_stand_ins) */
    char **rest = calloc((size_t)argc + 16, sizeof(char *));
    if (!rest) mc_fatal("out of host memory parsing the command line");
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *eq;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help();
            free(rest);
            return 0;
        }
        int k = option_of(argv[i], &eq);
        if (k < 0) {
            rest[n++] = argv[i];
            continue;
        }
        if (!eq) {
            if (i + 1 >= argc) mc_user_error("argument %s: expected one argument", OPTION_NAMES[k]);
            eq = argv[++i];
        }
        set_option(&o, k, eq);
    }

    if (o.dp_rank_given && !o.iteration_given)
        mc_user_error("--data-parallel-rank needs --iteration (the rank's samples of that iteration)");
    if (o.dp_rank >= o.dp_size)
        mc_user_error("--data-parallel-rank (%lld) must be less than --data-parallel-size (%lld)",
                      (long long)o.dp_rank, (long long)o.dp_size);
    if (o.iteration_given) {
        if (o.samples_given || o.format_given)
            mc_user_error("--iteration prints sample indices per microbatch; --samples and "
                          "--format do not apply to it");
        if (o.split != MC_SPLIT_TRAIN)
            mc_user_error("--iteration is for the train split (training iterations), not "
                          "--split-name %s", SPLIT_NAMES[o.split]);
        if (!has_flag(rest, n, "--micro-batch-size"))
            mc_user_error("--iteration needs --micro-batch-size (the training run's)");
    }

    n = add_stand_ins(rest, n, o.iteration_given);
    static mc_args_t args;
    mc_args_parse(&args, n, rest, (int)o.dp_size);
    free(rest);

    mc_data_source_t src;
    char err[1024];
    if (mc_data_source_open(&src, &args, err, sizeof(err)) != 0) mc_user_error("%s", err);

    if (o.iteration_given)
        run_sampler(&src, &args, &o);
    else
        run_samples(&src, &o);
    if (fflush(stdout) != 0 || ferror(stdout)) mc_fatal("writing the output failed: %s", strerror(errno));

    mc_data_source_free(&src);
    mc_args_free(&args);
    return 0;
}
