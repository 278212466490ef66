/* The safetensors file format of Hugging Face (an 8-byte little-endian header length, a JSON
 * header naming each tensor's dtype, shape and data_offsets within the data that follows, and
 * the raw little-endian bytes), both ways: what `megatron-c export-hf` writes and `import-hf`
 * reads (ckpt/hf.h). The writer pads the header with spaces to a multiple of 8 bytes, as the
 * safetensors package does, so every tensor's data starts aligned. */
#ifndef MC_TORCHFMT_SAFETENSORS_H
#define MC_TORCHFMT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "torchfmt/pyobj.h"

#define MC_ST_MAX_DIMS 8

/* One tensor of a file: its name, type, shape and bytes [begin, end) of the data section. */
typedef struct {
    char *name;
    mc_torch_dtype_t dtype;
    int ndim;
    int64_t shape[MC_ST_MAX_DIMS];
    uint64_t begin, end;
} mc_st_tensor_t;

/* An open file (mapped read-only): its tensors in the header's order, its __metadata__. */
typedef struct {
    mc_st_tensor_t *t;
    size_t n;
    char **meta; /* key, value, key, value, ... (2 * n_meta strings) */
    size_t n_meta;
    const uint8_t *data; /* the data section */
    uint64_t data_len;
    void *map;
    size_t map_len;
} mc_st_file_t;

/* Opens and checks path: the header length within the file, the JSON header, every tensor's
 * dtype, shape and offsets (inside the data, of the size its shape and dtype say, no two
 * overlapping). Returns 0, or -1 with one line naming the file and the problem in err. */
int mc_st_open(const char *path, mc_st_file_t *f, char *err, size_t n);
/* The tensor called name, or NULL. */
const mc_st_tensor_t *mc_st_find(const mc_st_file_t *f, const char *name);
/* The value of __metadata__'s key, or NULL. */
const char *mc_st_meta(const mc_st_file_t *f, const char *key);
static inline const void *mc_st_bytes(const mc_st_file_t *f, const mc_st_tensor_t *t)
{
    return f->data + t->begin;
}
void mc_st_close(mc_st_file_t *f);

/* The safetensors name of a dtype ("F32", "BF16", ...), or NULL for one it has none for. */
const char *mc_st_dtype_name(mc_torch_dtype_t dt);
/* Bytes per element of the dtypes safetensors names (0 for others). */
size_t mc_st_dtype_size(mc_torch_dtype_t dt);

/* One tensor to write: data holds numel(shape) little-endian elements of dtype. */
typedef struct {
    const char *name;
    mc_torch_dtype_t dtype;
    int ndim;
    int64_t shape[MC_ST_MAX_DIMS];
    const void *data;
} mc_st_entry_t;

/* The data bytes of e. */
uint64_t mc_st_nbytes(const mc_st_entry_t *e);
/* Writes the n tensors, in this order, and meta (key, value pairs; NULL for none) to path,
 * durably (base/fs.h). Returns 0, or -1 with one line in err. */
int mc_st_write(const char *path, const mc_st_entry_t *e, size_t n, const char *const *meta,
                size_t n_meta, char *err, size_t errn);
/* The bytes mc_st_write would write for these tensors (the header's and the data's). */
uint64_t mc_st_file_size(const mc_st_entry_t *e, size_t n, const char *const *meta, size_t n_meta);

#endif
