/* Where training samples come from: Megatron's GPT datasets (--data-path, or the per-split
 * paths) with the tokenizer that made them, or Megatron's mock datasets (--mock-data) with the
 * tokenizer's vocabulary, behind one call that fills a microbatch. */
#ifndef MC_DATA_SOURCE_H
#define MC_DATA_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/fim_stream.h"
#include "data/gpt_dataset.h"
#include "data/tokenizer.h"

/* What a source is opened from (trainer/config.c makes it from the arguments). */
typedef struct {
    mc_tokenizer_spec_t tokenizer;
    /* the datasets: every field but the ones the tokenizer gives (sample.eod, sample.pad,
     * mock_vocab_size) and vocab_limit, which the source fills */
    mc_gpt_data_config_t gpt;
    /* the embedding's rows, ids are checked against: padded_vocab_size, or 0 for the tokenizer's
     * vocabulary padded to a multiple of vocab_divisible_by x tp (Megatron's) */
    int padded_vocab_size, vocab_divisible_by, tp;
    mc_fim_config_t fim; /* --fim-data and its flags (data/fim_stream.h) */
} mc_data_config_t;

typedef struct {
    bool is_mock; /* --mock-data */
    int seq_length;
    int64_t vocab_size; /* the tokenizer's (before padding) */
    mc_sample_opts_t opts;
    mc_tokenizer_t *tokenizer; /* NULL for mock data sized by --vocab-size alone */
    mc_gpt_datasets_t *gpt;
    mc_fim_streams_t *fim; /* --fim-data, else NULL */
    int64_t microbatch[3]; /* microbatches read per split (FIM's DataLoader worker) */
    int32_t *text;         /* one sample's text, for FIM */
} mc_data_source_t;

/* Builds the tokenizer and every split's dataset as pretrain_gpt.py would. 0, or -1 with one
 * line in err (names the file or the flag at fault). check_ids: a sample holding an id beyond
 * the embedding's rows (the padded vocabulary) is an error when read (training); negative ids
 * always are. inspect-data shows the ids as they are instead. */
int mc_data_source_open(mc_data_source_t *s, const mc_data_config_t *c, bool check_ids, char *err,
                        size_t n);
void mc_data_source_free(mc_data_source_t *s);

/* Samples in a split (0: no dataset for the split). */
int64_t mc_data_source_len(const mc_data_source_t *s, int split);

/* Fills [b, seq_length] tokens/labels/loss_mask/positions (and segments, the per-document
 * attention of --reset-attention-mask, when not NULL) with samples idx[0..b) of a split.
 * 0, or -1 with err (index past the split's end), or MC_DATA_BAD_TOKENS with err (the .bin
 * holds a token id outside the padded vocabulary: the user's data error). */
int mc_data_source_batch(mc_data_source_t *s, int split, const int64_t *idx, int b, int32_t *tokens,
                         int32_t *labels, float *loss_mask, int32_t *positions, int32_t *segments,
                         char *err, size_t n);

/* Sample i's text (seq_length + 1 ids) as training reads it: with --fim-data transformed, each
 * call drawing from the FIM state of worker 0 (inspect-data reads samples in order in one
 * process, as Megatron with --num-workers 0). 0, or as mc_data_source_batch. */
int mc_data_source_text(mc_data_source_t *s, int split, int64_t i, int32_t *text, char *err,
                        size_t n);

#endif
