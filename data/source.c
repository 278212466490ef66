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

    if (a->n_data_path + a->n_train_data_path + a->n_valid_data_path + a->n_test_data_path == 0 &&
        !a->mock_data) {
        snprintf(err, n,
                 "no training data (pass --data-path PREFIX, the per-split --*-data-path "
                 "flags, or --mock-data)");
        return -1;
    }
    s->is_mock = a->mock_data;
    /* Megatron's mock data takes its vocabulary and eod from the tokenizer it builds, like real
     * data. megatron-c's own addition: GPT2BPETokenizer without its files and --vocab-size V
     * give mock data V ids with eod V - 1 (Megatron needs the files). */
    const bool gpt2 = strcmp(a->tokenizer_type, "GPT2BPETokenizer") == 0;
    if (a->mock_data && gpt2 && !a->vocab_file[0] && !a->merge_file[0]) {
        s->vocab_size = a->vocab_size;
        s->opts.eod = (int32_t)(a->vocab_size - 1);
    } else {
        const mc_tokenizer_spec_t spec = mc_tokenizer_spec_of(a);
        s->tokenizer = mc_tokenizer_build(&spec, err, n);
        if (!s->tokenizer) return -1;
        /* Megatron pads its global (legacy) tokenizer's vocabulary; the datasets take eod and
         * pad from the tokenizer of --legacy-tokenizer's choice (they differ for SentencePiece). */
        s->vocab_size = mc_tokenizer_train_vocab_size(s->tokenizer);
        s->opts.eod = mc_tokenizer_eod(s->tokenizer);
        s->opts.pad = mc_tokenizer_pad(s->tokenizer);
        if (a->mock_data && s->opts.eod < 0) {
            snprintf(err, n,
                     "%s: the model '%s' has no eos piece, so no eod for mock data's documents",
                     a->tokenizer_type, a->tokenizer_model);
            return -1;
        }
    }

    mc_gpt_data_config_t c;
    mc_gpt_data_config_from_args(&c, a, s->opts.eod, s->opts.pad);
    c.mid_level_dataset_surplus = a->mid_level_dataset_surplus;
    c.mock = a->mock_data;
    c.mock_vocab_size = s->vocab_size;
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
    memset(s, 0, sizeof(*s));
}

int64_t mc_data_source_len(const mc_data_source_t *s, int split)
{
    return mc_gpt_datasets_len(s->gpt, split);
}

int mc_data_source_batch(mc_data_source_t *s, int split, const int64_t *idx, int b, int32_t *tokens,
                         int32_t *labels, float *loss_mask, int32_t *positions, int32_t *segments,
                         char *err, size_t n)
{
    return mc_gpt_datasets_batch(s->gpt, split, idx, b, tokens, labels, loss_mask, positions,
                                 segments, err, n);
}
