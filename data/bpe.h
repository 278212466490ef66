/* GPT-2 byte-level BPE (internal to data/tokenizer.c; the public interface is data/tokenizer.h).
 *
 * Loading follows Megatron's legacy GPT2Tokenizer (megatron/training/tokenizer/gpt2_tokenization.py):
 *   - vocab: a JSON object {token: id}; vocab_size = number of keys; eod = vocab["<|endoftext|>"].
 *   - merges: the file's text (UTF-8, universal newlines) split at '\n', dropping the first
 *     element (the "#version" line) and the last one (empty when the file ends with a newline;
 *     as in Megatron, an unterminated last line is ignored); each remaining line, split on
 *     whitespace, is a pair; rank = line index, a repeated pair keeping its last rank.
 *     Whitespace-only lines are skipped (harmless in Megatron too); a line with one or more
 *     than two fields is an error (Megatron would silently never use it).
 * Encoding: pre-tokenisation by GPT-2's pattern (see bpe.c), each piece's bytes through
 * bytes_to_unicode, merges applied lowest rank first, every occurrence left to right; a final
 * symbol that is not in the vocab becomes id 0, as Megatron's encoder.get(token, 0) does.
 *
 * Everything is read-only after mc_bpe_load, so encode/decode are thread-safe. */
#ifndef MC_DATA_BPE_H
#define MC_DATA_BPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer.h"

typedef struct mc_bpe mc_bpe_t;

/* NULL with one line in err (naming the file) on failure. */
mc_bpe_t *mc_bpe_load(const char *vocab_file, const char *merge_file, char *err, size_t n);
void mc_bpe_free(mc_bpe_t *b);

/* --- the merge core built token by token (GPT-2's files, tokenizer.json, tiktoken) ---------
 * Tokens are keyed by their bytes_to_unicode form (as GPT-2's vocab and tokenizer.json write
 * them). A merge (l, r) of rank k joins adjacent symbols l and r into l+r; the lowest rank
 * merges first, equal ranks left to right (HF's BPE, and tiktoken's rank-of-the-pair rule when
 * every split of a token is a merge of its rank). Build: mc_bpe_new, the tokens, then the
 * merges, then mc_bpe_finish; mc_bpe_free at any point. vocab_size and eod stay 0 (the
 * tokenizer around it owns them). All but finish return 0, or -1 out of memory. */
mc_bpe_t *mc_bpe_new(void);
int mc_bpe_add_token(mc_bpe_t *b, const char *key, size_t len, int32_t id);
/* 1 (nothing added) when require_token and l+r is not a token. */
int mc_bpe_add_merge(mc_bpe_t *b, const char *l, size_t ll, const char *r, size_t lr, uint32_t rank,
                     bool require_token);
/* The bytes_to_unicode key of raw[0..n) in out (room for 2n bytes); returns its length. */
size_t mc_bpe_byte_key(const unsigned char *raw, size_t n, char *out);
/* While building: the id of the token with that key, or -1. */
int32_t mc_bpe_token_id(const mc_bpe_t *b, const char *key, size_t len);
/* The first byte whose bytes_to_unicode character is not a token (after the tokens are added),
 * -1 if every byte has one, -2 out of memory. */
int mc_bpe_lacking_byte(mc_bpe_t *b);
/* whole_words: a piece whose bytes are a token is that token without merging (HF's
 * ignore_merges; tiktoken's encoder lookup of the whole piece). 0, or -1 out of memory. */
int mc_bpe_finish(mc_bpe_t *b, bool whole_words);

/* The end (> pos, <= len) of the pre-tokenizer's piece that starts at pos, or 0 on failure. */
typedef size_t (*mc_bpe_split_fn)(void *ctx, const unsigned char *s, size_t len, size_t pos);
/* Appends the ids of text[0..len), cut into pieces by split, each piece's bytes merged. */
int mc_bpe_encode_split(const mc_bpe_t *b, const char *text, size_t len, mc_bpe_split_fn split,
                        void *ctx, mc_ids_t *ids, char *err, size_t n);

int64_t mc_bpe_vocab_size(const mc_bpe_t *b);
int32_t mc_bpe_eod(const mc_bpe_t *b);

/* Appends the ids of text[0..len) to ids, pre-tokenized by GPT-2's pattern. 0, or -1 with one
 * line in err. */
int mc_bpe_encode(const mc_bpe_t *b, const char *text, size_t len, mc_ids_t *ids, char *err,
                  size_t n);
/* The bytes of ids (malloc'd; never NULL on success, even for count 0). NULL on an id that is
 * not in the vocab or whose token has a character outside bytes_to_unicode's image. */
char *mc_bpe_decode(const mc_bpe_t *b, const int32_t *ids, size_t count, size_t *out_len);

/* --- helpers shared with data/tokenizer.c ------------------------------------------------ */

/* Decodes one well-formed UTF-8 sequence (Unicode Table 3-7: no overlongs, no surrogates,
 * <= U+10FFFF) at s[pos..len). Returns its length (1..4) and sets *cp, or 0 if the byte at pos
 * does not start a well-formed sequence (*cp then holds that byte). */
static inline size_t mc_utf8_next(const unsigned char *s, size_t len, size_t pos, uint32_t *cp)
{
    unsigned c = s[pos];
    *cp = c;
    if (c < 0x80) return 1;
    size_t left = len - pos;
    if (c >= 0xC2 && c <= 0xDF) {
        if (left < 2 || (s[pos + 1] & 0xC0) != 0x80) return 0;
        *cp = ((c & 0x1Fu) << 6) | (s[pos + 1] & 0x3Fu);
        return 2;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3) return 0;
        unsigned c1 = s[pos + 1], c2 = s[pos + 2];
        unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        if (c1 < lo || c1 > hi || (c2 & 0xC0) != 0x80) return 0;
        *cp = ((c & 0x0Fu) << 12) | ((c1 & 0x3Fu) << 6) | (c2 & 0x3Fu);
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4) return 0;
        unsigned c1 = s[pos + 1], c2 = s[pos + 2], c3 = s[pos + 3];
        unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        if (c1 < lo || c1 > hi || (c2 & 0xC0) != 0x80 || (c3 & 0xC0) != 0x80) return 0;
        *cp = ((c & 0x07u) << 18) | ((c1 & 0x3Fu) << 12) | ((c2 & 0x3Fu) << 6) | (c3 & 0x3Fu);
        return 4;
    }
    return 0;
}

/* Python's str.isspace (what str.split() and int() strip): ASCII \t\n\v\f\r, U+001C..U+001F,
 * space, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. */
static inline int mc_py_isspace(uint32_t cp)
{
    if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

#endif
