/* MCFX fixture reader; see fixture.h. */
#include "test/unit/fixture.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MC_FX_MAGIC "MCFX0001"
#define MC_FX_MAX_FILE ((size_t)1 << 32) /* fixtures are ~1 MB; refuse anything absurd */

size_t mc_fx_dtype_size(int dtype)
{
    switch (dtype) {
    case MC_FX_F32:
    case MC_FX_I32: return 4;
    case MC_FX_F64:
    case MC_FX_I64: return 8;
    default: return 0;
    }
}

static size_t align8(size_t x) { return (x + 7) & ~(size_t)7; }

static uint32_t rd_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int64_t rd_i64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return (int64_t)v;
}

/* Reads the whole file. Returns NULL and sets *why on failure. */
static unsigned char *read_all(const char *path, size_t *size, const char **why)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *why = strerror(errno);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        if (len == cap) {
            if (cap >= MC_FX_MAX_FILE) {
                *why = "file too large";
                free(buf);
                buf = NULL;
                break;
            }
            unsigned char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) {
                *why = "read error";
                free(buf);
                buf = NULL;
            }
            break;
        }
    }
    if (!buf && !*why) *why = "out of memory";
    fclose(f);
    *size = len;
    return buf;
}

typedef struct {
    const unsigned char *p;
    size_t size, off;
} cursor_t;

static int take(cursor_t *c, size_t n, const unsigned char **out)
{
    if (n > c->size - c->off) return -1;
    *out = c->p + c->off;
    c->off += n;
    return 0;
}

/* One record's header, validated against the bytes that remain. */
typedef struct {
    const unsigned char *name, *data;
    uint32_t name_len;
    int dtype, ndim;
    int64_t dims[MC_FX_MAX_NDIM], numel;
    size_t bytes;
} rec_t;

static const char *parse_record(cursor_t *c, rec_t *r)
{
    const unsigned char *q;
    memset(r, 0, sizeof(*r));
    if (take(c, 4, &q)) return "truncated record header (name length)";
    r->name_len = rd_u32(q);
    if (r->name_len == 0) return "empty record name";
    if (take(c, r->name_len, &r->name)) return "truncated record name";
    if (memchr(r->name, 0, r->name_len)) return "NUL byte in record name";
    if (take(c, 8, &q)) return "truncated record header (dtype, ndim)";
    uint32_t dtype = rd_u32(q), ndim = rd_u32(q + 4);
    size_t isz = mc_fx_dtype_size((int)(dtype > 3 ? 99 : dtype));
    if (isz == 0) return "invalid dtype";
    if (ndim > MC_FX_MAX_NDIM) return "ndim > 8";
    r->dtype = (int)dtype;
    r->ndim = (int)ndim;
    if (take(c, 8 * (size_t)ndim, &q)) return "truncated dims";
    /* numel*isz must fit in the remaining bytes; check as we multiply so nothing overflows. */
    size_t remaining = c->size - c->off, max_el = remaining / isz;
    uint64_t numel = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        int64_t v = rd_i64(q + 8 * d);
        if (v < 0) return "negative dimension";
        r->dims[d] = v;
        if (numel != 0 && v != 0 && (uint64_t)v > max_el / numel) return "data runs past end of file";
        numel *= (uint64_t)v;
    }
    if (numel > max_el) return "data runs past end of file";
    r->numel = (int64_t)numel;
    r->bytes = (size_t)numel * isz;
    if (take(c, r->bytes, &r->data)) return "data runs past end of file";
    return NULL;
}

static int name_eq(const rec_t *r, const char *s)
{
    return strlen(s) == r->name_len && memcmp(s, r->name, r->name_len) == 0;
}

static mc_fx_t *parse(const unsigned char *buf, size_t size, const char **why, int *bad_rec)
{
    cursor_t c = {buf, size, 0};
    const unsigned char *q;
    *bad_rec = -1;
    if (take(&c, 8, &q) || memcmp(q, MC_FX_MAGIC, 8) != 0) {
        *why = "bad magic (not an MCFX0001 file)";
        return NULL;
    }
    if (take(&c, 4, &q)) {
        *why = "truncated header (record count)";
        return NULL;
    }
    uint32_t n = rd_u32(q);
    /* Each record takes at least 12 + 1 + 4 bytes (name_len, 1-byte name, dtype, ndim, 4 data). */
    if (n > INT32_MAX || (uint64_t)n * 17 > size - c.off) {
        *why = "record count exceeds file size";
        return NULL;
    }
    /* Pass 1: validate and size the blob. */
    size_t start = c.off, blob_bytes = 0;
    rec_t r;
    for (uint32_t i = 0; i < n; i++) {
        *bad_rec = (int)i;
        if ((*why = parse_record(&c, &r))) return NULL;
        blob_bytes += align8(r.bytes) + align8((size_t)r.name_len + 1);
    }
    *bad_rec = -1;
    if (c.off != size) {
        *why = "trailing bytes after the last record";
        return NULL;
    }
    mc_fx_t *fx = calloc(1, sizeof(*fx));
    if (!fx) {
        *why = "out of memory";
        return NULL;
    }
    fx->t = calloc(n ? n : 1, sizeof(*fx->t));
    fx->blob = malloc(blob_bytes ? blob_bytes : 1);
    if (!fx->t || !fx->blob) {
        mc_fx_free(fx);
        *why = "out of memory";
        return NULL;
    }
    /* Pass 2: copy into aligned storage. */
    c.off = start;
    char *dst = fx->blob;
    for (uint32_t i = 0; i < n; i++) {
        parse_record(&c, &r); /* validated above */
        for (uint32_t j = 0; j < i; j++) {
            if (name_eq(&r, fx->t[j].name)) {
                *why = "duplicate record name";
                *bad_rec = (int)i;
                mc_fx_free(fx);
                return NULL;
            }
        }
        mc_fx_tensor_t *t = &fx->t[i];
        t->data = dst;
        if (r.bytes) memcpy(dst, r.data, r.bytes);
        dst += align8(r.bytes);
        t->name = dst;
        memcpy(dst, r.name, r.name_len);
        dst[r.name_len] = '\0';
        dst += align8((size_t)r.name_len + 1);
        t->dtype = r.dtype;
        t->ndim = r.ndim;
        memcpy(t->dims, r.dims, sizeof(t->dims));
        t->numel = r.numel;
        fx->n = (int)i + 1;
    }
    return fx;
}

mc_fx_t *mc_fx_load(const char *path)
{
    const char *why = NULL;
    size_t size = 0;
    unsigned char *buf = read_all(path, &size, &why);
    if (!buf) {
        fprintf(stderr, "mc_fx_load: %s: %s\n", path, why ? why : "cannot read");
        return NULL;
    }
    int bad_rec = -1;
    mc_fx_t *fx = parse(buf, size, &why, &bad_rec);
    free(buf);
    if (!fx) {
        if (bad_rec >= 0)
            fprintf(stderr, "mc_fx_load: %s: corrupt fixture: %s (record %d)\n", path, why, bad_rec);
        else
            fprintf(stderr, "mc_fx_load: %s: corrupt fixture: %s\n", path, why);
    }
    return fx;
}

const mc_fx_tensor_t *mc_fx_get(const mc_fx_t *fx, const char *name)
{
    if (!fx || !name) return NULL;
    for (int i = 0; i < fx->n; i++)
        if (strcmp(fx->t[i].name, name) == 0) return &fx->t[i];
    return NULL;
}

double mc_fx_at(const mc_fx_tensor_t *t, int64_t i)
{
    switch (t->dtype) {
    case MC_FX_F32: return ((const float *)t->data)[i];
    case MC_FX_I32: return ((const int32_t *)t->data)[i];
    case MC_FX_F64: return ((const double *)t->data)[i];
    case MC_FX_I64: return (double)((const int64_t *)t->data)[i];
    default: return NAN;
    }
}

double mc_fx_scalar(const mc_fx_t *fx, const char *name)
{
    const mc_fx_tensor_t *t = mc_fx_get(fx, name);
    if (!t) fail_msg("fixture record '%s' is missing", name);
    if (t->numel != 1) fail_msg("fixture record '%s' has %lld elements, not 1", name, (long long)t->numel);
    return mc_fx_at(t, 0);
}

static const char *dtype_name(int d)
{
    static const char *names[] = {"float32", "int32", "float64", "int64"};
    return d >= 0 && d < 4 ? names[d] : "?";
}

const mc_fx_tensor_t *mc_fx_require(const mc_fx_t *fx, const char *name, int dtype, int64_t numel)
{
    const mc_fx_tensor_t *t = mc_fx_get(fx, name);
    if (!t) fail_msg("fixture record '%s' is missing", name);
    if (t->dtype != dtype)
        fail_msg("fixture record '%s' is %s, expected %s", name, dtype_name(t->dtype), dtype_name(dtype));
    if (numel >= 0 && t->numel != numel)
        fail_msg("fixture record '%s' has %lld elements, expected %lld", name, (long long)t->numel,
                 (long long)numel);
    return t;
}

void mc_fx_free(mc_fx_t *fx)
{
    if (!fx) return;
    free(fx->t);
    free(fx->blob);
    free(fx);
}

int mc_fx_path(char *buf, size_t n, const char *file)
{
    const char *dir = getenv("MC_FIXTURES");
    if (!dir || !*dir) dir = "test/fixtures";
    int w = snprintf(buf, n, "%s/%s", dir, file);
    return (w < 0 || (size_t)w >= n) ? -1 : 0;
}

mc_fx_t *mc_fx_open(const char *file)
{
    char path[4096];
    if (mc_fx_path(path, sizeof(path), file)) {
        fprintf(stderr, "mc_fx_open: path too long for %s\n", file);
        return NULL;
    }
    return mc_fx_load(path);
}

static int64_t compare(const mc_fx_tensor_t *ref, const float *gf, const double *gd, int64_t n,
                       double atol, double rtol, const char *what)
{
    if (!ref) {
        printf("# %s: no reference record\n", what);
        return n + 1;
    }
    if (ref->numel != n) {
        printf("# %s: size mismatch: reference '%s' has %lld elements, got %lld\n", what, ref->name,
               (long long)ref->numel, (long long)n);
        return n + 1;
    }
    int64_t bad = 0, worst_i = 0;
    double max_abs = 0, max_rel = 0;
    for (int64_t i = 0; i < n; i++) {
        double r = mc_fx_at(ref, i), g = gf ? (double)gf[i] : gd[i], d = fabs(g - r);
        if (!(d <= max_abs)) { /* also catches NaN */
            max_abs = isnan(d) ? INFINITY : d;
            worst_i = i;
        }
        if (fabs(r) > 0 && d / fabs(r) > max_rel) max_rel = d / fabs(r);
        if (!(d <= atol + rtol * fabs(r))) {
            if (bad < 5)
                printf("# %s: [%lld] got %.9g, reference %.9g (|diff| %.3g)\n", what, (long long)i, g, r, d);
            bad++;
        }
    }
    if (bad)
        printf("# %s: %lld/%lld mismatches (atol %.3g rtol %.3g), max |diff| %.3g at [%lld], max rel %.3g\n",
               what, (long long)bad, (long long)n, atol, rtol, max_abs, (long long)worst_i, max_rel);
    return bad;
}

int64_t mc_fx_compare_f32(const mc_fx_tensor_t *ref, const float *got, int64_t n, double atol,
                          double rtol, const char *what)
{
    return compare(ref, got, NULL, n, atol, rtol, what);
}

int64_t mc_fx_compare_f64(const mc_fx_tensor_t *ref, const double *got, int64_t n, double atol,
                          double rtol, const char *what)
{
    return compare(ref, NULL, got, n, atol, rtol, what);
}
