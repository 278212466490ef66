/* The safetensors format (torchfmt/safetensors.h). */
#include "torchfmt/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fs.h"
#include "torchfmt/util.h"

/* A header beyond this is no model's (the safetensors package refuses 100 MB too). */
#define HEADER_MAX (100u << 20)

static const struct {
    const char *name;
    mc_torch_dtype_t dt;
    size_t size;
} DTYPES[] = {
    {"F32", MC_TORCH_FLOAT32, 4}, {"BF16", MC_TORCH_BFLOAT16, 2}, {"F16", MC_TORCH_FLOAT16, 2},
    {"F64", MC_TORCH_FLOAT64, 8}, {"I64", MC_TORCH_INT64, 8},     {"I32", MC_TORCH_INT32, 4},
    {"I16", MC_TORCH_INT16, 2},   {"I8", MC_TORCH_INT8, 1},       {"U8", MC_TORCH_UINT8, 1},
    {"BOOL", MC_TORCH_BOOL, 1},
};
#define N_DTYPES (sizeof(DTYPES) / sizeof(DTYPES[0]))

const char *mc_st_dtype_name(mc_torch_dtype_t dt)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (DTYPES[i].dt == dt) return DTYPES[i].name;
    return NULL;
}

size_t mc_st_dtype_size(mc_torch_dtype_t dt)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (DTYPES[i].dt == dt) return DTYPES[i].size;
    return 0;
}

static int dtype_of(const char *name, mc_torch_dtype_t *dt)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (strcmp(DTYPES[i].name, name) == 0) {
            *dt = DTYPES[i].dt;
            return 0;
        }
    return -1;
}

/* ---- reading ---- */

void mc_st_close(mc_st_file_t *f)
{
    for (size_t i = 0; i < f->n; i++) free(f->t[i].name);
    free(f->t);
    for (size_t i = 0; i < 2 * f->n_meta; i++) free(f->meta[i]);
    free(f->meta);
    if (f->map) munmap(f->map, f->map_len);
    memset(f, 0, sizeof(*f));
}

const mc_st_tensor_t *mc_st_find(const mc_st_file_t *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

const char *mc_st_meta(const mc_st_file_t *f, const char *key)
{
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
    return NULL;
}

static int read_meta(mc_st_file_t *f, json_t *m, char *err, size_t n)
{
    if (!json_is_object(m)) return mc_errf(err, n, "__metadata__ is not an object");
    f->meta = calloc(2 * json_object_size(m) + 1, sizeof(char *));
    if (!f->meta) return mc_errf(err, n, "out of memory");
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v)
    {
        if (!json_is_string(v)) return mc_errf(err, n, "__metadata__ '%s' is not a string", k);
        f->meta[2 * f->n_meta] = strdup(k);
        f->meta[2 * f->n_meta + 1] = strdup(json_string_value(v));
        f->n_meta++;
    }
    return 0;
}

/* One tensor's entry {dtype, shape, data_offsets}, checked against the data's length. */
static int read_entry(mc_st_tensor_t *t, const char *name, json_t *e, uint64_t data_len, char *err,
                      size_t n)
{
    json_t *dt = json_object_get(e, "dtype"), *shape = json_object_get(e, "shape"),
           *off = json_object_get(e, "data_offsets");
    if (!json_is_object(e) || !json_is_string(dt) || !json_is_array(shape) || !json_is_array(off) ||
        json_array_size(off) != 2)
        return mc_errf(err, n, "tensor '%s': not {dtype, shape, data_offsets: [begin, end]}", name);
    if (dtype_of(json_string_value(dt), &t->dtype) != 0)
        return mc_errf(err, n, "tensor '%s': unknown dtype '%s'", name, json_string_value(dt));
    if (json_array_size(shape) > MC_ST_MAX_DIMS)
        return mc_errf(err, n, "tensor '%s': more than %d dimensions", name, MC_ST_MAX_DIMS);
    t->ndim = (int)json_array_size(shape);
    uint64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        json_t *s = json_array_get(shape, (size_t)d);
        if (!json_is_integer(s) || json_integer_value(s) < 0 || json_integer_value(s) > (1LL << 40))
            return mc_errf(err, n, "tensor '%s': bad shape", name);
        t->shape[d] = json_integer_value(s);
        numel *= (uint64_t)t->shape[d];
        if (numel > (1ULL << 40)) return mc_errf(err, n, "tensor '%s': bad shape", name);
    }
    json_t *b = json_array_get(off, 0), *en = json_array_get(off, 1);
    if (!json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 ||
        json_integer_value(en) < json_integer_value(b))
        return mc_errf(err, n, "tensor '%s': bad data_offsets", name);
    t->begin = (uint64_t)json_integer_value(b);
    t->end = (uint64_t)json_integer_value(en);
    if (t->end > data_len)
        return mc_errf(err, n,
                       "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                       ") beyond the data (%" PRIu64 " bytes: truncated?)",
                       name, t->begin, t->end, data_len);
    if (t->end - t->begin != numel * mc_st_dtype_size(t->dtype))
        return mc_errf(err, n,
                       "tensor '%s': data_offsets hold %" PRIu64
                       " bytes, its shape and dtype %" PRIu64,
                       name, t->end - t->begin, numel * mc_st_dtype_size(t->dtype));
    return (t->name = strdup(name)) ? 0 : mc_errf(err, n, "out of memory");
}

static int cmp_begin(const void *a, const void *b)
{
    const mc_st_tensor_t *x = *(const mc_st_tensor_t *const *)a,
                         *y = *(const mc_st_tensor_t *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* No two tensors may share bytes (a file whose tensors alias is damaged or hostile). */
static int check_overlap(const mc_st_file_t *f, char *err, size_t n)
{
    const mc_st_tensor_t **by = malloc((f->n + 1) * sizeof(*by));
    if (!by) return mc_errf(err, n, "out of memory");
    for (size_t i = 0; i < f->n; i++) by[i] = &f->t[i];
    qsort(by, f->n, sizeof(*by), cmp_begin);
    int rc = 0;
    for (size_t i = 1; i < f->n && rc == 0; i++)
        if (by[i]->begin < by[i - 1]->end && by[i]->end > by[i]->begin)
            rc = mc_errf(err, n, "tensors '%s' and '%s' overlap (data_offsets)", by[i - 1]->name,
                         by[i]->name);
    free(by);
    return rc;
}

static int parse_header(mc_st_file_t *f, const char *text, size_t len, char *err, size_t n)
{
    json_error_t je;
    json_t *h = json_loadb(text, len, 0, &je);
    if (!h || !json_is_object(h)) {
        json_decref(h);
        return mc_errf(err, n, "the header is not a JSON object (%s)", h ? "" : je.text);
    }
    int rc = 0;
    f->t = calloc(json_object_size(h) + 1, sizeof(*f->t));
    if (!f->t) rc = mc_errf(err, n, "out of memory");
    const char *k;
    json_t *v;
    json_object_foreach(h, k, v)
    {
        if (rc != 0) break;
        if (strcmp(k, "__metadata__") == 0) rc = read_meta(f, v, err, n);
        else if ((rc = read_entry(&f->t[f->n], k, v, f->data_len, err, n)) == 0) f->n++;
    }
    json_decref(h);
    return rc != 0 ? rc : check_overlap(f, err, n);
}

int mc_st_open(const char *path, mc_st_file_t *f, char *err, size_t n)
{
    memset(f, 0, sizeof(*f));
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return mc_errf(err, n, "%s: %s", path, strerror(e));
    }
    f->map_len = (size_t)st.st_size;
    if (f->map_len < 8) {
        close(fd);
        return mc_errf(err, n, "%s: %zu bytes, too short for a safetensors file (truncated?)", path,
                       f->map_len);
    }
    f->map = mmap(NULL, f->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        return mc_errf(err, n, "%s: %s", path, strerror(errno));
    }
    const uint8_t *p = f->map;
    const uint64_t hlen = ck_le64(p);
    if (hlen > HEADER_MAX || hlen > f->map_len - 8) {
        mc_st_close(f);
        return mc_errf(err, n,
                       "%s: header length %" PRIu64 " is beyond the file's %zu bytes (truncated or "
                       "not a safetensors file)",
                       path, hlen, f->map_len);
    }
    f->data = p + 8 + hlen;
    f->data_len = f->map_len - 8 - hlen;
    if (parse_header(f, (const char *)p + 8, hlen, err, n) != 0) {
        ck_err_prefix(err, n, path);
        mc_st_close(f);
        return -1;
    }
    return 0;
}

/* ---- writing ---- */

uint64_t mc_st_nbytes(const mc_st_entry_t *e)
{
    uint64_t numel = 1;
    for (int d = 0; d < e->ndim; d++) numel *= (uint64_t)e->shape[d];
    return numel * mc_st_dtype_size(e->dtype);
}

/* The header's JSON, padded with spaces to a multiple of 8 bytes (malloc'ed; *len its length). */
static char *header(const mc_st_entry_t *e, size_t n, const char *const *meta, size_t n_meta,
                    size_t *len)
{
    json_t *h = json_object();
    if (n_meta) {
        json_t *m = json_object();
        for (size_t i = 0; i < n_meta; i++)
            json_object_set_new(m, meta[2 * i], json_string(meta[2 * i + 1]));
        json_object_set_new(h, "__metadata__", m);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *shape = json_array();
        for (int d = 0; d < e[i].ndim; d++)
            json_array_append_new(shape, json_integer(e[i].shape[d]));
        const uint64_t end = off + mc_st_nbytes(&e[i]);
        json_object_set_new(h, e[i].name,
                            json_pack("{s:s, s:o, s:[I, I]}", "dtype", mc_st_dtype_name(e[i].dtype),
                                      "shape", shape, "data_offsets", (json_int_t)off,
                                      (json_int_t)end));
        off = end;
    }
    char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    if (!text) return NULL;
    size_t l = strlen(text), padded = (l + 7) & ~(size_t)7;
    char *out = realloc(text, padded + 1);
    if (!out) {
        free(text);
        return NULL;
    }
    memset(out + l, ' ', padded - l);
    out[padded] = 0;
    *len = padded;
    return out;
}

uint64_t mc_st_file_size(const mc_st_entry_t *e, size_t n, const char *const *meta, size_t n_meta)
{
    size_t hl = 0;
    char *h = header(e, n, meta, n_meta, &hl);
    if (!h) mc_fatal("out of host memory");
    free(h);
    uint64_t size = 8 + hl;
    for (size_t i = 0; i < n; i++) size += mc_st_nbytes(&e[i]);
    return size;
}

int mc_st_write(const char *path, const mc_st_entry_t *e, size_t n, const char *const *meta,
                size_t n_meta, char *err, size_t errn)
{
    for (size_t i = 0; i < n; i++)
        if (!mc_st_dtype_name(e[i].dtype) || e[i].ndim > MC_ST_MAX_DIMS)
            return mc_errf(err, errn, "%s: tensor '%s' has no safetensors dtype", path, e[i].name);
    size_t hl = 0;
    char *h = header(e, n, meta, n_meta, &hl);
    if (!h) return mc_errf(err, errn, "%s: out of memory", path);
    uint64_t size = 8 + hl;
    for (size_t i = 0; i < n; i++) size += mc_st_nbytes(&e[i]);
    uint8_t *buf = malloc(size);
    if (!buf) {
        free(h);
        return mc_errf(err, errn, "%s: out of memory (%" PRIu64 " bytes)", path, size);
    }
    ck_put64(buf, hl);
    memcpy(buf + 8, h, hl);
    free(h);
    uint64_t off = 8 + hl;
    for (size_t i = 0; i < n; i++) {
        memcpy(buf + off, e[i].data, mc_st_nbytes(&e[i]));
        off += mc_st_nbytes(&e[i]);
    }
    int rc = mc_write_file(path, buf, size, err, errn);
    free(buf);
    return rc;
}
