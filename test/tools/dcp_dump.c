/* Prints what a PyTorch Distributed Checkpoint holds, through torchfmt/dcp.h, for comparison
 * with PyTorch (test/integration/test_dcp_torch.sh):
 *
 *   dcp_dump DIR            one line per key, in the .metadata's order:
 *                           tensors: key TAB dtype TAB shape (comma-separated) TAB sha256 of the
 *                           whole tensor (C order, the stored dtype's little-endian bytes);
 *                           byte items: key TAB object TAB - TAB -
 *   dcp_dump --chunks DIR   one line per tensor chunk: key TAB offsets TAB sizes (comma-separated),
 *                           in the .metadata's order (how a checkpoint is cut, to compare with
 *                           another writer's)
 *   dcp_dump --ranges DIR KEY A:B[,C:D...]
 *                           sha256 of the elements [A, B), [C, D), ... of 1-D tensor KEY, in turn
 *   dcp_dump --sample DIR   writes a small two-rank checkpoint into DIR (an existing folder):
 *                           "w" float32 [4,6,5] in two chunks along axis 1, "b" bfloat16 [8,4]
 *                           in two row chunks, "v" float32 [10], "obj/shard_0_1" = [{'a': 1}];
 *                           element i of each tensor is i * 0.25 - 3 (before rounding)
 *
 * Exit 0, or 1 with one line on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/sha256.h"
#include "kernels/dtype.h"
#include "torchfmt/dcp.h"

/* DIR/.metadata into m; 0, or -1 after saying why on stderr. */
static int open_meta(const char *dir, mc_dcp_meta_t *m)
{
    char path[4200], err[1024];
    snprintf(path, sizeof path, "%s/.metadata", dir);
    if (mc_dcp_meta_read(path, m, err, sizeof err) == 0) return 0;
    fprintf(stderr, "dcp_dump: %s\n", err);
    return -1;
}

static int dump(const char *dir)
{
    char err[1024];
    mc_dcp_meta_t m;
    if (open_meta(dir, &m)) return 1;
    mc_dcp_reader_t *r = mc_dcp_reader_new(dir, &m);
    int rc = r ? 0 : 1;
    for (size_t i = 0; i < m.n && !rc; i++) {
        const mc_dcp_entry_t *e = &m.entries[i];
        if (e->bytes) {
            printf("%s\tobject\t-\t-\n", e->key);
            continue;
        }
        int64_t n = 1, zero[MC_DCP_MAX_DIMS] = {0};
        for (int d = 0; d < e->ndim; d++) n *= e->shape[d];
        size_t bytes = (size_t)n * mc_torch_dtype_size(e->dtype);
        void *buf = malloc(bytes + 1);
        if (!buf ||
            mc_dcp_read_box(r, e->key, e->ndim, zero, e->shape, e->dtype, buf, err, sizeof err)) {
            fprintf(stderr, "dcp_dump: %s\n", buf ? err : "out of memory");
            rc = 1;
        } else {
            char hex[65];
            mc_sha256_hex(buf, bytes, hex);
            printf("%s\t%s\t", e->key, mc_torch_dtype_name(e->dtype));
            for (int d = 0; d < e->ndim; d++)
                printf("%s%lld", d ? "," : "", (long long)e->shape[d]);
            printf("\t%s\n", hex);
        }
        free(buf);
    }
    mc_dcp_reader_free(r);
    mc_dcp_meta_free(&m);
    return rc;
}

/* The chunk [off, off+sizes) of a global tensor of shape `shape` whose element i is
 * i * 0.25 - 3, in dtype dt. */
static mc_pyobj_t *piece(mc_torch_dtype_t dt, int ndim, const int64_t *shape, const int64_t *off,
                         const int64_t *sizes)
{
    mc_pyobj_t *t = mc_py_tensor_new(dt, ndim, sizes);
    if (!t) return NULL;
    uint8_t *p = mc_py_tensor_data(t);
    int64_t n = mc_py_tensor_numel(t);
    for (int64_t k = 0; k < n; k++) {
        int64_t rem = k, g = 0;
        int64_t gi[MC_DCP_MAX_DIMS];
        for (int d = ndim - 1; d >= 0; d--) gi[d] = off[d] + rem % sizes[d], rem /= sizes[d];
        for (int d = 0; d < ndim; d++) g = g * shape[d] + gi[d];
        float x = (float)g * 0.25f - 3.0f;
        if (dt == MC_TORCH_FLOAT32) memcpy(p + 4 * k, &x, 4);
        else {
            uint16_t h = mc_bf16_from_f32(x);
            memcpy(p + 2 * k, &h, 2);
        }
    }
    return t;
}

static int add(mc_dcp_writer_t *w, const char *key, mc_torch_dtype_t dt, int ndim,
               const int64_t *shape, const int64_t *off, const int64_t *sizes)
{
    mc_pyobj_t *t = piece(dt, ndim, shape, off, sizes);
    int rc = t ? mc_dcp_writer_add_tensor(w, key, t, shape, off) : -1;
    mc_py_decref(t);
    return rc;
}

static int sample(const char *dir)
{
    char err[1024], path[4200];
    static const int64_t W[3] = {4, 6, 5}, B[2] = {8, 4}, V[1] = {10}, z[3] = {0, 0, 0};
    static const int64_t w1[3] = {0, 3, 0}, ws[3] = {4, 3, 5}, b1[2] = {5, 0}, bs0[2] = {5, 4},
                         bs1[2] = {3, 4};
    mc_dcp_writer_t *w0 = mc_dcp_writer_new(dir, 0), *wr1 = mc_dcp_writer_new(dir, 1);
    mc_pyobj_t *obj = mc_py_list(), *d = mc_py_dict();
    mc_py_dict_set_str(d, "a", mc_py_int(1));
    mc_py_list_append(obj, d);
    int rc = !w0 || !wr1 || add(w0, "w", MC_TORCH_FLOAT32, 3, W, z, ws) ||
             add(wr1, "w", MC_TORCH_FLOAT32, 3, W, w1, ws) ||
             add(w0, "b", MC_TORCH_BFLOAT16, 2, B, z, bs0) ||
             add(wr1, "b", MC_TORCH_BFLOAT16, 2, B, b1, bs1) ||
             add(w0, "v", MC_TORCH_FLOAT32, 1, V, z, V) ||
             mc_dcp_writer_add_object(w0, "obj/shard_0_1", obj);
    mc_py_decref(obj);
    if (rc) {
        fprintf(stderr, "dcp_dump: cannot build the sample\n");
        mc_dcp_writer_free(w0);
        mc_dcp_writer_free(wr1);
        return 1;
    }
    mc_dcp_records_t recs = {0};
    mc_dcp_meta_t m = {0};
    snprintf(path, sizeof path, "%s/.metadata", dir);
    rc = mc_dcp_writer_finish(w0, &recs, err, sizeof err) ||
         mc_dcp_writer_finish(wr1, &recs, err, sizeof err) ||
         mc_dcp_meta_from_records(&recs, &m, err, sizeof err) ||
         mc_dcp_meta_write(path, &m, dir, err, sizeof err);
    if (rc) fprintf(stderr, "dcp_dump: %s\n", err);
    mc_dcp_records_free(&recs);
    mc_dcp_meta_free(&m);
    return rc ? 1 : 0;
}

static int chunks(const char *dir)
{
    mc_dcp_meta_t m;
    if (open_meta(dir, &m)) return 1;
    for (size_t k = 0; k < m.n; k++) {
        const mc_dcp_entry_t *e = &m.entries[k];
        for (size_t c = 0; !e->bytes && c < e->n_chunks; c++) {
            printf("%s\t", e->key);
            for (int d = 0; d < e->ndim; d++)
                printf("%s%lld", d ? "," : "", (long long)e->chunks[c].offsets[d]);
            printf("\t");
            for (int d = 0; d < e->ndim; d++)
                printf("%s%lld", d ? "," : "", (long long)e->chunks[c].sizes[d]);
            printf("\n");
        }
    }
    mc_dcp_meta_free(&m);
    return 0;
}

/* The sha256 of the elements [a, b) of each range of 1-D tensor key, in turn (Megatron's
 * optimizer buckets without their padding, whose bytes Megatron leaves uninitialised). */
static int ranges(const char *dir, const char *key, const char *list)
{
    char err[1024];
    mc_dcp_meta_t m;
    if (open_meta(dir, &m)) return 1;
    const mc_dcp_entry_t *e = mc_dcp_meta_find(&m, key);
    mc_dcp_reader_t *r = e && e->ndim == 1 && !e->bytes ? mc_dcp_reader_new(dir, &m) : NULL;
    const size_t es = e ? mc_torch_dtype_size(e->dtype) : 0;
    uint8_t *all = r ? malloc((size_t)e->shape[0] * es + 1) : NULL;
    uint8_t *sel = r ? malloc((size_t)e->shape[0] * es + 1) : NULL;
    int64_t zero[1] = {0};
    int rc = !all || !sel ||
             mc_dcp_read_box(r, key, 1, zero, e->shape, e->dtype, all, err, sizeof err) != 0;
    size_t n = 0;
    for (const char *at = list; !rc && *at;) {
        char *end;
        long long a = strtoll(at, &end, 10), b = a;
        if (*end == ':') b = strtoll(end + 1, &end, 10);
        if (a < 0 || b < a || b > e->shape[0] || (*end && *end != ',')) rc = 1;
        else memcpy(sel + n, all + (size_t)a * es, (size_t)(b - a) * es), n += (size_t)(b - a) * es;
        at = *end ? end + 1 : end;
    }
    if (rc) fprintf(stderr, "dcp_dump: %s: cannot read %s over %s\n", dir, key, list);
    else {
        char hex[65];
        mc_sha256_hex(sel, n, hex);
        printf("%s\n", hex);
    }
    free(all);
    free(sel);
    mc_dcp_reader_free(r);
    mc_dcp_meta_free(&m);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--ranges")) return ranges(argv[2], argv[3], argv[4]);
    if (argc == 3 && !strcmp(argv[1], "--chunks")) return chunks(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--sample")) return sample(argv[2]);
    if (argc == 2 && argv[1][0] != '-') return dump(argv[1]);
    fprintf(stderr, "usage: dcp_dump DIR | dcp_dump --sample DIR\n");
    return 2;
}
