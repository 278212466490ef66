/* Megatron's indexed dataset (.idx + .bin, MMIDIDX version 1; MEGATRON.md section 1): a
 * validating mmap reader and a writer whose output is byte-identical to Megatron's. */
#ifndef MC_DATA_INDEXED_H
#define MC_DATA_INDEXED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Megatron's DType codes. */
enum {
    MC_DTYPE_UINT8 = 1,
    MC_DTYPE_INT8 = 2,
    MC_DTYPE_INT16 = 3,
    MC_DTYPE_INT32 = 4,
    MC_DTYPE_INT64 = 5,
    MC_DTYPE_FLOAT64 = 6,
    MC_DTYPE_FLOAT32 = 7,
    MC_DTYPE_UINT16 = 8,
};

typedef struct {
    char *prefix;
    int dtype;             /* MC_DTYPE_* of the tokens in .bin */
    int itemsize;          /* bytes per token */
    int64_t num_sequences; /* S */
    int64_t num_documents; /* D - 1 (document_indices has D entries) */
    /* The arrays point into an aligned copy of the .idx (idx_map): in the file they sit at
     * offset 34, misaligned for int32/int64 loads. */
    const int32_t *sequence_lengths;  /* [S] */
    const int64_t *sequence_pointers; /* [S] byte offsets into .bin */
    const int64_t *document_indices;  /* [D] */
    const int8_t *sequence_modes;     /* [S] or NULL (multimodal only) */
    const uint8_t *bin;               /* the .bin mapping */
    size_t bin_size, idx_size;
    void *idx_map; /* the aligned .idx copy (heap) */
} mc_indexed_t;

/* Opens <prefix>.idx and <prefix>.bin (mmap) and validates everything the reader relies on:
 * magic, version, dtype, array sizes against the file size, pointers and lengths against the
 * .bin size, document indices monotonic from 0 to S. On failure returns -1 with one line in
 * err naming the file and the problem; never reads out of bounds. multimodal: parse the
 * sequence_modes array too. */
int mc_indexed_open(mc_indexed_t *d, const char *prefix, bool multimodal, char *err, size_t n);
void mc_indexed_close(mc_indexed_t *d);

/* Tokens [offset, offset+length) of sequence seq, converted to int32 (Megatron's get()).
 * Returns 0, or -1 if out of range or a value does not fit int32 (err says which). */
int mc_indexed_get(const mc_indexed_t *d, int64_t seq, int64_t offset, int64_t length, int32_t *out,
                   char *err, size_t n);

/* Writer (Megatron's IndexedDatasetBuilder). Writes <prefix>.bin/.idx under temporary names
 * (<prefix>.bin.tmp, <prefix>.idx.tmp) and renames them only in mc_indexed_writer_finish. */
typedef struct mc_indexed_writer mc_indexed_writer_t;

mc_indexed_writer_t *mc_indexed_writer_open(const char *prefix, int dtype, char *err, size_t n);
/* add_document(tokens, lengths): the sequences of one document, lengths summing to n_tokens.
 * A document with no sequences still adds a document_indices entry. Returns 0 or -1. */
int mc_indexed_writer_add_document(mc_indexed_writer_t *w, const int32_t *tokens,
                                   const int32_t *lengths, int n_sequences, char *err, size_t n);
/* add_index: appends every sequence and document of another dataset (merging partitions). */
int mc_indexed_writer_add_index(mc_indexed_writer_t *w, const char *prefix, char *err, size_t n);
/* Writes the .idx, closes, renames both files into place. Frees w. Returns 0 or -1. */
int mc_indexed_writer_finish(mc_indexed_writer_t *w, char *err, size_t n);
/* Removes the temporary files and frees w (after an error). */
void mc_indexed_writer_abort(mc_indexed_writer_t *w);

/* DType.optimal_dtype: uint16 if vocab_size < 65500, else int32. */
int mc_indexed_optimal_dtype(int64_t vocab_size);
/* Bytes per item of a dtype code (0 for an invalid code), and its numpy name ("uint16"). */
int mc_indexed_dtype_size(int dtype);
const char *mc_indexed_dtype_name(int dtype);

#endif
