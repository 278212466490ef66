#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/source.h"

int mc_data_source_open(mc_data_source_t *s, const mc_args_t *a, bool check_ids, char *err,
                        size_t n)
{
    memset(s, 0, sizeof(*s));
    s->seq_length = a->seq_length;
    s->opts.eod_mask_loss = a->eod_mask_loss;
    s->opts.reset_position_ids = a->reset_position_ids;
    s->opts.reset_attention_mask = a->reset_attention_mask;
    s->opts.pad = MC_PAD_TOKEN_ID;

    if (a->mock_data) {
        /* The mock vocabulary is --vocab-size (plus eod for NullTokenizer, as Megatron's). */
        s->is_mock = true;
        s->vocab_size = mc_args_vocab_from_size(a);
        s->text = malloc(((size_t)a->seq_length + 1) * sizeof(int32_t));
        if (!s->text || mc_mock_init(&s->mock, (int32_t)s->vocab_size, MC_MOCK_NUM_DOCS) != 0) {
            snprintf(err, n, "out of host memory building the mock dataset");
            return -1;
        }
        s->opts.eod = s->mock.eod;
        return 0;
    }

    if (a->n_data_path + a->n_train_data_path + a->n_valid_data_path + a->n_test_data_path == 0) {
        snprintf(err, n,
                 "no training data (pass --data-path PREFIX, the per-split --*-data-path "
                 "flags, or --mock-data)");
        return -1;
    }
    s->tokenizer =
        mc_tokenizer_build(a->tokenizer_type, a->vocab_file, a->merge_file, a->vocab_size, err, n);
    if (!s->tokenizer) return -1;
    s->vocab_size = mc_tokenizer_vocab_size(s->tokenizer);
    s->opts.eod = mc_tokenizer_eod(s->tokenizer);

    mc_gpt_data_config_t c;
    mc_gpt_data_config_from_args(&c, a, s->opts.eod, s->opts.pad);
    c.mid_level_dataset_surplus = a->mid_level_dataset_surplus;
    /* The embedding's rows, as mc_pretrain pads the vocabulary: ids in [vocab, padded) index
     * padding rows in Megatron too, and train; ids beyond are its IndexError. */
    c.vocab_limit = !check_ids ? 0
                    : a->padded_vocab_size > 0
                        ? a->padded_vocab_size
                        : mc_padded_vocab_size((int)s->vocab_size, a->make_vocab_size_divisible_by,
                                               a->tensor_model_parallel_size);
    c.n_split_data_path[MC_SPLIT_TRAIN] = a->n_train_data_path;
    c.split_data_path[MC_SPLIT_TRAIN] = a->train_data_path;
    c.n_split_data_path[MC_SPLIT_VALID] = a->n_valid_data_path;
    c.split_data_path[MC_SPLIT_VALID] = a->valid_data_path;
    c.n_split_data_path[MC_SPLIT_TEST] = a->n_test_data_path;
    c.split_data_path[MC_SPLIT_TEST] = a->test_data_path;
    s->gpt = mc_gpt_datasets_build(&c, err, n);
    return s->gpt ? 0 : -1;
}

void mc_data_source_free(mc_data_source_t *s)
{
    if (s->gpt) mc_gpt_datasets_free(s->gpt);
    if (s->tokenizer) mc_tokenizer_free(s->tokenizer);
    if (s->is_mock) mc_mock_free(&s->mock);
    free(s->text);
    memset(s, 0, sizeof(*s));
}

int64_t mc_data_source_len(const mc_data_source_t *s, int split)
{
    if (s->is_mock) return s->mock.split_tokens[split] > 0 ? INT64_MAX : 0;
    return mc_gpt_datasets_len(s->gpt, split);
}

int mc_data_source_batch(mc_data_source_t *s, int split, const int64_t *idx, int b, int32_t *tokens,
                         int32_t *labels, float *loss_mask, int32_t *positions, int32_t *segments,
                         char *err, size_t n)
{
    const int S = s->seq_length;
    if (!s->is_mock)
        return mc_gpt_datasets_batch(s->gpt, split, idx, b, tokens, labels, loss_mask, positions,
                                     segments, err, n);
    for (int r = 0; r < b; r++) {
        if (mc_mock_sample(&s->mock, split, idx[r], S, s->text) != 0) {
            snprintf(err, n, "the %s split of the mock data is empty",
                     split == MC_SPLIT_TRAIN   ? "train"
                     : split == MC_SPLIT_VALID ? "valid"
                                               : "test");
            return -1;
        }
        size_t o = (size_t)r * S;
        mc_gpt_sample_fields(s->text, S, &s->opts, tokens + o, labels + o, loss_mask + o,
                             positions + o, segments ? segments + o : NULL);
    }
    return 0;
}
