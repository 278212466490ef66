/* One rank's DIR/__<rank>_{0,1}.distcp (torchfmt/dcp.h), as torch's FileSystemWriter with
 * Megatron's two threads per rank lays them out: byte items round-robin over the two files,
 * tensor items by size, largest first, each to the file with fewer tensor bytes so far
 * (_split_by_size_and_type); in each file the byte items first, then the tensors. Every item is
 * a complete torch.save archive written at the file's current end, so its zip offsets count
 * from the item's start. */
#define _GNU_SOURCE /* qsort_r */
#include "torchfmt/dcp_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "torchfmt/torch_save.h"
#include "torchfmt/util.h"

#define N_FILES 2

typedef struct {
    char *key;
    mc_pyobj_t *obj;
    bool bytes;
    int ndim;
    int64_t shape[MC_DCP_MAX_DIMS], offsets[MC_DCP_MAX_DIMS];
} witem_t;

struct mc_dcp_writer {
    char *dir;
    int rank;
    witem_t *items;
    mc_pyobj_t **objs; /* the items' objects, for mc_dcp_writer_objects */
    size_t n, cap;
};

mc_dcp_writer_t *mc_dcp_writer_new(const char *dir, int rank)
{
    mc_dcp_writer_t *w = calloc(1, sizeof *w);
    if (!w || !(w->dir = strdup(dir))) {
        free(w);
        return NULL;
    }
    w->rank = rank;
    return w;
}

void mc_dcp_writer_free(mc_dcp_writer_t *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n; i++) {
        free(w->items[i].key);
        mc_py_decref(w->items[i].obj);
    }
    free(w->items);
    free(w->objs);
    free(w->dir);
    free(w);
}

static witem_t *push(mc_dcp_writer_t *w, const char *key, const mc_pyobj_t *obj)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        witem_t *p = realloc(w->items, cap * sizeof *p);
        if (!p) return NULL;
        w->items = p;
        mc_pyobj_t **o = realloc(w->objs, cap * sizeof *o);
        if (!o) return NULL;
        w->objs = o;
        w->cap = cap;
    }
    witem_t *it = &w->items[w->n];
    memset(it, 0, sizeof *it);
    if (!(it->key = strdup(key))) return NULL;
    it->obj = mc_py_incref((mc_pyobj_t *)obj);
    w->objs[w->n++] = it->obj;
    return it;
}

int mc_dcp_writer_add_tensor(mc_dcp_writer_t *w, const char *key, const mc_pyobj_t *t,
                             const int64_t *global_shape, const int64_t *offsets)
{
    if (!w || !key || !t || t->kind != MC_PY_TENSOR || t->tensor.ndim > MC_DCP_MAX_DIMS ||
        !mc_py_tensor_contiguous(t))
        return -1;
    witem_t *it = push(w, key, t);
    if (!it) return -1;
    it->ndim = t->tensor.ndim;
    for (int d = 0; d < it->ndim; d++) {
        it->shape[d] = global_shape[d];
        it->offsets[d] = offsets[d];
    }
    return 0;
}

int mc_dcp_writer_add_object(mc_dcp_writer_t *w, const char *key, const mc_pyobj_t *obj)
{
    if (!w || !key || !obj) return -1;
    witem_t *it = push(w, key, obj);
    if (!it) return -1;
    it->bytes = true;
    return 0;
}

size_t mc_dcp_writer_count(const mc_dcp_writer_t *w) { return w ? w->n : 0; }
mc_pyobj_t **mc_dcp_writer_objects(mc_dcp_writer_t *w) { return w ? w->objs : NULL; }

static int cmp_size_desc(const void *a, const void *b, void *ctx)
{
    const mc_dcp_writer_t *w = ctx;
    size_t x = mc_py_tensor_nbytes(w->items[*(const size_t *)a].obj);
    size_t y = mc_py_tensor_nbytes(w->items[*(const size_t *)b].obj);
    if (x != y) return x > y ? -1 : 1;
    /* Python's sort is stable: equal sizes keep the order added */
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static int add_record(mc_dcp_records_t *recs, const witem_t *it, const char *file, uint64_t off,
                      uint64_t len)
{
    mc_dcp_record_t r;
    memset(&r, 0, sizeof r);
    if (!(r.key = strdup(it->key))) return -1;
    r.bytes = it->bytes;
    r.dtype = it->bytes ? MC_TORCH_UINT8 : it->obj->tensor.dtype;
    r.ndim = it->ndim;
    for (int d = 0; d < it->ndim; d++) {
        r.shape[d] = it->shape[d];
        r.chunk.offsets[d] = it->offsets[d];
        r.chunk.sizes[d] = it->obj->tensor.shape[d];
    }
    snprintf(r.chunk.file, sizeof r.chunk.file, "%s", file);
    r.chunk.offset = off;
    r.chunk.length = len;
    if (dcp_records_push(recs, &r) == 0) return 0;
    free(r.key);
    return -1;
}

/* What torch's writer saves of a chunk: a plain tensor (no Parameter, no requires_grad) whose
 * storage is exactly its bytes (torch.save writes a view's whole storage, so torch clones such
 * a chunk first). New reference, or NULL when out of memory. */
static mc_pyobj_t *plain_chunk(const mc_pyobj_t *t)
{
    if (t->tensor.offset || t->tensor.storage->storage.nbytes != mc_py_tensor_nbytes(t))
        return mc_py_tensor_copy(t->tensor.dtype, t->tensor.ndim, t->tensor.shape,
                                 mc_py_tensor_data(t));
    if (!t->tensor.parameter && !t->tensor.requires_grad) return mc_py_incref((mc_pyobj_t *)t);
    return mc_py_tensor(mc_py_incref(t->tensor.storage), t->tensor.dtype, 0, t->tensor.ndim,
                        t->tensor.shape, NULL);
}

/* Appends item it to f (named name, at path) and records it. */
static int write_item(FILE *f, const char *path, const char *name, const witem_t *it,
                      mc_dcp_records_t *recs, char *err, size_t errn)
{
    off_t start = ftello(f);
    if (start < 0) return mc_errf(err, errn, "%s: %s", path, strerror(errno));
    mc_pyobj_t *obj = it->bytes ? mc_py_incref(it->obj) : plain_chunk(it->obj);
    if (!obj) return mc_errf(err, errn, "%s: out of memory", path);
    int rc = mc_torch_save_stream(f, obj, NULL, err, errn);
    mc_py_decref(obj);
    if (rc) {
        char shown[CK_SHOWN_MAX + 4], pre[4200];
        snprintf(pre, sizeof pre, "%s: key '%s'", path, ck_shown(it->key, strlen(it->key), shown));
        ck_err_prefix(err, errn, pre);
        return -1;
    }
    off_t end = ftello(f);
    if (end < start) return mc_errf(err, errn, "%s: %s", path, strerror(errno));
    if (add_record(recs, it, name, (uint64_t)start, (uint64_t)(end - start)))
        return mc_errf(err, errn, "%s: out of memory", path);
    return 0;
}

/* Writes file k: its byte items in the order added, then its tensors largest first. */
static int write_file(mc_dcp_writer_t *w, int k, const int *file_of, const size_t *order,
                      size_t n_tensors, mc_dcp_records_t *recs, char *err, size_t errn)
{
    char name[64], path[4200];
    snprintf(name, sizeof name, "__%d_%d.distcp", w->rank, k);
    snprintf(path, sizeof path, "%s/%s", w->dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return mc_errf(err, errn, "%s: %s", path, strerror(errno));
    int rc = 0;
    for (size_t i = 0; i < w->n && !rc; i++)
        if (w->items[i].bytes && file_of[i] == k)
            rc = write_item(f, path, name, &w->items[i], recs, err, errn);
    for (size_t j = 0; j < n_tensors && !rc; j++)
        if (file_of[order[j]] == k)
            rc = write_item(f, path, name, &w->items[order[j]], recs, err, errn);
    if (!rc && (fflush(f) || fsync(fileno(f))))
        rc = mc_errf(err, errn, "%s: %s", path, strerror(errno));
    if (fclose(f) && !rc) rc = mc_errf(err, errn, "%s: %s", path, strerror(errno));
    if (rc) unlink(path);
    return rc;
}

int mc_dcp_writer_finish(mc_dcp_writer_t *w, mc_dcp_records_t *recs, char *err, size_t errn)
{
    if (!w) return mc_errf(err, errn, "no writer");
    int *file_of = calloc(w->n + 1, sizeof *file_of);
    size_t *order = calloc(w->n + 1, sizeof *order), n_tensors = 0, n_bytes = 0;
    int rc = 0;
    if (!file_of || !order) {
        rc = mc_errf(err, errn, "%s: out of memory", w->dir);
        goto out;
    }
    for (size_t i = 0; i < w->n; i++) {
        if (w->items[i].bytes) file_of[i] = (int)(n_bytes++ % N_FILES);
        else order[n_tensors++] = i;
    }
    qsort_r(order, n_tensors, sizeof *order, cmp_size_desc, w);
    uint64_t load[N_FILES] = {0};
    for (size_t j = 0; j < n_tensors; j++) {
        int k = 0; /* the lighter file; the first on a tie, as Python's min() */
        for (int f = 1; f < N_FILES; f++)
            if (load[f] < load[k]) k = f;
        file_of[order[j]] = k;
        load[k] += mc_py_tensor_nbytes(w->items[order[j]].obj);
    }
    for (int k = 0; k < N_FILES && !rc; k++)
        rc = write_file(w, k, file_of, order, n_tensors, recs, err, errn);
out:
    free(file_of);
    free(order);
    mc_dcp_writer_free(w);
    return rc;
}
