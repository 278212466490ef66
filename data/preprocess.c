/* `megatron-c preprocess-data`: reader thread -> worker threads -> in-order writer (see
 * preprocess.h for what it does and where it differs from Megatron's script). */
#include "data/preprocess.h"

#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "base/clock.h"
#include "base/error.h"
#include "data/indexed.h"
#include "data/tokenizer.h"

enum {
    CHUNK_BYTES = 64 << 10, /* a chunk is closed once it holds this much text ... */
    CHUNK_LINES = 4096,     /* ... or this many lines */
    READ_BYTES = 1 << 20,   /* gzread block */
    ERR_LEN = 1024,
};

/* ---- Python's float repr ---- */

void mc_py_float_repr(double v, char *buf, size_t n)
{
    if (isnan(v)) { snprintf(buf, n, "nan"); return; }
    if (isinf(v)) { snprintf(buf, n, v < 0 ? "-inf" : "inf"); return; }
    if (v == 0) { snprintf(buf, n, signbit(v) ? "-0.0" : "0.0"); return; }
    /* The shortest %e that reads back as v: Python's repr digits. */
    char e[40];
    for (int p = 0; p < 17; p++) {
        snprintf(e, sizeof(e), "%.*e", p, v);
        if (strtod(e, NULL) == v) break;
    }
    const char *s = e;
    bool neg = *s == '-';
    if (neg) s++;
    char digits[24];
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.') digits[nd++] = *s;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    int exp = atoi(s + 1);
    char out[64];
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp >= 0) {
            for (int i = 0; i <= exp; i++) out[o++] = i < nd ? digits[i] : '0';
            out[o++] = '.';
            if (nd > exp + 1)
                for (int i = exp + 1; i < nd; i++) out[o++] = digits[i];
            else
                out[o++] = '0';
        } else {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = 0; i < -exp - 1; i++) out[o++] = '0';
            for (int i = 0; i < nd; i++) out[o++] = digits[i];
        }
        out[o] = '\0';
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (int i = 1; i < nd; i++) out[o++] = digits[i];
        }
        snprintf(out + o, sizeof(out) - o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    snprintf(buf, n, "%s", out);
}

/* ---- chunks ---- */

enum { SLOT_FREE, SLOT_FILLED, SLOT_DONE };

typedef struct {
    int state;
    int64_t seq;           /* chunk number in input order */
    /* input, owned by the reader while filling */
    char *text;            /* the lines back to back, without their '\n' */
    size_t text_len, text_cap;
    size_t *line_off;      /* [n_lines + 1] */
    int n_lines, lines_cap;
    int file;              /* index into the input list */
    int64_t first_line;    /* 1-based line number (in that file) of line 0 */
    int64_t first_global;  /* 0-based line number over all inputs of line 0 */
    /* output, owned by a worker while tokenizing */
    mc_ids_t *tokens;      /* [keys] every document's tokens, back to back */
    mc_ids_t *lens;        /* [keys] sequence lengths */
    int32_t *nseq;         /* [keys * lines_cap] sequences per document and key */
    unsigned char *bad;    /* [lines_cap] the line is malformed */
    int first_bad;         /* first malformed line, -1 if none */
    char bad_msg[ERR_LEN]; /* why, for first_bad */
} chunk_t;

typedef struct {
    /* configuration */
    const mc_preprocess_args_t *a;
    const mc_tokenizer_t *tok;
    int32_t eod;
    char **files;
    int n_files;
    int keys;
    size_t *key_len;       /* strlen of each --json-keys key */
    /* ring */
    chunk_t *slots;
    int n_slots;
    pthread_mutex_t mu;
    pthread_cond_t cv_free, cv_work, cv_done;
    int64_t produced;      /* chunks handed to the workers so far */
    int64_t next_work;     /* next chunk a worker takes */
    bool eof;              /* the reader is done (produced is final) */
    bool stop;             /* abort or --max-documents reached: everybody winds down */
    bool failed;
    char err[ERR_LEN];
} pipe_t;

static void pipe_fail(pipe_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pipe_fail(pipe_t *p, const char *fmt, ...)
{
    pthread_mutex_lock(&p->mu);
    if (!p->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err, sizeof(p->err), fmt, ap);
        va_end(ap);
        p->failed = true;
    }
    p->stop = true;
    pthread_cond_broadcast(&p->cv_free);
    pthread_cond_broadcast(&p->cv_work);
    pthread_cond_broadcast(&p->cv_done);
    pthread_mutex_unlock(&p->mu);
}

static void pipe_stop(pipe_t *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv_free);
    pthread_cond_broadcast(&p->cv_work);
    pthread_cond_broadcast(&p->cv_done);
    pthread_mutex_unlock(&p->mu);
}

static bool grow(void **ptr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*ptr, c * elem);
    if (!q) return false;
    *ptr = q;
    *cap = c;
    return true;
}

static void chunk_free(chunk_t *c, int keys)
{
    free(c->text);
    free(c->line_off);
    if (c->tokens)
        for (int k = 0; k < keys; k++) mc_ids_free(&c->tokens[k]);
    if (c->lens)
        for (int k = 0; k < keys; k++) mc_ids_free(&c->lens[k]);
    free(c->tokens);
    free(c->lens);
    free(c->nseq);
    free(c->bad);
}

/* Room for one more line in the per-line arrays (reader side). */
static bool chunk_reserve_line(chunk_t *c, int keys)
{
    if (c->n_lines + 1 < c->lines_cap) return true;
    int cap = c->lines_cap ? c->lines_cap * 2 : 256;
    size_t *off = realloc(c->line_off, (size_t)(cap + 1) * sizeof(*off));
    if (!off) return false;
    c->line_off = off;
    int32_t *nseq = realloc(c->nseq, (size_t)cap * (size_t)keys * sizeof(*nseq));
    if (!nseq) return false;
    c->nseq = nseq;
    unsigned char *bad = realloc(c->bad, (size_t)cap);
    if (!bad) return false;
    c->bad = bad;
    c->lines_cap = cap;
    return true;
}

/* ---- reader ---- */

typedef struct {
    pipe_t *p;
    char *rbuf;
} reader_t;

/* Waits for the next free slot; NULL when the pipeline is stopping. */
static chunk_t *acquire_slot(pipe_t *p, int file, int64_t first_line, int64_t first_global)
{
    pthread_mutex_lock(&p->mu);
    chunk_t *c = &p->slots[p->produced % p->n_slots];
    while (!p->stop && c->state != SLOT_FREE) pthread_cond_wait(&p->cv_free, &p->mu);
    bool stop = p->stop;
    pthread_mutex_unlock(&p->mu);
    if (stop) return NULL;
    c->text_len = 0;
    c->n_lines = 0;
    if (!chunk_reserve_line(c, p->keys)) {
        pipe_fail(p, "out of memory reading the input");
        return NULL;
    }
    c->line_off[0] = 0;
    c->file = file;
    c->first_line = first_line;
    c->first_global = first_global;
    return c;
}

static void submit_slot(pipe_t *p, chunk_t *c)
{
    pthread_mutex_lock(&p->mu);
    c->seq = p->produced++;
    c->state = SLOT_FILLED;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
}

/* zlib's message for the last error on gz, without the "path: " it starts with. */
static const char *gz_message(gzFile gz, const char *path)
{
    int errnum;
    const char *msg = gzerror(gz, &errnum);
    if (errnum == Z_ERRNO) return strerror(errno);
    size_t n = strlen(path);
    if (strncmp(msg, path, n) == 0 && strncmp(msg + n, ": ", 2) == 0) msg += n + 2;
    return msg;
}

/* Reads one file into chunks. Returns the number of lines, or -1 (pipeline stopping). */
static int64_t read_file(reader_t *r, int file, int64_t global)
{
    pipe_t *p = r->p;
    const char *path = p->files[file];
    gzFile gz = gzopen(path, "rb");
    if (!gz) {
        pipe_fail(p, "cannot open --input %s: %s", path, errno ? strerror(errno) : "out of memory");
        return -1;
    }
    gzbuffer(gz, READ_BYTES);
    printf("Opening %s\n", path);
    fflush(stdout);

    int64_t line = 0;   /* lines completed in this file */
    chunk_t *c = NULL;
    bool partial = false; /* the chunk's last line has no '\n' yet */
    int64_t result = -1;
    for (;;) {
        int n = gzread(gz, r->rbuf, READ_BYTES);
        if (n <= 0) {
            int errnum;
            gzerror(gz, &errnum);
            if (n < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) {
                pipe_fail(p, "reading --input %s: %s", path, gz_message(gz, path));
                goto out;
            }
            break;
        }
        pthread_mutex_lock(&p->mu);
        bool stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop) goto out;
        const char *b = r->rbuf, *end = r->rbuf + n;
        while (b < end) {
            if (!c) {
                c = acquire_slot(p, file, line + 1, global + line);
                if (!c) goto out;
            }
            const char *nl = memchr(b, '\n', (size_t)(end - b));
            size_t len = (size_t)((nl ? nl : end) - b);
            if (!grow((void **)&c->text, &c->text_cap, c->text_len + len, 1)) {
                pipe_fail(p, "out of memory reading --input %s", path);
                goto out;
            }
            memcpy(c->text + c->text_len, b, len);
            c->text_len += len;
            b += len;
            if (!nl) {
                partial = true;
                break;
            }
            b++; /* the '\n' */
            partial = false;
            if (!chunk_reserve_line(c, p->keys)) {
                pipe_fail(p, "out of memory reading --input %s", path);
                goto out;
            }
            c->line_off[++c->n_lines] = c->text_len;
            line++;
            if (c->text_len >= CHUNK_BYTES || c->n_lines >= CHUNK_LINES) {
                submit_slot(p, c);
                c = NULL;
            }
        }
    }
    if (partial) { /* a last line without '\n' is a line too */
        if (!chunk_reserve_line(c, p->keys)) {
            pipe_fail(p, "out of memory reading --input %s", path);
            goto out;
        }
        c->line_off[++c->n_lines] = c->text_len;
        line++;
    }
    if (c && c->n_lines > 0) submit_slot(p, c);
    c = NULL;
    result = line;
out:
    if (c) { /* not submitted: give the slot back untouched (state is still FREE) */
        c->n_lines = 0;
    }
    gzclose(gz);
    return result;
}

static void *reader_main(void *arg)
{
    reader_t *r = arg;
    pipe_t *p = r->p;
    int64_t global = 0;
    for (int f = 0; f < p->n_files; f++) {
        int64_t n = read_file(r, f, global);
        if (n < 0) break;
        global += n;
    }
    pthread_mutex_lock(&p->mu);
    p->eof = true;
    pthread_cond_broadcast(&p->cv_work);
    pthread_cond_broadcast(&p->cv_done);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* ---- the fast line scanner ----
 * jansson builds a whole tree per line at ~30 MB/s, slower than the tokenizer. The common line
 * (an object whose keys have no escapes, with a string or list of strings under each wanted
 * key) is validated and picked apart here in one pass without allocating: the full grammar of
 * Python's json.loads (RFC 8259 plus NaN, Infinity, -Infinity; control characters refused in
 * strings; strict UTF-8; surrogate escapes paired), recording where the wanted values are.
 * Anything else - invalid JSON, a missing key, another type, an escaped key, deep nesting - goes
 * to jansson, which decides and words the error. */

enum { FJ_MAX_DEPTH = 512 };

typedef struct {
    const unsigned char *s, *end;
    int depth;
    bool esc;                /* the last string had escapes */
} fj_t;

typedef struct {
    const char *p;           /* a string: its raw bytes between the quotes; a list: from '[' */
    size_t n;
    int kind;                /* 0 absent, 's' string, '[' list, 'o' other */
    bool esc;
} fj_val_t;

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
    } else
        return 0;
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
    else
        return false;
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
                     fj_val_t *vals);

/* An object or list after its opening bracket. keys: record the top-level values. */
static bool fj_container(fj_t *j, bool object, const char *const *keys, const size_t *key_len,
                         int nkeys, fj_val_t *vals)
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
            fj_val_t *v = &vals[want];
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
                     fj_val_t *vals)
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

/* Whether line is one JSON object as json.loads reads it; fills vals[k] for each key. */
static bool fj_scan(const char *line, size_t n, const char *const *keys, const size_t *key_len,
                    int nkeys, fj_val_t *vals)
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
    else if (u < 0x800) *q++ = (unsigned char)(0xC0 | u >> 6), *q++ = (unsigned char)(0x80 | (u & 0x3F));
    else if (u < 0x10000)
        *q++ = (unsigned char)(0xE0 | u >> 12), *q++ = (unsigned char)(0x80 | (u >> 6 & 0x3F)),
        *q++ = (unsigned char)(0x80 | (u & 0x3F));
    else
        *q++ = (unsigned char)(0xF0 | u >> 18), *q++ = (unsigned char)(0x80 | (u >> 12 & 0x3F)),
        *q++ = (unsigned char)(0x80 | (u >> 6 & 0x3F)), *q++ = (unsigned char)(0x80 | (u & 0x3F));
    *o = q;
}

/* The bytes of a validated string's raw text p[0..n) with escapes resolved, into out (room for
 * n bytes: an escape never decodes to more bytes than it is written with). Returns the length. */
static size_t fj_decode(const char *raw, size_t n, char *out)
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
    fj_val_t v;
    if (!fj_scan(line, n, &key, &kl, 1, &v)) return 0;
    *kind = v.kind;
    *len = 0;
    if (v.kind == 's') *len = v.esc ? fj_decode(v.p, v.n, buf) : (memcpy(buf, v.p, v.n), v.n);
    return 1;
}

/* ---- workers ---- */

typedef struct {
    char *buf;               /* decoded strings with escapes */
    size_t cap;
    fj_val_t *vals;          /* [keys] */
} scratch_t;

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* Tokenizes text[0..len) onto tokens[k]; a non-empty result becomes one sequence. Returns the
 * tokens added, or -1 with msg set. */
static int64_t encode_text(pipe_t *p, chunk_t *c, int k, const char *text, size_t len, char *msg,
                           size_t n)
{
    mc_ids_t *t = &c->tokens[k];
    size_t before = t->n;
    char err[512] = "";
    if (mc_tokenizer_encode(p->tok, text, len, t, err, sizeof(err)) != 0) {
        snprintf(msg, n, "tokenizer: %s", err[0] ? err : "failed");
        return -1;
    }
    size_t added = t->n - before;
    if (added > (size_t)INT32_MAX) {
        snprintf(msg, n, "a text of more than 2^31-1 tokens");
        return -1;
    }
    if (added > 0 && mc_ids_push(&c->lens[k], (int32_t)added) != 0) {
        snprintf(msg, n, "out of memory");
        return -1;
    }
    return (int64_t)added;
}

/* Ends key k of document i: eod when non-empty and asked for, the sequence count. */
static int end_key(pipe_t *p, chunk_t *c, int k, int i, int64_t total, size_t lens_before,
                   char *msg, size_t n)
{
    if (total > 0 && p->a->append_eod) {
        if (mc_ids_push(&c->tokens[k], p->eod) != 0) {
            snprintf(msg, n, "out of memory");
            return -1;
        }
        c->lens[k].v[c->lens[k].n - 1]++;
    }
    c->nseq[(size_t)k * (size_t)c->lines_cap + (size_t)i] = (int32_t)(c->lens[k].n - lens_before);
    return 0;
}

/* A string value found by the scanner, as bytes (into the scratch buffer if it has escapes). */
static bool fast_text(scratch_t *sc, const char *raw, size_t n, bool esc, const char **text,
                      size_t *len)
{
    if (!esc) {
        *text = raw;
        *len = n;
        return true;
    }
    if (!grow((void **)&sc->buf, &sc->cap, n ? n : 1, 1)) return false;
    *len = fj_decode(raw, n, sc->buf);
    *text = sc->buf;
    return true;
}

/* The fast path: 1 done, -1 malformed (msg set), 0 not for the fast path (caller undoes any
 * output and asks jansson). */
static int encode_line_fast(pipe_t *p, chunk_t *c, int i, scratch_t *sc, char *msg, size_t n)
{
    const char *line = c->text + c->line_off[i];
    size_t len = c->line_off[i + 1] - c->line_off[i];
    if (!fj_scan(line, len, p->a->json_keys, p->key_len, p->keys, sc->vals)) return 0;
    for (int k = 0; k < p->keys; k++)
        if (sc->vals[k].kind != 's' && sc->vals[k].kind != '[') return 0;
    for (int k = 0; k < p->keys; k++) {
        const fj_val_t *v = &sc->vals[k];
        size_t lens_before = c->lens[k].n;
        int64_t total = 0;
        const char *text;
        size_t tlen;
        if (v->kind == 's') {
            if (!fast_text(sc, v->p, v->n, v->esc, &text, &tlen)) return 0;
            if ((total = encode_text(p, c, k, text, tlen, msg, n)) < 0) return -1;
        } else { /* a validated list: walk its elements */
            fj_t j = {(const unsigned char *)v->p + 1, (const unsigned char *)v->p + v->n, 0, false};
            for (;;) {
                fj_ws(&j);
                if (*j.s == ']') break;
                if (*j.s != '"') return 0; /* not a string: jansson words the error */
                const unsigned char *s0 = ++j.s;
                fj_string(&j);
                if (!fast_text(sc, (const char *)s0, (size_t)(j.s - 1 - s0), j.esc, &text, &tlen))
                    return 0;
                int64_t added = encode_text(p, c, k, text, tlen, msg, n);
                if (added < 0) return -1;
                total += added;
                fj_ws(&j);
                if (*j.s == ',') j.s++;
            }
        }
        if (end_key(p, c, k, i, total, lens_before, msg, n) != 0) return -1;
    }
    return 1;
}

static bool is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return false;
    return true;
}

/* The jansson path: 0, or -1 with msg (the line is malformed). */
static int encode_line_jansson(pipe_t *p, chunk_t *c, int i, char *msg, size_t n)
{
    const char *text = c->text + c->line_off[i];
    size_t len = c->line_off[i + 1] - c->line_off[i];
    if (is_blank(text, len)) {
        snprintf(msg, n, "blank line (every line must be one JSON object)");
        return -1;
    }
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &je);
    if (!root) {
        snprintf(msg, n, "malformed JSON: %s (column %d)", je.text, je.column);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(root)) {
        snprintf(msg, n, "not a JSON object (it is %s)", json_type_name(root));
        goto out;
    }
    for (int k = 0; k < p->keys; k++) {
        const char *key = p->a->json_keys[k];
        json_t *v = json_object_get(root, key);
        size_t lens_before = c->lens[k].n;
        int64_t total = 0;
        if (!v) {
            snprintf(msg, n, "no key \"%.100s\"", key);
            goto out;
        }
        if (json_is_string(v)) {
            total = encode_text(p, c, k, json_string_value(v), json_string_length(v), msg, n);
            if (total < 0) goto out;
        } else if (json_is_array(v)) { /* pre-split sentences, as Encoder.encode takes them */
            for (size_t j = 0; j < json_array_size(v); j++) {
                json_t *s = json_array_get(v, j);
                if (!json_is_string(s)) {
                    snprintf(msg, n, "\"%.100s\"[%zu] is %s, not a string", key, j,
                             json_type_name(s));
                    goto out;
                }
                int64_t added =
                    encode_text(p, c, k, json_string_value(s), json_string_length(s), msg, n);
                if (added < 0) goto out;
                total += added;
            }
        } else {
            snprintf(msg, n, "\"%.100s\" is %s, not a string", key, json_type_name(v));
            goto out;
        }
        if (end_key(p, c, k, i, total, lens_before, msg, n) != 0) goto out;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

static void encode_chunk(pipe_t *p, chunk_t *c, scratch_t *sc)
{
    for (int k = 0; k < p->keys; k++) c->tokens[k].n = c->lens[k].n = 0;
    c->first_bad = -1;
    /* Where each key's output stood before the line, to undo a malformed line's part. */
    size_t *tm = (size_t *)(sc->vals + p->keys), *lm = tm + p->keys;
    char msg[ERR_LEN / 2];
    for (int i = 0; i < c->n_lines; i++) {
        for (int k = 0; k < p->keys; k++) tm[k] = c->tokens[k].n, lm[k] = c->lens[k].n;
        c->bad[i] = 0;
        int rc = encode_line_fast(p, c, i, sc, msg, sizeof(msg));
        if (rc == 0) {
            for (int k = 0; k < p->keys; k++) c->tokens[k].n = tm[k], c->lens[k].n = lm[k];
            rc = encode_line_jansson(p, c, i, msg, sizeof(msg)) == 0 ? 1 : -1;
        }
        if (rc > 0) continue;
        for (int k = 0; k < p->keys; k++) {
            c->tokens[k].n = tm[k];
            c->lens[k].n = lm[k];
            c->nseq[(size_t)k * (size_t)c->lines_cap + (size_t)i] = 0;
        }
        c->bad[i] = 1;
        if (c->first_bad < 0) {
            c->first_bad = i;
            snprintf(c->bad_msg, sizeof(c->bad_msg), "%.300s, line %lld: %s", p->files[c->file],
                     (long long)(c->first_line + i), msg);
        }
    }
}

static void *worker_main(void *arg)
{
    pipe_t *p = arg;
    /* vals[keys], then two size_t marks per key (encode_chunk) */
    scratch_t sc = {NULL, 0, malloc((size_t)p->keys * (sizeof(fj_val_t) + 2 * sizeof(size_t)))};
    if (!sc.vals) {
        pipe_fail(p, "out of memory");
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->next_work >= p->produced && !p->eof)
            pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop || p->next_work >= p->produced) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        chunk_t *c = &p->slots[p->next_work++ % p->n_slots];
        pthread_mutex_unlock(&p->mu);

        encode_chunk(p, c, &sc);

        pthread_mutex_lock(&p->mu);
        c->state = SLOT_DONE;
        pthread_cond_broadcast(&p->cv_done);
        pthread_mutex_unlock(&p->mu);
    }
    free(sc.buf);
    free(sc.vals);
    return NULL;
}

/* ---- output files ---- */

typedef struct {
    char *prefix;
    mc_indexed_writer_t *w;  /* open; NULL once finished (or never opened) */
    bool finished;           /* the files exist at prefix.bin/.idx */
} out_t;

static char *fmt_alloc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *fmt_alloc(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = malloc((size_t)n + 1);
    if (!s) mc_fatal("out of memory");
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static void remove_outputs(out_t *o)
{
    if (o->w) mc_indexed_writer_abort(o->w);
    o->w = NULL;
    if (o->finished) {
        char *bin = fmt_alloc("%s.bin", o->prefix), *idx = fmt_alloc("%s.idx", o->prefix);
        unlink(bin);
        unlink(idx);
        free(bin);
        free(idx);
        o->finished = false;
    }
}

/* ---- inputs ---- */

static void free_files(char **files, int n)
{
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
}

static void check_input(const char *path, char **files, int n)
{
    char msg[ERR_LEN] = "";
    struct stat st;
    if (stat(path, &st) != 0 || access(path, R_OK) != 0)
        snprintf(msg, sizeof(msg), "cannot open --input %s: %s", path, strerror(errno));
    else if (S_ISDIR(st.st_mode))
        snprintf(msg, sizeof(msg), "--input %s is a directory (expected a JSON lines file)", path);
    if (!msg[0]) return;
    free_files(files, n);
    mc_user_error("%s", msg);
}

/* The script's input list: the path itself with one partition, the sorted glob otherwise. */
static char **input_files(const mc_preprocess_args_t *a, int *n_out)
{
    char **files;
    int n = 0;
    if (a->partitions == 1) {
        files = malloc(sizeof(*files));
        if (!files || !(files[0] = strdup(a->input))) mc_fatal("out of memory");
        n = 1;
    } else {
        glob_t g;
        int rc = glob(a->input, 0, NULL, &g);
        if (rc == GLOB_NOMATCH)
            mc_user_error("--input %s matched no files (with --partitions > 1 it is a glob)",
                          a->input);
        if (rc != 0) mc_user_error("--input %s: glob failed", a->input);
        files = malloc(g.gl_pathc * sizeof(*files));
        if (!files) mc_fatal("out of memory");
        for (size_t i = 0; i < g.gl_pathc; i++)
            if (!(files[n++] = strdup(g.gl_pathv[i]))) mc_fatal("out of memory");
        globfree(&g);
    }
    for (int i = 0; i < n; i++) check_input(files[i], files, n);
    *n_out = n;
    return files;
}

/* Lines in a file as Python counts them (a last line without '\n' counts). */
static int64_t count_lines(const char *path, char *buf)
{
    gzFile gz = gzopen(path, "rb");
    if (!gz) mc_user_error("cannot open --input %s: %s", path, strerror(errno));
    gzbuffer(gz, READ_BYTES);
    int64_t lines = 0;
    char last = '\n';
    int n;
    while ((n = gzread(gz, buf, READ_BYTES)) > 0) {
        for (const char *q = buf, *end = buf + n; (q = memchr(q, '\n', (size_t)(end - q))); q++)
            lines++;
        last = buf[n - 1];
    }
    int errnum;
    gzerror(gz, &errnum);
    if (n < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) {
        char m[256];
        snprintf(m, sizeof(m), "%s", gz_message(gz, path));
        gzclose(gz);
        mc_user_error("reading --input %s: %s", path, m);
    }
    gzclose(gz);
    return lines + (last != '\n');
}

/* ---- the run ---- */

typedef struct {
    int64_t docs, tokens, skipped, bytes;
    char first_skipped[ERR_LEN];
} stats_t;

static void progress(const mc_preprocess_args_t *a, int64_t docs, int64_t bytes, double t0)
{
    if (docs % a->log_interval != 0) return;
    double elapsed = mc_now_s() - t0;
    if (elapsed <= 0) elapsed = 1e-9;
    char r1[40], r2[40];
    mc_py_float_repr((double)docs / elapsed, r1, sizeof(r1));
    mc_py_float_repr((double)bytes / elapsed / 1024 / 1024, r2, sizeof(r2));
    fprintf(stderr, "Processed %lld documents (%s docs/s, %s MB/s).\n", (long long)docs, r1, r2);
}

/* Writes one finished chunk in order. Returns false when the run must stop (error or
 * --max-documents reached). */
static bool write_chunk(pipe_t *p, chunk_t *c, out_t *outs, int64_t partition_size, stats_t *st,
                        double t0)
{
    const mc_preprocess_args_t *a = p->a;
    size_t toff[64], loff[64];
    size_t *to = toff, *lo = loff;
    size_t *heap = NULL;
    if (p->keys > 64) {
        heap = calloc(2 * (size_t)p->keys, sizeof(*heap));
        if (!heap) {
            pipe_fail(p, "out of memory");
            return false;
        }
        to = heap;
        lo = heap + p->keys;
    } else {
        memset(toff, 0, sizeof(toff));
        memset(loff, 0, sizeof(loff));
    }
    bool go_on = true;
    for (int i = 0; i < c->n_lines; i++) {
        if (a->max_documents >= 0 && st->docs >= a->max_documents) {
            go_on = false;
            break;
        }
        if (c->bad[i]) {
            if (!a->skip_malformed) {
                pipe_fail(p, "%s (fix the line, or pass --skip-malformed to skip such lines)",
                          c->bad_msg);
                go_on = false;
                break;
            }
            if (st->skipped++ == 0) snprintf(st->first_skipped, ERR_LEN, "%s", c->bad_msg);
            /* later bad lines of this chunk: their messages are not kept, the count is */
            continue;
        }
        int64_t g = c->first_global + i;
        int part = 0;
        if (a->partitions > 1) {
            part = a->keep_sequential_samples ? (int)(g / partition_size) : (int)(g % a->partitions);
            if (part >= a->partitions) part = a->partitions - 1;
        }
        for (int k = 0; k < p->keys; k++) {
            int32_t ns = c->nseq[(size_t)k * (size_t)c->lines_cap + (size_t)i];
            const int32_t *lens = c->lens[k].v + lo[k];
            int64_t ntok = 0;
            for (int32_t s = 0; s < ns; s++) ntok += lens[s];
            char err[512] = "";
            out_t *o = &outs[(size_t)part * (size_t)p->keys + (size_t)k];
            if (mc_indexed_writer_add_document(o->w, c->tokens[k].v + to[k], lens, ns, err,
                                               sizeof(err)) != 0) {
                pipe_fail(p, "%s", err);
                go_on = false;
                goto out;
            }
            to[k] += (size_t)ntok;
            lo[k] += (size_t)ns;
            st->tokens += ntok;
        }
        st->docs++;
        st->bytes += (int64_t)(c->line_off[i + 1] - c->line_off[i]) + 1;
        progress(a, st->docs, st->bytes, t0);
    }
out:
    free(heap);
    return go_on;
}

int mc_preprocess_run(const mc_preprocess_args_t *a)
{
    double start = mc_now_s();
    int n_files = 0;
    char **files = input_files(a, &n_files);

    int64_t partition_size = 1;
    if (a->partitions > 1 && a->keep_sequential_samples) {
        char *buf = malloc(READ_BYTES);
        if (!buf) mc_fatal("out of memory");
        int64_t total = 0;
        for (int f = 0; f < n_files; f++) total += count_lines(files[f], buf);
        free(buf);
        partition_size = (total + a->partitions - 1) / a->partitions;
        if (partition_size < 1) partition_size = 1;
    }

    char err[ERR_LEN] = "";
    mc_tokenizer_t *tok = mc_tokenizer_build(a->tokenizer_type, a->vocab_file, a->merge_file,
                                             a->vocab_size, err, sizeof(err));
    if (!tok) {
        free_files(files, n_files);
        mc_user_error("%s", err[0] ? err : "cannot build the tokenizer");
    }
    int dtype = mc_indexed_optimal_dtype(mc_tokenizer_vocab_size(tok));
    printf("Processing data with %d workers.\n", a->workers);
    fflush(stdout);

    /* Output files: per partition and key (partitions > 1) or per key. */
    int keys = a->n_json_keys, parts = a->partitions;
    size_t n_outs = (size_t)parts * (size_t)keys;
    out_t *outs = calloc(n_outs, sizeof(*outs));
    out_t *finals = calloc((size_t)keys, sizeof(*finals));
    if (!outs || !finals) mc_fatal("out of memory");
    for (int k = 0; k < keys; k++) {
        finals[k].prefix = fmt_alloc("%s_%s_document", a->output_prefix, a->json_keys[k]);
        for (int i = 0; i < parts; i++)
            outs[(size_t)i * keys + k].prefix =
                parts == 1 ? fmt_alloc("%s", finals[k].prefix)
                           : fmt_alloc("%s_%d_%s_document", a->output_prefix, i, a->json_keys[k]);
    }
    bool failed = false;
    for (size_t o = 0; o < n_outs && !failed; o++) {
        outs[o].w = mc_indexed_writer_open(outs[o].prefix, dtype, err, sizeof(err));
        if (!outs[o].w) failed = true;
    }

    pipe_t p;
    memset(&p, 0, sizeof(p));
    p.a = a;
    p.tok = tok;
    p.eod = mc_tokenizer_eod(tok);
    p.files = files;
    p.n_files = n_files;
    p.keys = keys;
    p.key_len = malloc((size_t)keys * sizeof(*p.key_len));
    if (!p.key_len) mc_fatal("out of memory");
    for (int k = 0; k < keys; k++) p.key_len[k] = strlen(a->json_keys[k]);
    p.n_slots = 4 * a->workers + 4;
    stats_t st;
    memset(&st, 0, sizeof(st));
    char rate[40];
    mc_py_float_repr(mc_now_s() - start, rate, sizeof(rate));
    double t0 = mc_now_s();

    if (!failed) {
        printf("Time to startup: %s\n", rate);
        fflush(stdout);
        p.slots = calloc((size_t)p.n_slots, sizeof(*p.slots));
        if (!p.slots) mc_fatal("out of memory");
        for (int s = 0; s < p.n_slots; s++) {
            chunk_t *c = &p.slots[s];
            c->tokens = calloc((size_t)keys, sizeof(*c->tokens));
            c->lens = calloc((size_t)keys, sizeof(*c->lens));
            if (!c->tokens || !c->lens) mc_fatal("out of memory");
        }
        pthread_mutex_init(&p.mu, NULL);
        pthread_cond_init(&p.cv_free, NULL);
        pthread_cond_init(&p.cv_work, NULL);
        pthread_cond_init(&p.cv_done, NULL);

        reader_t r = {.p = &p, .rbuf = malloc(READ_BYTES)};
        if (!r.rbuf) mc_fatal("out of memory");
        pthread_t reader, *workers = calloc((size_t)a->workers, sizeof(*workers));
        if (!workers) mc_fatal("out of memory");
        if (pthread_create(&reader, NULL, reader_main, &r) != 0) mc_fatal("cannot start a thread");
        for (int w = 0; w < a->workers; w++)
            if (pthread_create(&workers[w], NULL, worker_main, &p) != 0)
                mc_fatal("cannot start a thread");

        /* The writer: chunks strictly in input order. */
        for (int64_t next = 0;; next++) {
            pthread_mutex_lock(&p.mu);
            chunk_t *c = &p.slots[next % p.n_slots];
            while (!p.stop && !(c->state == SLOT_DONE && c->seq == next) &&
                   !(p.eof && next >= p.produced))
                pthread_cond_wait(&p.cv_done, &p.mu);
            bool ready = !p.stop && c->state == SLOT_DONE && c->seq == next;
            pthread_mutex_unlock(&p.mu);
            if (!ready) break;
            bool go_on = write_chunk(&p, c, outs, partition_size, &st, t0);
            pthread_mutex_lock(&p.mu);
            c->state = SLOT_FREE;
            pthread_cond_broadcast(&p.cv_free);
            pthread_mutex_unlock(&p.mu);
            if (!go_on) {
                pipe_stop(&p); /* --max-documents (or an error already recorded) */
                break;
            }
        }
        pthread_join(reader, NULL);
        for (int w = 0; w < a->workers; w++) pthread_join(workers[w], NULL);
        free(workers);
        free(r.rbuf);
        for (int s = 0; s < p.n_slots; s++) chunk_free(&p.slots[s], keys);
        free(p.slots);
        pthread_mutex_destroy(&p.mu);
        pthread_cond_destroy(&p.cv_free);
        pthread_cond_destroy(&p.cv_work);
        pthread_cond_destroy(&p.cv_done);
        if (p.failed) {
            failed = true;
            snprintf(err, sizeof(err), "%s", p.err);
        }
    }

    /* Finish: every writer, then (partitions > 1) the merge into the final names. */
    for (size_t o = 0; o < n_outs && !failed; o++) {
        mc_indexed_writer_t *w = outs[o].w;
        outs[o].w = NULL;
        if (mc_indexed_writer_finish(w, err, sizeof(err)) != 0) failed = true;
        else outs[o].finished = true;
    }
    if (parts > 1) {
        for (int k = 0; k < keys && !failed; k++) {
            out_t *f = &finals[k];
            f->w = mc_indexed_writer_open(f->prefix, dtype, err, sizeof(err));
            if (!f->w) {
                failed = true;
                break;
            }
            for (int i = 0; i < parts && !failed; i++)
                if (mc_indexed_writer_add_index(f->w, outs[(size_t)i * keys + k].prefix, err,
                                                sizeof(err)) != 0)
                    failed = true;
            if (failed) break;
            mc_indexed_writer_t *w = f->w;
            f->w = NULL;
            if (mc_indexed_writer_finish(w, err, sizeof(err)) != 0) failed = true;
            else f->finished = true;
        }
        for (size_t o = 0; o < n_outs; o++) remove_outputs(&outs[o]); /* the partitions */
    } else if (!failed) {
        for (int k = 0; k < keys; k++) finals[k].finished = true; /* same files as outs */
    }
    if (failed) {
        for (size_t o = 0; o < n_outs; o++) remove_outputs(&outs[o]);
        if (parts > 1)
            for (int k = 0; k < keys; k++) remove_outputs(&finals[k]);
    }

    double elapsed = mc_now_s() - t0;
    if (!failed) {
        if (st.skipped > 0)
            mc_warn("skipped %lld malformed line%s (--skip-malformed); the first: %s",
                    (long long)st.skipped, st.skipped == 1 ? "" : "s", st.first_skipped);
        printf("Done: %lld documents, %lld tokens, %lld bytes of input in %.3f s "
               "(%.0f tokens/s, %.2f MB/s, %d workers).\n",
               (long long)st.docs, (long long)st.tokens, (long long)st.bytes, elapsed,
               elapsed > 0 ? (double)st.tokens / elapsed : 0.0,
               elapsed > 0 ? (double)st.bytes / elapsed / 1024 / 1024 : 0.0, a->workers);
        for (int k = 0; k < keys; k++) printf("Wrote %s.bin and %s.idx\n", finals[k].prefix, finals[k].prefix);
        fflush(stdout);
    }

    for (size_t o = 0; o < n_outs; o++) free(outs[o].prefix);
    for (int k = 0; k < keys; k++) free(finals[k].prefix);
    free(outs);
    free(finals);
    free(p.key_len);
    mc_tokenizer_free(tok);
    free_files(files, n_files);
    if (failed) mc_user_error("%s", err);
    return 0;
}
