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
 * malloc'd memory owned by the call. Building the tables (from tokens and merges, or GPT-2's
 * files) is in bpe_build.c. */
#include "base/error.h"
#include "data/bpe_int.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "data/unicode_classes.h"

/* ---------------------------------------------------------------------------------------- */
/* hashing and tables                                                                       */

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

/* h = bpe_hash_bytes(w, n) */
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
/* per-call scratch for merging                                                             */

void bpe_scratch_layout(scratch_t *sc, void *buf, size_t cap)
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
    bpe_scratch_layout(sc, mem, cap);
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

int bpe_run(const mc_bpe_t *b, const unsigned char *w, size_t n, scratch_t *sc)
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

uint64_t bpe_new_gen(void) { return __atomic_add_fetch(&pcache_gen, 1, __ATOMIC_RELAXED); }

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
    if (n <= b->word_maxlen || n <= PCACHE_MAXLEN) h = bpe_hash_bytes(w, n);
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
    bpe_scratch_layout(&sc, local, SCRATCH_LOCAL);
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
    bpe_build_free(b->build);
    free(b);
}
