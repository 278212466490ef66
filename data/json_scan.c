/* The fast line scanner of preprocess-data (json_scan.h).
 * jansson builds a whole tree per line at ~30 MB/s, slower than the tokenizer. The common line
 * (an object whose keys have no escapes, with a string or list of strings under each wanted
 * key) is validated and picked apart here in one pass without allocating: the full grammar of
 * Python's json.loads (RFC 8259 plus NaN, Infinity, -Infinity; control characters refused in
 * strings; strict UTF-8; surrogate escapes paired), recording where the wanted values are.
 * Anything else - invalid JSON, a missing key, another type, an escaped key, deep nesting - goes
 * to jansson, which decides and words the error. */
#include "data/json_scan.h"

#include <stdint.h>
#include <string.h>

enum { FJ_MAX_DEPTH = 512 };

typedef struct {
    const unsigned char *s, *end;
    int depth;
    bool esc; /* the last string had escapes */
} fj_t;

static inline void fj_ws(fj_t *j)
{
    while (j->s < j->end && (*j->s == ' ' || *j->s == '\t' || *j->s == '\n' || *j->s == '\r'))
        j->s++;
}

static inline int hexval(unsigned c)
{
    if (c >= '0' && c <= '9') return (int)(c - '0');
    if (c >= 'a' && c <= 'f') return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return (int)(c - 'A' + 10);
    return -1;
}

static bool hex4(const unsigned char *p, const unsigned char *end, unsigned *u)
{
    if (end - p < 4) return false;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0) return false;
        v = v << 4 | (unsigned)h;
    }
    *u = v;
    return true;
}

/* Length of the strict UTF-8 sequence at p (Unicode table 3-7), 0 if ill-formed. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if ((size_t)(end - p) < n) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

/* A string after its opening quote; leaves s after the closing quote. */
static bool fj_string(fj_t *j)
{
    const unsigned char *p = j->s, *end = j->end;
    bool esc = false;
    for (;;) {
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') p++;
        if (p >= end) return false;
        unsigned c = *p;
        if (c == '"') {
            j->s = p + 1;
            j->esc = esc;
            return true;
        }
        if (c < 0x20) return false;
        if (c == '\\') {
            esc = true;
            if (end - p < 2) return false;
            c = p[1];
            if (c == 'u') {
                unsigned u, u2;
                if (!hex4(p + 2, end, &u)) return false;
                p += 6;
                if (u >= 0xDC00 && u <= 0xDFFF) return false; /* lone low surrogate */
                if (u >= 0xD800 && u <= 0xDBFF) {
                    if (end - p < 2 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, end, &u2) ||
                        u2 < 0xDC00 || u2 > 0xDFFF)
                        return false; /* lone high surrogate */
                    p += 6;
                }
            } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
                       c == 'r' || c == 't') {
                p += 2;
            } else {
                return false;
            }
            continue;
        }
        size_t k = utf8_seq(p, end);
        if (!k) return false;
        p += k;
    }
}

static bool fj_literal(fj_t *j, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(j->end - j->s) < n || memcmp(j->s, lit, n) != 0) return false;
    j->s += n;
    return true;
}

static bool fj_number(fj_t *j)
{
    const unsigned char *p = j->s, *end = j->end;
    if (p < end && *p == '-') p++;
    if (p < end && *p == 'I') { /* Python's -Infinity */
        j->s = p;
        return fj_literal(j, "Infinity");
    }
    if (p >= end) return false;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9')
        while (p < end && *p >= '0' && *p <= '9') p++;
    else return false;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') return false;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return false;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    j->s = p;
    return true;
}

static bool fj_value(fj_t *j, const char *const *keys, const size_t *key_len, int nkeys,
                     mc_json_val_t *vals);

/* An object or list after its opening bracket. keys: record the top-level values. */
static bool fj_container(fj_t *j, bool object, const char *const *keys, const size_t *key_len,
                         int nkeys, mc_json_val_t *vals)
{
    if (++j->depth > FJ_MAX_DEPTH) return false;
    const unsigned char close = object ? '}' : ']';
    fj_ws(j);
    if (j->s < j->end && *j->s == close) {
        j->s++;
        j->depth--;
        return true;
    }
    for (;;) {
        int want = -1;
        if (object) {
            if (j->s >= j->end || *j->s != '"') return false;
            const unsigned char *k0 = ++j->s;
            if (!fj_string(j)) return false;
            size_t kn = (size_t)(j->s - 1 - k0);
            if (keys) {
                if (j->esc) return false; /* an escaped key might spell a wanted one: ask jansson */
                for (int k = 0; k < nkeys; k++)
                    if (kn == key_len[k] && memcmp(k0, keys[k], kn) == 0) want = k;
            }
            fj_ws(j);
            if (j->s >= j->end || *j->s != ':') return false;
            j->s++;
            fj_ws(j);
        }
        const unsigned char *v0 = j->s;
        if (!fj_value(j, NULL, NULL, 0, NULL)) return false;
        if (want >= 0) { /* duplicate keys: the last one wins, as in json.loads */
            mc_json_val_t *v = &vals[want];
            v->kind = *v0 == '"' ? 's' : *v0 == '[' ? '[' : 'o';
            v->p = (const char *)v0 + (v->kind == 's');
            v->n = (size_t)(j->s - v0) - (v->kind == 's' ? 2 : 0);
            v->esc = v->kind == 's' && j->esc;
        }
        fj_ws(j);
        if (j->s >= j->end) return false;
        if (*j->s == ',') {
            j->s++;
            fj_ws(j);
            continue;
        }
        if (*j->s != close) return false;
        j->s++;
        j->depth--;
        return true;
    }
}

static bool fj_value(fj_t *j, const char *const *keys, const size_t *key_len, int nkeys,
                     mc_json_val_t *vals)
{
    if (j->s >= j->end) return false;
    switch (*j->s) {
    case '{': j->s++; return fj_container(j, true, keys, key_len, nkeys, vals);
    case '[': j->s++; return fj_container(j, false, NULL, NULL, 0, NULL);
    case '"': j->s++; return fj_string(j);
    case 't': return fj_literal(j, "true");
    case 'f': return fj_literal(j, "false");
    case 'n': return fj_literal(j, "null");
    case 'N': return fj_literal(j, "NaN");
    case 'I': return fj_literal(j, "Infinity");
    default: return fj_number(j);
    }
}

bool mc_json_scan_object(const char *line, size_t n, const char *const *keys, const size_t *key_len,
                         int nkeys, mc_json_val_t *vals)
{
    fj_t j = {(const unsigned char *)line, (const unsigned char *)line + n, 0, false};
    memset(vals, 0, (size_t)nkeys * sizeof(*vals));
    fj_ws(&j);
    if (j.s >= j.end || *j.s != '{') return false;
    if (!fj_value(&j, keys, key_len, nkeys, vals)) return false;
    fj_ws(&j);
    return j.s == j.end;
}

static void put_utf8(unsigned char **o, unsigned u)
{
    unsigned char *q = *o;
    if (u < 0x80) *q++ = (unsigned char)u;
    else if (u < 0x800)
        *q++ = (unsigned char)(0xC0 | u >> 6), *q++ = (unsigned char)(0x80 | (u & 0x3F));
    else if (u < 0x10000)
        *q++ = (unsigned char)(0xE0 | u >> 12), *q++ = (unsigned char)(0x80 | (u >> 6 & 0x3F)),
        *q++ = (unsigned char)(0x80 | (u & 0x3F));
    else
        *q++ = (unsigned char)(0xF0 | u >> 18), *q++ = (unsigned char)(0x80 | (u >> 12 & 0x3F)),
        *q++ = (unsigned char)(0x80 | (u >> 6 & 0x3F)), *q++ = (unsigned char)(0x80 | (u & 0x3F));
    *o = q;
}

size_t mc_json_decode(const char *raw, size_t n, char *out)
{
    const unsigned char *p = (const unsigned char *)raw, *end = p + n;
    unsigned char *o = (unsigned char *)out;
    while (p < end) {
        const unsigned char *bs = memchr(p, '\\', (size_t)(end - p));
        size_t plain = (size_t)((bs ? bs : end) - p);
        memcpy(o, p, plain);
        o += plain;
        p += plain;
        if (!bs) break;
        unsigned c = p[1], u, u2;
        p += 2;
        switch (c) {
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u':
            hex4(p, end, &u);
            p += 4;
            if (u >= 0xD800 && u <= 0xDBFF) {
                hex4(p + 2, end, &u2);
                p += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + (u2 - 0xDC00);
            }
            put_utf8(&o, u);
            break;
        default: *o++ = (unsigned char)c; /* " \ / */
        }
    }
    return (size_t)(o - (unsigned char *)out);
}

int mc_json_line_scan(const char *line, size_t n, const char *key, int *kind, char *buf,
                      size_t *len)
{
    size_t kl = strlen(key);
    mc_json_val_t v;
    if (!mc_json_scan_object(line, n, &key, &kl, 1, &v)) return 0;
    *kind = v.kind;
    *len = 0;
    if (v.kind == 's') *len = v.esc ? mc_json_decode(v.p, v.n, buf) : (memcpy(buf, v.p, v.n), v.n);
    return 1;
}

int mc_json_list_next(mc_json_list_t *it, mc_json_val_t *str)
{
    fj_t j = {(const unsigned char *)it->s, (const unsigned char *)it->end, 0, false};
    fj_ws(&j);
    if (*j.s == ',') {
        j.s++;
        fj_ws(&j);
    }
    if (*j.s == ']') return 0;
    if (*j.s != '"') return -1;
    const unsigned char *s0 = ++j.s;
    fj_string(&j);
    str->kind = 's';
    str->p = (const char *)s0;
    str->n = (size_t)(j.s - 1 - s0);
    str->esc = j.esc;
    it->s = (const char *)j.s;
    return 1;
}
