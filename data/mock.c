#include <stdlib.h>
#include <string.h>

#include "data/mock.h"
#include "kernels/philox.h"

#define MOCK_KEY0 0x4D4F434Bu /* "MOCK": fixed, like Megatron's fixed numpy seed */
#define MOCK_KEY1 0u

static int32_t draw_len(int k)
{
    mc_philox_ctr_t c = {{(uint32_t)k, 0, 0, 0}};
    uint32_t r = mc_philox4x32_10(c, MOCK_KEY0, MOCK_KEY1).v[0];
    return 1 + (int32_t)(r % (MC_MOCK_MAX_DOC_LEN - 1)); /* [1, 4096) */
}

int mc_mock_init(mc_mock_data_t *d, int32_t vocab, int n_docs)
{
    memset(d, 0, sizeof(*d));
    d->n_docs = n_docs;
    d->eod = vocab - 1;
    d->doc_len = malloc((size_t)n_docs * sizeof(int32_t));
    d->doc_end = malloc((size_t)n_docs * sizeof(int64_t));
    if (!d->doc_len || !d->doc_end || vocab < 3) return -1;
    /* Megatron's default split 969,30,1 over documents, bookends rounded half-to-even. */
    const double w[3] = {969.0 / 1000.0, 30.0 / 1000.0, 1.0 / 1000.0};
    double e = 0;
    for (int s = 0; s < 3; s++) {
        d->split_begin[s] = (int)__builtin_rint(e * n_docs);
        e += w[s];
        d->split_end[s] = (int)__builtin_rint(e * n_docs);
    }
    for (int s = 0; s < 3; s++) {
        int64_t acc = 0;
        for (int k = d->split_begin[s]; k < d->split_end[s]; k++) {
            d->doc_len[k] = draw_len(k);
            acc += d->doc_len[k];
            d->doc_end[k] = acc;
        }
        d->split_tokens[s] = acc;
    }
    return 0;
}

void mc_mock_free(mc_mock_data_t *d)
{
    free(d->doc_len);
    free(d->doc_end);
    memset(d, 0, sizeof(*d));
}

/* First document of the split whose end is past stream position pos. */
static int find_doc(const mc_mock_data_t *d, int split, int64_t pos)
{
    int lo = d->split_begin[split], hi = d->split_end[split] - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (d->doc_end[mid] > pos) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

int mc_mock_sample(const mc_mock_data_t *d, int split, int64_t idx, int seq_length, int32_t *text)
{
    const int64_t T = d->split_tokens[split];
    if (T <= 0) return -1;
    int64_t pos = (idx * (int64_t)seq_length) % T;
    int k = find_doc(d, split, pos);
    int64_t off = pos - (d->doc_end[k] - d->doc_len[k]);
    for (int i = 0; i <= seq_length; i++) {
        const int32_t n = d->doc_len[k];
        text[i] = off == n - 1 ? d->eod : 1 + (int32_t)(off % (d->eod - 1));
        if (++off == n) { /* next document, wrapping to the split's start */
            off = 0;
            k = k + 1 < d->split_end[split] ? k + 1 : d->split_begin[split];
        }
    }
    return 0;
}
