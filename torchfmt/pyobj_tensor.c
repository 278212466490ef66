/* torch's side of the checkpoint object model (pyobj.h): dtypes, the byte owners that storages
 * share (a malloc'd or mmap'd file region), storages, and tensors over them with the bounds
 * check every tensor passes. */
#include "torchfmt/pyobj.h"
#include "torchfmt/pyobj_int.h"
#include "torchfmt/util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- dtypes ---------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} DTYPES[MC_TORCH_DTYPE_COUNT] = {
    [MC_TORCH_FLOAT32] = {"float32", 4},
    [MC_TORCH_FLOAT64] = {"float64", 8},
    [MC_TORCH_FLOAT16] = {"float16", 2},
    [MC_TORCH_BFLOAT16] = {"bfloat16", 2},
    [MC_TORCH_INT64] = {"int64", 8},
    [MC_TORCH_INT32] = {"int32", 4},
    [MC_TORCH_INT16] = {"int16", 2},
    [MC_TORCH_INT8] = {"int8", 1},
    [MC_TORCH_UINT8] = {"uint8", 1},
    [MC_TORCH_BOOL] = {"bool", 1},
    [MC_TORCH_COMPLEX64] = {"complex64", 8},
    [MC_TORCH_COMPLEX128] = {"complex128", 16},
    [MC_TORCH_UINT16] = {"uint16", 2},
    [MC_TORCH_UINT32] = {"uint32", 4},
    [MC_TORCH_UINT64] = {"uint64", 8},
    [MC_TORCH_FLOAT8_E4M3FN] = {"float8_e4m3fn", 1},
    [MC_TORCH_FLOAT8_E5M2] = {"float8_e5m2", 1},
};

size_t mc_torch_dtype_size(mc_torch_dtype_t dt)
{
    return (unsigned)dt < MC_TORCH_DTYPE_COUNT ? DTYPES[dt].size : 0;
}

const char *mc_torch_dtype_name(mc_torch_dtype_t dt)
{
    return (unsigned)dt < MC_TORCH_DTYPE_COUNT ? DTYPES[dt].name : "invalid";
}

int mc_torch_dtype_from_name(const char *name, mc_torch_dtype_t *out)
{
    /* torch's aliases (torch.float is torch.float32, ...), as a dtype's pickle may name them. */
    static const struct {
        const char *alias;
        mc_torch_dtype_t dt;
    } ALIASES[] = {{"float", MC_TORCH_FLOAT32},    {"double", MC_TORCH_FLOAT64},
                   {"half", MC_TORCH_FLOAT16},     {"long", MC_TORCH_INT64},
                   {"int", MC_TORCH_INT32},        {"short", MC_TORCH_INT16},
                   {"cfloat", MC_TORCH_COMPLEX64}, {"cdouble", MC_TORCH_COMPLEX128}};
    for (int i = 0; i < MC_TORCH_DTYPE_COUNT; i++)
        if (!strcmp(name, DTYPES[i].name)) return *out = (mc_torch_dtype_t)i, 0;
    for (size_t i = 0; i < sizeof ALIASES / sizeof *ALIASES; i++)
        if (!strcmp(name, ALIASES[i].alias)) return *out = ALIASES[i].dt, 0;
    return -1;
}

/* ---- byte owners ----------------------------------------------------------------------------- */

struct mc_py_buf {
    int refs;
    void *p;
    size_t len;
    bool mapped;
};

mc_py_buf_t *mc_py_buf_new(void *p, size_t len, bool mapped)
{
    mc_py_buf_t *b = malloc(sizeof *b);
    if (b) *b = (mc_py_buf_t){.refs = 1, .p = p, .len = len, .mapped = mapped};
    return b;
}

void mc_py_buf_release(mc_py_buf_t *b)
{
    if (!b || --b->refs > 0) return;
    if (b->mapped) {
        if (b->len) munmap(b->p, b->len);
    } else {
        free(b->p);
    }
    free(b);
}

/* ---- storages and tensors -------------------------------------------------------------------- */

mc_pyobj_t *mc_py_storage_owned_by(mc_torch_dtype_t dt, bool untyped, void *data, int64_t numel,
                                   mc_py_buf_t *owner, const char *location)
{
    size_t es = mc_torch_dtype_size(dt);
    if (!es || numel < 0 || (uint64_t)numel > SIZE_MAX / es) return NULL;
    mc_pyobj_t *s = py_new_obj(MC_PY_STORAGE);
    char *loc = strdup(location ? location : "cpu");
    if (!s || !loc) {
        free(s);
        free(loc);
        return NULL;
    }
    s->storage.dtype = dt;
    s->storage.untyped = untyped;
    s->storage.numel = numel;
    s->storage.nbytes = (size_t)numel * es;
    s->storage.data = data;
    s->storage.location = loc;
    if (owner) owner->refs++;
    s->storage.owner = owner;
    return s;
}

mc_pyobj_t *mc_py_storage_new(mc_torch_dtype_t dt, int64_t numel)
{
    size_t es = mc_torch_dtype_size(dt);
    if (!es || numel < 0 || (uint64_t)numel > SIZE_MAX / es) return NULL;
    size_t n = (size_t)numel * es;
    void *p = n ? calloc(1, n) : NULL;
    mc_py_buf_t *b = n && p ? mc_py_buf_new(p, n, false) : NULL;
    if (n && !b) {
        free(p);
        return NULL;
    }
    mc_pyobj_t *s = mc_py_storage_owned_by(dt, false, p, numel, b, "cpu");
    mc_py_buf_release(b); /* the storage holds its own reference */
    return s;
}

mc_pyobj_t *mc_py_storage_wrap(mc_torch_dtype_t dt, void *data, int64_t numel)
{
    return mc_py_storage_owned_by(dt, false, data, numel, NULL, "cpu");
}

/* torch's contiguous strides: a dimension of size 0 or 1 still advances by at least 1. */
static void contiguous_strides(int ndim, const int64_t *shape, int64_t *stride)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = s;
        if (shape[i] > 1 && s <= INT64_MAX / shape[i]) s *= shape[i];
    }
}

int mc_py_tensor_check(const mc_pyobj_t *storage, mc_torch_dtype_t dt, int64_t offset, int ndim,
                       const int64_t *shape, const int64_t *stride, char *err, size_t errn)
{
    if (!storage || storage->kind != MC_PY_STORAGE)
        return mc_errf(err, errn, "a tensor's storage is a %s",
                       storage ? mc_py_kind_name(storage->kind) : "missing object");
    size_t es = mc_torch_dtype_size(dt);
    if (!es) return mc_errf(err, errn, "invalid tensor dtype %d", (int)dt);
    if (!storage->storage.untyped && storage->storage.dtype != dt)
        return mc_errf(err, errn, "a %s storage viewed as %s",
                       mc_torch_dtype_name(storage->storage.dtype), mc_torch_dtype_name(dt));
    if (ndim < 0 || ndim > MC_PY_MAX_DIMS)
        return mc_errf(err, errn, "a tensor with %d dimensions (at most %d)", ndim, MC_PY_MAX_DIMS);
    if (offset < 0) return mc_errf(err, errn, "negative storage offset %lld", (long long)offset);
    uint64_t cap = storage->storage.nbytes / es; /* elements of dt in the storage */
    int64_t numel = 1, last = offset;
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || stride[i] < 0)
            return mc_errf(err, errn, "negative size or stride in dimension %d", i);
        if (shape[i] == 0) empty = true;
        if (__builtin_mul_overflow(numel, shape[i], &numel))
            return mc_errf(err, errn, "tensor size overflows");
    }
    if (empty) {
        if ((uint64_t)offset > cap)
            return mc_errf(err, errn, "storage offset %lld beyond a storage of %llu %s elements",
                           (long long)offset, (unsigned long long)cap, mc_torch_dtype_name(dt));
        return 0;
    }
    for (int i = 0; i < ndim; i++) {
        int64_t span;
        if (__builtin_mul_overflow(shape[i] - 1, stride[i], &span) ||
            __builtin_add_overflow(last, span, &last))
            return mc_errf(err, errn, "tensor extent overflows");
    }
    if ((uint64_t)last >= cap)
        return mc_errf(err, errn,
                       "tensor view reaches element %lld of a storage of %llu %s elements",
                       (long long)last, (unsigned long long)cap, mc_torch_dtype_name(dt));
    return 0;
}

mc_pyobj_t *mc_py_tensor(mc_pyobj_t *storage, mc_torch_dtype_t dt, int64_t offset, int ndim,
                         const int64_t *shape, const int64_t *stride)
{
    int64_t cstride[MC_PY_MAX_DIMS];
    if (!storage || ndim < 0 || ndim > MC_PY_MAX_DIMS || (ndim && !shape)) goto fail;
    if (!stride) {
        contiguous_strides(ndim, shape, cstride);
        stride = cstride;
    }
    if (mc_py_tensor_check(storage, dt, offset, ndim, shape, stride, NULL, 0)) goto fail;
    mc_pyobj_t *t = py_new_obj(MC_PY_TENSOR);
    if (!t) goto fail;
    if (ndim) {
        t->tensor.shape = malloc((size_t)ndim * sizeof(int64_t));
        t->tensor.stride = malloc((size_t)ndim * sizeof(int64_t));
        if (!t->tensor.shape || !t->tensor.stride) {
            free(t->tensor.shape);
            free(t->tensor.stride);
            free(t);
            goto fail;
        }
        memcpy(t->tensor.shape, shape, (size_t)ndim * sizeof(int64_t));
        memcpy(t->tensor.stride, stride, (size_t)ndim * sizeof(int64_t));
    }
    t->tensor.storage = storage;
    t->tensor.dtype = dt;
    t->tensor.ndim = ndim;
    t->tensor.offset = offset;
    return t;
fail:
    mc_py_decref(storage);
    return NULL;
}

static int64_t shape_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n)) return -1;
    return n;
}

mc_pyobj_t *mc_py_tensor_new(mc_torch_dtype_t dt, int ndim, const int64_t *shape)
{
    int64_t n = ndim < 0 || ndim > MC_PY_MAX_DIMS ? -1 : shape_numel(ndim, shape);
    return n < 0 ? NULL : mc_py_tensor(mc_py_storage_new(dt, n), dt, 0, ndim, shape, NULL);
}

mc_pyobj_t *mc_py_tensor_copy(mc_torch_dtype_t dt, int ndim, const int64_t *shape, const void *data)
{
    mc_pyobj_t *t = mc_py_tensor_new(dt, ndim, shape);
    size_t n = t ? mc_py_tensor_nbytes(t) : 0;
    if (n) memcpy(mc_py_tensor_data(t), data, n);
    return t;
}

mc_pyobj_t *mc_py_tensor_wrap(mc_torch_dtype_t dt, int ndim, const int64_t *shape, void *data)
{
    int64_t n = ndim < 0 || ndim > MC_PY_MAX_DIMS ? -1 : shape_numel(ndim, shape);
    return n < 0 ? NULL : mc_py_tensor(mc_py_storage_wrap(dt, data, n), dt, 0, ndim, shape, NULL);
}

void *mc_py_tensor_data(const mc_pyobj_t *t)
{
    if (!t || t->kind != MC_PY_TENSOR || !t->tensor.storage->storage.data) return NULL;
    if (mc_py_tensor_numel(t) == 0) return t->tensor.storage->storage.data;
    return (char *)t->tensor.storage->storage.data +
           (size_t)t->tensor.offset * mc_torch_dtype_size(t->tensor.dtype);
}

int64_t mc_py_tensor_numel(const mc_pyobj_t *t)
{
    if (!t || t->kind != MC_PY_TENSOR) return 0;
    return shape_numel(t->tensor.ndim, t->tensor.shape); /* checked on construction */
}

size_t mc_py_tensor_nbytes(const mc_pyobj_t *t)
{
    return (size_t)mc_py_tensor_numel(t) *
           mc_torch_dtype_size(t ? t->tensor.dtype : MC_TORCH_DTYPE_COUNT);
}

bool mc_py_tensor_contiguous(const mc_pyobj_t *t)
{
    if (!t || t->kind != MC_PY_TENSOR) return false;
    if (mc_py_tensor_numel(t) == 0) return true;
    int64_t expect = 1;
    for (int i = t->tensor.ndim - 1; i >= 0; i--) {
        if (t->tensor.shape[i] == 1) continue; /* torch ignores strides of size-1 dims */
        if (t->tensor.stride[i] != expect) return false;
        expect *= t->tensor.shape[i];
    }
    return true;
}
