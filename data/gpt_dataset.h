/* Megatron's GPT dataset sampling, bit for bit (MEGATRON.md sections 2.1-2.8):
 *
 *   mc_gpt_dataset_t   one Megatron GPTDataset: one indexed dataset (prefix), one split. Its
 *                      document index, sample index and shuffle index are built exactly as
 *                      GPTDataset._build_document_sample_shuffle_indices and helpers.cpp do,
 *                      with a numpy-compatible RandomState(seed) (data/mt19937.h).
 *   mc_gpt_datasets_t  what BlendedMegatronDatasetBuilder returns for pretrain_gpt.py: per split
 *                      (train, valid, test) nothing, one GPTDataset, or a BlendedDataset of
 *                      several (data/blend.h), from --data-path + --split or from per-split
 *                      paths (--train-data-path ...); or with --mock-data one MockGPTDataset
 *                      per split (data/mock.h).
 *
 * The three index arrays are cached as Megatron caches them (data/index_cache.h): with a cache
 * directory (--data-cache-path, by default <prefix>/cache/GPTDataset_indices), each GPTDataset's
 * arrays are written there as .npy files after building and read back at the next start-up
 * instead of rebuilt, when the entry's description (prefix, a hash of its sequence lengths, split
 * range, sample count, seq_length, seed, drop-last flag, cache format) matches exactly. A missing,
 * damaged or unwritable cache is a warning at most: the arrays are then built in memory, the same
 * arrays (building is an O(tokens / seq_length + documents) pass).
 *
 * Splits are MC_SPLIT_TRAIN / MC_SPLIT_VALID / MC_SPLIT_TEST (data/mock.h). data/gpt_dataset.c
 * holds one GPTDataset, data/dataset_builder.c the builder of all splits. */
#ifndef MC_DATA_GPT_DATASET_H
#define MC_DATA_GPT_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/indexed.h"
#include "data/mock.h"

/* megatron_dataset._PAD_TOKEN_ID: the pad id when the tokenizer has none (GPT-2). */
#define MC_PAD_TOKEN_ID (-1)
/* add_extra_token_to_sequence: always True for pretrain_gpt. */
#define MC_GPT_ADD_EXTRA_TOKEN 1

/* "train", "valid" or "test": a split's name in messages. */
const char *mc_split_name(int split);

/* ---------------------------------------------------------------------------------------------
 * One GPTDataset */
typedef struct {
    int split; /* MC_SPLIT_* (valid may keep a partial last sample) */
    int seq_length;
    int64_t seq_begin, seq_end;    /* the split's sequences [begin, end) of the indexed dataset */
    int64_t num_samples_requested; /* -1: None (one epoch) */
    int64_t tokens_per_epoch;
    int64_t num_epochs;
    bool separate_final_epoch;
    int64_t num_samples_sans_final_epoch; /* when separate_final_epoch */
    /* document_index: int32 sequence ids, num_epochs * (end - begin) of them. */
    int32_t *document_index;
    int64_t document_index_len;
    /* sample_index: [length + 1][2] of (position in document_index, token offset); int32 when
     * max(document_index_len, max sequence length) <= INT32_MAX, else int64 (helpers.py). */
    void *sample_index;
    bool sample_index_int64;
    /* shuffle_index: [length], uint32, or int64 when length >= 2^32 - 2. */
    void *shuffle_index;
    bool shuffle_index_int64;
    int64_t length;              /* len(GPTDataset) = sample_index rows - 1 */
    const mc_indexed_t *indexed; /* token source for mc_gpt_dataset_text; not owned */
    const mc_mock_data_t *mock;  /* or this one (--mock-data); not owned */
    /* Token ids read from the .bin must lie in [0, token_limit) (the embedding's rows); 0: only
     * negative ids are refused. */
    int64_t token_limit;
    bool from_cache; /* the arrays were read from the index cache */
} mc_gpt_dataset_t;

/* Builds the indices of the GPTDataset over sequences [begin, end) of a dataset whose sequence
 * lengths are sequence_lengths[num_sequences]. num_samples: the requested sample count, or -1
 * for None (one epoch). drop_last_partial_sequence: true except for the validation split with
 * drop_last_partial_validation_sequence off. seed: RandomState(seed), in [0, 2^32 - 1].
 * Returns 0, or -1 with one line in err (what Megatron would assert on, or out of memory).
 * d->indexed is left NULL; set it to fetch tokens. */
int mc_gpt_dataset_build(mc_gpt_dataset_t *d, const int32_t *sequence_lengths,
                         int64_t num_sequences, int64_t begin, int64_t end, int64_t num_samples,
                         int split, int seq_length, int64_t seed, bool drop_last_partial_sequence,
                         char *err, size_t n);
void mc_gpt_dataset_free(mc_gpt_dataset_t *d);

/* The index cache of one indexed dataset (data/index_cache.h). */
typedef struct {
    const char *dir;          /* the cache directory; NULL or "": no cache */
    const char *dataset_path; /* the prefix, for the description */
    const char *lengths_md5;  /* mc_index_cache_lengths_md5 of all its sequence lengths, or
                               * NULL to compute it here */
} mc_gpt_index_cache_t;

/* mc_gpt_dataset_build with the index cache: the arrays are read from the cache entry of this
 * description when it is there and sound (d->from_cache), else built and written there. cache
 * NULL: exactly mc_gpt_dataset_build. Cache problems are warnings (base/error.h mc_warn), never
 * errors; the return value and err are mc_gpt_dataset_build's. */
int mc_gpt_dataset_build_cached(mc_gpt_dataset_t *d, const int32_t *sequence_lengths,
                                int64_t num_sequences, int64_t begin, int64_t end,
                                int64_t num_samples, int split, int seq_length, int64_t seed,
                                bool drop_last_partial_sequence, const mc_gpt_index_cache_t *cache,
                                char *err, size_t n);

/* Entries of the index arrays, whatever their dtype. */
int64_t mc_gpt_dataset_shuffle_at(const mc_gpt_dataset_t *d, int64_t i);
void mc_gpt_dataset_sample_at(const mc_gpt_dataset_t *d, int64_t row, int64_t *doc_pos,
                              int64_t *offset);

/* The text of sample i (Megatron's _query_document_sample_shuffle_indices): seq_length + 1
 * tokens, the end filled with pad if the sample is short (only a partial validation sample).
 * Returns 0; -1 (i out of range) with err set; or MC_DATA_BAD_TOKENS with err naming the .bin,
 * the document and the token when the file holds a token id outside [0, token_limit) or one
 * that is not an int32 (a user's data error, not a bug). */
#define MC_DATA_BAD_TOKENS (-2)
int mc_gpt_dataset_text(const mc_gpt_dataset_t *d, int64_t i, int32_t pad, int32_t *text, char *err,
                        size_t n);

/* ---------------------------------------------------------------------------------------------
 * A sample's training fields (GPTDataset.__getitem__ with _get_ltor_masks_and_position_ids). */
typedef struct {
    int32_t eod;               /* tokenizer.eod */
    int32_t pad;               /* tokenizer.pad, or MC_PAD_TOKEN_ID */
    bool eod_mask_loss;        /* --eod-mask-loss */
    bool reset_position_ids;   /* --reset-position-ids */
    bool reset_attention_mask; /* --reset-attention-mask */
} mc_sample_opts_t;

/* From text[seq_length + 1]: tokens = text[:-1], labels = text[1:]; loss_mask 1, 0 where
 * tokens == eod (with eod_mask_loss) and where labels == pad; tokens and labels equal to pad
 * become 0. positions: 0..s-1, or with reset_position_ids restarting at 0 after every eod in
 * tokens. segments (may be NULL): the attention mask of --reset-attention-mask as a per-token
 * document number, the count of eods in tokens before the position (all 0 without the flag);
 * query q may attend key k iff k <= q and segments[k] == segments[q] (Megatron zeroes
 * mask[(i+1):, :(i+1)] for every eod position i). */
void mc_gpt_sample_fields(const int32_t *text, int seq_length, const mc_sample_opts_t *o,
                          int32_t *tokens, int32_t *labels, float *loss_mask, int32_t *positions,
                          int32_t *segments);

/* ---------------------------------------------------------------------------------------------
 * All splits, as pretrain_gpt.py builds them. */
typedef struct {
    /* --data-path (get_blend_from_list: "0.3 a 0.7 b" or "a b"); n_data_path = 0 when the
     * per-split paths are used instead. */
    int n_data_path;
    char *const *data_path;
    /* --train-data-path / --valid-data-path / --test-data-path (n = 0: no dataset for it). */
    int n_split_data_path[3];
    char *const *split_data_path[3];
    /* --mock-data instead of any path: MockGPTDatasets (data/mock.h) over the split "1,1,1"
     * (split is not read), with the tokenizer's vocabulary size and sample.eod. */
    bool mock;
    int64_t mock_vocab_size;
    const char *split; /* --split; NULL or "" = "969, 30, 1" (the legacy default) */
    int seq_length;
    int64_t seed;                     /* --seed, the config's random_seed */
    int64_t num_samples[3];           /* requested per split (mc_gpt_num_samples); -1 = None */
    double mid_level_dataset_surplus; /* --mid-level-dataset-surplus, 0.005 */
    bool drop_last_partial_validation_sequence; /* true */
    mc_sample_opts_t sample;
    /* The index cache directory (--data-cache-path). NULL: no cache, the indices are built in
     * memory (configs written by hand, tests). "": Megatron's default, a directory per prefix,
     * <prefix>/cache/GPTDataset_indices (mc_index_cache_default_dir). Else the directory. */
    const char *cache_path;
    /* Token ids must lie below it: the padded vocabulary, the rows of Megatron's embedding (an id
     * at or above it is Megatron's IndexError). 0: only negative ids are refused. */
    int64_t vocab_limit;
} mc_gpt_data_config_t;

typedef struct mc_gpt_datasets mc_gpt_datasets_t;

/* Training samples need a train split: --split with a zero train weight (Megatron builds no
 * train dataset and fails on its first batch) or per-split paths without --train-data-path are
 * usage errors when c->num_samples[train] > 0. 0, or -1 with err naming the flag. Called by
 * mc_gpt_datasets_build; needs no file (cli/validate.c may call it too). */
int mc_gpt_check_train_split(const mc_gpt_data_config_t *c, char *err, size_t n);

/* Opens every prefix (or draws the mock documents) and builds every split. NULL with one line
 * in err on failure (a file problem names the file; an impossible configuration says what
 * Megatron would do). */
mc_gpt_datasets_t *mc_gpt_datasets_build(const mc_gpt_data_config_t *c, char *err, size_t n);
void mc_gpt_datasets_free(mc_gpt_datasets_t *d);

/* len(dataset) of a split: 0 when the split has no dataset. */
int64_t mc_gpt_datasets_len(const mc_gpt_datasets_t *d, int split);
/* dataset[i]'s text (seq_length + 1 tokens). 0, or -1 or MC_DATA_BAD_TOKENS with err. */
int mc_gpt_datasets_text(const mc_gpt_datasets_t *d, int split, int64_t i, int32_t *text, char *err,
                         size_t n);
/* One micro-batch: the samples idx[0..b) of a split into row-major [b, seq_length] arrays
 * (segments may be NULL), as mc_gpt_sample_fields. Uses a buffer inside d: do not call it on
 * the same d from two threads at once. 0, or -1 or MC_DATA_BAD_TOKENS with err. */
int mc_gpt_datasets_batch(mc_gpt_datasets_t *d, int split, const int64_t *idx, int b,
                          int32_t *tokens, int32_t *labels, float *loss_mask, int32_t *positions,
                          int32_t *segments, char *err, size_t n);

/* Introspection (tests, inspect-data). A split is a single GPTDataset (components = 1, not
 * blended), a BlendedDataset of `components` GPTDatasets, or nothing (components = 0). */
int mc_gpt_datasets_components(const mc_gpt_datasets_t *d, int split);
bool mc_gpt_datasets_blended(const mc_gpt_datasets_t *d, int split);
const mc_gpt_dataset_t *mc_gpt_datasets_component(const mc_gpt_datasets_t *d, int split, int k);
/* Blended splits: which component and which of its samples blended sample i is. */
void mc_gpt_datasets_blend_at(const mc_gpt_datasets_t *d, int split, int64_t i, int *component,
                              int64_t *component_sample);

#endif
