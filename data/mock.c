/* Megatron's MockGPTLowLevelDataset; see mock.h. */
#include <stdlib.h>
#include <string.h>

#include "data/mock.h"
#include "data/pcg64.h"

int mc_mock_init(mc_mock_data_t *d, int64_t vocab_size, int32_t eod)
{
    memset(d, 0, sizeof(*d));
    d->vocab_size = vocab_size;
    d->eod = eod;
    d->sequence_lengths = malloc(MC_MOCK_NUM_DOCS * sizeof(int32_t));
    if (!d->sequence_lengths) return -1;
    mc_pcg64_t rng;
    mc_pcg64_seed(&rng, MC_MOCK_SEED);
    mc_pcg64_integers_i32(&rng, 1, MC_MOCK_MAX_DOC_LEN, MC_MOCK_NUM_DOCS, d->sequence_lengths);
    return 0;
}

void mc_mock_free(mc_mock_data_t *d)
{
    free(d->sequence_lengths);
    memset(d, 0, sizeof(*d));
}

void mc_mock_get(const mc_mock_data_t *d, int64_t doc, int64_t offset, int64_t length, int32_t *out)
{
    const int64_t n = d->sequence_lengths[doc];
    for (int64_t i = 0; i < length; i++) {
        const int64_t k = offset + i; /* (arange(n - 1) + 1) % vocab_size, then eod */
        out[i] = k == n - 1 ? d->eod : (int32_t)((k + 1) % d->vocab_size);
    }
}
