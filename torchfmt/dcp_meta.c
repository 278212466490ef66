/* DIR/.metadata (torchfmt/dcp.h): the pickle of torch's Metadata read into mc_dcp_meta_t, and
 * written from it. The object graph is FORMAT.md section 2's; unpickle.c turns every class
 * instance into an opaque MC_PY_OBJECT whose BUILD state is the instance dict (TensorProperties:
 * its __getstate__ tuple), which is what is walked here. */
#include "torchfmt/dcp_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "torchfmt/pickle.h"
#include "torchfmt/util.h"

#define DCP_MOD "torch.distributed.checkpoint.metadata"

/* ---- reading ----------------------------------------------------------------------------- */

/* The instance dict of a class instance (BUILD state), or NULL. */
static const mc_pyobj_t *state_dict(const mc_pyobj_t *o)
{
    if (!o || o->kind != MC_PY_OBJECT || !o->object.state) return NULL;
    return o->object.state->kind == MC_PY_DICT ? o->object.state : NULL;
}

static const mc_pyobj_t *field(const mc_pyobj_t *o, const char *name)
{
    const mc_pyobj_t *st = state_dict(o);
    return st ? mc_py_dict_get_str(st, name) : NULL;
}

/* A torch.Size (REDUCE of torch.Size on a tuple of ints), or a plain tuple or list. */
static int parse_size(const mc_pyobj_t *o, int64_t *out, int *ndim)
{
    if (o && o->kind == MC_PY_OBJECT && mc_py_is_a(o, "torch", "Size") &&
        mc_py_len(o->object.args) == 1)
        o = mc_py_item(o->object.args, 0);
    if (!o || (o->kind != MC_PY_TUPLE && o->kind != MC_PY_LIST) || o->seq.len > MC_DCP_MAX_DIMS)
        return -1;
    for (size_t i = 0; i < o->seq.len; i++)
        if (o->seq.items[i]->kind != MC_PY_INT || (out[i] = o->seq.items[i]->i) < 0) return -1;
    *ndim = (int)o->seq.len;
    return 0;
}

/* TensorProperties: state (dtype, layout, requires_grad, memory format, pin_memory[, strides]),
 * or an instance dict with "dtype" (a plain dataclass). */
static int parse_dtype(const mc_pyobj_t *props, mc_torch_dtype_t *dt)
{
    const mc_pyobj_t *d = NULL;
    if (props && props->kind == MC_PY_OBJECT && props->object.state) {
        const mc_pyobj_t *st = props->object.state;
        if (st->kind == MC_PY_TUPLE && (st->seq.len == 5 || st->seq.len == 6)) d = st->seq.items[0];
        else if (st->kind == MC_PY_DICT) d = mc_py_dict_get_str(st, "dtype");
    }
    if (!d || d->kind != MC_PY_GLOBAL || strcmp(d->global.module, "torch")) return -1;
    return mc_torch_dtype_from_name(d->global.name, dt);
}

static int parse_tensor(const mc_pyobj_t *v, mc_dcp_entry_t *e, char *err, size_t errn)
{
    if (parse_dtype(field(v, "properties"), &e->dtype))
        return mc_errf(err, errn, "bad or unknown TensorProperties");
    if (parse_size(field(v, "size"), e->shape, &e->ndim)) return mc_errf(err, errn, "bad size");
    const mc_pyobj_t *chunks = field(v, "chunks");
    if (!chunks || chunks->kind != MC_PY_LIST) return mc_errf(err, errn, "chunks not a list");
    for (size_t i = 0; i < chunks->seq.len; i++) {
        mc_dcp_chunk_t c;
        memset(&c, 0, sizeof c);
        int n1 = -1, n2 = -1;
        const mc_pyobj_t *ch = chunks->seq.items[i];
        if (parse_size(field(ch, "offsets"), c.offsets, &n1) ||
            parse_size(field(ch, "sizes"), c.sizes, &n2) || n1 != e->ndim || n2 != e->ndim)
            return mc_errf(err, errn, "bad chunk %zu", i);
        if (dcp_entry_add_chunk(e, &c)) return mc_errf(err, errn, "out of memory");
    }
    return 0;
}

static int parse_entries(const mc_pyobj_t *sdm, mc_dcp_meta_t *m, char *err, size_t errn)
{
    char shown[CK_SHOWN_MAX + 4];
    if (!sdm || sdm->kind != MC_PY_DICT)
        return mc_errf(err, errn, "state_dict_metadata is not a dict");
    for (size_t i = 0; i < sdm->dict.len; i++) {
        const char *key = mc_py_get_str(sdm->dict.keys[i]);
        const mc_pyobj_t *v = sdm->dict.vals[i];
        if (!key || strlen(key) != sdm->dict.keys[i]->str.len)
            return mc_errf(err, errn, "a key of state_dict_metadata is not a str");
        size_t at;
        if (dcp_meta_add(m, key, &at, err, errn)) return -1;
        mc_dcp_entry_t *e = &m->entries[at];
        if (mc_py_is_a(v, DCP_MOD, "BytesStorageMetadata")) {
            e->bytes = true;
            e->dtype = MC_TORCH_UINT8;
            mc_dcp_chunk_t c; /* its one item, which storage_data places */
            memset(&c, 0, sizeof c);
            if (dcp_entry_add_chunk(e, &c)) return mc_errf(err, errn, "out of memory");
        } else if (!mc_py_is_a(v, DCP_MOD, "TensorStorageMetadata")) {
            return mc_errf(err, errn, "key '%s': not a Tensor/BytesStorageMetadata",
                           ck_shown(key, strlen(key), shown));
        } else if (parse_tensor(v, e, err, errn)) {
            char pre[CK_SHOWN_MAX + 16];
            snprintf(pre, sizeof pre, "key '%s'", ck_shown(key, strlen(key), shown));
            ck_err_prefix(err, errn, pre);
            return -1;
        }
    }
    return 0;
}

/* Chunks by (key, offsets), to give each storage record its chunk. */
typedef struct {
    uint32_t *ent, *chk; /* per slot: 1 + the entry's index (0: free), the chunk's */
    bool *done;          /* per slot: a storage record found */
    size_t cap;
} chunk_map_t;

static uint64_t chunk_hash(size_t ent, int ndim, const int64_t *off)
{
    return ck_hash(off, (size_t)ndim * sizeof *off) ^ (ent * 0x9E3779B97F4A7C15ULL);
}

static int map_build(chunk_map_t *h, const mc_dcp_meta_t *m)
{
    size_t total = 0;
    for (size_t i = 0; i < m->n; i++) total += m->entries[i].n_chunks;
    if (total >= UINT32_MAX / 4) return -1;
    h->cap = 16;
    while (h->cap < 2 * total) h->cap *= 2;
    h->ent = calloc(h->cap, sizeof *h->ent);
    h->chk = calloc(h->cap, sizeof *h->chk);
    h->done = calloc(h->cap, sizeof *h->done);
    if (!h->ent || !h->chk || !h->done) return -1;
    for (size_t i = 0; i < m->n; i++) {
        const mc_dcp_entry_t *e = &m->entries[i];
        for (size_t c = 0; c < e->n_chunks; c++) {
            size_t s = (size_t)chunk_hash(i, e->ndim, e->chunks[c].offsets) & (h->cap - 1);
            while (h->ent[s]) s = (s + 1) & (h->cap - 1);
            h->ent[s] = (uint32_t)i + 1;
            h->chk[s] = (uint32_t)c;
        }
    }
    return 0;
}

static void map_free(chunk_map_t *h)
{
    free(h->ent);
    free(h->chk);
    free(h->done);
}

/* The slot of key ent's first chunk at off without a storage record yet, or -1. */
static ptrdiff_t map_take(chunk_map_t *h, const mc_dcp_meta_t *m, size_t ent, const int64_t *off)
{
    const mc_dcp_entry_t *e = &m->entries[ent];
    size_t s = (size_t)chunk_hash(ent, e->ndim, off) & (h->cap - 1);
    for (; h->ent[s]; s = (s + 1) & (h->cap - 1))
        if (h->ent[s] == ent + 1 && !h->done[s] &&
            !memcmp(e->chunks[h->chk[s]].offsets, off, (size_t)e->ndim * sizeof *off)) {
            h->done[s] = true;
            return (ptrdiff_t)s;
        }
    return -1;
}

/* One storage_data item: MetadataIndex(fqn, offset) -> _StorageInfo(relative_path, offset,
 * length). */
static int parse_storage(const mc_pyobj_t *idx, const mc_pyobj_t *info, mc_dcp_meta_t *m,
                         chunk_map_t *h, char *err, size_t errn)
{
    char shown[CK_SHOWN_MAX + 4];
    const char *fqn = mc_py_get_str(field(idx, "fqn"));
    if (!fqn) return mc_errf(err, errn, "storage_data key is not a MetadataIndex");
    const char *key = ck_shown(fqn, strlen(fqn), shown);
    ptrdiff_t ent = dcp_meta_lookup(m, fqn);
    if (ent < 0) return mc_errf(err, errn, "storage record of unknown key '%s'", key);
    mc_dcp_entry_t *e = &m->entries[ent];
    int64_t off[MC_DCP_MAX_DIMS] = {0};
    int nd = 0;
    const mc_pyobj_t *o = field(idx, "offset");
    if (!e->bytes && parse_size(o, off, &nd))
        return mc_errf(err, errn, "key '%s': storage record with a bad offset", key);
    if (!e->bytes && nd != e->ndim)
        return mc_errf(err, errn, "key '%s': storage record offset of %d dims", key, nd);
    ptrdiff_t s = map_take(h, m, (size_t)ent, off);
    if (s < 0) return mc_errf(err, errn, "key '%s': storage record matching no chunk", key);
    mc_dcp_chunk_t *c = &e->chunks[h->chk[s]];
    const char *path = mc_py_get_str(field(info, "relative_path"));
    const mc_pyobj_t *fo = field(info, "offset"), *fl = field(info, "length");
    if (!path || !fo || fo->kind != MC_PY_INT || fo->i < 0 || !fl || fl->kind != MC_PY_INT ||
        fl->i < 0)
        return mc_errf(err, errn, "key '%s': bad _StorageInfo", key);
    if (dcp_check_file_name(path, err, errn)) return -1;
    snprintf(c->file, sizeof c->file, "%s", path);
    c->offset = (uint64_t)fo->i;
    c->length = (uint64_t)fl->i;
    return 0;
}

static int parse_storages(const mc_pyobj_t *sd, mc_dcp_meta_t *m, char *err, size_t errn)
{
    if (!sd || sd->kind != MC_PY_DICT) return mc_errf(err, errn, "storage_data is not a dict");
    chunk_map_t h = {0};
    int rc = 0;
    if (map_build(&h, m)) rc = mc_errf(err, errn, "out of memory");
    for (size_t i = 0; i < sd->dict.len && !rc; i++)
        rc = parse_storage(sd->dict.keys[i], sd->dict.vals[i], m, &h, err, errn);
    for (size_t s = 0; s < h.cap && !rc; s++)
        if (h.ent[s] && !h.done[s]) {
            char shown[CK_SHOWN_MAX + 4];
            const char *k = m->entries[h.ent[s] - 1].key;
            rc = mc_errf(err, errn, "key '%s': a chunk without a storage record",
                         ck_shown(k, strlen(k), shown));
        }
    map_free(&h);
    return rc;
}

static int parse_metadata(const mc_pyobj_t *root, mc_dcp_meta_t *m, char *err, size_t errn)
{
    if (!state_dict(root)) return mc_errf(err, errn, "not a Metadata object");
    if (parse_entries(field(root, "state_dict_metadata"), m, err, errn)) return -1;
    for (size_t i = 0; i < m->n; i++)
        if (dcp_entry_check(&m->entries[i], err, errn)) return -1;
    return parse_storages(field(root, "storage_data"), m, err, errn);
}

int mc_dcp_meta_read_mem(const void *buf, size_t len, const char *name, mc_dcp_meta_t *m, char *err,
                         size_t errn)
{
    memset(m, 0, sizeof *m);
    mc_pyobj_t *root = NULL;
    int rc = mc_unpickle(buf, len, NULL, &root, err, errn);
    if (rc == 0) rc = parse_metadata(root, m, err, errn);
    mc_py_decref(root);
    if (rc) {
        ck_err_prefix(err, errn, name);
        mc_dcp_meta_free(m);
    }
    return rc;
}

int mc_dcp_meta_read(const char *path, mc_dcp_meta_t *m, char *err, size_t errn)
{
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) {
        int e = errno;
        if (fd >= 0) close(fd);
        return mc_errf(err, errn, "%s: %s", path, strerror(e));
    }
    size_t n = (size_t)st.st_size;
    void *p = n ? mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (n && p == MAP_FAILED)
        return mc_errf(err, errn, "%s: cannot map: %s", path, strerror(errno));
    int rc = mc_dcp_meta_read_mem(n ? p : "", n, path, m, err, errn);
    if (n) munmap(p, n);
    return rc;
}
