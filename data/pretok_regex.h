/* Pre-tokenization by a regex, as tokenizers' Split (behavior Isolated) and tiktoken do it: the
 * text is cut at every match of the pattern (findall), and the text between two matches is a
 * piece too. The pattern runs under PCRE2 in UTF and UCP mode (\p{..}, \s, (?i) by Unicode);
 * \s is widened to Unicode's White_Space (PCRE2's also lacks U+0085, which the Rust engines
 * and Oniguruma include). Invalid UTF-8 is allowed (PCRE2_MATCH_INVALID_UTF): no pattern item
 * matches its bytes, so they end up in the pieces between matches and go through BPE as bytes,
 * which keeps decode(encode(x)) == x. Read-only after mc_pretok_regex_new: thread-safe. */
#ifndef MC_DATA_PRETOK_REGEX_H
#define MC_DATA_PRETOK_REGEX_H

#include <stddef.h>

#include "data/bpe.h"

typedef struct mc_pretok_regex mc_pretok_regex_t;

/* NULL with one line in err naming what (e.g. "tokenizer.json's Split pattern") on failure. */
mc_pretok_regex_t *mc_pretok_regex_new(const char *pattern, const char *what, char *err, size_t n);
void mc_pretok_regex_free(mc_pretok_regex_t *r);

/* Appends the ids of text[0..len): each piece through b's merges. 0, or -1 with err. */
int mc_pretok_regex_encode(const mc_pretok_regex_t *r, const mc_bpe_t *b, const char *text,
                           size_t len, mc_ids_t *ids, char *err, size_t n);

/* The ends of text[0..len)'s pieces in order, into ends[0..*count) (at most cap; more is an
 * error): the pieces encode merges, for checks of the pre-tokenization alone. 0, or -1. */
int mc_pretok_regex_pieces(const mc_pretok_regex_t *r, const char *text, size_t len, size_t *ends,
                           size_t cap, size_t *count);

#endif
