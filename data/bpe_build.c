/* Building GPT-2 byte-level BPE's tables (data/bpe.h): symbols interned while tokens and merges
 * are added, then the merge table, the decode table and the whole-token shortcut table; and
 * GPT-2's own files, vocab.json and merges.txt, read into them (mc_bpe_load). */
#include "base/error.h"
#include "data/bpe_int.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/unicode_classes.h"

/* ---------------------------------------------------------------------------------------- */
/* bytes_to_unicode                                                                         */

/* GPT-2's byte -> code point map: printable Latin-1 bytes (0x21..0x7E, 0xA1..0xAC,
 * 0xAE..0xFF) map to themselves, the other 68 bytes, in increasing order, to U+0100.. */
static uint32_t byte_to_cp(unsigned b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return b;
    uint32_t k = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF)))
            k++;
    return 0x100 + k;
}

#define CP2BYTE_N 0x144 /* byte_to_cp's largest value + 1 */

static size_t put_utf8(unsigned char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---------------------------------------------------------------------------------------- */
/* loading                                                                                  */

/* Load-time interning of symbol strings (byte-level UTF-8). */
typedef struct {
    unsigned char *arena;
    size_t alen, acap;
    size_t *off;
    uint32_t *len;
    int32_t *vocab; /* vocab id, or -1 */
    uint32_t nsym, symcap;
    uint32_t *slot; /* symbol + 1, 0 empty */
    size_t nslot;   /* power of two */
} intern_t;

static void intern_free(intern_t *t)
{
    free(t->arena);
    free(t->off);
    free(t->len);
    free(t->vocab);
    free(t->slot);
}

static int intern_rehash(intern_t *t, size_t nslot)
{
    uint32_t *slot = calloc(nslot, sizeof(uint32_t));
    if (!slot) return -1;
    for (uint32_t s = 0; s < t->nsym; s++) {
        size_t i = bpe_hash_bytes(t->arena + t->off[s], t->len[s]) & (nslot - 1);
        while (slot[i]) i = (i + 1) & (nslot - 1);
        slot[i] = s + 1;
    }
    free(t->slot);
    t->slot = slot;
    t->nslot = nslot;
    return 0;
}

/* The symbol of string p[0..n) (added if new), or -1 out of memory. */
static int64_t intern(intern_t *t, const unsigned char *p, size_t n)
{
    if (n > UINT32_MAX) return -1;
    size_t i = bpe_hash_bytes(p, n) & (t->nslot - 1);
    for (; t->slot[i]; i = (i + 1) & (t->nslot - 1)) {
        uint32_t s = t->slot[i] - 1;
        if (t->len[s] == n && memcmp(t->arena + t->off[s], p, n) == 0) return s;
    }
    if (t->nsym == t->symcap) {
        if (t->symcap >= UINT32_MAX / 4) return -1;
        uint32_t cap = t->symcap ? t->symcap * 2 : 1024;
        size_t *off = realloc(t->off, cap * sizeof(size_t));
        if (!off) return -1;
        t->off = off;
        uint32_t *len = realloc(t->len, cap * sizeof(uint32_t));
        if (!len) return -1;
        t->len = len;
        int32_t *vocab = realloc(t->vocab, cap * sizeof(int32_t));
        if (!vocab) return -1;
        t->vocab = vocab;
        t->symcap = cap;
    }
    if (t->alen + n > t->acap) {
        size_t cap = t->acap ? t->acap : 1 << 16;
        while (cap < t->alen + n) cap *= 2;
        unsigned char *a = realloc(t->arena, cap);
        if (!a) return -1;
        t->arena = a;
        t->acap = cap;
    }
    if (n) memcpy(t->arena + t->alen, p, n);
    uint32_t s = t->nsym++;
    t->off[s] = t->alen;
    t->len[s] = (uint32_t)n;
    t->vocab[s] = -1;
    t->alen += n;
    t->slot[i] = s + 1;
    if ((size_t)t->nsym * 2 > t->nslot && intern_rehash(t, t->nslot * 2) < 0) return -1;
    return s;
}

typedef struct {
    uint32_t l, r, rank, result;
} merge_rec_t;

static char *read_file(const char *path, size_t *len, const char *what, char *err, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        mc_errf(err, n, "cannot open %s '%s': %s", what, path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, used = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + used, 1, cap - used, f);
        used += got;
        if (used < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    if (!buf) {
        fclose(f);
        mc_errf(err, n, "%s '%s': out of memory", what, path);
        return NULL;
    }
    if (ferror(f)) {
        mc_errf(err, n, "cannot read %s '%s': %s", what, path, strerror(errno));
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    *len = used;
    return buf;
}

static int build_merge_table(mc_bpe_t *b, const merge_rec_t *recs, size_t nrec)
{
    size_t cap = 1024;
    int bits = 10;
    while (cap < nrec * 2 + 2) {
        cap *= 2;
        bits++;
    }
    b->merge_keys = malloc(cap * sizeof(uint64_t));
    b->merge_vals = malloc(cap * sizeof(merge_val_t));
    if (!b->merge_keys || !b->merge_vals) return -1;
    for (size_t i = 0; i < cap; i++) b->merge_keys[i] = MERGE_EMPTY;
    b->merge_mask = cap - 1;
    b->merge_shift = 64 - bits;
    for (size_t k = 0; k < nrec; k++) { /* a repeated pair keeps its last rank */
        uint64_t key = (uint64_t)recs[k].l << 32 | recs[k].r;
        uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> b->merge_shift;
        while (b->merge_keys[i] != MERGE_EMPTY && b->merge_keys[i] != key)
            i = (i + 1) & b->merge_mask;
        b->merge_keys[i] = key;
        b->merge_vals[i] = (merge_val_t){recs[k].rank, recs[k].result};
    }
    return 0;
}

/* 1 if the n bytes of w merge into the single token id, 0 if not (more than one symbol, a
 * symbol outside the vocab, another id), -1 out of memory. */
static int merges_to(const mc_bpe_t *b, const unsigned char *w, size_t n, int32_t id, scratch_t *sc)
{
    if (n == 1) return b->sym_out[b->byte_sym[w[0]]] == id;
    if (bpe_run(b, w, n, sc) < 0) return -1;
    return sc->next[0] < 0 && b->sym_out[sc->sym[0]] == id;
}

/* The shortcut table: every decodable vocab token whose bytes merge into exactly that token (with
 * whole_words: every decodable token). */
static int build_word_table(mc_bpe_t *b)
{
    size_t cand = 0, bytes = 0;
    for (int32_t id = 0; id < b->ndec; id++)
        if (b->dec_len[id] > 0) {
            cand++;
            bytes += (size_t)b->dec_len[id];
        }
    size_t cap = 1024;
    while (cap < cand * 2 + 2) cap *= 2;
    b->words = malloc(cap * sizeof(word_slot_t));
    b->word_bytes = malloc(bytes ? bytes : 1);
    if (!b->words || !b->word_bytes) return -1;
    for (size_t i = 0; i < cap; i++) b->words[i].id = -1;
    b->word_mask = cap - 1;
    b->word_maxlen = 0;
    uint64_t local[SCRATCH_BYTES(SCRATCH_LOCAL) / sizeof(uint64_t)];
    scratch_t sc = {0};
    bpe_scratch_layout(&sc, local, SCRATCH_LOCAL);
    size_t used = 0;
    int rc = 0;
    for (int32_t id = 0; id < b->ndec && rc == 0; id++) {
        if (b->dec_len[id] <= 0) continue;
        const unsigned char *w = b->dec_bytes + b->dec_off[id];
        size_t n = (size_t)b->dec_len[id];
        int self = b->whole_words ? 1 : merges_to(b, w, n, id, &sc);
        if (self < 0) {
            rc = -1;
            break;
        }
        if (!self) continue;
        const int32_t out = id;
        uint64_t h = bpe_hash_bytes(w, n);
        uint64_t i = h & b->word_mask;
        while (b->words[i].id >= 0) {
            if (b->words[i].len == n && memcmp(b->word_bytes + b->words[i].off, w, n) == 0) break;
            i = (i + 1) & b->word_mask;
        }
        if (b->words[i].id >= 0) continue; /* same bytes under two ids: first wins; both give out */
        memcpy(b->word_bytes + used, w, n);
        b->words[i] = (word_slot_t){(uint32_t)(h >> 32), (uint32_t)used, (uint32_t)n, out};
        used += n;
        if (n > b->word_maxlen) b->word_maxlen = n;
    }
    free(sc.mem);
    return rc;
}

/* The state of a tokenizer being built: interned symbols, its tokens and merges. */
typedef struct {
    uint32_t sym;
    int32_t id;
} tok_rec_t;

struct bpe_build {
    intern_t t;
    tok_rec_t *toks;
    size_t ntok, tokcap;
    merge_rec_t *recs;
    size_t nrec, reccap;
    unsigned char *cat;
    size_t catcap;
};

void bpe_build_free(struct bpe_build *bb)
{
    if (!bb) return;
    intern_free(&bb->t);
    free(bb->toks);
    free(bb->recs);
    free(bb->cat);
    free(bb);
}

mc_bpe_t *mc_bpe_new(void)
{
    mc_bpe_t *b = calloc(1, sizeof(*b));
    if (!b) return NULL;
    b->build = calloc(1, sizeof(*b->build));
    if (!b->build || intern_rehash(&b->build->t, 1 << 12) < 0) {
        mc_bpe_free(b);
        return NULL;
    }
    b->gen = bpe_new_gen();
    return b;
}

int mc_bpe_add_token(mc_bpe_t *b, const char *key, size_t len, int32_t id)
{
    struct bpe_build *bb = b->build;
    int64_t s = intern(&bb->t, (const unsigned char *)key, len);
    if (s < 0 || id < 0) return -1;
    if (bb->ntok == bb->tokcap) {
        size_t cap = bb->tokcap ? bb->tokcap * 2 : 1024;
        tok_rec_t *t = realloc(bb->toks, cap * sizeof(*t));
        if (!t) return -1;
        bb->toks = t;
        bb->tokcap = cap;
    }
    bb->toks[bb->ntok++] = (tok_rec_t){(uint32_t)s, id};
    bb->t.vocab[s] = id;
    return 0;
}

int mc_bpe_add_merge(mc_bpe_t *b, const char *l, size_t ll, const char *r, size_t lr, uint32_t rank,
                     bool require_token)
{
    struct bpe_build *bb = b->build;
    if (ll + lr > bb->catcap) {
        size_t cap = (ll + lr) * 2;
        unsigned char *c = realloc(bb->cat, cap);
        if (!c) return -1;
        bb->cat = c;
        bb->catcap = cap;
    }
    memcpy(bb->cat, l, ll);
    memcpy(bb->cat + ll, r, lr);
    int64_t a = intern(&bb->t, (const unsigned char *)l, ll);
    int64_t c = intern(&bb->t, (const unsigned char *)r, lr);
    int64_t res = intern(&bb->t, bb->cat, ll + lr);
    if (a < 0 || c < 0 || res < 0) return -1;
    if (require_token && bb->t.vocab[res] < 0) return 1;
    if (bb->nrec == bb->reccap) {
        size_t cap = bb->reccap ? bb->reccap * 2 : 1024;
        merge_rec_t *nr = realloc(bb->recs, cap * sizeof(merge_rec_t));
        if (!nr) return -1;
        bb->recs = nr;
        bb->reccap = cap;
    }
    bb->recs[bb->nrec++] = (merge_rec_t){(uint32_t)a, (uint32_t)c, rank, (uint32_t)res};
    return 0;
}

size_t mc_bpe_byte_key(const unsigned char *raw, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += put_utf8((unsigned char *)out + o, byte_to_cp(raw[i]));
    return o;
}

int32_t mc_bpe_token_id(const mc_bpe_t *b, const char *key, size_t len)
{
    const intern_t *t = &b->build->t;
    size_t i = bpe_hash_bytes((const unsigned char *)key, len) & (t->nslot - 1);
    for (; t->slot[i]; i = (i + 1) & (t->nslot - 1)) {
        uint32_t s = t->slot[i] - 1;
        if (t->len[s] == len && memcmp(t->arena + t->off[s], key, len) == 0) return t->vocab[s];
    }
    return -1;
}

int mc_bpe_lacking_byte(mc_bpe_t *b)
{
    for (unsigned x = 0; x < 256; x++) {
        unsigned char u[4];
        int64_t s = intern(&b->build->t, u, put_utf8(u, byte_to_cp(x)));
        if (s < 0) return -2;
        if (b->build->t.vocab[s] < 0) return (int)x;
    }
    return -1;
}

/* The decode table: each token's bytes (its characters through bytes_to_unicode's inverse);
 * a token with a character outside that image is not decodable. */
static int build_decode_table(mc_bpe_t *b)
{
    const struct bpe_build *bb = b->build;
    int16_t cp2byte[CP2BYTE_N];
    for (size_t i = 0; i < CP2BYTE_N; i++) cp2byte[i] = -1;
    for (unsigned x = 0; x < 256; x++) cp2byte[byte_to_cp(x)] = (int16_t)x;
    int32_t maxid = -1;
    size_t keybytes = 0; /* raw bytes are never longer than the byte-level key */
    for (size_t k = 0; k < bb->ntok; k++) {
        if (bb->toks[k].id > maxid) maxid = bb->toks[k].id;
        keybytes += bb->t.len[bb->toks[k].sym];
    }
    b->ndec = maxid + 1;
    size_t nd = (size_t)b->ndec ? (size_t)b->ndec : 1;
    b->dec_off = calloc(nd, sizeof(uint32_t));
    b->dec_len = malloc(nd * sizeof(int32_t));
    b->dec_bytes = malloc(keybytes ? keybytes : 1);
    if (!b->dec_off || !b->dec_len || !b->dec_bytes) return -1;
    for (size_t i = 0; i < nd; i++) b->dec_len[i] = -1;
    size_t dpos = 0;
    for (size_t k = 0; k < bb->ntok; k++) {
        const unsigned char *key = bb->t.arena + bb->t.off[bb->toks[k].sym];
        size_t klen = bb->t.len[bb->toks[k].sym], p = 0, start = dpos;
        int32_t id = bb->toks[k].id;
        int ok = 1;
        while (p < klen && ok) {
            uint32_t cp;
            size_t n = mc_utf8_next(key, klen, p, &cp);
            int byte = n && cp < CP2BYTE_N ? cp2byte[cp] : -1;
            ok = byte >= 0;
            if (ok) b->dec_bytes[dpos++] = (unsigned char)byte;
            p += n;
        }
        if (ok) { /* a later key with the same id wins, as in Python's {v: k for k, v in ...} */
            b->dec_off[id] = (uint32_t)start;
            b->dec_len[id] = (int32_t)(dpos - start);
        } else {
            dpos = start;
            b->dec_len[id] = -1;
        }
    }
    return 0;
}

int mc_bpe_finish(mc_bpe_t *b, bool whole_words)
{
    struct bpe_build *bb = b->build;
    for (unsigned x = 0; x < 256; x++) {
        unsigned char u[4];
        int64_t s = intern(&bb->t, u, put_utf8(u, byte_to_cp(x)));
        if (s < 0) return -1;
        b->byte_sym[x] = (uint32_t)s;
    }
    b->nsym = bb->t.nsym;
    b->sym_out = malloc((size_t)bb->t.nsym * sizeof(int32_t));
    if (!b->sym_out) return -1;
    for (uint32_t s = 0; s < bb->t.nsym; s++)
        b->sym_out[s] = bb->t.vocab[s] >= 0 ? bb->t.vocab[s] : 0;
    if (build_decode_table(b) < 0 || build_merge_table(b, bb->recs, bb->nrec) < 0) return -1;
    b->whole_words = whole_words;
    if (build_word_table(b) < 0) return -1;
    bpe_build_free(bb);
    b->build = NULL;
    return 0;
}

/* Reads GPT-2's vocab file into b. Returns 0 or -1 (err set). */
static int load_vocab(mc_bpe_t *b, const char *path, char *err, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        mc_errf(err, n, "cannot open vocab file '%s': %s", path, strerror(errno));
        return -1;
    }
    json_error_t je;
    json_t *root = json_loadf(f, 0, &je);
    fclose(f);
    if (!root) {
        mc_errf(err, n, "vocab file '%s': invalid JSON at line %d: %s", path, je.line, je.text);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(root)) {
        mc_errf(err, n, "vocab file '%s': expected a JSON object {token: id}", path);
        goto out;
    }
    b->vocab_size = (int64_t)json_object_size(root);
    int64_t eod = -1;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (!json_is_integer(val) || json_integer_value(val) < 0 ||
            json_integer_value(val) >= INT32_MAX) {
            mc_errf(err, n, "vocab file '%s': the id of token '%.40s' is not an integer in [0, %d)",
                    path, key, INT32_MAX);
            goto out;
        }
        int64_t id = json_integer_value(val);
        if (strcmp(key, "<|endoftext|>") == 0) eod = id;
        if (mc_bpe_add_token(b, key, strlen(key), (int32_t)id) < 0) {
            mc_errf(err, n, "vocab file '%s': out of memory", path);
            goto out;
        }
    }
    if (eod < 0) {
        mc_errf(err, n, "vocab file '%s': no '<|endoftext|>' token", path);
        goto out;
    }
    b->eod = (int32_t)eod;
    rc = 0;
out:
    json_decref(root);
    return rc;
}

/* The fields of line s[p..e) separated by Python whitespace: their count, the first 3 kept. */
static int line_fields(const unsigned char *s, size_t p, size_t e, size_t fs[3], size_t fe[3])
{
    int nf = 0;
    size_t q = p;
    while (q < e) {
        uint32_t cp;
        size_t k = mc_utf8_next(s, e, q, &cp);
        if (!k) k = 1;
        if (mc_py_isspace(cp)) {
            q += k;
            continue;
        }
        size_t st = q;
        while (q < e) {
            k = mc_utf8_next(s, e, q, &cp);
            if (!k) k = 1;
            if (mc_py_isspace(cp)) break;
            q += k;
        }
        if (nf < 3) {
            fs[nf] = st;
            fe[nf] = q;
        }
        nf++;
    }
    return nf;
}

/* Parses GPT-2's merges file into b (rank = index after dropping the first line). */
static int load_merges(mc_bpe_t *b, const char *path, char *err, size_t n)
{
    size_t len;
    char *buf = read_file(path, &len, "merge file", err, n);
    if (!buf) return -1;
    const unsigned char *s = (const unsigned char *)buf;
    int rc = -1;
    /* the whole file must be UTF-8 (Python reads it with encoding='utf-8') */
    for (size_t p = 0; p < len;) {
        uint32_t cp;
        size_t k = mc_utf8_next(s, len, p, &cp);
        if (!k) {
            mc_errf(err, n, "merge file '%s': not valid UTF-8 (byte offset %zu)", path, p);
            goto out;
        }
        p += k;
    }
    /* lines: split at \n, \r\n or \r (universal newlines); drop the first and the last */
    size_t p = 0, lineno = 0;
    int64_t rank = -1;
    while (p <= len) {
        size_t e = p;
        while (e < len && s[e] != '\n' && s[e] != '\r') e++;
        int last = e >= len; /* no newline after this segment: Python's [-1], dropped */
        size_t next =
            e < len ? (s[e] == '\r' && e + 1 < len && s[e + 1] == '\n' ? e + 2 : e + 1) : len + 1;
        lineno++;
        if (lineno > 1 && !last) {
            rank++;
            size_t fs[3], fe[3];
            int nf = line_fields(s, p, e, fs, fe);
            if (nf != 0 && nf != 2) {
                mc_errf(
                    err, n,
                    "merge file '%s' line %zu: expected two tokens separated by a space, found %d",
                    path, lineno, nf);
                goto out;
            }
            if (nf == 2 && (rank >= (int64_t)UINT32_MAX ||
                            mc_bpe_add_merge(b, buf + fs[0], fe[0] - fs[0], buf + fs[1],
                                             fe[1] - fs[1], (uint32_t)rank, false) != 0)) {
                mc_errf(err, n, "merge file '%s': out of memory", path);
                goto out;
            }
        }
        p = next;
    }
    rc = 0;
out:
    free(buf);
    return rc;
}

mc_bpe_t *mc_bpe_load(const char *vocab_file, const char *merge_file, char *err, size_t n)
{
    mc_bpe_t *b = mc_bpe_new();
    if (!b) {
        mc_errf(err, n, "GPT2BPETokenizer: out of memory");
        return NULL;
    }
    if (load_vocab(b, vocab_file, err, n) < 0 || load_merges(b, merge_file, err, n) < 0) {
        mc_bpe_free(b);
        return NULL;
    }
    if (mc_bpe_finish(b, false) < 0) {
        mc_errf(err, n, "GPT2BPETokenizer: out of memory loading '%s' and '%s'", vocab_file,
                merge_file);
        mc_bpe_free(b);
        return NULL;
    }
    return b;
}
