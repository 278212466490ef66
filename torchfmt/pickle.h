/* torch.save's pickle dialect (the data.pkl record of a checkpoint): a writer that emits what
 * Python's pickle protocol 2 emits for the same objects, and a reader.
 *
 * torch.save pickles with protocol 2. Tensors are written through torch._utils._rebuild_tensor_v2
 * (storage, storage_offset, size, stride, requires_grad, OrderedDict()), and each storage as a
 * persistent id ('storage', torch.<Type>Storage, key, location, numel) whose bytes torch keeps
 * in the zip entry data/<key>, outside the pickle. Keys are "0", "1", ... in the order storages
 * are first met. The writer reproduces Python's memo (BINPUT after every memoizable object,
 * BINGET for an object met again, globals and torch's constant strings shared), batching
 * (SETITEMS/APPENDS of at most 1000 items, SETITEM/APPEND for one) and int encodings, so its
 * output matches Python's byte for byte when the graph shares objects where Python's does
 * (the same pointer for the same object). Loading keeps a file's sharing, so a checkpoint
 * torch.save wrote comes out with the same data.pkl when saved again
 * (test/integration/test_ckpt_torch.sh checks both against torch).
 *
 * The reader accepts protocols 2 to 5 as Python 3 writes them and what older torch versions
 * wrote (see unpickle.c for the opcode list). It turns torch's tensor rebuild calls into
 * tensors, OrderedDict() into an ordered dict, _codecs.encode(s, 'latin1') into bytes, and any
 * other call into an opaque object. Malformed input yields an error, never a crash: every read
 * is bounds-checked, sizes are checked against the input before allocating, and containers
 * cannot be made to contain themselves. */
#ifndef MC_TORCHFMT_PICKLE_H
#define MC_TORCHFMT_PICKLE_H

#include "torchfmt/pyobj.h"

#include <stddef.h>
#include <stdint.h>

/* The storages a dump refers to, in key order: storages[i] is the one named str(i). */
typedef struct {
    const mc_pyobj_t **storages;
    size_t n;
} mc_pickle_storages_t;

/* Pickles obj as torch.save does. On success returns 0 with the bytes in *out (malloc'd, *len
 * bytes) and the storages to write beside them in *st (free with mc_pickle_storages_free).
 * Fails with a one-line error for what torch would not write: tensors of dtypes that need
 * _rebuild_tensor_v3 or that view a storage of another dtype, nesting deeper than 1000, strings
 * of 4 GiB or more. */
int mc_pickle_dump(const mc_pyobj_t *obj, uint8_t **out, size_t *len, mc_pickle_storages_t *st,
                   char *err, size_t errn);
void mc_pickle_storages_free(mc_pickle_storages_t *st);

/* Resolves the persistent id of a storage: a new reference to a STORAGE holding numel elements
 * of dt (of bytes when untyped), or NULL with a one-line error. The same key must give the
 * same storage each time (tensors that share a storage in torch share it here). */
typedef struct {
    mc_pyobj_t *(*storage)(void *ctx, const char *key, mc_torch_dtype_t dt, bool untyped,
                           int64_t numel, const char *location, char *err, size_t errn);
    void *ctx;
} mc_unpickle_storages_t;

/* Unpickles len bytes. storages may be NULL (a persistent id is then an error). On success
 * returns 0 with a new reference in *out; on failure -1, *out NULL and one line in err saying
 * what is wrong and at which byte. */
int mc_unpickle(const void *buf, size_t len, const mc_unpickle_storages_t *storages,
                mc_pyobj_t **out, char *err, size_t errn);

/* torch's storage class for dt ("FloatStorage"), or NULL for dtypes torch writes untyped. */
const char *mc_pickle_storage_class(mc_torch_dtype_t dt);

#endif
