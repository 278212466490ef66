#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/source.h"

#include "base/error.h"

int mc_data_source_open(mc_data_source_t *s, const mc_data_config_t *dc, bool check_ids, char *err,
                        size_t n)
{
    const mc_gpt_data_config_t *g = &dc->gpt;
    const mc_tokenizer_spec_t *spec = &dc->tokenizer;
    memset(s, 0, sizeof(*s));
    s->seq_length = g->seq_length;
    s->opts = g->sample;
    s->opts.pad = MC_PAD_TOKEN_ID;

    if (g->n_data_path + g->n_split_data_path[MC_SPLIT_TRAIN] +
                g->n_split_data_path[MC_SPLIT_VALID] + g->n_split_data_path[MC_SPLIT_TEST] ==
            0 &&
        !g->mock) {
        snprintf(err, n,
                 "no training data (pass --data-path PREFIX, the per-split --*-data-path "
                 "flags, or --mock-data)");
        return -1;
    }
    s->is_mock = g->mock;
    /* Megatron's mock data takes its vocabulary and eod from the tokenizer it builds, like real
     * data. megatron-c's own addition: GPT2BPETokenizer without its files and --vocab-size V
     * give mock data V ids with eod V - 1 (Megatron needs the files). */
    const bool gpt2 = strcmp(spec->type, "GPT2BPETokenizer") == 0;
    if (g->mock && gpt2 && !spec->vocab_file[0] && !spec->merge_file[0]) {
        s->vocab_size = spec->vocab_size;
        s->opts.eod = (int32_t)(spec->vocab_size - 1);
    } else {
        s->tokenizer = mc_tokenizer_build(spec, err, n);
        if (!s->tokenizer) return -1;
        /* Megatron pads its global (legacy) tokenizer's vocabulary; the datasets take eod and
         * pad from the tokenizer of --legacy-tokenizer's choice (they differ for SentencePiece). */
        s->vocab_size = mc_tokenizer_train_vocab_size(s->tokenizer);
        s->opts.eod = mc_tokenizer_eod(s->tokenizer);
        s->opts.pad = mc_tokenizer_pad(s->tokenizer);
        if (g->mock && s->opts.eod < 0) {
            snprintf(err, n,
                     "%s: the model '%s' has no eos piece, so no eod for mock data's documents",
                     spec->type, spec->tokenizer_model);
            return -1;
        }
    }

    mc_gpt_data_config_t c = *g;
    c.sample.eod = s->opts.eod;
    c.sample.pad = s->opts.pad;
    c.mock_vocab_size = s->vocab_size;
    /* The embedding's rows, as the vocabulary is padded: ids in [vocab, padded) index padding
     * rows in Megatron too, and train; ids beyond are its IndexError. */
    c.vocab_limit = !check_ids ? 0
                    : dc->padded_vocab_size > 0
                        ? dc->padded_vocab_size
                        : mc_padded_vocab_size((int)s->vocab_size, dc->vocab_divisible_by, dc->tp);
    s->gpt = mc_gpt_datasets_build(&c, err, n);
    if (!s->gpt) return -1;
    if (dc->fim.on) {
        s->fim = mc_fim_streams_open(&dc->fim, s->tokenizer, err, n);
        if (!s->fim) return -1;
        s->text = malloc(((size_t)g->seq_length + 1) * sizeof(int32_t));
        if (!s->text) return mc_errf(err, n, "--fim-data: out of memory");
    }
    return 0;
}

void mc_data_source_free(mc_data_source_t *s)
{
    if (s->gpt) mc_gpt_datasets_free(s->gpt);
    if (s->tokenizer) mc_tokenizer_free(s->tokenizer);
    mc_fim_streams_free(s->fim);
    free(s->text);
    memset(s, 0, sizeof(*s));
}

int64_t mc_data_source_len(const mc_data_source_t *s, int split)
{
    return mc_gpt_datasets_len(s->gpt, split);
}

/* Sample i's text, FIM-transformed with the state of the split's microbatch number mb. A
 * partial validation sample's trailing pads stay (Megatron's FIM dataset does not pad it; the
 * transform covers the ids it holds). */
static int fim_text(mc_data_source_t *s, int split, int64_t i, int64_t mb, int32_t *text, char *err,
                    size_t n)
{
    int rc = mc_gpt_datasets_text(s->gpt, split, i, text, err, n);
    if (rc) return rc;
    int comp = 0;
    int64_t j;
    mc_gpt_datasets_blend_at(s->gpt, split, i, &comp, &j);
    int len = s->seq_length + 1;
    while (len > 0 && text[len - 1] == MC_PAD_TOKEN_ID) len--;
    return mc_fim_streams_apply(s->fim, split, comp, mc_gpt_datasets_components(s->gpt, split), mb,
                                text, len, err, n);
}

int mc_data_source_text(mc_data_source_t *s, int split, int64_t i, int32_t *text, char *err,
                        size_t n)
{
    if (!s->fim) return mc_gpt_datasets_text(s->gpt, split, i, text, err, n);
    return fim_text(s, split, i, 0, text, err, n);
}

int mc_data_source_batch(mc_data_source_t *s, int split, const int64_t *idx, int b, int32_t *tokens,
                         int32_t *labels, float *loss_mask, int32_t *positions, int32_t *segments,
                         char *err, size_t n)
{
    if (s->fim) {
        const int64_t mb = s->microbatch[split]++;
        const int S = s->seq_length;
        for (int r = 0; r < b; r++) {
            int rc = fim_text(s, split, idx[r], mb, s->text, err, n);
            if (rc) return rc;
            size_t o = (size_t)r * (size_t)S;
            mc_gpt_sample_fields(s->text, S, &s->opts, tokens + o, labels + o, loss_mask + o,
                                 positions + o, segments ? segments + o : NULL);
        }
        return 0;
    }
    return mc_gpt_datasets_batch(s->gpt, split, idx, b, tokens, labels, loss_mask, positions,
                                 segments, err, n);
}
