/* torch.save's zip container (torchzip.h): a streaming writer laid out byte for byte as torch's
 * PyTorchStreamWriter (miniz) lays it out, and a validating reader. */
#include "torchfmt/torchzip.h"
#include "torchfmt/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_DESCRIPTOR 0x08074b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOCATOR64 0x07064b50u
#define LOCAL_SIZE 30
#define CENTRAL_SIZE 46
#define EOCD_SIZE 22
#define EOCD64_SIZE 56
#define LOCATOR64_SIZE 20
#define FLAGS 0x0808 /* sizes in a data descriptor; UTF-8 names */
#define ALIGNMENT 64 /* torch's kFieldAlignment */
#define U32_LIMIT 0xFFFFFFFFull

/* zlib's crc32 takes 32-bit lengths. */
static uint32_t crc_of(const void *data, uint64_t size)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    const Bytef *p = data;
    while (size) {
        uInt n = size > (1u << 30) ? (1u << 30) : (uInt)size;
        crc = crc32(crc, p, n);
        p += n;
        size -= n;
    }
    return (uint32_t)crc;
}

/* ---- writer ---------------------------------------------------------------------------------- */

typedef struct {
    char *name;
    uint64_t offset, size;
    uint32_t crc;
} record_t;

struct mc_zipw {
    FILE *f;
    char *archive;
    uint64_t pos;   /* bytes written so far */
    uint64_t limit; /* sizes and offsets >= limit take zip64 fields */
    record_t *rec;
    size_t n, cap;
};

mc_zipw_t *mc_zipw_open(FILE *f, const char *archive, bool force_zip64)
{
    mc_zipw_t *z = calloc(1, sizeof *z);
    if (!z || !(z->archive = strdup(archive))) {
        free(z);
        return NULL;
    }
    z->f = f;
    z->limit = force_zip64 ? 0 : U32_LIMIT;
    return z;
}

void mc_zipw_free(mc_zipw_t *z)
{
    if (!z) return;
    for (size_t i = 0; i < z->n; i++) free(z->rec[i].name);
    free(z->rec);
    free(z->archive);
    free(z);
}

static int write_all(mc_zipw_t *z, const void *p, uint64_t n, char *err, size_t errn)
{
    const uint8_t *b = p;
    while (n) {
        size_t k = n > (1u << 30) ? (1u << 30) : (size_t)n;
        if (fwrite(b, 1, k, z->f) != k)
            return mc_errf(err, errn, "write failed: %s", strerror(errno ? errno : EIO));
        b += k;
        n -= k;
        z->pos += k;
    }
    return 0;
}

/* A zip64 extra field with the given values (NULL: absent); returns its size. */
static size_t zip64_extra(uint8_t *out, const uint64_t *usize, const uint64_t *csize,
                          const uint64_t *offset)
{
    size_t n = 4;
    if (usize) ck_put64(out + n, *usize), n += 8;
    if (csize) ck_put64(out + n, *csize), n += 8;
    if (offset) ck_put64(out + n, *offset), n += 8;
    ck_put16(out, 0x0001);
    ck_put16(out + 2, (uint16_t)(n - 4));
    return n;
}

int mc_zipw_add(mc_zipw_t *z, const char *name, const void *data, uint64_t size, uint32_t *crc,
                char *err, size_t errn)
{
    size_t alen = strlen(z->archive), nlen = alen + 1 + strlen(name);
    if (nlen > 0xffff) return mc_errf(err, errn, "record name too long: %s", name);
    if (z->n == z->cap) {
        size_t cap = z->cap ? 2 * z->cap : 16;
        record_t *r = realloc(z->rec, cap * sizeof *r);
        if (!r) return mc_errf(err, errn, "out of memory");
        z->rec = r;
        z->cap = cap;
    }
    record_t *r = &z->rec[z->n];
    if (!(r->name = malloc(nlen + 1))) return mc_errf(err, errn, "out of memory");
    snprintf(r->name, nlen + 1, "%s/%s", z->archive, name);
    z->n++;
    r->offset = z->pos;
    r->size = size;
    r->crc = crc_of(data, size);
    if (crc) *crc = r->crc;

    /* Local header + name + [zip64: sizes when the size is big, offset when the offset is] +
     * "FB" padding so the data starts at a multiple of 64 (torch's getPadding). */
    bool big_size = size >= z->limit, big_offset = r->offset >= z->limit;
    uint8_t extra[4 + 24 + 4 + ALIGNMENT];
    size_t xlen = 0;
    if (big_size || big_offset)
        xlen = zip64_extra(extra, big_size ? &size : NULL, big_size ? &size : NULL,
                           big_offset ? &r->offset : NULL);
    uint64_t start = r->offset + LOCAL_SIZE + nlen + xlen + 4;
    size_t pad = (size_t)((ALIGNMENT - start % ALIGNMENT) % ALIGNMENT);
    extra[xlen] = 'F';
    extra[xlen + 1] = 'B';
    ck_put16(extra + xlen + 2, (uint16_t)pad);
    memset(extra + xlen + 4, 'Z', pad);
    xlen += 4 + pad;

    uint8_t h[LOCAL_SIZE] = {0};
    ck_put32(h, SIG_LOCAL);
    ck_put16(h + 6, FLAGS);
    ck_put16(h + 26, (uint16_t)nlen);
    ck_put16(h + 28, (uint16_t)xlen);
    if (write_all(z, h, LOCAL_SIZE, err, errn) || write_all(z, r->name, nlen, err, errn) ||
        write_all(z, extra, xlen, err, errn) || write_all(z, data, size, err, errn))
        return -1;

    /* Data descriptor: 64-bit sizes once the record has zip64 fields (as miniz). */
    uint8_t d[24];
    ck_put32(d, SIG_DESCRIPTOR);
    ck_put32(d + 4, r->crc);
    size_t dlen = 16;
    if (big_size || big_offset) {
        ck_put64(d + 8, size);
        ck_put64(d + 16, size);
        dlen = 24;
    } else {
        ck_put32(d + 8, (uint32_t)size);
        ck_put32(d + 12, (uint32_t)size);
    }
    return write_all(z, d, dlen, err, errn);
}

int mc_zipw_finish(mc_zipw_t *z, char *err, size_t errn)
{
    uint64_t cd_offset = z->pos, lim = z->limit;
    int rc = 0;
    for (size_t i = 0; i < z->n && !rc; i++) {
        record_t *r = &z->rec[i];
        bool big_size = r->size >= lim, big_offset = r->offset >= lim;
        uint8_t extra[28];
        size_t xlen = big_size || big_offset
                          ? zip64_extra(extra, big_size ? &r->size : NULL,
                                        big_size ? &r->size : NULL, big_offset ? &r->offset : NULL)
                          : 0;
        uint32_t size32 = big_size ? 0xFFFFFFFFu : (uint32_t)r->size;
        size_t nlen = strlen(r->name);
        uint8_t h[CENTRAL_SIZE] = {0};
        ck_put32(h, SIG_CENTRAL);
        ck_put16(h + 8, FLAGS);
        ck_put32(h + 16, r->crc);
        ck_put32(h + 20, size32);
        ck_put32(h + 24, size32);
        ck_put16(h + 28, (uint16_t)nlen);
        ck_put16(h + 30, (uint16_t)xlen);
        ck_put32(h + 42, big_offset ? 0xFFFFFFFFu : (uint32_t)r->offset);
        rc = write_all(z, h, CENTRAL_SIZE, err, errn) || write_all(z, r->name, nlen, err, errn) ||
             write_all(z, extra, xlen, err, errn);
    }
    uint64_t cd_size = z->pos - cd_offset, eocd64 = z->pos, n = z->n;
    uint8_t e64[EOCD64_SIZE] = {0}, loc[LOCATOR64_SIZE] = {0}, e[EOCD_SIZE] = {0};
    ck_put32(e64, SIG_EOCD64);
    ck_put64(e64 + 4, EOCD64_SIZE - 12);
    ck_put16(e64 + 12, 0x031e); /* made by: Unix, 3.0 (as miniz) */
    ck_put16(e64 + 14, 0x002d); /* needed: 4.5, zip64 */
    ck_put64(e64 + 24, n);
    ck_put64(e64 + 32, n);
    ck_put64(e64 + 40, cd_size);
    ck_put64(e64 + 48, cd_offset);
    ck_put32(loc, SIG_LOCATOR64);
    ck_put64(loc + 8, eocd64);
    ck_put32(loc + 16, 1);
    ck_put32(e, SIG_EOCD);
    ck_put16(e + 8, n >= 0xffff || !lim ? 0xffff : (uint16_t)n);
    ck_put16(e + 10, n >= 0xffff || !lim ? 0xffff : (uint16_t)n);
    ck_put32(e + 12, cd_size >= lim ? 0xFFFFFFFFu : (uint32_t)cd_size);
    ck_put32(e + 16, cd_offset >= lim ? 0xFFFFFFFFu : (uint32_t)cd_offset);
    if (!rc)
        rc = write_all(z, e64, sizeof e64, err, errn) || write_all(z, loc, sizeof loc, err, errn) ||
             write_all(z, e, sizeof e, err, errn);
    if (!rc && fflush(z->f)) rc = mc_errf(err, errn, "write failed: %s", strerror(errno));
    mc_zipw_free(z);
    return rc ? -1 : 0;
}

/* ---- reader ---------------------------------------------------------------------------------- */

void mc_zipr_close(mc_zipr_t *z)
{
    for (size_t i = 0; i < z->n; i++) free(z->entries[i].name);
    free(z->entries);
    free(z->prefix);
    free(z->index);
    memset(z, 0, sizeof *z);
}

static size_t name_slot(const char *s, size_t len, size_t cap)
{
    return (size_t)ck_hash(s, len) & (cap - 1);
}

static const mc_zipentry_t *find_full(const mc_zipr_t *z, const char *name, size_t len)
{
    if (!z->index_cap) return NULL;
    size_t mask = z->index_cap - 1;
    for (size_t h = name_slot(name, len, z->index_cap); z->index[h]; h = (h + 1) & mask) {
        const mc_zipentry_t *e = &z->entries[z->index[h] - 1];
        if (!strncmp(e->name, name, len) && !e->name[len]) return e;
    }
    return NULL;
}

const mc_zipentry_t *mc_zipr_find(const mc_zipr_t *z, const char *name)
{
    size_t plen = strlen(z->prefix), len = plen + 1 + strlen(name);
    char small[256], *full = len < sizeof small ? small : malloc(len + 1);
    if (!full) return NULL;
    memcpy(full, z->prefix, plen);
    full[plen] = '/';
    memcpy(full + plen + 1, name, len - plen); /* with its NUL */
    const mc_zipentry_t *e = find_full(z, full, len);
    if (full != small) free(full);
    return e;
}

/* The zip64 extra field's values for the 32-bit fields that hold 0xFFFFFFFF. */
static int read_zip64_extra(const uint8_t *x, size_t xlen, uint64_t *usize, uint64_t *csize,
                            uint64_t *offset, bool need_u, bool need_c, bool need_o)
{
    for (size_t i = 0; i + 4 <= xlen;) {
        uint16_t id = ck_le16(x + i), len = ck_le16(x + i + 2);
        if (i + 4 + len > xlen) return -1;
        if (id == 0x0001) {
            const uint8_t *p = x + i + 4, *end = p + len;
            if (need_u) {
                if (end - p < 8) return -1;
                *usize = ck_le64(p), p += 8;
            }
            if (need_c) {
                if (end - p < 8) return -1;
                *csize = ck_le64(p), p += 8;
            }
            if (need_o) {
                if (end - p < 8) return -1;
                *offset = ck_le64(p);
            }
            return 0;
        }
        i += 4 + (size_t)len;
    }
    return need_u || need_c || need_o ? -1 : 0;
}

/* Finds the end records: entry count, central directory size and offset. */
static int find_end(const uint8_t *b, uint64_t size, uint64_t *count, uint64_t *cd_size,
                    uint64_t *cd_offset, uint64_t *cd_end, char *err, size_t errn)
{
    if (size < EOCD_SIZE)
        return mc_errf(err, errn, "not a zip archive: %llu bytes, too short (truncated?)",
                       (unsigned long long)size);
    /* the end record, after which only its comment may follow */
    uint64_t lo = size > EOCD_SIZE + 0xffff ? size - EOCD_SIZE - 0xffff : 0, at = size - EOCD_SIZE;
    for (;; at--) {
        if (ck_le32(b + at) == SIG_EOCD && at + EOCD_SIZE + ck_le16(b + at + 20) <= size) break;
        if (at == lo)
            return mc_errf(err, errn,
                           "no end-of-central-directory record: not a zip archive, "
                           "or truncated");
    }
    const uint8_t *e = b + at;
    if (ck_le16(e + 4) || ck_le16(e + 6))
        return mc_errf(err, errn, "multi-disk zip archives are not supported");
    *count = ck_le16(e + 10);
    *cd_size = ck_le32(e + 12);
    *cd_offset = ck_le32(e + 16);
    *cd_end = at;
    if (at >= LOCATOR64_SIZE && ck_le32(b + at - LOCATOR64_SIZE) == SIG_LOCATOR64) {
        uint64_t z64 = ck_le64(b + at - LOCATOR64_SIZE + 8);
        if (z64 > at - LOCATOR64_SIZE || at - LOCATOR64_SIZE - z64 < EOCD64_SIZE ||
            ck_le32(b + z64) != SIG_EOCD64)
            return mc_errf(err, errn, "corrupt zip64 end-of-central-directory record");
        const uint8_t *e64 = b + z64;
        if (ck_le32(e64 + 16) || ck_le32(e64 + 20))
            return mc_errf(err, errn, "multi-disk zip archives are not supported");
        *count = ck_le64(e64 + 32);
        *cd_size = ck_le64(e64 + 40);
        *cd_offset = ck_le64(e64 + 48);
        *cd_end = z64;
    }
    if (*cd_offset > *cd_end || *cd_size > *cd_end - *cd_offset)
        return mc_errf(err, errn, "central directory outside the archive (truncated or corrupt)");
    if (*count > *cd_size / CENTRAL_SIZE)
        return mc_errf(err, errn, "central directory too small for %llu records",
                       (unsigned long long)*count);
    return 0;
}

static int parse_entry(mc_zipr_t *z, const uint8_t **pp, const uint8_t *cd_end_p,
                       uint64_t cd_offset, mc_zipentry_t *out, char *err, size_t errn)
{
    const uint8_t *b = z->base, *h = *pp;
    char shown[CK_SHOWN_MAX + 4];
    if (cd_end_p - h < CENTRAL_SIZE || ck_le32(h) != SIG_CENTRAL)
        return mc_errf(err, errn, "corrupt central directory");
    uint16_t flags = ck_le16(h + 8), method = ck_le16(h + 10);
    size_t nlen = ck_le16(h + 28), xlen = ck_le16(h + 30), clen = ck_le16(h + 32);
    if ((size_t)(cd_end_p - h) - CENTRAL_SIZE < nlen + xlen + clen)
        return mc_errf(err, errn, "corrupt central directory");
    const char *name = (const char *)h + CENTRAL_SIZE;
    ck_shown(name, nlen, shown);
    if (memchr(name, 0, nlen) || nlen == 0)
        return mc_errf(err, errn, "invalid record name '%s'", shown);
    uint64_t csize = ck_le32(h + 20), usize = ck_le32(h + 24), loc = ck_le32(h + 42);
    if (read_zip64_extra(h + CENTRAL_SIZE + nlen, xlen, &usize, &csize, &loc, usize == U32_LIMIT,
                         csize == U32_LIMIT, loc == U32_LIMIT))
        return mc_errf(err, errn, "%s: corrupt zip64 extra field", shown);
    if (flags & 1) return mc_errf(err, errn, "%s: encrypted records are not supported", shown);
    if (method != 0 || csize != usize)
        return mc_errf(err, errn, "%s: compressed records (method %u) are not supported", shown,
                       method);
    /* the local header, then the data, all before the central directory */
    if (loc > cd_offset || cd_offset - loc < LOCAL_SIZE || ck_le32(b + loc) != SIG_LOCAL)
        return mc_errf(err, errn, "%s: local header missing or corrupt", shown);
    uint64_t lnlen = ck_le16(b + loc + 26), lxlen = ck_le16(b + loc + 28);
    uint64_t data = loc + LOCAL_SIZE + lnlen + lxlen;
    if (data > cd_offset || lnlen != nlen || memcmp(b + loc + LOCAL_SIZE, name, nlen))
        return mc_errf(err, errn, "%s: local header does not match the central directory", shown);
    if (usize > cd_offset - data)
        return mc_errf(err, errn, "%s: data runs past its space in the archive (truncated?)",
                       shown);
    if (!(out->name = strndup(name, nlen))) return mc_errf(err, errn, "out of memory");
    out->offset = data;
    out->size = usize;
    out->crc = ck_le32(h + 16);
    *pp = h + CENTRAL_SIZE + nlen + xlen + clen;
    return 0;
}

int mc_zipr_open(mc_zipr_t *z, const void *base, uint64_t size, char *err, size_t errn)
{
    memset(z, 0, sizeof *z);
    z->base = base;
    z->size = size;
    uint64_t count = 0, cd_size = 0, cd_offset = 0, cd_end = 0;
    if (find_end(base, size, &count, &cd_size, &cd_offset, &cd_end, err, errn)) return -1;
    if (count == 0) return mc_errf(err, errn, "empty zip archive");
    if (count >= UINT32_MAX / 4) return mc_errf(err, errn, "too many records");
    if (!(z->entries = calloc((size_t)count, sizeof *z->entries))) goto oom;
    size_t cap = 16;
    while (cap < 2 * count) cap *= 2;
    if (!(z->index = calloc(cap, sizeof *z->index))) goto oom;
    z->index_cap = cap;
    const uint8_t *p = z->base + cd_offset, *end = p + cd_size;
    for (uint64_t i = 0; i < count; i++) {
        mc_zipentry_t *e = &z->entries[i];
        if (parse_entry(z, &p, end, cd_offset, e, err, errn)) goto fail;
        z->n++;
        size_t len = strlen(e->name);
        if (find_full(z, e->name, len)) {
            char shown[CK_SHOWN_MAX + 4];
            mc_errf(err, errn, "duplicate record %s", ck_shown(e->name, len, shown));
            goto fail;
        }
        size_t h = name_slot(e->name, len, cap);
        while (z->index[h]) h = (h + 1) & (cap - 1);
        z->index[h] = (uint32_t)(i + 1);
    }
    /* torch takes the folder from the first record and looks every record up under it */
    const char *slash = strchr(z->entries[0].name, '/');
    if (!slash) {
        char shown[CK_SHOWN_MAX + 4];
        mc_errf(err, errn, "record %s is not in a folder (not a torch.save archive)",
                ck_shown(z->entries[0].name, strlen(z->entries[0].name), shown));
        goto fail;
    }
    if (!(z->prefix = strndup(z->entries[0].name, (size_t)(slash - z->entries[0].name)))) goto oom;
    return 0;
oom:
    mc_errf(err, errn, "out of memory");
fail:
    mc_zipr_close(z);
    return -1;
}

int mc_zipr_check_crc(const mc_zipr_t *z, const mc_zipentry_t *e, char *err, size_t errn)
{
    if (crc_of(z->base + e->offset, e->size) != e->crc) {
        char shown[CK_SHOWN_MAX + 4];
        return mc_errf(err, errn, "CRC mismatch in %s", ck_shown(e->name, strlen(e->name), shown));
    }
    return 0;
}
