/* Embedded default data (--mock-data), shaped like Megatron's MockGPTDataset: 100000 documents
 * of lengths drawn in [1, 4096), document k holding tokens 1, 2, ..., n-1 then eod (token values
 * wrap to stay below eod). Documents are split 969/30/1 into train/valid/test; samples of
 * seq_length+1 tokens are cut from each split's token stream, consecutive samples overlapping by
 * one token, wrapping around for further epochs. The draw uses Philox with a fixed key (as
 * Megatron's mock uses a fixed numpy seed), not numpy's generator. */
#ifndef MC_DATA_MOCK_H
#define MC_DATA_MOCK_H

#include <stdint.h>

enum { MC_SPLIT_TRAIN = 0, MC_SPLIT_VALID = 1, MC_SPLIT_TEST = 2 };

typedef struct {
    int n_docs;
    int32_t *doc_len;
    int64_t *doc_end; /* cumulative token count within the doc's split, exclusive end */
    int split_begin[3], split_end[3];
    int64_t split_tokens[3];
    int32_t eod;
} mc_mock_data_t;

#define MC_MOCK_NUM_DOCS 100000
#define MC_MOCK_MAX_DOC_LEN 4096

/* eod is the last id of the vocabulary (vocab - 1); tokens stay in [1, eod). Returns 0 or -1. */
int mc_mock_init(mc_mock_data_t *d, int32_t vocab, int n_docs);
void mc_mock_free(mc_mock_data_t *d);
/* The seq_length+1 tokens of sample idx of a split. Returns -1 if the split is empty. */
int mc_mock_sample(const mc_mock_data_t *d, int split, int64_t idx, int seq_length, int32_t *text);

#endif
