/* Internals shared by data/bpe.c (merging, encoding, decoding) and data/bpe_build.c (the tables
 * built from tokens and merges, GPT-2's files): the tokenizer's tables, the per-call scratch, one
 * piece's merge. */
#ifndef MC_DATA_BPE_INT_H
#define MC_DATA_BPE_INT_H

#include "data/bpe.h"

#include <stdint.h>
#include <string.h>

#define SYM_DEAD UINT32_MAX

struct bpe_build;
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

static inline uint64_t bpe_hash_bytes(const unsigned char *p, size_t n)
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

typedef struct {
    size_t cap;
    uint64_t *heap; /* 3*cap */
    uint32_t *sym;  /* cap each below */
    int32_t *next, *prev, *merged;
    void *mem; /* malloc'd block, or NULL while using the caller's buffer */
} scratch_t;

#define SCRATCH_LOCAL 256
#define SCRATCH_BYTES(c) ((size_t)(c) * (3 * sizeof(uint64_t) + 4 * sizeof(uint32_t)))

void bpe_scratch_layout(scratch_t *sc, void *buf, size_t cap);
/* Merges the n >= 2 bytes of w. The final symbols are the list sc->sym[i], i = 0, next[i], ...
 * until -1. 0, or -1 out of memory. */
int bpe_run(const mc_bpe_t *b, const unsigned char *w, size_t n, scratch_t *sc);
/* A load generation for a new tokenizer: unique, never 0 (tags its piece-cache entries). */
uint64_t bpe_new_gen(void);
/* Frees the state of a tokenizer being built (bpe_build.c); NULL is a no-op. */
void bpe_build_free(struct bpe_build *bb);

#endif
