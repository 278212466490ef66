/* Writing DIR/.metadata (torchfmt/dcp.h): the graph Python pickles for a plain
 * torch.distributed.checkpoint.metadata.Metadata (FORMAT.md section 2), through torch.save's
 * pickler (protocol 2: dataclass instances are NEWOBJ(cls, ()) + BUILD(instance dict)).
 * Singletons Python shares (classes, torch.strided, the memory-format member, dtypes) are
 * shared here so the memo refers to them as Python's does. */
#include "torchfmt/dcp_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/fs.h"
#include "torchfmt/pickle.h"
#include "torchfmt/util.h"

#define DCP_MOD "torch.distributed.checkpoint.metadata"

typedef struct {
    mc_pyobj_t *tsm, *bsm, *tprops, *chunk_cls, *midx, *sinfo, *size, *layout, *memfmt;
    mc_pyobj_t *dtypes[MC_TORCH_DTYPE_COUNT];
} classes_t;

/* cls.__new__(cls) with the instance dict `state` (stolen; NULL: none). */
static mc_pyobj_t *instance(mc_pyobj_t *cls, mc_pyobj_t *state)
{
    mc_pyobj_t *o = mc_py_object(mc_py_incref(cls), mc_py_tuple(0), true);
    if (o) o->object.state = state;
    else mc_py_decref(state);
    return o;
}

/* An instance of DCP_MOD's class `name` with BUILD state (stolen). */
static mc_pyobj_t *dcp_instance(const char *name, mc_pyobj_t *state)
{
    mc_pyobj_t *cls = mc_py_global(DCP_MOD, name);
    mc_pyobj_t *o = cls ? instance(cls, state) : (mc_py_decref(state), NULL);
    mc_py_decref(cls);
    return o;
}

static mc_pyobj_t *torch_size(classes_t *k, int ndim, const int64_t *v)
{
    mc_pyobj_t *items[MC_DCP_MAX_DIMS];
    for (int d = 0; d < ndim; d++) items[d] = mc_py_int(v[d]);
    return mc_py_object(mc_py_incref(k->size), mc_py_tuple(1, mc_py_tuple_of((size_t)ndim, items)),
                        false);
}

static int classes_init(classes_t *k)
{
    memset(k, 0, sizeof *k);
    k->tsm = mc_py_global(DCP_MOD, "TensorStorageMetadata");
    k->bsm = mc_py_global(DCP_MOD, "BytesStorageMetadata");
    k->tprops = mc_py_global(DCP_MOD, "TensorProperties");
    k->chunk_cls = mc_py_global(DCP_MOD, "ChunkStorageMetadata");
    k->midx = mc_py_global(DCP_MOD, "MetadataIndex");
    k->sinfo = mc_py_global("torch.distributed.checkpoint.filesystem", "_StorageInfo");
    k->size = mc_py_global("torch", "Size");
    /* torch.serialization._get_layout('torch.strided'); _MEM_FORMAT_ENCODING(0) */
    k->layout = mc_py_object(mc_py_global("torch.serialization", "_get_layout"),
                             mc_py_tuple(1, mc_py_str("torch.strided")), false);
    k->memfmt = mc_py_object(mc_py_global(DCP_MOD, "_MEM_FORMAT_ENCODING"),
                             mc_py_tuple(1, mc_py_int(0)), false);
    return k->tsm && k->bsm && k->tprops && k->chunk_cls && k->midx && k->sinfo && k->size &&
                   k->layout && k->memfmt
               ? 0
               : -1;
}

static void classes_free(classes_t *k)
{
    mc_pyobj_t *all[] = {k->tsm,   k->bsm,  k->tprops, k->chunk_cls, k->midx,
                         k->sinfo, k->size, k->layout, k->memfmt};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) mc_py_decref(all[i]);
    for (int i = 0; i < MC_TORCH_DTYPE_COUNT; i++) mc_py_decref(k->dtypes[i]);
}

/* TensorProperties as its 5-item __getstate__ tuple, which every torch >= 2.3 reads. */
static mc_pyobj_t *tensor_props(classes_t *k, mc_torch_dtype_t dt)
{
    if (!k->dtypes[dt] && !(k->dtypes[dt] = mc_py_global("torch", mc_torch_dtype_name(dt))))
        return NULL;
    mc_pyobj_t *st = mc_py_tuple(5, mc_py_incref(k->dtypes[dt]), mc_py_incref(k->layout),
                                 mc_py_bool(false), mc_py_incref(k->memfmt), mc_py_bool(false));
    return st ? instance(k->tprops, st) : NULL;
}

static mc_pyobj_t *tensor_meta(classes_t *k, const mc_dcp_entry_t *e)
{
    mc_pyobj_t *chunks = mc_py_list(), *st = mc_py_dict();
    for (size_t i = 0; chunks && i < e->n_chunks; i++) {
        mc_pyobj_t *cs = mc_py_dict();
        mc_py_dict_set_str(cs, "offsets", torch_size(k, e->ndim, e->chunks[i].offsets));
        if (mc_py_dict_set_str(cs, "sizes", torch_size(k, e->ndim, e->chunks[i].sizes)) ||
            mc_py_list_append(chunks, instance(k->chunk_cls, cs))) {
            mc_py_decref(chunks);
            chunks = NULL;
        }
    }
    mc_py_dict_set_str(st, "properties", tensor_props(k, e->dtype));
    mc_py_dict_set_str(st, "size", torch_size(k, e->ndim, e->shape));
    if (mc_py_dict_set_str(st, "chunks", chunks)) {
        mc_py_decref(st);
        return NULL;
    }
    return instance(k->tsm, st);
}

/* storage_data's item of one chunk: MetadataIndex -> _StorageInfo. */
static int storage_item(classes_t *k, mc_pyobj_t *sd, const mc_dcp_entry_t *e,
                        const mc_dcp_chunk_t *c)
{
    mc_pyobj_t *ist = mc_py_dict(), *sst = mc_py_dict();
    mc_py_dict_set_str(ist, "fqn", mc_py_str(e->key));
    mc_py_dict_set_str(ist, "offset", e->bytes ? mc_py_none() : torch_size(k, e->ndim, c->offsets));
    mc_py_dict_set_str(ist, "index", mc_py_none());
    mc_py_dict_set_str(sst, "relative_path", mc_py_str(c->file));
    mc_py_dict_set_str(sst, "offset", mc_py_int((int64_t)c->offset));
    mc_py_dict_set_str(sst, "length", mc_py_int((int64_t)c->length));
    if (ist && mc_py_len(ist) != 3) mc_py_decref(ist), ist = NULL;
    if (sst && mc_py_len(sst) != 3) mc_py_decref(sst), sst = NULL;
    return mc_py_dict_set(sd, ist ? instance(k->midx, ist) : NULL,
                          sst ? instance(k->sinfo, sst) : NULL);
}

/* A version-4 UUID from /dev/urandom, as StorageMeta.save_id holds (str(uuid.uuid4())). */
static void uuid4(char out[37])
{
    uint8_t b[16] = {0};
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(b, 1, 16, f) != 16)
        for (int i = 0; i < 16; i++) b[i] = (uint8_t)(rand() >> 7);
    if (f) fclose(f);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    char *p = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
        p += sprintf(p, "%02x", b[i]);
    }
}

static mc_pyobj_t *storage_meta(const char *checkpoint_id)
{
    if (!checkpoint_id) return mc_py_none();
    char id[40];
    uuid4(id);
    mc_pyobj_t *st = mc_py_dict();
    mc_py_dict_set_str(st, "checkpoint_id", mc_py_str(checkpoint_id));
    mc_py_dict_set_str(st, "save_id", mc_py_str(id));
    mc_py_dict_set_str(st, "load_id", mc_py_none());
    if (mc_py_dict_set_str(st, "modules", mc_py_list())) {
        mc_py_decref(st);
        return NULL;
    }
    return dcp_instance("StorageMeta", st);
}

static mc_pyobj_t *metadata_graph(const mc_dcp_meta_t *m, const char *checkpoint_id)
{
    classes_t k;
    mc_pyobj_t *sdm = mc_py_dict(), *sd = mc_py_dict(), *st = mc_py_dict();
    int rc = classes_init(&k) || !sdm || !sd || !st ? -1 : 0;
    for (size_t i = 0; i < m->n && !rc; i++) {
        const mc_dcp_entry_t *e = &m->entries[i];
        rc = mc_py_dict_set_str(sdm, e->key, e->bytes ? instance(k.bsm, NULL) : tensor_meta(&k, e));
        for (size_t c = 0; c < e->n_chunks && !rc; c++) rc = storage_item(&k, sd, e, &e->chunks[c]);
    }
    classes_free(&k);
    if (rc) {
        mc_py_decref(sdm);
        mc_py_decref(sd);
        mc_py_decref(st);
        return NULL;
    }
    mc_py_dict_set_str(st, "state_dict_metadata", sdm);
    mc_py_dict_set_str(st, "planner_data", mc_py_none());
    mc_py_dict_set_str(st, "storage_data", sd);
    mc_py_dict_set_str(st, "storage_meta", storage_meta(checkpoint_id));
    if (mc_py_dict_set_str(st, "version", mc_py_str("1.0.0"))) {
        mc_py_decref(st);
        return NULL;
    }
    return dcp_instance("Metadata", st);
}

int mc_dcp_meta_write(const char *path, const mc_dcp_meta_t *m, const char *checkpoint_id,
                      char *err, size_t errn)
{
    mc_pyobj_t *root = metadata_graph(m, checkpoint_id);
    if (!root) return mc_errf(err, errn, "%s: out of memory", path);
    uint8_t *pkl = NULL;
    size_t len = 0;
    mc_pickle_storages_t st = {0};
    int rc = mc_pickle_dump(root, &pkl, &len, &st, err, errn);
    mc_py_decref(root);
    mc_pickle_storages_free(&st);
    if (rc) {
        ck_err_prefix(err, errn, path);
        return -1;
    }
    rc = mc_write_file(path, pkl, len, err, errn);
    free(pkl);
    return rc;
}
