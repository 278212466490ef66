/* Hand-parsed fields of a SentencePiece ModelProto; see data/spm_proto.h. Protobuf wire format:
 * each field is a varint key (field << 3 | wire type) then a varint (type 0), 8 bytes (1), a
 * varint length and that many bytes (2), or 4 bytes (5). */
#include "data/spm_proto.h"

#include <stdint.h>

typedef struct {
    const unsigned char *p, *end;
} rd_t;

static int varint(rd_t *r, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return -1;
        unsigned char b = *r->p++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return 0;
    }
    return -1;
}

/* Reads one field: its number, wire type, varint value (type 0) or payload (type 2). */
static int field(rd_t *r, uint32_t *num, uint64_t *val, rd_t *sub)
{
    uint64_t key, len;
    if (varint(r, &key) != 0) return -1;
    *num = (uint32_t)(key >> 3);
    switch (key & 7) {
    case 0: return varint(r, val);
    case 1:
    case 5: len = (key & 7) == 1 ? 8 : 4; break;
    case 2:
        if (varint(r, &len) != 0) return -1;
        break;
    default: return -1;
    }
    if (len > (uint64_t)(r->end - r->p)) return -1;
    *sub = (rd_t){r->p, r->p + len};
    r->p += len;
    return 1; /* not a varint */
}

static int trainer(rd_t r, mc_spm_proto_flags_t *f)
{
    while (r.p < r.end) {
        uint32_t num;
        uint64_t v = 0;
        rd_t sub;
        int k = field(&r, &num, &v, &sub);
        if (k < 0) return -1;
        if (k != 0) continue;
        if (num == 3) f->model_type = (int)v;
        if (num == 22) f->split_by_whitespace = v != 0;
        if (num == 24) f->treat_whitespace_as_suffix = v != 0;
        if (num == 35) f->byte_fallback = v != 0;
    }
    return 0;
}

static int normalizer(rd_t r, mc_spm_proto_flags_t *f)
{
    while (r.p < r.end) {
        uint32_t num;
        uint64_t v = 0;
        rd_t sub;
        int k = field(&r, &num, &v, &sub);
        if (k < 0) return -1;
        if (k != 0) continue;
        if (num == 3) f->add_dummy_prefix = v != 0;
        if (num == 4) f->remove_extra_whitespaces = v != 0;
        if (num == 5) f->escape_whitespaces = v != 0;
    }
    return 0;
}

int mc_spm_proto_flags(const unsigned char *buf, size_t n, mc_spm_proto_flags_t *f)
{
    const mc_spm_proto_flags_t dflt = {1, true, false, false, true, true, true};
    *f = dflt;
    rd_t r = {buf, buf + n};
    while (r.p < r.end) {
        uint32_t num;
        uint64_t v;
        rd_t sub;
        int k = field(&r, &num, &v, &sub);
        if (k < 0 || (k == 1 && num == 2 && trainer(sub, f) != 0) ||
            (k == 1 && num == 3 && normalizer(sub, f) != 0)) {
            *f = dflt;
            return -1;
        }
    }
    return 0;
}
