/* Records (torchfmt/dcp.h) as flat bytes, for gathering on rank 0. Little-endian:
 *   "MCDCPR01", u64 count, then per record: u32 key length, the key, u8 bytes, u8 dtype,
 *   u8 ndim, i64 shape[ndim], i64 offsets[ndim], i64 sizes[ndim], u8 file length, the file,
 *   u64 offset, u64 length. */
#include "torchfmt/dcp_int.h"

#include <stdlib.h>

#include "torchfmt/util.h"

#define REC_MAGIC "MCDCPR01"

static size_t rec_size(const mc_dcp_record_t *r)
{
    return 4 + strlen(r->key) + 3 + 24 * (size_t)r->ndim + 1 + strlen(r->chunk.file) + 16;
}

int mc_dcp_records_pack(const mc_dcp_records_t *recs, uint8_t **buf, size_t *len)
{
    size_t n = 16;
    for (size_t i = 0; i < recs->n; i++) {
        const mc_dcp_record_t *r = &recs->items[i];
        if (r->ndim < 0 || r->ndim > MC_DCP_MAX_DIMS || strlen(r->key) > UINT32_MAX ||
            strlen(r->chunk.file) >= sizeof r->chunk.file)
            return -1;
        n += rec_size(r);
    }
    uint8_t *p = malloc(n), *q = p;
    if (!p) return -1;
    memcpy(q, REC_MAGIC, 8);
    ck_put64(q + 8, recs->n);
    q += 16;
    for (size_t i = 0; i < recs->n; i++) {
        const mc_dcp_record_t *r = &recs->items[i];
        size_t kl = strlen(r->key), fl = strlen(r->chunk.file);
        ck_put32(q, (uint32_t)kl);
        memcpy(q + 4, r->key, kl);
        q += 4 + kl;
        *q++ = r->bytes;
        *q++ = (uint8_t)r->dtype;
        *q++ = (uint8_t)r->ndim;
        for (int d = 0; d < r->ndim; d++) {
            ck_put64(q, (uint64_t)r->shape[d]);
            ck_put64(q + 8 * r->ndim, (uint64_t)r->chunk.offsets[d]);
            ck_put64(q + 16 * r->ndim, (uint64_t)r->chunk.sizes[d]);
            q += 8;
        }
        q += 16 * r->ndim;
        *q++ = (uint8_t)fl;
        memcpy(q, r->chunk.file, fl);
        q += fl;
        ck_put64(q, r->chunk.offset);
        ck_put64(q + 8, r->chunk.length);
        q += 16;
    }
    *buf = p;
    *len = n;
    return 0;
}

int dcp_records_push(mc_dcp_records_t *recs, const mc_dcp_record_t *r)
{
    if (recs->n == recs->cap) {
        size_t cap = recs->cap ? 2 * recs->cap : 16;
        mc_dcp_record_t *p = realloc(recs->items, cap * sizeof *p);
        if (!p) return -1;
        recs->items = p;
        recs->cap = cap;
    }
    recs->items[recs->n++] = *r;
    return 0;
}

/* One record at buf[*at..len). */
static int unpack_one(const uint8_t *buf, size_t len, size_t *at, mc_dcp_record_t *r, char *err,
                      size_t errn)
{
    size_t a = *at;
#define NEED(k)                                                                                    \
    if (len - a < (size_t)(k)) return mc_errf(err, errn, "records truncated at byte %zu", a)
    NEED(4);
    size_t kl = ck_le32(buf + a);
    a += 4;
    NEED(kl + 3);
    const uint8_t *key = buf + a;
    if (memchr(key, 0, kl)) return mc_errf(err, errn, "record key with a NUL at byte %zu", a);
    a += kl;
    r->bytes = buf[a] != 0;
    r->dtype = (mc_torch_dtype_t)buf[a + 1];
    r->ndim = buf[a + 2];
    if (buf[a] > 1 || r->dtype >= MC_TORCH_DTYPE_COUNT || r->ndim > MC_DCP_MAX_DIMS)
        return mc_errf(err, errn, "bad record header at byte %zu", a);
    a += 3;
    NEED(24 * (size_t)r->ndim + 1);
    for (int d = 0; d < r->ndim; d++) {
        r->shape[d] = (int64_t)ck_le64(buf + a + 8 * d);
        r->chunk.offsets[d] = (int64_t)ck_le64(buf + a + 8 * (r->ndim + d));
        r->chunk.sizes[d] = (int64_t)ck_le64(buf + a + 8 * (2 * r->ndim + d));
    }
    a += 24 * (size_t)r->ndim;
    size_t fl = buf[a++];
    NEED(fl + 16);
    if (fl >= sizeof r->chunk.file || memchr(buf + a, 0, fl))
        return mc_errf(err, errn, "bad record file name at byte %zu", a);
    memcpy(r->chunk.file, buf + a, fl);
    r->chunk.file[fl] = '\0';
    a += fl;
    r->chunk.offset = ck_le64(buf + a);
    r->chunk.length = ck_le64(buf + a + 8);
    a += 16;
#undef NEED
    if (!(r->key = malloc(kl + 1))) return mc_errf(err, errn, "out of memory");
    memcpy(r->key, key, kl);
    r->key[kl] = '\0';
    *at = a;
    return 0;
}

int mc_dcp_records_unpack(const uint8_t *buf, size_t len, mc_dcp_records_t *recs, char *err,
                          size_t errn)
{
    if (len < 16 || memcmp(buf, REC_MAGIC, 8)) return mc_errf(err, errn, "not packed records");
    uint64_t n = ck_le64(buf + 8);
    size_t at = 16;
    for (uint64_t i = 0; i < n; i++) {
        mc_dcp_record_t r;
        memset(&r, 0, sizeof r);
        if (unpack_one(buf, len, &at, &r, err, errn)) return -1;
        if (dcp_records_push(recs, &r)) {
            free(r.key);
            return mc_errf(err, errn, "out of memory");
        }
    }
    if (at != len) return mc_errf(err, errn, "%zu bytes after the records", len - at);
    return 0;
}
