/* Reader for the MCFX test fixtures written by test/ref/gpt_ref.py (see test/ref/README.md).
 *
 * File format (little-endian): 8-byte magic "MCFX0001", u32 record count, then per record:
 * u32 name_len, name bytes (no NUL), u32 dtype (MC_FX_F32/I32/F64/I64), u32 ndim (0..8),
 * int64 dims[ndim], raw data (numel*itemsize bytes; ndim 0 holds one element).
 *
 * Every tensor's data is copied to 8-byte-aligned memory, so `(const double *)t->data` etc. is
 * safe. Names are NUL-terminated copies. Everything is owned by the mc_fx_t. */
#ifndef MC_TEST_FIXTURE_H
#define MC_TEST_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

enum { MC_FX_F32 = 0, MC_FX_I32 = 1, MC_FX_F64 = 2, MC_FX_I64 = 3 };
#define MC_FX_MAX_NDIM 8

typedef struct {
    char *name;
    int dtype;       /* MC_FX_F32 / MC_FX_I32 / MC_FX_F64 / MC_FX_I64 */
    int ndim;        /* 0..8 */
    int64_t dims[8]; /* unused entries are 0 */
    int64_t numel;   /* product of dims; 1 for ndim 0 */
    void *data;      /* numel elements of dtype, 8-byte aligned */
} mc_fx_tensor_t;

typedef struct {
    int n;
    mc_fx_tensor_t *t; /* in file order */
    void *blob;        /* backing storage of names and data */
} mc_fx_t;

/* Loads a fixture file. Returns NULL (and prints one line on stderr) on a missing, truncated or
 * corrupt file: bad magic, bad dtype/ndim, negative or overflowing dims, a record running past
 * the end, trailing bytes, an empty or duplicate name. Never reads out of bounds. */
mc_fx_t *mc_fx_load(const char *path);

/* The record named `name`, or NULL if absent. */
const mc_fx_tensor_t *mc_fx_get(const mc_fx_t *fx, const char *name);

/* The value of a one-element record (ndim 0 or numel 1) of any dtype, as double. Fails the
 * running cmocka test with a message if absent or not one element. */
double mc_fx_scalar(const mc_fx_t *fx, const char *name);

void mc_fx_free(mc_fx_t *fx);

/* Writes "<$MC_FIXTURES or test/fixtures>/<file>" into buf. Returns 0, or -1 if it does not
 * fit (buf then holds a truncated, NUL-terminated string). */
int mc_fx_path(char *buf, size_t n, const char *file);

/* mc_fx_path + mc_fx_load. */
mc_fx_t *mc_fx_open(const char *file);

/* Bytes per element of a dtype code (0 for an invalid code). */
size_t mc_fx_dtype_size(int dtype);

/* Element i (flat, row-major) of any dtype, as double. i must be in [0, numel). */
double mc_fx_at(const mc_fx_tensor_t *t, int64_t i);

/* Like mc_fx_get, but fails the running cmocka test unless the record exists with this dtype
 * and exactly numel elements (numel < 0: any). */
const mc_fx_tensor_t *mc_fx_require(const mc_fx_t *fx, const char *name, int dtype, int64_t numel);

/* Compares n float values `got` against the reference record `ref` (any dtype, numel == n):
 * element i passes when |got-ref| <= atol + rtol*|ref|. Prints the first few mismatches and the
 * max abs/rel error (prefixed by `what`) on stdout with a leading '#' (TAP comment) and returns
 * the number of mismatches (n + 1 if the sizes differ). */
int64_t mc_fx_compare_f32(const mc_fx_tensor_t *ref, const float *got, int64_t n, double atol,
                          double rtol, const char *what);

/* The same for double values. */
int64_t mc_fx_compare_f64(const mc_fx_tensor_t *ref, const double *got, int64_t n, double atol,
                          double rtol, const char *what);

#endif
