/* Megatron's GPTDataset for pretrain_gpt.py, one dataset of one split: its document, sample and
 * shuffle indices (built or read from the index cache), its samples' tokens, and the fields of a
 * sample; see gpt_dataset.h. The builder of all splits is dataset_builder.c. References are to
 * Megatron-LM core_v0.15.0, megatron/core/datasets/. */
#include "base/error.h"
#include "data/gpt_dataset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/index_cache.h"
#include "data/mt19937.h"


const char *mc_split_name(int split)
{
    return split == MC_SPLIT_TRAIN ? "train" : split == MC_SPLIT_VALID ? "valid" : "test";
}

/* =============================================================================================
 * One GPTDataset */

/* helpers.cpp build_sample_idx<T>, for T = int32_t and int64_t. Arithmetic is done in int64;
 * every value stored fits T by the caller's choice of T (helpers.py). Returns the number of rows
 * written (num_samples + 1), or -1 where Megatron's assert(sample_idx_index == num_samples) at
 * the end of the documents would fail. */
#define MC_DEFINE_BUILD_SAMPLE_IDX(name, T)                                                        \
    static int64_t name(T *out, const int32_t *sizes, const int32_t *doc_idx, int64_t n_doc,       \
                        int seq_length, int64_t num_samples, int add_extra)                        \
    {                                                                                              \
        int64_t s = 0, di = 0, off = 0;                                                            \
        out[0] = 0;                                                                                \
        out[1] = 0;                                                                                \
        s = 1;                                                                                     \
        while (s <= num_samples) {                                                                 \
            int64_t rem = (int64_t)seq_length + add_extra;                                         \
            while (rem != 0) {                                                                     \
                int64_t dl = (int64_t)sizes[doc_idx[di]] - off;                                    \
                rem -= dl;                                                                         \
                if (rem <= 0) {                                                                    \
                    off += rem + dl - add_extra;                                                   \
                    rem = 0;                                                                       \
                } else {                                                                           \
                    if (di == n_doc - 1) {                                                         \
                        if (s != num_samples) return -1;                                           \
                        off = (int64_t)sizes[doc_idx[di]] - add_extra;                             \
                        break;                                                                     \
                    }                                                                              \
                    di++;                                                                          \
                    off = 0;                                                                       \
                }                                                                                  \
            }                                                                                      \
            out[2 * s] = (T)di;                                                                    \
            out[2 * s + 1] = (T)off;                                                               \
            s++;                                                                                   \
        }                                                                                          \
        return s;                                                                                  \
    }

MC_DEFINE_BUILD_SAMPLE_IDX(build_sample_idx_i32, int32_t)
MC_DEFINE_BUILD_SAMPLE_IDX(build_sample_idx_i64, int64_t)

void mc_gpt_dataset_free(mc_gpt_dataset_t *d)
{
    if (!d) return;
    free(d->document_index);
    free(d->sample_index);
    free(d->shuffle_index);
    memset(d, 0, sizeof *d);
}

/* _build_document_index for one shuffle group: `epochs` copies of [begin, end), epoch-major,
 * shuffled as a whole. */
static void document_index_part(int32_t *out, int64_t begin, int64_t end, int64_t epochs,
                                mc_mt19937_t *rs)
{
    int64_t n = end - begin, k = 0;
    for (int64_t e = 0; e < epochs; e++)
        for (int64_t i = 0; i < n; i++) out[k++] = (int32_t)(begin + i);
    mc_mt19937_shuffle_i32(rs, out, k);
}

/* _build_shuffle_index: shuffle(arange(0, first)) then shuffle(arange(first, total)). */
static void shuffle_index_build(void *out, bool i64, int64_t first, int64_t total, mc_mt19937_t *rs)
{
    if (i64) {
        int64_t *x = out;
        for (int64_t i = 0; i < total; i++) x[i] = i;
        mc_mt19937_shuffle_i64(rs, x, first);
        if (first < total) mc_mt19937_shuffle_i64(rs, x + first, total - first);
    } else {
        uint32_t *x = out;
        for (int64_t i = 0; i < total; i++) x[i] = (uint32_t)i;
        mc_mt19937_shuffle_u32(rs, x, first);
        if (first < total) mc_mt19937_shuffle_u32(rs, x + first, total - first);
    }
}

/* The part of _build_document_sample_shuffle_indices that needs no array: the checks Megatron
 * would assert on, the epochs, the final-epoch split, the sample count ns and the dtypes. Fills
 * d's scalar fields (length = ns, what build_sample_idx returns when it succeeds). */
static int plan(mc_gpt_dataset_t *d, const int32_t *sequence_lengths, int64_t num_sequences,
                int64_t begin, int64_t end, int64_t num_samples, int split, int seq_length,
                int64_t seed, bool drop_last_partial_sequence, int32_t *max_size_out, char *err,
                size_t n)
{
    const int add_extra = MC_GPT_ADD_EXTRA_TOKEN;
    memset(d, 0, sizeof *d);
    d->split = split;
    d->seq_length = seq_length;
    d->seq_begin = begin;
    d->seq_end = end;
    d->num_samples_requested = num_samples;
    if (seed < 0 || seed > (int64_t)UINT32_MAX)
        return mc_errf(err, n,
                       "--seed %lld: the dataset shuffle uses numpy's RandomState, which "
                       "takes seeds in [0, 2^32 - 1]",
                       (long long)seed);
    if (seq_length < 2)
        return mc_errf(err, n, "--seq-length %d: Megatron's sample index needs at least 2",
                       seq_length);
    if (begin < 0 || end < begin || end > num_sequences)
        return mc_errf(err, n, "split range [%lld, %lld) outside the %lld sequences",
                       (long long)begin, (long long)end, (long long)num_sequences);
    if (num_sequences > INT32_MAX)
        return mc_errf(err, n, "%lld sequences: Megatron's document index holds int32 ids",
                       (long long)num_sequences);

    /* _get_num_tokens_per_epoch */
    int64_t T = 0;
    for (int64_t i = begin; i < end; i++) T += sequence_lengths[i];
    d->tokens_per_epoch = T;
    if (T < 2)
        return mc_errf(err, n,
                       "the %s split has %lld sequences and %lld tokens; Megatron cannot build "
                       "samples from it (it would loop forever or abort): change --split or the "
                       "data",
                       mc_split_name(split), (long long)(end - begin), (long long)T);

    /* _get_num_epochs: the smallest E >= 1 with E*T >= num_samples*seq_length + 1. */
    int64_t E = 1;
    if (num_samples >= 0) {
        if (num_samples > (INT64_MAX - add_extra) / seq_length)
            return mc_errf(err, n, "%lld samples of %d tokens overflow", (long long)num_samples,
                           seq_length);
        int64_t req = num_samples * seq_length + add_extra;
        E = (req + T - 1) / T;
        if (E < 1) E = 1;
    }
    d->num_epochs = E;
    if (E > INT32_MAX || (end - begin) > INT64_MAX / E)
        return mc_errf(err, n, "%lld epochs over %lld sequences is too many", (long long)E,
                       (long long)(end - begin));

    bool separate = false;
    int64_t sans = 0;
    if (E > 1) {
        sans = ((E - 1) * T - add_extra) / seq_length;
        int64_t from_final = num_samples - sans;
        int64_t per_epoch = (T - add_extra) / seq_length;
        if (from_final < 0 || from_final > per_epoch + 1)
            return mc_errf(err, n, "internal: num_samples_from_final_epoch %lld outside [0, %lld]",
                           (long long)from_final, (long long)per_epoch + 1);
        separate = from_final < (int64_t)(0.80 * (double)per_epoch);
    }
    d->separate_final_epoch = separate;
    d->num_samples_sans_final_epoch = separate ? sans : 0;
    d->document_index_len = E * (end - begin);

    /* The sample count of helpers.build_sample_idx, and the dtypes (helpers.py). */
    int64_t ns;
    if (drop_last_partial_sequence) ns = (E * T - add_extra) / seq_length;
    else /* helpers.cpp: ceil(float(E*T - add_extra) / seq_length), in single precision */
        ns = (int64_t)ceilf((float)(E * T - add_extra) / (float)seq_length);
    int32_t max_size = 0;
    for (int64_t i = 0; i < num_sequences; i++)
        if (sequence_lengths[i] > max_size) max_size = sequence_lengths[i];
    int64_t idx_max = d->document_index_len > max_size ? d->document_index_len : max_size;
    d->sample_index_int64 = idx_max > INT32_MAX;
    d->length = ns;
    d->shuffle_index_int64 = ns >= (int64_t)UINT32_MAX - 1;
    *max_size_out = max_size;
    return 0;
}

/* The three arrays of a planned dataset, built (RandomState(seed) consumed in Megatron's order:
 * the document index shuffle(s), then the shuffle index shuffle(s)). On failure d is freed. */
static int build_arrays(mc_gpt_dataset_t *d, const int32_t *sequence_lengths, int64_t seed,
                        char *err, size_t n)
{
    const int add_extra = MC_GPT_ADD_EXTRA_TOKEN;
    const int64_t begin = d->seq_begin, end = d->seq_end, E = d->num_epochs, ns = d->length;
    mc_mt19937_t rs;
    mc_mt19937_seed(&rs, (uint32_t)seed);

    /* Document index. */
    int64_t ndoc = end - begin;
    d->document_index =
        malloc(sizeof(int32_t) * (size_t)(d->document_index_len ? d->document_index_len : 1));
    if (!d->document_index) {
        mc_gpt_dataset_free(d);
        return mc_errf(err, n, "out of memory (document index)");
    }
    if (!d->separate_final_epoch) {
        document_index_part(d->document_index, begin, end, E, &rs);
    } else {
        document_index_part(d->document_index, begin, end, E - 1, &rs);
        document_index_part(d->document_index + (E - 1) * ndoc, begin, end, 1, &rs);
    }

    /* Sample index (helpers.build_sample_idx). */
    size_t isz = d->sample_index_int64 ? sizeof(int64_t) : sizeof(int32_t);
    d->sample_index = malloc(isz * 2 * (size_t)(ns + 1));
    if (!d->sample_index) {
        mc_gpt_dataset_free(d);
        return mc_errf(err, n, "out of memory (sample index of %lld samples)", (long long)ns);
    }
    int64_t rows = d->sample_index_int64
                       ? build_sample_idx_i64(d->sample_index, sequence_lengths, d->document_index,
                                              d->document_index_len, d->seq_length, ns, add_extra)
                       : build_sample_idx_i32(d->sample_index, sequence_lengths, d->document_index,
                                              d->document_index_len, d->seq_length, ns, add_extra);
    if (rows < 0) {
        int split = d->split;
        mc_gpt_dataset_free(d);
        return mc_errf(err, n,
                       "the %s split's documents end before its %lld samples (Megatron's "
                       "build_sample_idx asserts here)",
                       mc_split_name(split), (long long)ns);
    }
    d->length = rows - 1;

    /* Shuffle index. */
    size_t ssz = d->shuffle_index_int64 ? sizeof(int64_t) : sizeof(uint32_t);
    d->shuffle_index = malloc(ssz * (size_t)(d->length ? d->length : 1));
    if (!d->shuffle_index) {
        mc_gpt_dataset_free(d);
        return mc_errf(err, n, "out of memory (shuffle index)");
    }
    shuffle_index_build(d->shuffle_index, d->shuffle_index_int64,
                        d->separate_final_epoch ? d->num_samples_sans_final_epoch : d->length,
                        d->length, &rs);
    return 0;
}

int mc_gpt_dataset_build(mc_gpt_dataset_t *d, const int32_t *sequence_lengths,
                         int64_t num_sequences, int64_t begin, int64_t end, int64_t num_samples,
                         int split, int seq_length, int64_t seed, bool drop_last_partial_sequence,
                         char *err, size_t n)
{
    return mc_gpt_dataset_build_cached(d, sequence_lengths, num_sequences, begin, end, num_samples,
                                       split, seq_length, seed, drop_last_partial_sequence, NULL,
                                       err, n);
}

/* ---- The index cache (data/index_cache.h) ------------------------------------------------- */

/* Whether arrays read from a cache entry are the ones a planned d would have: dtypes and shapes
 * exactly, and every value in the range that mc_gpt_dataset_text indexes with (so a damaged but
 * well-formed file cannot make it read out of bounds). Their order is not checked: an entry whose
 * description matches is trusted to hold Megatron's permutation, as Megatron trusts it. */
static bool cached_arrays_fit(const mc_gpt_dataset_t *d, const mc_npy_t a[3], int32_t max_size,
                              char *why, size_t n)
{
    const mc_npy_t *doc = &a[MC_INDEX_CACHE_DOCUMENT], *smp = &a[MC_INDEX_CACHE_SAMPLE],
                   *shf = &a[MC_INDEX_CACHE_SHUFFLE];
    const int64_t ns = d->length;
    if (strcmp(doc->descr, "<i4") || doc->ndim != 1 || doc->shape[0] != d->document_index_len)
        return mc_errf(why, n, "document_index.npy is %s %lld-d, expected <i4 [%lld]", doc->descr,
                       (long long)doc->ndim, (long long)d->document_index_len),
               false;
    const char *sd = d->sample_index_int64 ? "<i8" : "<i4";
    if (strcmp(smp->descr, sd) || smp->ndim != 2 || smp->shape[0] != ns + 1 || smp->shape[1] != 2)
        return mc_errf(why, n, "sample_index.npy does not have dtype %s and shape (%lld, 2)", sd,
                       (long long)ns + 1),
               false;
    const char *hd = d->shuffle_index_int64 ? "<i8" : "<u4";
    if (strcmp(shf->descr, hd) || shf->ndim != 1 || shf->shape[0] != ns)
        return mc_errf(why, n, "shuffle_index.npy does not have dtype %s and shape (%lld,)", hd,
                       (long long)ns),
               false;
    const int32_t *di = doc->data;
    for (int64_t i = 0; i < d->document_index_len; i++)
        if (di[i] < d->seq_begin || di[i] >= d->seq_end)
            return mc_errf(why, n,
                           "document_index[%lld] = %d is outside the split's sequences "
                           "[%lld, %lld)",
                           (long long)i, di[i], (long long)d->seq_begin, (long long)d->seq_end),
                   false;
    for (int64_t r = 0; r <= ns; r++) {
        int64_t pos = d->sample_index_int64 ? ((const int64_t *)smp->data)[2 * r]
                                            : ((const int32_t *)smp->data)[2 * r];
        int64_t off = d->sample_index_int64 ? ((const int64_t *)smp->data)[2 * r + 1]
                                            : ((const int32_t *)smp->data)[2 * r + 1];
        if (pos < 0 || pos >= d->document_index_len || off < 0 || off > max_size)
            return mc_errf(why, n, "sample_index[%lld] = (%lld, %lld) is out of range",
                           (long long)r, (long long)pos, (long long)off),
                   false;
    }
    for (int64_t i = 0; i < ns; i++) {
        int64_t v = d->shuffle_index_int64 ? ((const int64_t *)shf->data)[i]
                                           : (int64_t)((const uint32_t *)shf->data)[i];
        if (v < 0 || v >= ns)
            return mc_errf(why, n, "shuffle_index[%lld] = %lld is outside [0, %lld)", (long long)i,
                           (long long)v, (long long)ns),
                   false;
    }
    return true;
}

int mc_gpt_dataset_build_cached(mc_gpt_dataset_t *d, const int32_t *sequence_lengths,
                                int64_t num_sequences, int64_t begin, int64_t end,
                                int64_t num_samples, int split, int seq_length, int64_t seed,
                                bool drop_last_partial_sequence, const mc_gpt_index_cache_t *cache,
                                char *err, size_t n)
{
    int32_t max_size = 0;
    if (plan(d, sequence_lengths, num_sequences, begin, end, num_samples, split, seq_length, seed,
             drop_last_partial_sequence, &max_size, err, n))
        return -1;
    if (!cache || !cache->dir || !cache->dir[0])
        return build_arrays(d, sequence_lengths, seed, err, n);

    /* The entry of this description; anything short of a usable one means building. */
    char md5[33];
    const char *lengths_md5 = cache->lengths_md5;
    if (!lengths_md5) {
        mc_index_cache_lengths_md5(sequence_lengths, num_sequences, md5);
        lengths_md5 = md5;
    }
    mc_index_desc_t desc = {
        .dataset_path = cache->dataset_path ? cache->dataset_path : "",
        .num_sequences = num_sequences,
        .sequence_lengths_md5 = lengths_md5,
        .split = mc_split_name(split),
        .begin = begin,
        .end = end,
        .num_samples = num_samples,
        .seq_length = seq_length,
        .seed = seed,
        .drop_last_partial_sequence = drop_last_partial_sequence,
        .add_extra_token_to_sequence = MC_GPT_ADD_EXTRA_TOKEN != 0,
    };
    char *text = mc_index_cache_description(&desc);
    mc_index_cache_entry_t e;
    if (!text || mc_index_cache_entry_init(&e, cache->dir, mc_split_name(split), text)) {
        free(text);
        return build_arrays(d, sequence_lengths, seed, err, n);
    }
    free(text);
    mc_npy_t a[3];
    if (mc_index_cache_load(&e, a) == MC_INDEX_CACHE_HIT) {
        char why[512];
        if (cached_arrays_fit(d, a, max_size, why, sizeof why)) {
            d->document_index = a[MC_INDEX_CACHE_DOCUMENT].data;
            d->sample_index = a[MC_INDEX_CACHE_SAMPLE].data;
            d->shuffle_index = a[MC_INDEX_CACHE_SHUFFLE].data;
            d->from_cache = true;
            mc_index_cache_entry_free(&e);
            return 0;
        }
        mc_index_cache_reject(&e, why);
        for (int k = 0; k < 3; k++) mc_npy_free(&a[k]);
    }
    if (build_arrays(d, sequence_lengths, seed, err, n)) {
        mc_index_cache_entry_free(&e);
        return -1;
    }
    mc_npy_t w[3] = {
        {.descr = "<i4", .ndim = 1, .shape = {d->document_index_len}, .data = d->document_index},
        {.ndim = 2, .shape = {d->length + 1, 2}, .data = d->sample_index},
        {.ndim = 1, .shape = {d->length}, .data = d->shuffle_index},
    };
    memcpy(w[1].descr, d->sample_index_int64 ? "<i8" : "<i4", 4);
    memcpy(w[2].descr, d->shuffle_index_int64 ? "<i8" : "<u4", 4);
    mc_index_cache_store(&e, w); /* a failure is a warning: the arrays are in memory */
    mc_index_cache_entry_free(&e);
    return 0;
}

int64_t mc_gpt_dataset_shuffle_at(const mc_gpt_dataset_t *d, int64_t i)
{
    return d->shuffle_index_int64 ? ((const int64_t *)d->shuffle_index)[i]
                                  : (int64_t)((const uint32_t *)d->shuffle_index)[i];
}

void mc_gpt_dataset_sample_at(const mc_gpt_dataset_t *d, int64_t row, int64_t *doc_pos,
                              int64_t *offset)
{
    if (d->sample_index_int64) {
        const int64_t *s = d->sample_index;
        *doc_pos = s[2 * row];
        *offset = s[2 * row + 1];
    } else {
        const int32_t *s = d->sample_index;
        *doc_pos = s[2 * row];
        *offset = s[2 * row + 1];
    }
}

/* The document of the indexed dataset that holds sequence seq: document_indices[doc] <= seq <
 * document_indices[doc + 1] (empty documents repeat an entry; the last such is the one). */
static int64_t document_of(const mc_indexed_t *x, int64_t seq)
{
    int64_t lo = 0, hi = x->num_documents; /* document_indices has num_documents + 1 entries */
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (x->document_indices[mid] <= seq) lo = mid;
        else hi = mid;
    }
    return lo;
}

/* Megatron would index its embedding with these ids: one beyond its rows (or negative, from a
 * signed dtype) is an IndexError there, and a silent zero row in our kernels. One pass over the
 * tokens of a sample, so it costs nothing next to a training step. */
static int check_tokens(const mc_gpt_dataset_t *d, int64_t seq, int64_t off, const int32_t *t,
                        int64_t len, char *err, size_t n)
{
    for (int64_t k = 0; k < len; k++) {
        if (t[k] >= 0 && (d->token_limit <= 0 || t[k] < d->token_limit)) continue;
        const mc_indexed_t *x = d->indexed;
        char limit[64] = "";
        if (d->token_limit > 0)
            snprintf(limit, sizeof limit, ", outside the vocabulary [0, %lld)",
                     (long long)d->token_limit);
        mc_errf(err, n,
                "%s.bin: token id %d at position %lld of document %lld (sequence %lld)%s "
                "(the data was made with another tokenizer, or is corrupt: re-run "
                "preprocess_data.py with this run's tokenizer)",
                x->prefix, t[k], (long long)(off + k), (long long)document_of(x, seq),
                (long long)seq, t[k] < 0 ? ", negative" : limit);
        return MC_DATA_BAD_TOKENS;
    }
    return 0;
}

int mc_gpt_dataset_text(const mc_gpt_dataset_t *d, int64_t i, int32_t pad, int32_t *text, char *err,
                        size_t n)
{
    if (i < 0 || i >= d->length)
        return mc_errf(err, n, "sample %lld of the %s split is out of range [0, %lld)",
                       (long long)i, mc_split_name(d->split), (long long)d->length);
    if (!d->indexed && !d->mock) return mc_errf(err, n, "internal: dataset has no token source");
    const int32_t *lengths = d->indexed ? d->indexed->sequence_lengths : d->mock->sequence_lengths;
    const int64_t want = (int64_t)d->seq_length + 1;
    int64_t j = mc_gpt_dataset_shuffle_at(d, i), b, bo, e, eo;
    mc_gpt_dataset_sample_at(d, j, &b, &bo);
    mc_gpt_dataset_sample_at(d, j + 1, &e, &eo);
    int64_t got = 0;
    for (int64_t k = b; k <= e; k++) {
        int64_t seq = d->document_index[k];
        int64_t off = k == b ? bo : 0;
        int64_t len = k < e ? (int64_t)lengths[seq] - off : eo + 1 - off;
        if (len < 0 || got + len > want)
            return mc_errf(err, n, "internal: sample %lld spans more than %lld tokens",
                           (long long)i, (long long)want);
        if (d->mock) { /* ids below the tokenizer's vocabulary by construction */
            mc_mock_get(d->mock, seq, off, len, text + got);
            got += len;
            continue;
        }
        if (len > 0 && mc_indexed_get(d->indexed, seq, off, len, text + got, err, n) != 0)
            return MC_DATA_BAD_TOKENS; /* bounds hold since open: a value not an int32 id */
        if (check_tokens(d, seq, off, text + got, len, err, n)) return MC_DATA_BAD_TOKENS;
        got += len;
    }
    for (; got < want; got++) text[got] = pad;
    return 0;
}

/* =============================================================================================
 * Sample fields */

void mc_gpt_sample_fields(const int32_t *text, int seq_length, const mc_sample_opts_t *o,
                          int32_t *tokens, int32_t *labels, float *loss_mask, int32_t *positions,
                          int32_t *segments)
{
    int32_t pos = 0, seg = 0;
    for (int t = 0; t < seq_length; t++) {
        int32_t tok = text[t], lab = text[t + 1];
        bool is_eod = tok == o->eod;
        loss_mask[t] = (o->eod_mask_loss && is_eod) || lab == o->pad ? 0.0f : 1.0f;
        positions[t] = o->reset_position_ids ? pos : t;
        if (segments) segments[t] = o->reset_attention_mask ? seg : 0;
        pos++;
        if (is_eod) {
            pos = 0;
            seg++;
        }
        tokens[t] = tok == o->pad ? 0 : tok;
        labels[t] = lab == o->pad ? 0 : lab;
    }
}