/* GPT-2 byte-level BPE: loading the vocab and merges, pre-tokenisation, merging, decoding.
 * See data/bpe.h for the loading rules and data/tokenizer.h for the encoding contract.
 *
 * Symbols. Every string that can occur during merging (vocab keys, both sides of each merge and
 * their concatenation, the 256 single byte-characters) is interned once at load time into a
 * symbol number; the merge table maps a pair of symbol numbers to (rank, merged symbol). Symbol
 * strings are not kept after loading.
 *
 * Merging one piece. Megatron's bpe() repeatedly takes the lowest-ranked adjacent pair and merges
 * every occurrence of it in one left-to-right, non-overlapping pass. Here the symbols form a
 * linked list over the piece's byte positions and a binary heap holds (rank << 32 | position)
 * entries. All entries of the lowest rank are popped in position order and merged if still
 * current (the pair at that position still has that rank); only then are the pairs the merges
 * created pushed. That is exactly one pass of Megatron's loop (a merge can never create another
 * occurrence of the pair being merged: the merged symbol is longer than either side), in
 * O(n log n) instead of O(n^2) per piece.
 *
 * Shortcut. At load time every vocab token whose bytes BPE into that single token is put in a
 * hash table keyed by its bytes; a piece found there is emitted without merging. This is the
 * result of the full algorithm, precomputed, so it cannot change any id.
 *
 * Piece cache. A piece's ids are a pure function of its bytes, and text repeats the same words
 * constantly, so (like OpenAI's and Megatron's self.cache) the ids of merged pieces are kept in
 * a per-thread, direct-mapped table: the key is the piece's bytes, stored and compared in full,
 * tagged with the tokenizer's load generation (so one thread can use several tokenizers, and a
 * tokenizer loaded at a freed one's address never sees its entries). Bounded: pieces of at most
 * PCACHE_MAXLEN bytes and PCACHE_MAXIDS ids, PCACHE_N slots, a collision overwrites. Per thread
 * because encode runs concurrently on one tokenizer and must stay lock-free; the table is freed
 * by a pthread key destructor at thread exit, and the calling thread's by mc_bpe_free and at
 * exit (the main thread runs no key destructors), so sanitizer runs stay leak-free.
 *
 * Everything in mc_bpe_t is read-only after loading; per-call scratch lives on the stack or in
 * malloc'd memory owned by the call. */
#include "base/error.h"
#include "data/bpe.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/unicode_classes.h"

#define SYM_DEAD UINT32_MAX

struct bpe_build;
static void build_free(struct bpe_build *bb);
#define MERGE_EMPTY UINT64_MAX

typedef struct {
    uint32_t rank, result;
} merge_val_t;

typedef struct {
    uint32_t hash, off, len;
    int32_t id; /* < 0: empty */
} word_slot_t;

struct mc_bpe {
    uint64_t gen; /* unique per load, never 0: tags this tokenizer's piece-cache entries */
    int64_t vocab_size;
    int32_t eod;
    uint32_t byte_sym[256];
    uint32_t nsym;
    int32_t *sym_out; /* id emitted for a final symbol: its vocab id, or 0 */

    uint64_t *merge_keys; /* left << 32 | right, or MERGE_EMPTY (keys apart from values: probing
                           * touches half the memory) */
    merge_val_t *merge_vals;
    uint64_t merge_mask;
    int merge_shift;

    word_slot_t *words;
    uint64_t word_mask;
    size_t word_maxlen;
    unsigned char *word_bytes;

    int32_t ndec; /* largest id + 1 */
    uint32_t *dec_off;
    int32_t *dec_len; /* < 0: no token with this id, or not decodable */
    unsigned char *dec_bytes;
    bool whole_words; /* a piece that is a token is that token, merges or not */

    struct bpe_build *build; /* while tokens and merges are added; NULL after mc_bpe_finish */
};

/* ---------------------------------------------------------------------------------------- */
/* hashing and tables                                                                       */

static inline uint64_t hash_bytes(const unsigned char *p, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xFF51AFD7ED558CCDull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)p[i] << (8 * i);
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return h;
}

static inline int merge_get(const mc_bpe_t *b, uint32_t l, uint32_t r, uint32_t *rank,
                            uint32_t *result)
{
    uint64_t key = (uint64_t)l << 32 | r;
    uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> b->merge_shift;
    for (;;) {
        uint64_t k = b->merge_keys[i];
        if (k == key) {
            *rank = b->merge_vals[i].rank;
            *result = b->merge_vals[i].result;
            return 1;
        }
        if (k == MERGE_EMPTY) return 0;
        i = (i + 1) & b->merge_mask;
    }
}

/* h = hash_bytes(w, n) */
static inline int32_t word_get(const mc_bpe_t *b, const unsigned char *w, size_t n, uint64_t h)
{
    uint32_t h32 = (uint32_t)(h >> 32);
    uint64_t i = h & b->word_mask;
    for (;;) {
        const word_slot_t *s = &b->words[i];
        if (s->id < 0) return -1;
        if (s->hash == h32 && s->len == n && memcmp(b->word_bytes + s->off, w, n) == 0)
            return s->id;
        i = (i + 1) & b->word_mask;
    }
}

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
/* per-call scratch for merging                                                             */

typedef struct {
    size_t cap;
    uint64_t *heap; /* 3*cap */
    uint32_t *sym;  /* cap each below */
    int32_t *next, *prev, *merged;
    void *mem; /* malloc'd block, or NULL while using the caller's buffer */
} scratch_t;

#define SCRATCH_LOCAL 256
#define SCRATCH_BYTES(c) ((size_t)(c) * (3 * sizeof(uint64_t) + 4 * sizeof(uint32_t)))

static void scratch_layout(scratch_t *sc, void *buf, size_t cap)
{
    sc->cap = cap;
    sc->heap = buf;
    sc->sym = (uint32_t *)(sc->heap + 3 * cap);
    sc->next = (int32_t *)(sc->sym + cap);
    sc->prev = sc->next + cap;
    sc->merged = sc->prev + cap;
}

static int scratch_reserve(scratch_t *sc, size_t n)
{
    if (n <= sc->cap) return 0;
    size_t cap = sc->cap * 2 > n ? sc->cap * 2 : n;
    if (cap > SIZE_MAX / (3 * sizeof(uint64_t) + 4 * sizeof(uint32_t))) return -1;
    void *mem = malloc(SCRATCH_BYTES(cap));
    if (!mem) return -1;
    free(sc->mem);
    sc->mem = mem;
    scratch_layout(sc, mem, cap);
    return 0;
}

static inline void heap_sift_down(uint64_t *h, size_t n, size_t i)
{
    uint64_t v = h[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

static inline void heap_push(uint64_t *h, size_t *n, uint64_t v)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static inline uint64_t heap_pop(uint64_t *h, size_t *n)
{
    uint64_t top = h[0];
    (*n)--;
    if (*n) {
        h[0] = h[*n];
        heap_sift_down(h, *n, 0);
    }
    return top;
}

/* Merges the n >= 2 bytes of w. The final symbols are the list sc->sym[i], i = 0, next[i], ...
 * until -1. 0, or -1 out of memory. */
static int bpe_run(const mc_bpe_t *b, const unsigned char *w, size_t n, scratch_t *sc)
{
    if (n > (size_t)INT32_MAX || scratch_reserve(sc, n) < 0) return -1;
    uint32_t *sym = sc->sym;
    int32_t *nx = sc->next, *pv = sc->prev, *mg = sc->merged;
    uint64_t *h = sc->heap;
    size_t hn = 0;
    uint32_t rank, res;
    for (size_t i = 0; i < n; i++) {
        sym[i] = b->byte_sym[w[i]];
        nx[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        pv[i] = (int32_t)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        if (merge_get(b, sym[i], sym[i + 1], &rank, &res)) h[hn++] = (uint64_t)rank << 32 | i;
    for (size_t i = hn / 2; i-- > 0;) heap_sift_down(h, hn, i);

    while (hn) {
        uint32_t cur = (uint32_t)(h[0] >> 32);
        size_t nm = 0;
        while (hn && (uint32_t)(h[0] >> 32) == cur) {
            int32_t l = (int32_t)(uint32_t)heap_pop(h, &hn);
            if (sym[l] == SYM_DEAD) continue;
            int32_t r = nx[l];
            if (r < 0 || !merge_get(b, sym[l], sym[r], &rank, &res) || rank != cur) continue;
            sym[l] = res;
            sym[r] = SYM_DEAD;
            nx[l] = nx[r];
            if (nx[r] >= 0) pv[nx[r]] = l;
            mg[nm++] = l;
        }
        for (size_t k = 0; k < nm; k++) {
            int32_t l = mg[k];
            if (pv[l] >= 0 && merge_get(b, sym[pv[l]], sym[l], &rank, &res))
                heap_push(h, &hn, (uint64_t)rank << 32 | (uint32_t)pv[l]);
            if (nx[l] >= 0 && merge_get(b, sym[l], sym[nx[l]], &rank, &res))
                heap_push(h, &hn, (uint64_t)rank << 32 | (uint32_t)l);
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* encoding                                                                                 */

/* ---------------------------------------------------------------------------------------- */
/* per-thread piece cache (see the top of the file)                                         */

#define PCACHE_BITS 16
#define PCACHE_N ((size_t)1 << PCACHE_BITS)
#define PCACHE_MAXLEN 32
#define PCACHE_MAXIDS 8

typedef struct {
    uint64_t gen; /* the owning tokenizer's gen; 0: empty */
    uint8_t len, nids;
    int32_t ids[PCACHE_MAXIDS];
    unsigned char bytes[PCACHE_MAXLEN];
} pcache_slot_t;

static uint64_t pcache_gen; /* last gen handed out (atomic) */
static pthread_key_t pcache_key;
static pthread_once_t pcache_once = PTHREAD_ONCE_INIT;
static int pcache_ok; /* the key exists */
static __thread pcache_slot_t *pcache_tls;

/* Key destructor: runs in the exiting thread with its table. */
static void pcache_destroy(void *c)
{
    free(c);
    pcache_tls = NULL;
}

/* Frees the calling thread's table (a later encode on this thread allocates a new one). */
static void pcache_release(void)
{
    if (!pcache_tls) return;
    pthread_setspecific(pcache_key, NULL);
    free(pcache_tls);
    pcache_tls = NULL;
}

static void pcache_init(void)
{
    pcache_ok = pthread_key_create(&pcache_key, pcache_destroy) == 0;
    if (pcache_ok) atexit(pcache_release); /* exit() runs no key destructors */
}

/* The calling thread's table, allocated on first use; NULL (no caching) if that fails. */
static pcache_slot_t *pcache_get(void)
{
    if (pcache_tls) return pcache_tls;
    pthread_once(&pcache_once, pcache_init);
    if (!pcache_ok) return NULL;
    pcache_slot_t *c = calloc(PCACHE_N, sizeof(pcache_slot_t));
    if (!c) return NULL;
    if (pthread_setspecific(pcache_key, c) != 0) {
        free(c);
        return NULL;
    }
    return pcache_tls = c;
}

static int emit_piece(const mc_bpe_t *b, const unsigned char *w, size_t n, scratch_t *sc,
                      mc_ids_t *ids)
{
    uint64_t h = 0;
    if (n <= b->word_maxlen || n <= PCACHE_MAXLEN) h = hash_bytes(w, n);
    if (n <= b->word_maxlen) {
        int32_t id = word_get(b, w, n, h);
        if (id >= 0) return mc_ids_push(ids, id);
    }
    if (n == 1) return mc_ids_push(ids, b->sym_out[b->byte_sym[w[0]]]);
    pcache_slot_t *slot = NULL;
    if (n <= PCACHE_MAXLEN) {
        pcache_slot_t *c = pcache_get();
        if (c) {
            slot = &c[h >> (64 - PCACHE_BITS)];
            if (slot->gen == b->gen && slot->len == n && memcmp(slot->bytes, w, n) == 0) {
                for (size_t k = 0; k < slot->nids; k++)
                    if (mc_ids_push(ids, slot->ids[k]) < 0) return -1;
                return 0;
            }
        }
    }
    if (bpe_run(b, w, n, sc) < 0) return -1;
    int32_t got[PCACHE_MAXIDS];
    size_t ng = 0;
    for (int32_t i = 0; i >= 0; i = sc->next[i]) {
        int32_t id = b->sym_out[sc->sym[i]];
        if (mc_ids_push(ids, id) < 0) return -1;
        if (ng < PCACHE_MAXIDS) got[ng] = id;
        ng++;
    }
    if (slot && ng <= PCACHE_MAXIDS) { /* too many ids: not cached, the slot keeps its entry */
        slot->gen = b->gen;
        slot->len = (uint8_t)n;
        slot->nids = (uint8_t)ng;
        memcpy(slot->ids, got, ng * sizeof(int32_t));
        memcpy(slot->bytes, w, n);
    }
    return 0;
}

/* The pattern's class of the unit at s[pos]: a well-formed UTF-8 sequence, or one byte that is
 * not part of one (class OTHER, like the lone surrogate Python's surrogateescape makes of it). */
static inline int unit_class(const unsigned char *s, size_t len, size_t pos, size_t *nb)
{
    unsigned c = s[pos];
    if (c < 0x80) {
        *nb = 1;
        return mc_uc_latin1[c];
    }
    uint32_t cp;
    size_t k = mc_utf8_next(s, len, pos, &cp);
    if (!k) {
        *nb = 1;
        return MC_UC_OTHER;
    }
    *nb = k;
    return mc_uc_class(cp);
}

/* GPT-2's pre-tokenisation, one piece at a time: the end of the findall match of
 * 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ at pos: at each
 * position the first alternative that matches wins; every unit matches one of them. */
static size_t gpt2_split(void *ctx, const unsigned char *s, size_t len, size_t pos)
{
    (void)ctx;
    size_t end, nb;
    unsigned c = s[pos];
    if (c == '\'' && pos + 1 < len) { /* 's 't 're 've 'm 'll 'd */
        unsigned c1 = s[pos + 1], c2 = pos + 2 < len ? s[pos + 2] : 0;
        if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return pos + 2;
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
            return pos + 3;
    }
    int cls = unit_class(s, len, pos, &nb);
    size_t p = pos;
    if (c == ' ' && pos + 1 < len) { /* ' ?X+' with the optional space */
        size_t nb2;
        int cls2 = unit_class(s, len, pos + 1, &nb2);
        if (cls2 != MC_UC_S) {
            cls = cls2;
            p = pos + 1;
        }
    }
    if (cls != MC_UC_S) { /* ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+' */
        end = p;
        while (end < len && unit_class(s, len, end, &nb) == cls) end += nb;
        return end;
    }
    size_t last = pos; /* '\s+(?!\S)', else '\s+' */
    end = pos;
    while (end < len && unit_class(s, len, end, &nb) == MC_UC_S) {
        last = end;
        end += nb;
    }
    if (end < len && last > pos) end = last; /* leave the last space for the next word */
    return end;
}

int mc_bpe_encode_split(const mc_bpe_t *b, const char *text, size_t len, mc_bpe_split_fn split,
                        void *ctx, mc_ids_t *ids, char *err, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    uint64_t local[SCRATCH_BYTES(SCRATCH_LOCAL) / sizeof(uint64_t)];
    scratch_t sc = {0};
    scratch_layout(&sc, local, SCRATCH_LOCAL);
    int rc = 0;
    if (len && !text) {
        mc_errf(err, n, "tokenizer: NULL text");
        return -1;
    }
    for (size_t pos = 0; pos < len;) {
        size_t end = split(ctx, s, len, pos);
        if (end <= pos || end > len) {
            mc_errf(err, n, "tokenizer: the pre-tokenizer failed at byte %zu of %zu", pos, len);
            rc = -1;
            break;
        }
        if (emit_piece(b, s + pos, end - pos, &sc, ids) < 0) {
            mc_errf(err, n, "tokenizer: out of memory encoding %zu bytes", len);
            rc = -1;
            break;
        }
        pos = end;
    }
    free(sc.mem);
    return rc;
}

int mc_bpe_encode(const mc_bpe_t *b, const char *text, size_t len, mc_ids_t *ids, char *err,
                  size_t n)
{
    return mc_bpe_encode_split(b, text, len, gpt2_split, NULL, ids, err, n);
}

char *mc_bpe_decode(const mc_bpe_t *b, const int32_t *ids, size_t count, size_t *out_len)
{
    size_t total = 0;
    for (size_t i = 0; i < count; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= b->ndec || b->dec_len[id] < 0) return NULL;
        total += (size_t)b->dec_len[id];
    }
    char *out = malloc(total ? total : 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < count; i++) {
        memcpy(out + o, b->dec_bytes + b->dec_off[ids[i]], (size_t)b->dec_len[ids[i]]);
        o += (size_t)b->dec_len[ids[i]];
    }
    if (out_len) *out_len = total;
    return out;
}

int64_t mc_bpe_vocab_size(const mc_bpe_t *b) { return b->vocab_size; }
int32_t mc_bpe_eod(const mc_bpe_t *b) { return b->eod; }

void mc_bpe_free(mc_bpe_t *b)
{
    if (!b) return;
    pcache_release(); /* the main thread's table has no destructor; its entries die with b */
    free(b->sym_out);
    free(b->merge_keys);
    free(b->merge_vals);
    free(b->words);
    free(b->word_bytes);
    free(b->dec_off);
    free(b->dec_len);
    free(b->dec_bytes);
    build_free(b->build);
    free(b);
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
        size_t i = hash_bytes(t->arena + t->off[s], t->len[s]) & (nslot - 1);
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
    size_t i = hash_bytes(p, n) & (t->nslot - 1);
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
    scratch_layout(&sc, local, SCRATCH_LOCAL);
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
        uint64_t h = hash_bytes(w, n);
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

static void build_free(struct bpe_build *bb)
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
    b->gen = __atomic_add_fetch(&pcache_gen, 1, __ATOMIC_RELAXED);
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
    size_t i = hash_bytes((const unsigned char *)key, len) & (t->nslot - 1);
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
    build_free(bb);
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
