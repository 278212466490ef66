/* Fuzzes Megatron's indexed dataset reader (data/indexed_reader.c) and what reads through it:
 * mutated .idx (and sometimes .bin) files are opened with mc_indexed_open; when one opens, every
 * sequence is read with mc_indexed_get and a GPTDataset is built over it and its samples read
 * (data/gpt_dataset.c), as training would. Seeds: the prefixes on the command line (a real
 * preprocess_data.py output) and two small datasets written here (uint16 and int32 tokens).
 *
 *   fuzz_idx [--seconds N] [--seed S] [--crashes DIR] [PREFIX...] */
#include "test/fuzz/fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/gpt_dataset.h"
#include "data/indexed.h"

#define MAX_SEEDS 8
#define MAX_LEN (4u << 20)

typedef struct {
    fuzz_buf_t idx[MAX_SEEDS], bin[MAX_SEEDS];
    int n_seeds;
    fuzz_buf_t cur_idx, cur_bin;
    char dir[64], prefix[128];
    bool multimodal;
    int seq_length;
    int64_t limit;
} idx_ctx_t;

static void add_seed(idx_ctx_t *c, const char *prefix)
{
    char path[4200];
    if (c->n_seeds == MAX_SEEDS) return;
    snprintf(path, sizeof path, "%s.idx", prefix);
    int bad = fuzz_read_file(path, &c->idx[c->n_seeds]);
    snprintf(path, sizeof path, "%s.bin", prefix);
    bad |= fuzz_read_file(path, &c->bin[c->n_seeds]);
    if (bad) {
        fprintf(stderr, "fuzz idx: cannot read %s.idx/.bin\n", prefix);
        exit(2);
    }
    c->n_seeds++;
}

/* A small dataset from the writer: documents of 0..3 sequences of 0..40 tokens. */
static void write_small(idx_ctx_t *c, const char *name, int dtype)
{
    char prefix[256], err[512];
    snprintf(prefix, sizeof prefix, "%s/%s", c->dir, name);
    mc_indexed_writer_t *w = mc_indexed_writer_open(prefix, dtype, err, sizeof err);
    if (!w) {
        fprintf(stderr, "fuzz idx: %s\n", err);
        exit(2);
    }
    int32_t tokens[160], lengths[4];
    for (int d = 0; d < 12; d++) {
        int ns = d % 4, total = 0;
        for (int s = 0; s < ns; s++) {
            lengths[s] = (d * 7 + s * 13) % 41;
            for (int k = 0; k < lengths[s]; k++) tokens[total++] = (d * 131 + k * 17) % 1000;
        }
        if (mc_indexed_writer_add_document(w, tokens, lengths, ns, err, sizeof err) != 0) exit(2);
    }
    if (mc_indexed_writer_finish(w, err, sizeof err) != 0) exit(2);
    add_seed(c, prefix);
}

static void make(void *ctx, long i)
{
    idx_ctx_t *c = ctx;
    int s = (int)fuzz_below((uint64_t)c->n_seeds);
    fuzz_buf_set(&c->cur_idx, c->idx[s].p, c->idx[s].n);
    fuzz_buf_set(&c->cur_bin, c->bin[s].p, c->bin[s].n);
    uint64_t what = fuzz_below(10);
    if (what < 8) fuzz_mutate(&c->cur_idx, 34 + 64, MAX_LEN);
    if (what >= 7) fuzz_mutate(&c->cur_bin, 0, MAX_LEN);
    c->multimodal = fuzz_below(8) == 0;
    c->seq_length = 2 + (int)fuzz_below(63);
    c->limit = fuzz_below(3) ? (int64_t)fuzz_below(70000) : 0;
    char path[200];
    snprintf(path, sizeof path, "%s.idx", c->prefix);
    fuzz_write_file(path, c->cur_idx.p, c->cur_idx.n);
    snprintf(path, sizeof path, "%s.bin", c->prefix);
    fuzz_write_file(path, c->cur_bin.p, c->cur_bin.n);
}

/* Every token of every sequence (bounded), then a GPTDataset over all of it and its samples. */
static void read_all(const mc_indexed_t *x, const idx_ctx_t *c)
{
    char err[1024];
    int64_t total = 0;
    for (int64_t s = 0; s < x->num_sequences && total < (1 << 22); s++) {
        int64_t len = x->sequence_lengths[s];
        int32_t *out = malloc(sizeof(int32_t) * (size_t)(len ? len : 1));
        if (!out) return;
        mc_indexed_get(x, s, 0, len, out, err, sizeof err);
        mc_indexed_get(x, s, len / 2, len - len / 2, out, err, sizeof err);
        free(out);
        total += len;
    }
    if (total >= (1 << 20) || x->num_sequences == 0) return;
    mc_gpt_dataset_t d;
    if (mc_gpt_dataset_build(&d, x->sequence_lengths, x->num_sequences, 0, x->num_sequences, -1,
                             MC_SPLIT_TRAIN, c->seq_length, 1234, true, err, sizeof err) != 0)
        return;
    d.indexed = x;
    d.token_limit = c->limit;
    int32_t *text = malloc(sizeof(int32_t) * ((size_t)c->seq_length + 1));
    for (int64_t i = 0; text && i < d.length && i < 4096; i++)
        mc_gpt_dataset_text(&d, i, MC_PAD_TOKEN_ID, text, err, sizeof err);
    free(text);
    mc_gpt_dataset_free(&d);
}

static void run(void *ctx)
{
    idx_ctx_t *c = ctx;
    mc_indexed_t x;
    char err[1024];
    if (mc_indexed_open(&x, c->prefix, c->multimodal, err, sizeof err) != 0) {
        if (!memchr(err, '\0', sizeof err) || strchr(err, '\n')) abort(); /* one line */
        return;
    }
    read_all(&x, c);
    mc_indexed_close(&x);
}

static void save(void *ctx, const char *prefix)
{
    idx_ctx_t *c = ctx;
    char path[4300];
    snprintf(path, sizeof path, "%s.idx", prefix);
    fuzz_write_file(path, c->cur_idx.p, c->cur_idx.n);
    snprintf(path, sizeof path, "%s.bin", prefix);
    fuzz_write_file(path, c->cur_bin.p, c->cur_bin.n);
    snprintf(path, sizeof path, "%s.txt", prefix);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "multimodal %d seq_length %d token_limit %lld\n", c->multimodal,
                c->seq_length, (long long)c->limit);
        fclose(f);
    }
}

int main(int argc, char **argv)
{
    fuzz_opts_t o;
    fuzz_parse(&o, argc, argv, "[PREFIX...]");
    static idx_ctx_t c;
    snprintf(c.dir, sizeof c.dir, "/tmp/fuzz_idx_XXXXXX");
    if (!mkdtemp(c.dir)) return 2;
    snprintf(c.prefix, sizeof c.prefix, "%s/in", c.dir);
    for (int k = 0; k < o.argc; k++) add_seed(&c, o.argv[k]);
    write_small(&c, "u16", MC_DTYPE_UINT16);
    write_small(&c, "i32", MC_DTYPE_INT32);
    static const int allowed[] = {0};
    fuzz_target_t t = {"idx", make, run, save, allowed, 1, &c};
    long failures = fuzz_loop(&o, &t);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", c.dir);
    if (system(cmd) != 0) fprintf(stderr, "fuzz idx: could not remove %s\n", c.dir);
    for (int s = 0; s < c.n_seeds; s++) fuzz_buf_free(&c.idx[s]), fuzz_buf_free(&c.bin[s]);
    fuzz_buf_free(&c.cur_idx);
    fuzz_buf_free(&c.cur_bin);
    return failures ? 1 : 0;
}
