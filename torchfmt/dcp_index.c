/* The checkpoint index of torchfmt/dcp.h as a structure: keys, the tiling check, the records
 * ranks gather and their merge into an index. */
#define _GNU_SOURCE /* qsort_r */
#include "torchfmt/dcp_int.h"

#include <stdio.h>
#include <stdlib.h>

#include "torchfmt/util.h"

int64_t dcp_volume(int ndim, const int64_t *sizes)
{
    int64_t v = 1;
    for (int d = 0; d < ndim; d++)
        if (sizes[d] < 0 || __builtin_mul_overflow(v, sizes[d], &v)) return -1;
    return v;
}

int dcp_check_file_name(const char *name, char *err, size_t errn)
{
    size_t n = strlen(name);
    char shown[CK_SHOWN_MAX + 4];
    /* a stored name must not lead a reader out of the checkpoint's directory */
    if (n == 0 || n >= sizeof((mc_dcp_chunk_t){0}.file) || strchr(name, '/') ||
        !strcmp(name, ".") || !strcmp(name, ".."))
        return mc_errf(err, errn, "bad storage file name '%s'", ck_shown(name, n, shown));
    return 0;
}

/* ---- the tiling check ------------------------------------------------------------------ */

typedef struct {
    const mc_dcp_entry_t *e;
    int axis;
} sweep_t;

static int cmp_axis(const void *a, const void *b, void *ctx)
{
    const sweep_t *s = ctx;
    int64_t x = s->e->chunks[*(const size_t *)a].offsets[s->axis];
    int64_t y = s->e->chunks[*(const size_t *)b].offsets[s->axis];
    return x < y ? -1 : x > y;
}

static bool boxes_overlap(int ndim, const mc_dcp_chunk_t *a, const mc_dcp_chunk_t *b)
{
    for (int d = 0; d < ndim; d++)
        if (a->offsets[d] + a->sizes[d] <= b->offsets[d] ||
            b->offsets[d] + b->sizes[d] <= a->offsets[d])
            return false;
    return true;
}

/* Two chunks that share an element: a sweep along the axis the chunks are split on (the first
 * whose chunk sizes are not the whole dimension), keeping the chunks still open there. Each
 * chunk is compared only with the open ones, so the usual layouts (pieces along one or two
 * axes) cost about n log n. Returns 0, or -1 with the pair. */
static int find_overlap(const mc_dcp_entry_t *e, size_t *ia, size_t *ib)
{
    int axis = 0;
    for (int d = 0; d < e->ndim; d++)
        for (size_t i = 0; i < e->n_chunks; i++)
            if (e->chunks[i].sizes[d] != e->shape[d]) {
                axis = d;
                d = e->ndim;
                break;
            }
    size_t *ord = malloc(e->n_chunks * sizeof *ord), *open = malloc(e->n_chunks * sizeof *open);
    int rc = 0;
    if (!ord || !open) {
        rc = -2;
        goto out;
    }
    size_t n = 0, n_open = 0;
    for (size_t i = 0; i < e->n_chunks; i++)
        if (dcp_volume(e->ndim, e->chunks[i].sizes) > 0)
            ord[n++] = i; /* empty ones cover nothing */
    sweep_t s = {e, axis};
    if (e->ndim > 0) qsort_r(ord, n, sizeof *ord, cmp_axis, &s);
    for (size_t k = 0; k < n && rc == 0; k++) {
        const mc_dcp_chunk_t *c = &e->chunks[ord[k]];
        size_t kept = 0;
        for (size_t j = 0; j < n_open; j++) {
            const mc_dcp_chunk_t *o = &e->chunks[open[j]];
            if (e->ndim > 0 && o->offsets[axis] + o->sizes[axis] <= c->offsets[axis]) continue;
            open[kept++] = open[j];
            if (boxes_overlap(e->ndim, o, c)) {
                *ia = open[j];
                *ib = ord[k];
                rc = -1;
            }
        }
        n_open = kept;
        open[n_open++] = ord[k];
    }
out:
    free(ord);
    free(open);
    return rc;
}

static const char *box_str(int ndim, const int64_t *v, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int d = 0; d < ndim && at < n; d++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", d ? "," : "", (long long)v[d]);
    return buf;
}

int dcp_entry_check(const mc_dcp_entry_t *e, char *err, size_t errn)
{
    char shown[CK_SHOWN_MAX + 4], b1[200], b2[200], b3[200];
    const char *key = ck_shown(e->key, strlen(e->key), shown);
    if (e->bytes)
        return e->n_chunks == 1
                   ? 0
                   : mc_errf(err, errn, "byte key '%s' has %zu items, not 1", key, e->n_chunks);
    int64_t total = dcp_volume(e->ndim, e->shape), sum = 0;
    if (total < 0) return mc_errf(err, errn, "key '%s': bad or too large shape", key);
    for (size_t i = 0; i < e->n_chunks; i++) {
        const mc_dcp_chunk_t *c = &e->chunks[i];
        for (int d = 0; d < e->ndim; d++)
            if (c->offsets[d] < 0 || c->sizes[d] < 0 || c->offsets[d] > e->shape[d] ||
                c->sizes[d] > e->shape[d] - c->offsets[d])
                return mc_errf(err, errn, "key '%s': chunk at [%s] of sizes [%s] outside [%s]", key,
                               box_str(e->ndim, c->offsets, b1, sizeof b1),
                               box_str(e->ndim, c->sizes, b2, sizeof b2),
                               box_str(e->ndim, e->shape, b3, sizeof b3));
        if (__builtin_add_overflow(sum, dcp_volume(e->ndim, c->sizes), &sum) || sum > total) {
            sum = -1; /* more than the whole: an overlap, which the sweep names */
            break;
        }
    }
    size_t ia, ib;
    int ov = find_overlap(e, &ia, &ib);
    if (ov == -2) return mc_errf(err, errn, "key '%s': out of memory", key);
    if (ov)
        return mc_errf(err, errn, "key '%s': chunks at [%s] and [%s] overlap", key,
                       box_str(e->ndim, e->chunks[ia].offsets, b1, sizeof b1),
                       box_str(e->ndim, e->chunks[ib].offsets, b2, sizeof b2));
    if (sum < 0) return mc_errf(err, errn, "key '%s': chunks cover more than its shape", key);
    if (sum != total)
        return mc_errf(err, errn, "key '%s': chunks cover %lld of %lld elements (a gap)", key,
                       (long long)sum, (long long)total);
    return 0;
}

/* ---- keys ------------------------------------------------------------------------------ */

ptrdiff_t dcp_meta_lookup(const mc_dcp_meta_t *m, const char *key)
{
    if (!m->index_cap) return -1;
    size_t cap = m->index_cap, h = (size_t)ck_hash(key, strlen(key)) & (cap - 1);
    for (; m->index[h]; h = (h + 1) & (cap - 1))
        if (!strcmp(m->entries[m->index[h] - 1].key, key)) return (ptrdiff_t)m->index[h] - 1;
    return -1;
}

static int reindex(mc_dcp_meta_t *m, size_t cap)
{
    uint32_t *idx = calloc(cap, sizeof *idx);
    if (!idx) return -1;
    for (size_t i = 0; i < m->n; i++) {
        size_t h = (size_t)ck_hash(m->entries[i].key, strlen(m->entries[i].key)) & (cap - 1);
        while (idx[h]) h = (h + 1) & (cap - 1);
        idx[h] = (uint32_t)(i + 1);
    }
    free(m->index);
    m->index = idx;
    m->index_cap = cap;
    return 0;
}

int dcp_meta_add(mc_dcp_meta_t *m, const char *key, size_t *at, char *err, size_t errn)
{
    char shown[CK_SHOWN_MAX + 4];
    if (dcp_meta_lookup(m, key) >= 0)
        return mc_errf(err, errn, "key '%s' twice", ck_shown(key, strlen(key), shown));
    if (m->n >= UINT32_MAX / 4) return mc_errf(err, errn, "too many keys");
    if ((m->n & (m->n - 1)) == 0) { /* grow at powers of two */
        mc_dcp_entry_t *e = realloc(m->entries, (m->n ? 2 * m->n : 1) * sizeof *e);
        if (!e) return mc_errf(err, errn, "out of memory");
        m->entries = e;
    }
    mc_dcp_entry_t *e = &m->entries[m->n];
    memset(e, 0, sizeof *e);
    if (!(e->key = strdup(key))) return mc_errf(err, errn, "out of memory");
    m->n++;
    if (2 * m->n > m->index_cap) {
        size_t cap = 16;
        while (cap < 4 * m->n) cap *= 2;
        if (reindex(m, cap)) return mc_errf(err, errn, "out of memory");
    } else {
        size_t cap = m->index_cap, h = (size_t)ck_hash(key, strlen(key)) & (cap - 1);
        while (m->index[h]) h = (h + 1) & (cap - 1);
        m->index[h] = (uint32_t)m->n;
    }
    *at = m->n - 1;
    return 0;
}

int dcp_entry_add_chunk(mc_dcp_entry_t *e, const mc_dcp_chunk_t *c)
{
    size_t n = e->n_chunks;
    if ((n & (n - 1)) == 0) {
        mc_dcp_chunk_t *p = realloc(e->chunks, (n ? 2 * n : 1) * sizeof *p);
        if (!p) return -1;
        e->chunks = p;
    }
    e->chunks[e->n_chunks++] = *c;
    return 0;
}

const mc_dcp_entry_t *mc_dcp_meta_find(const mc_dcp_meta_t *m, const char *key)
{
    ptrdiff_t i = dcp_meta_lookup(m, key);
    return i < 0 ? NULL : &m->entries[i];
}

void mc_dcp_meta_free(mc_dcp_meta_t *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->entries[i].key);
        free(m->entries[i].chunks);
    }
    free(m->entries);
    free(m->index);
    memset(m, 0, sizeof *m);
}

/* ---- records --------------------------------------------------------------------------- */

int mc_dcp_records_move(mc_dcp_records_t *dst, mc_dcp_records_t *src)
{
    size_t k = 0;
    while (k < src->n && dcp_records_push(dst, &src->items[k]) == 0) k++;
    if (k < src->n) { /* out of memory: the records not moved stay in src */
        memmove(src->items, src->items + k, (src->n - k) * sizeof *src->items);
        src->n -= k;
        return -1;
    }
    free(src->items);
    memset(src, 0, sizeof *src);
    return 0;
}

void mc_dcp_records_free(mc_dcp_records_t *recs)
{
    if (!recs) return;
    for (size_t i = 0; i < recs->n; i++) free(recs->items[i].key);
    free(recs->items);
    memset(recs, 0, sizeof *recs);
}

int mc_dcp_meta_from_records(const mc_dcp_records_t *recs, mc_dcp_meta_t *m, char *err, size_t errn)
{
    char shown[CK_SHOWN_MAX + 4];
    memset(m, 0, sizeof *m);
    for (size_t i = 0; i < recs->n; i++) {
        const mc_dcp_record_t *r = &recs->items[i];
        const char *key = ck_shown(r->key, strlen(r->key), shown);
        if (r->ndim < 0 || r->ndim > MC_DCP_MAX_DIMS || mc_torch_dtype_size(r->dtype) == 0) {
            mc_errf(err, errn, "key '%s': bad record", key);
            goto fail;
        }
        if (dcp_check_file_name(r->chunk.file, err, errn)) goto fail;
        ptrdiff_t at = dcp_meta_lookup(m, r->key);
        if (at < 0) {
            size_t k;
            if (dcp_meta_add(m, r->key, &k, err, errn)) goto fail;
            mc_dcp_entry_t *e = &m->entries[k];
            e->bytes = r->bytes;
            e->dtype = r->dtype;
            e->ndim = r->bytes ? 0 : r->ndim;
            memcpy(e->shape, r->shape, sizeof e->shape);
            at = (ptrdiff_t)k;
        }
        mc_dcp_entry_t *e = &m->entries[at];
        if (e->bytes != r->bytes ||
            (!e->bytes && (e->dtype != r->dtype || e->ndim != r->ndim ||
                           memcmp(e->shape, r->shape, (size_t)e->ndim * sizeof *e->shape)))) {
            mc_errf(err, errn, "key '%s': records disagree on %s", key,
                    e->bytes != r->bytes   ? "kind"
                    : e->dtype != r->dtype ? "dtype"
                                           : "shape");
            goto fail;
        }
        if (dcp_entry_add_chunk(e, &r->chunk)) {
            mc_errf(err, errn, "out of memory");
            goto fail;
        }
    }
    for (size_t i = 0; i < m->n; i++)
        if (dcp_entry_check(&m->entries[i], err, errn)) goto fail;
    return 0;
fail:
    mc_dcp_meta_free(m);
    return -1;
}
