/* Megatron's MockGPTLowLevelDataset (--mock-data; megatron/core/datasets/gpt_dataset.py on
 * main), bit for bit: 100000 documents whose lengths are
 * numpy.random.default_rng(seed=0).integers(low=1, high=4096, size=100000, dtype=int32)
 * (data/pcg64.h); document k of length n holds the tokens (1, 2, ..., n-1) % vocab_size, then
 * eod, where vocab_size and eod are the tokenizer's (core_v0.15 had no "% vocab_size": ids up to
 * 4094 whatever the vocabulary).
 *
 * Megatron wraps it in GPTDatasets like any indexed dataset (MockGPTDataset): the document,
 * sample and shuffle indices are built from these lengths with --seed, over the split "1,1,1"
 * (BlendedMegatronDatasetConfig sets it when there is no blend, whatever --split says). See
 * mc_gpt_datasets_build in data/gpt_dataset.h. */
#ifndef MC_DATA_MOCK_H
#define MC_DATA_MOCK_H

#include <stdint.h>

enum { MC_SPLIT_TRAIN = 0, MC_SPLIT_VALID = 1, MC_SPLIT_TEST = 2 };

/* MockGPTLowLevelDataset's hard-coded seed, size and max_sequence_length. */
#define MC_MOCK_SEED 0
#define MC_MOCK_NUM_DOCS 100000
#define MC_MOCK_MAX_DOC_LEN 4096
/* The split Megatron uses for mock data (blended_megatron_dataset_config.py). */
#define MC_MOCK_SPLIT "1,1,1"

typedef struct {
    int32_t *sequence_lengths; /* [MC_MOCK_NUM_DOCS], each in [1, 4096) */
    int64_t vocab_size;        /* tokenizer.vocab_size */
    int32_t eod;               /* tokenizer.eod */
} mc_mock_data_t;

/* Draws the lengths. vocab_size >= 1. Returns 0, or -1 out of memory. */
int mc_mock_init(mc_mock_data_t *d, int64_t vocab_size, int32_t eod);
void mc_mock_free(mc_mock_data_t *d);
/* Tokens [offset, offset + length) of document doc (MockGPTLowLevelDataset.get), within it. */
void mc_mock_get(const mc_mock_data_t *d, int64_t doc, int64_t offset, int64_t length,
                 int32_t *out);

#endif
