/* `megatron-c inspect-data` (data/inspect.h): training's datasets, printed. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "config/microbatches.h"
#include "data/inspect.h"
#include "data/sampler.h"
#include "data/sha256.h"
#include "data/source.h"

#define FMT_IDS MC_INSPECT_IDS
#define FMT_TEXT MC_INSPECT_TEXT
#define FMT_SHA256 MC_INSPECT_SHA256
#define SPLIT_NAMES mc_inspect_split_names

const char *const mc_inspect_split_names[3] = {"train", "valid", "test"};

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
    for (int i = 0; i < 32; i++)
        hex[2 * i] = digits[digest[i] >> 4], hex[2 * i + 1] = digits[digest[i] & 15];
    hex[64] = '\0';
}

static void print_length(FILE *out, const mc_data_source_t *s, int split)
{
    fprintf(out, " %s=%lld", SPLIT_NAMES[split], (long long)mc_data_source_len(s, split));
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
    int rc = mc_data_source_text(s, split, i, text, err, sizeof(err));
    if (rc == MC_DATA_BAD_TOKENS) mc_user_error("%s", err);
    if (rc != 0) mc_fatal("sample %lld of the %s split: %s", (long long)i, SPLIT_NAMES[split], err);
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
            mc_user_error(
                "sample %lld of the %s split holds id %d, outside the tokenizer's "
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

static void run_samples(mc_data_source_t *s, const mc_inspect_opts_t *o)
{
    const int split = o->split;
    const int64_t len = mc_data_source_len(s, split);
    if (len == 0)
        mc_user_error("the %s split has no dataset (its --split weight is 0, or its "
                      "--%s-data-path is not given)",
                      SPLIT_NAMES[split], SPLIT_NAMES[split]);
    if (o->format == FMT_TEXT && !s->tokenizer)
        mc_user_error("--format text needs a tokenizer to decode with, and --mock-data sized by "
                      "--vocab-size has none (give --vocab-file and --merge-file, or use --format "
                      "ids or sha256)");
    int64_t begin = o->begin, end;
    if (!o->samples_given) {
        begin = 0;
        end = len < 10 ? len : 10;
    } else if (o->end_given) {
        end = o->end;
    } else {
        end = len;
    }
    if (begin > end) /* "A:" with A past the end */
        mc_user_error("--samples %lld: starts past the end of the %s split (%lld samples)",
                      (long long)begin, SPLIT_NAMES[split], (long long)len);
    if (end > len) {
        mc_user_error("--samples %lld:%lld is out of range: the %s split has %lld samples "
                      "(0:%lld)",
                      (long long)begin, (long long)end, SPLIT_NAMES[split], (long long)len,
                      (long long)len);
    }

    int32_t *text = malloc(((size_t)s->seq_length + 1) * sizeof(int32_t));
    if (!text) mc_fatal("out of host memory");
    bool header_due = true;
    for (int64_t i = begin; i < end; i++)
        print_sample(stdout, s, split, i, o->format, text, &header_due);
    if (header_due) print_header(stdout, s);
    free(text);
}

static void run_sampler(mc_data_source_t *s, const mc_inspect_opts_t *o)
{
    const int64_t total = mc_data_source_len(s, MC_SPLIT_TRAIN);
    if (total == 0) mc_user_error("--iteration: the train split has no dataset");
    if (o->iteration >= o->train_iters)
        mc_user_error("--iteration %lld is past the end of training (iterations 0 to %lld of "
                      "--train-iters %lld)",
                      (long long)o->iteration, (long long)o->train_iters - 1,
                      (long long)o->train_iters);
    const int mbs = o->micro_batch_size, dp = o->data_parallel_size;
    /* the iteration's batch and its first sample: with --rampup-batch-size, each earlier
     * iteration consumed its own batch */
    mc_microbatches_t c = o->batches;
    const int64_t consumed = mc_microbatches_seek(&c, o->iteration);
    const int m = c.num_microbatches;
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
        for (int j = 0; j < mbs; j++)
            printf(j ? " %lld" : "%lld", (long long)idx[(size_t)k * mbs + j]);
        putchar('\n');
    }
    free(idx);
}

int mc_inspect_run(const mc_data_config_t *dc, const mc_inspect_opts_t *o)
{
    mc_data_source_t src;
    char err[1024];
    if (mc_data_source_open(&src, dc, false, err, sizeof(err)) != 0) mc_user_error("%s", err);

    if (o->iteration_given) run_sampler(&src, o);
    else run_samples(&src, o);
    if (fflush(stdout) != 0 || ferror(stdout))
        mc_fatal("writing the output failed: %s", strerror(errno));

    mc_data_source_free(&src);
    return 0;
}
