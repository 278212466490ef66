/* Megatron's dataset blending pieces (MEGATRON.md 2.2 and 2.8): the --data-path list
 * (utils.get_blend_from_list), --split parsing, weight normalisation with numpy's float64 sum,
 * per-split per-dataset sizes with the surplus, and helpers.cpp's build_blending_indices /
 * build_exhaustive_blending_indices. Pure functions; gpt_dataset.c puts them together. */
#ifndef MC_DATA_BLEND_H
#define MC_DATA_BLEND_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int n;
    char **prefixes; /* [n], stripped of surrounding whitespace */
    double *weights; /* [n] as given (not normalised), or NULL: None */
} mc_blend_t;

/* get_blend_from_list: an even-length list whose even positions all parse as Python floats
 * gives (weights, prefixes); otherwise the whole list is prefixes and weights are None. A list
 * where some weights parse and a later one does not fails as Megatron's assert does. An empty
 * list is an error. 0, or -1 with err. */
int mc_blend_from_list(mc_blend_t *b, char *const *list, int n, char *err, size_t en);
void mc_blend_free(mc_blend_t *b);

/* Python float(s) for the strings Megatron parses: surrounding whitespace, underscores between
 * digits, inf/nan; no hex. 0, or -1 if s is not a float. */
int mc_parse_py_float(const char *s, double *out);

/* numpy.sum of a float64 array (pairwise summation, exactly as numpy orders it). */
double mc_numpy_sum(const double *a, int64_t n);
/* utils.normalize: w / numpy.sum(w) in float64. out may equal w. */
void mc_normalize(const double *w, int n, double *out);

/* parse_and_normalize_split + convert_split_vector_to_split_matrix: "969, 30, 1" gives
 * bookends[i] = {begin, end} of split i and present[i] = 0 where the split is None (empty
 * weight). 0, or -1 with err (not numbers, more than 3, all zero). */
int mc_split_matrix(const char *split, double bookends[3][2], int present[3], char *err, size_t en);
/* The split's sequence range of a dataset with num_elements sequences:
 * [int(round(b0 * N)), int(round(b1 * N))), Python's round half to even. */
void mc_split_range(const double bookend[2], int64_t num_elements, int64_t *begin, int64_t *end);

/* Blend weights that Megatron can use: every one finite and > 0 (BlendedDataset asserts it;
 * zero, NaN or infinite weights make normalize() give NaN) and their sum finite. 0, or -1 with
 * err naming flag (e.g. "--data-path") and the weight. */
int mc_blend_check_weights(const mc_blend_t *b, const char *flag, char *err, size_t en);

/* _get_size_per_split_per_dataset: int(ceil(ceil(target * w) * (1 + surplus))) for one
 * normalised weight and one target size; -1 when that is not a number below 2^62 (a NaN weight,
 * a huge --mid-level-dataset-surplus), where Python would fail or ask for a Python big int. */
int64_t mc_size_for_dataset(double normalized_weight, int64_t target, double surplus);

/* helpers.cpp build_blending_indices (weights already normalised). 0, or -1 out of memory. */
int mc_build_blending_indices(int16_t *dataset_index, int64_t *dataset_sample_index,
                              const double *weights, int n, int64_t size);
/* helpers.cpp build_exhaustive_blending_indices: exactly sizes[k] samples from dataset k;
 * the arrays have sum(sizes) entries. sizes[k] > 0. 0, or -1 out of memory. */
int mc_build_exhaustive_blending_indices(int16_t *dataset_index, int64_t *dataset_sample_index,
                                         const int64_t *sizes, int n);

#endif
