/* Megatron's BlendedMegatronDatasetBuilder for pretrain_gpt.py: the train, valid and test
 * datasets of --data-path (split by --split, or blended with weights), of --train-data-path and
 * friends, or of --mock-data, their blends' indices, and batches; see gpt_dataset.h. References
 * are to Megatron-LM core_v0.15.0, megatron/core/datasets/. */
#include "base/error.h"
#include "data/gpt_dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/blend.h"
#include "data/index_cache.h"

/* =============================================================================================
 * All splits (BlendedMegatronDatasetBuilder) */

typedef struct {
    int n; /* components; 0 = no dataset for the split */
    mc_gpt_dataset_t **comp;
    bool blended;
    int64_t size; /* blended length */
    int16_t *dataset_index;
    int64_t *dataset_sample_index;
} split_t;

struct mc_gpt_datasets {
    int n_indexed, cap_indexed;
    mc_indexed_t **indexed;
    int n_ds, cap_ds;
    mc_gpt_dataset_t **ds;
    split_t split[3];
    int seq_length;
    mc_sample_opts_t opts;
    int32_t *scratch;    /* seq_length + 1 */
    mc_mock_data_t mock; /* --mock-data's documents (sequence_lengths NULL otherwise) */
};

void mc_gpt_datasets_free(mc_gpt_datasets_t *d)
{
    if (!d) return;
    for (int s = 0; s < 3; s++) {
        free(d->split[s].comp);
        free(d->split[s].dataset_index);
        free(d->split[s].dataset_sample_index);
    }
    for (int i = 0; i < d->n_ds; i++) {
        mc_gpt_dataset_free(d->ds[i]);
        free(d->ds[i]);
    }
    free(d->ds);
    for (int i = 0; i < d->n_indexed; i++) {
        mc_indexed_close(d->indexed[i]);
        free(d->indexed[i]);
    }
    free(d->indexed);
    mc_mock_free(&d->mock);
    free(d->scratch);
    free(d);
}

static mc_indexed_t *open_prefix(mc_gpt_datasets_t *D, const char *prefix, char *err, size_t n)
{
    if (D->n_indexed == D->cap_indexed) {
        int cap = D->cap_indexed ? 2 * D->cap_indexed : 8;
        mc_indexed_t **p = realloc(D->indexed, sizeof *p * (size_t)cap);
        if (!p) return NULL;
        D->indexed = p;
        D->cap_indexed = cap;
    }
    mc_indexed_t *x = calloc(1, sizeof *x);
    if (!x) {
        mc_errf(err, n, "out of memory");
        return NULL;
    }
    if (mc_indexed_open(x, prefix, false, err, n) != 0) {
        free(x);
        return NULL;
    }
    D->indexed[D->n_indexed++] = x;
    return x;
}

static mc_gpt_dataset_t *new_dataset(mc_gpt_datasets_t *D)
{
    if (D->n_ds == D->cap_ds) {
        int cap = D->cap_ds ? 2 * D->cap_ds : 8;
        mc_gpt_dataset_t **p = realloc(D->ds, sizeof *p * (size_t)cap);
        if (!p) return NULL;
        D->ds = p;
        D->cap_ds = cap;
    }
    mc_gpt_dataset_t *x = calloc(1, sizeof *x);
    if (x) D->ds[D->n_ds++] = x;
    return x;
}

/* _build_megatron_dataset_splits over one low-level dataset of num_sequences sequences: the
 * splits present in the matrix, each with its requested size (-1 = None). out[i] is NULL where
 * the split is None. The caller sets each dataset's token source. */
static int build_splits(mc_gpt_datasets_t *D, const mc_gpt_data_config_t *c,
                        const int32_t *sequence_lengths, int64_t num_sequences,
                        const double bookends[3][2], const int present[3], const int64_t sizes[3],
                        const mc_gpt_index_cache_t *cache, mc_gpt_dataset_t *out[3], char *err,
                        size_t n)
{
    for (int i = 0; i < 3; i++) out[i] = NULL;
    for (int i = 0; i < 3; i++) {
        if (!present[i]) continue;
        int64_t b, e;
        mc_split_range(bookends[i], num_sequences, &b, &e);
        mc_gpt_dataset_t *g = new_dataset(D);
        if (!g) return mc_errf(err, n, "out of memory");
        bool drop = i != MC_SPLIT_VALID || c->drop_last_partial_validation_sequence;
        if (mc_gpt_dataset_build_cached(g, sequence_lengths, num_sequences, b, e, sizes[i], i,
                                        c->seq_length, c->seed, drop, cache, err, n) != 0)
            return -1;
        g->token_limit = c->vocab_limit;
        out[i] = g;
    }
    return 0;
}

/* build_splits over one prefix, with its index cache. */
static int build_prefix_splits(mc_gpt_datasets_t *D, const mc_gpt_data_config_t *c,
                               const char *prefix, const double bookends[3][2],
                               const int present[3], const int64_t sizes[3],
                               mc_gpt_dataset_t *out[3], char *err, size_t n)
{
    mc_indexed_t *x = open_prefix(D, prefix, err, n);
    if (!x) return -1;
    /* The index cache of this prefix (none when c->cache_path is NULL). */
    char lengths_md5[33], *dir = NULL;
    mc_gpt_index_cache_t cache = {.dataset_path = prefix, .lengths_md5 = lengths_md5};
    if (c->cache_path) {
        dir = c->cache_path[0] ? strdup(c->cache_path) : mc_index_cache_default_dir(prefix);
        if (!dir) return mc_errf(err, n, "out of memory");
        mc_index_cache_lengths_md5(x->sequence_lengths, x->num_sequences, lengths_md5);
        cache.dir = dir;
    }
    char e2[512];
    int rc = build_splits(D, c, x->sequence_lengths, x->num_sequences, bookends, present, sizes,
                          dir ? &cache : NULL, out, e2, sizeof e2);
    free(dir);
    if (rc) return mc_errf(err, n, "%s: %s", prefix, e2);
    for (int i = 0; i < 3; i++)
        if (out[i]) out[i]->indexed = x;
    return 0;
}

/* The top-level dataset of split i from its components (one per prefix). weights: the
 * normalised blend weights or NULL (None). targets[k]: sizes_per_dataset_target of component k
 * for this split (weights given). */
static int assemble_split(mc_gpt_datasets_t *D, int i, mc_gpt_dataset_t **comp, int k,
                          const double *weights, const int64_t *targets, int64_t size_req,
                          char *err, size_t n)
{
    split_t *S = &D->split[i];
    S->comp = malloc(sizeof *S->comp * (size_t)k);
    if (!S->comp) return mc_errf(err, n, "out of memory");
    memcpy(S->comp, comp, sizeof *comp * (size_t)k);
    S->n = k;
    S->blended = true;
    if (k >= 32767) return mc_errf(err, n, "%d datasets in one blend (Megatron allows 32766)", k);
    double *w = malloc(sizeof *w * (size_t)k);
    int64_t *lens = malloc(sizeof *lens * (size_t)k);
    if (!w || !lens) {
        free(w);
        free(lens);
        return mc_errf(err, n, "out of memory");
    }
    int64_t size;
    bool exhaustive = false;
    if (weights) {
        if (size_req < 0) {
            free(w);
            free(lens);
            return mc_errf(err, n, "weighted blends need a sample count for the %s split",
                           mc_split_name(i));
        }
        size = 0;
        for (int j = 0; j < k; j++)
            if (__builtin_add_overflow(size, targets[j], &size)) {
                free(w);
                free(lens);
                return mc_errf(err, n, "the %s blend's sizes overflow int64", mc_split_name(i));
            }
        memcpy(w, weights, sizeof *w * (size_t)k);
    } else {
        int64_t sum = 0;
        for (int j = 0; j < k; j++) {
            lens[j] = comp[j]->length;
            w[j] = (double)lens[j];
            sum += lens[j];
        }
        if (size_req >= 0) {
            size = size_req < sum ? size_req : sum;
        } else {
            size = sum;
            exhaustive = true;
        }
    }
    for (int j = 0; j < k; j++)
        if (!(w[j] > 0)) {
            double wj = w[j];
            free(w);
            free(lens);
            return mc_errf(err, n,
                           "blend component %d of the %s split has weight %g (Megatron's "
                           "BlendedDataset asserts every weight > 0)",
                           j, mc_split_name(i), wj);
        }
    S->size = size;
    S->dataset_index = malloc(sizeof *S->dataset_index * (size_t)(size ? size : 1));
    S->dataset_sample_index = malloc(sizeof *S->dataset_sample_index * (size_t)(size ? size : 1));
    int rc = 0;
    if (!S->dataset_index || !S->dataset_sample_index) {
        rc = -1;
    } else if (exhaustive) {
        rc = mc_build_exhaustive_blending_indices(S->dataset_index, S->dataset_sample_index, lens,
                                                  k);
    } else {
        mc_normalize(w, k, w); /* BlendedDataset's "redundant normalization" */
        rc = mc_build_blending_indices(S->dataset_index, S->dataset_sample_index, w, k, size);
    }
    free(w);
    free(lens);
    if (rc != 0) return mc_errf(err, n, "out of memory (blending indices)");
    /* A component asked for more samples than it has: Megatron raises IndexError on use. */
    for (int64_t s = 0; s < size; s++) {
        int c = S->dataset_index[s];
        if (S->dataset_sample_index[s] >= comp[c]->length)
            return mc_errf(err, n,
                           "the %s blend needs sample %lld of component %d, which has %lld "
                           "(raise --mid-level-dataset-surplus)",
                           mc_split_name(i), (long long)S->dataset_sample_index[s], c,
                           (long long)comp[c]->length);
    }
    return 0;
}

static int set_single(mc_gpt_datasets_t *D, int i, mc_gpt_dataset_t *g, char *err, size_t n)
{
    split_t *S = &D->split[i];
    if (!g) return 0;
    S->comp = malloc(sizeof *S->comp);
    if (!S->comp) return mc_errf(err, n, "out of memory");
    S->comp[0] = g;
    S->n = 1;
    S->blended = false;
    S->size = g->length;
    return 0;
}

/* One blend (prefixes, optional weights) over the split matrix, for the splits in present[]
 * (all three with --data-path, one with a per-split path). */
static int build_blend(mc_gpt_datasets_t *D, const mc_gpt_data_config_t *c, const mc_blend_t *bl,
                       const char *flag, const double bookends[3][2], const int present[3],
                       char *err, size_t n)
{
    int k = bl->n;
    const int64_t *sizes = c->num_samples;
    if (k == 1 && !bl->weights) {
        mc_gpt_dataset_t *out[3];
        if (build_prefix_splits(D, c, bl->prefixes[0], bookends, present, sizes, out, err, n))
            return -1;
        for (int i = 0; i < 3; i++)
            if (present[i] && set_single(D, i, out[i], err, n)) return -1;
        return 0;
    }
    double *w = NULL;
    int64_t(*target)[3] = NULL, (*buffer)[3] = NULL;
    mc_gpt_dataset_t *(*comp)[3] = calloc((size_t)k, sizeof *comp);
    int rc = -1;
    if (!comp) goto oom;
    if (bl->weights) {
        if (mc_blend_check_weights(bl, flag, err, n)) goto out;
        for (int i = 0; i < 3; i++)
            if (present[i] && sizes[i] < 0) {
                mc_errf(err, n, "weighted blends need a sample count for the %s split",
                        mc_split_name(i));
                goto out;
            }
        w = malloc(sizeof *w * (size_t)k);
        target = malloc(sizeof *target * (size_t)k);
        buffer = malloc(sizeof *buffer * (size_t)k);
        if (!w || !target || !buffer) goto oom;
        mc_normalize(bl->weights, k, w);
        for (int j = 0; j < k; j++)
            for (int i = 0; i < 3; i++) {
                /* sizes of absent splits are 0 for per-split blends (sizes_spoof) */
                int64_t t = present[i] ? sizes[i] : 0;
                target[j][i] = mc_size_for_dataset(w[j], t, 0.0);
                buffer[j][i] = mc_size_for_dataset(w[j], t, c->mid_level_dataset_surplus);
                if (target[j][i] < 0 || buffer[j][i] < 0) {
                    mc_errf(err, n,
                            "--mid-level-dataset-surplus %g: component %d of the %s "
                            "split would need more than 2^62 samples (give a small surplus, "
                            "Megatron's default is 0.005)",
                            c->mid_level_dataset_surplus, j, mc_split_name(i));
                    goto out;
                }
            }
    }
    for (int j = 0; j < k; j++) {
        int64_t none[3] = {-1, -1, -1};
        if (build_prefix_splits(D, c, bl->prefixes[j], bookends, present, buffer ? buffer[j] : none,
                                comp[j], err, n))
            goto out;
    }
    for (int i = 0; i < 3; i++) {
        if (!present[i]) continue;
        mc_gpt_dataset_t **ci = malloc(sizeof *ci * (size_t)k);
        int64_t *ti = malloc(sizeof *ti * (size_t)k);
        if (!ci || !ti) {
            free(ci);
            free(ti);
            goto oom;
        }
        for (int j = 0; j < k; j++) {
            ci[j] = comp[j][i];
            ti[j] = target ? target[j][i] : 0;
        }
        int r = assemble_split(D, i, ci, k, w, ti, sizes[i], err, n);
        free(ci);
        free(ti);
        if (r) goto out;
    }
    rc = 0;
    goto out;
oom:
    mc_errf(err, n, "out of memory");
out:
    free(w);
    free(target);
    free(buffer);
    free(comp);
    return rc;
}

/* --mock-data: MockGPTDataset splits over MockGPTLowLevelDataset. Megatron's config replaces
 * the split by "1,1,1" when there is no blend, and keeps no index cache without
 * --data-cache-path (none is kept here at all: the arrays are the same). */
static int build_mock(mc_gpt_datasets_t *D, const mc_gpt_data_config_t *c, char *err, size_t n)
{
    if (c->mock_vocab_size < 1)
        return mc_errf(err, n, "the mock data needs a vocabulary of at least 1 id (got %lld)",
                       (long long)c->mock_vocab_size);
    if (mc_mock_init(&D->mock, c->mock_vocab_size, c->sample.eod) != 0)
        return mc_errf(err, n, "out of memory");
    double bookends[3][2];
    int present[3];
    if (mc_split_matrix(MC_MOCK_SPLIT, bookends, present, err, n)) return -1;
    mc_gpt_dataset_t *out[3];
    char e2[512];
    if (build_splits(D, c, D->mock.sequence_lengths, MC_MOCK_NUM_DOCS, bookends, present,
                     c->num_samples, NULL, out, e2, sizeof e2))
        return mc_errf(err, n, "mock data: %s", e2);
    for (int i = 0; i < 3; i++) {
        if (!out[i]) continue;
        out[i]->mock = &D->mock;
        if (set_single(D, i, out[i], err, n)) return -1;
    }
    return 0;
}

int mc_gpt_check_train_split(const mc_gpt_data_config_t *c, char *err, size_t n)
{
    if (c->num_samples[MC_SPLIT_TRAIN] <= 0) return 0;
    if (c->n_data_path > 0) {
        double bookends[3][2];
        int present[3];
        const char *split = c->split && c->split[0] ? c->split : "969, 30, 1";
        if (mc_split_matrix(split, bookends, present, err, n)) return -1;
        char shown[MC_SHOWN_MAX + 4];
        if (!present[MC_SPLIT_TRAIN])
            return mc_errf(err, n,
                           "--split '%s' leaves the train split empty, but training needs "
                           "%lld samples (give the train split a positive weight, e.g. --split "
                           "99,1,0)",
                           mc_shown(split, shown), (long long)c->num_samples[MC_SPLIT_TRAIN]);
    } else if (c->n_split_data_path[MC_SPLIT_VALID] + c->n_split_data_path[MC_SPLIT_TEST] > 0 &&
               c->n_split_data_path[MC_SPLIT_TRAIN] == 0) {
        return mc_errf(err, n,
                       "no --train-data-path, but training needs %lld samples (give "
                       "--train-data-path, or --data-path with --split)",
                       (long long)c->num_samples[MC_SPLIT_TRAIN]);
    }
    return 0;
}

mc_gpt_datasets_t *mc_gpt_datasets_build(const mc_gpt_data_config_t *c, char *err, size_t n)
{
    if (mc_gpt_check_train_split(c, err, n)) return NULL;
    mc_gpt_datasets_t *D = calloc(1, sizeof *D);
    if (!D) {
        mc_errf(err, n, "out of memory");
        return NULL;
    }
    D->seq_length = c->seq_length;
    D->opts = c->sample;
    D->scratch = malloc(sizeof(int32_t) * ((size_t)(c->seq_length > 0 ? c->seq_length : 0) + 1));
    if (!D->scratch) {
        mc_errf(err, n, "out of memory");
        goto bad;
    }
    bool per_split = c->n_split_data_path[0] || c->n_split_data_path[1] || c->n_split_data_path[2];
    if ((c->n_data_path > 0) + per_split + c->mock > 1) {
        mc_errf(err, n, "--mock-data, --data-path and --train/valid/test-data-path are exclusive");
        goto bad;
    }
    if (c->mock) {
        if (build_mock(D, c, err, n)) goto bad;
    } else if (c->n_data_path > 0) {
        double bookends[3][2];
        int present[3];
        const char *split = c->split && c->split[0] ? c->split : "969, 30, 1";
        if (mc_split_matrix(split, bookends, present, err, n)) goto bad;
        mc_blend_t bl;
        if (mc_blend_from_list(&bl, c->data_path, c->n_data_path, err, n)) goto bad;
        int r = build_blend(D, c, &bl, "--data-path", bookends, present, err, n);
        mc_blend_free(&bl);
        if (r) goto bad;
    } else if (per_split) {
        for (int i = 0; i < 3; i++) {
            if (!c->n_split_data_path[i]) continue;
            /* split_spoof: (0, 1) for this split only */
            double bookends[3][2] = {{0, 0}, {0, 0}, {0, 0}};
            int present[3] = {0, 0, 0};
            bookends[i][0] = 0.0;
            bookends[i][1] = 1.0;
            present[i] = 1;
            mc_blend_t bl;
            if (mc_blend_from_list(&bl, c->split_data_path[i], c->n_split_data_path[i], err, n))
                goto bad;
            static const char *const flags[3] = {"--train-data-path", "--valid-data-path",
                                                 "--test-data-path"};
            int r;
            if (bl.n == 1) { /* a single prefix is built directly, weights or not */
                double *keep = bl.weights;
                bl.weights = NULL;
                r = build_blend(D, c, &bl, flags[i], bookends, present, err, n);
                bl.weights = keep;
            } else {
                r = build_blend(D, c, &bl, flags[i], bookends, present, err, n);
            }
            mc_blend_free(&bl);
            if (r) goto bad;
        }
    } else {
        mc_errf(err, n, "no data: give --data-path (or --train-data-path etc.), or --mock-data");
        goto bad;
    }
    return D;
bad:
    mc_gpt_datasets_free(D);
    return NULL;
}

int64_t mc_gpt_datasets_len(const mc_gpt_datasets_t *d, int split)
{
    if (split < 0 || split > 2) return 0;
    return d->split[split].n ? d->split[split].size : 0;
}

int mc_gpt_datasets_components(const mc_gpt_datasets_t *d, int split)
{
    return split < 0 || split > 2 ? 0 : d->split[split].n;
}

bool mc_gpt_datasets_blended(const mc_gpt_datasets_t *d, int split)
{
    return split >= 0 && split <= 2 && d->split[split].blended;
}

const mc_gpt_dataset_t *mc_gpt_datasets_component(const mc_gpt_datasets_t *d, int split, int k)
{
    if (split < 0 || split > 2 || k < 0 || k >= d->split[split].n) return NULL;
    return d->split[split].comp[k];
}

void mc_gpt_datasets_blend_at(const mc_gpt_datasets_t *d, int split, int64_t i, int *component,
                              int64_t *component_sample)
{
    const split_t *S = &d->split[split];
    if (S->blended) {
        *component = S->dataset_index[i];
        *component_sample = S->dataset_sample_index[i];
    } else {
        *component = 0;
        *component_sample = i;
    }
}

int mc_gpt_datasets_text(const mc_gpt_datasets_t *d, int split, int64_t i, int32_t *text, char *err,
                         size_t n)
{
    if (split < 0 || split > 2 || !d->split[split].n)
        return mc_errf(err, n, "no dataset for the %s split", mc_split_name(split));
    const split_t *S = &d->split[split];
    if (i < 0 || i >= S->size)
        return mc_errf(err, n, "sample %lld of the %s split is out of range [0, %lld)",
                       (long long)i, mc_split_name(split), (long long)S->size);
    int k;
    int64_t j;
    mc_gpt_datasets_blend_at(d, split, i, &k, &j);
    return mc_gpt_dataset_text(S->comp[k], j, d->opts.pad, text, err, n);
}

int mc_gpt_datasets_batch(mc_gpt_datasets_t *d, int split, const int64_t *idx, int b,
                          int32_t *tokens, int32_t *labels, float *loss_mask, int32_t *positions,
                          int32_t *segments, char *err, size_t n)
{
    const int s = d->seq_length;
    for (int r = 0; r < b; r++) {
        int rc = mc_gpt_datasets_text(d, split, idx[r], d->scratch, err, n);
        if (rc != 0) return rc;
        size_t o = (size_t)r * (size_t)s;
        mc_gpt_sample_fields(d->scratch, s, &d->opts, tokens + o, labels + o, loss_mask + o,
                             positions + o, segments ? segments + o : NULL);
    }
    return 0;
}
