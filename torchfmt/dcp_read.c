/* Reading a checkpoint's items (torchfmt/dcp.h): .distcp files mapped on first use, each chunk
 * item loaded (zip, CRC, pickle) and checked once, then boxes copied out of the chunks that
 * overlap them, converting between float32, bfloat16 and float16. */
#include "torchfmt/dcp_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/dtype.h"
#include "torchfmt/torch_save.h"
#include "torchfmt/util.h"

typedef struct {
    char name[64];
    uint8_t *base; /* NULL for an empty file */
    size_t size;
} fmap_t;

struct mc_dcp_reader {
    char *dir;
    const mc_dcp_meta_t *m;
    fmap_t *files;
    size_t n_files, cap_files;
    mc_pyobj_t ***chunks; /* per entry, per chunk: the loaded chunk tensor, or NULL */
};

mc_dcp_reader_t *mc_dcp_reader_new(const char *dir, const mc_dcp_meta_t *m)
{
    mc_dcp_reader_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->dir = strdup(dir);
    r->chunks = calloc(m->n + 1, sizeof *r->chunks);
    if (!r->dir || !r->chunks) {
        free(r->dir);
        free(r->chunks);
        free(r);
        return NULL;
    }
    r->m = m;
    return r;
}

void mc_dcp_reader_free(mc_dcp_reader_t *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->m->n; i++) {
        if (!r->chunks[i]) continue;
        for (size_t c = 0; c < r->m->entries[i].n_chunks; c++) mc_py_decref(r->chunks[i][c]);
        free(r->chunks[i]);
    }
    for (size_t i = 0; i < r->n_files; i++)
        if (r->files[i].base) munmap(r->files[i].base, r->files[i].size);
    free(r->chunks);
    free(r->files);
    free(r->dir);
    free(r);
}

/* The mapping of file `name` (mapped now when it was not yet). */
static const fmap_t *map_file(mc_dcp_reader_t *r, const char *name, char *err, size_t errn)
{
    for (size_t i = 0; i < r->n_files; i++)
        if (!strcmp(r->files[i].name, name)) return &r->files[i];
    if (r->n_files == r->cap_files) {
        size_t cap = r->cap_files ? 2 * r->cap_files : 8;
        fmap_t *p = realloc(r->files, cap * sizeof *p);
        if (!p) return mc_errf(err, errn, "out of memory"), NULL;
        r->files = p;
        r->cap_files = cap;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", r->dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) {
        int e = errno;
        if (fd >= 0) close(fd);
        return mc_errf(err, errn, "%s: %s", path, strerror(e)), NULL;
    }
    fmap_t *f = &r->files[r->n_files];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->size = (size_t)st.st_size;
    if (f->size) {
        void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return mc_errf(err, errn, "%s: cannot map: %s", path, strerror(e)), NULL;
        }
        f->base = p;
    }
    close(fd);
    r->n_files++;
    return f;
}

/* Loads the archive of chunk c (flags: torch_save.h's); errors name the file and offset. */
static int load_item(mc_dcp_reader_t *r, const mc_dcp_chunk_t *c, unsigned flags, mc_pyobj_t **out,
                     char *err, size_t errn)
{
    const fmap_t *f = map_file(r, c->file, err, errn);
    if (!f) return -1;
    char pre[4300];
    snprintf(pre, sizeof pre, "%s/%s at offset %llu", r->dir, c->file,
             (unsigned long long)c->offset);
    if (c->offset > f->size || c->length > f->size - c->offset)
        return mc_errf(err, errn, "%s: item of %llu bytes runs past the end of the file (%zu)", pre,
                       (unsigned long long)c->length, f->size);
    if (mc_torch_load_mem(f->base + c->offset, c->length, flags, out, err, errn)) {
        ck_err_prefix(err, errn, pre);
        return -1;
    }
    return 0;
}

/* Chunk k of entry i, loaded and checked against the index on first use. */
static const mc_pyobj_t *chunk_tensor(mc_dcp_reader_t *r, size_t i, size_t k, char *err,
                                      size_t errn)
{
    const mc_dcp_entry_t *e = &r->m->entries[i];
    if (!r->chunks[i] && !(r->chunks[i] = calloc(e->n_chunks, sizeof **r->chunks)))
        return mc_errf(err, errn, "out of memory"), NULL;
    if (r->chunks[i][k]) return r->chunks[i][k];
    const mc_dcp_chunk_t *c = &e->chunks[k];
    mc_pyobj_t *t = NULL;
    if (load_item(r, c, 0, &t, err, errn)) return NULL;
    bool ok = t->kind == MC_PY_TENSOR && t->tensor.dtype == e->dtype && t->tensor.ndim == e->ndim &&
              mc_py_tensor_contiguous(t);
    for (int d = 0; ok && d < e->ndim; d++) ok = t->tensor.shape[d] == c->sizes[d];
    if (!ok) {
        char shown[CK_SHOWN_MAX + 4];
        mc_errf(err, errn,
                "%s/%s at offset %llu: key '%s': the item is not a contiguous %s tensor of the "
                "chunk's sizes",
                r->dir, c->file, (unsigned long long)c->offset,
                ck_shown(e->key, strlen(e->key), shown), mc_torch_dtype_name(e->dtype));
        mc_py_decref(t);
        return NULL;
    }
    return r->chunks[i][k] = t;
}

static bool is_float(mc_torch_dtype_t dt)
{
    return dt == MC_TORCH_FLOAT32 || dt == MC_TORCH_BFLOAT16 || dt == MC_TORCH_FLOAT16;
}

static float load_f(const uint8_t *p, mc_torch_dtype_t dt)
{
    if (dt == MC_TORCH_FLOAT32) {
        float x;
        memcpy(&x, p, 4);
        return x;
    }
    uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    return dt == MC_TORCH_BFLOAT16 ? mc_f32_from_bf16(h) : mc_f32_from_f16(h);
}

static void store_f(uint8_t *p, mc_torch_dtype_t dt, float x)
{
    if (dt == MC_TORCH_FLOAT32) {
        memcpy(p, &x, 4);
        return;
    }
    uint16_t h = dt == MC_TORCH_BFLOAT16 ? mc_bf16_from_f32(x) : mc_f16_from_f32(x);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* n elements from src (sdt) to dst (ddt): a copy, or through float32 (exact from the 16-bit
 * types, so one rounding, to nearest even, as torch's copy_). */
static void convert(const uint8_t *src, mc_torch_dtype_t sdt, uint8_t *dst, mc_torch_dtype_t ddt,
                    int64_t n)
{
    size_t ss = mc_torch_dtype_size(sdt), ds = mc_torch_dtype_size(ddt);
    if (sdt == ddt) {
        memcpy(dst, src, (size_t)n * ss);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        store_f(dst + (size_t)i * ds, ddt, load_f(src + (size_t)i * ss, sdt));
}

void mc_dcp_copy_overlap(int ndim, const int64_t *src_off, const int64_t *src_sizes,
                         const void *src, mc_torch_dtype_t sdt, const int64_t *dst_off,
                         const int64_t *dst_sizes, void *dst, mc_torch_dtype_t ddt)
{
    int64_t lo[MC_DCP_MAX_DIMS], hi[MC_DCP_MAX_DIMS], idx[MC_DCP_MAX_DIMS];
    for (int d = 0; d < ndim; d++) {
        lo[d] = src_off[d] > dst_off[d] ? src_off[d] : dst_off[d];
        int64_t se = src_off[d] + src_sizes[d], de = dst_off[d] + dst_sizes[d];
        hi[d] = se < de ? se : de;
        if (hi[d] <= lo[d]) return;
        idx[d] = lo[d];
    }
    size_t ss = mc_torch_dtype_size(sdt), ds = mc_torch_dtype_size(ddt);
    int64_t run = ndim ? hi[ndim - 1] - lo[ndim - 1] : 1;
    for (;;) {
        int64_t si = 0, di = 0; /* row-major positions in the source and the destination */
        for (int d = 0; d < ndim; d++) {
            si = si * src_sizes[d] + (idx[d] - src_off[d]);
            di = di * dst_sizes[d] + (idx[d] - dst_off[d]);
        }
        convert((const uint8_t *)src + (size_t)si * ss, sdt, (uint8_t *)dst + (size_t)di * ds, ddt,
                run);
        int d = ndim - 2; /* the next row: an odometer over all but the last dimension */
        while (d >= 0 && ++idx[d] == hi[d]) idx[d] = lo[d], d--;
        if (d < 0) return;
    }
}

int mc_dcp_read_box(mc_dcp_reader_t *r, const char *key, int ndim, const int64_t *start,
                    const int64_t *sizes, mc_torch_dtype_t dst_dtype, void *dst, char *err,
                    size_t errn)
{
    char shown[CK_SHOWN_MAX + 4];
    const char *k = ck_shown(key, strlen(key), shown);
    ptrdiff_t i = dcp_meta_lookup(r->m, key);
    if (i < 0) return mc_errf(err, errn, "%s: no key '%s'", r->dir, k);
    const mc_dcp_entry_t *e = &r->m->entries[i];
    if (e->bytes) return mc_errf(err, errn, "%s: key '%s' is a byte item", r->dir, k);
    if (ndim != e->ndim)
        return mc_errf(err, errn, "%s: key '%s' has %d dimensions, not %d", r->dir, k, e->ndim,
                       ndim);
    for (int d = 0; d < ndim; d++)
        if (start[d] < 0 || sizes[d] < 0 || start[d] > e->shape[d] ||
            sizes[d] > e->shape[d] - start[d])
            return mc_errf(err, errn, "%s: key '%s': box outside the tensor in dimension %d",
                           r->dir, k, d);
    if (dst_dtype != e->dtype && !(is_float(dst_dtype) && is_float(e->dtype)))
        return mc_errf(err, errn, "%s: key '%s': cannot convert %s to %s", r->dir, k,
                       mc_torch_dtype_name(e->dtype), mc_torch_dtype_name(dst_dtype));
    if (dcp_volume(ndim, sizes) == 0) return 0;
    for (size_t c = 0; c < e->n_chunks; c++) {
        const mc_dcp_chunk_t *ch = &e->chunks[c];
        bool meets = dcp_volume(ndim, ch->sizes) > 0;
        for (int d = 0; d < ndim && meets; d++)
            meets =
                ch->offsets[d] < start[d] + sizes[d] && start[d] < ch->offsets[d] + ch->sizes[d];
        if (!meets) continue;
        const mc_pyobj_t *t = chunk_tensor(r, (size_t)i, c, err, errn);
        if (!t) return -1;
        mc_dcp_copy_overlap(ndim, ch->offsets, ch->sizes, mc_py_tensor_data(t), e->dtype, start,
                            sizes, dst, dst_dtype);
    }
    return 0;
}

int mc_dcp_read_object(mc_dcp_reader_t *r, const char *key, mc_pyobj_t **out, char *err,
                       size_t errn)
{
    char shown[CK_SHOWN_MAX + 4];
    const char *k = ck_shown(key, strlen(key), shown);
    *out = NULL;
    const mc_dcp_entry_t *e = mc_dcp_meta_find(r->m, key);
    if (!e) return mc_errf(err, errn, "%s: no key '%s'", r->dir, k);
    if (!e->bytes || e->n_chunks != 1)
        return mc_errf(err, errn, "%s: key '%s' is not a byte item", r->dir, k);
    /* copied out of the mapping: the object may outlive the reader */
    return load_item(r, &e->chunks[0], MC_TORCH_LOAD_COPY, out, err, errn);
}
