/* A fast path for the pre-tokenization patterns of Llama 3, Qwen2, Mistral NeMo (Tekken, which
 * is Megatron's tiktoken v2 pattern) and Megatron's tiktoken v1: their findall match at a
 * position, computed by hand while every character it depends on is ASCII. Where the match would
 * depend on a byte >= 0x80, it answers "unknown" and data/pretok_regex.c asks PCRE2, so the
 * pieces are the regex's own. The patterns are recognised by their exact text. */
#ifndef MC_DATA_PRETOK_ASCII_H
#define MC_DATA_PRETOK_ASCII_H

#include <stddef.h>

typedef struct {
    int contractions; /* (?i:'s|'t|'re|'ve|'m|'ll|'d) first */
    int max_digits;   /* \p{N}{1,3}: 3; \p{N}: 1 */
    int case_split;   /* Tekken / v2: [Lu..]*[Ll..]+ | [Lu..]+[Ll..]* instead of \p{L}+ */
    int slash;        /* ' ?[^\s\p{L}\p{N}]+[\r\n/]*' (v2) instead of [\r\n]* */
} mc_pretok_ascii_t;  /* v1's \s*[\r\n] matches what \s*[\r\n]+ does */

/* The fast path of pattern, or NULL when it is none of the four. */
const mc_pretok_ascii_t *mc_pretok_ascii_find(const char *pattern);

/* The end of the match at pos (> pos), or 0 when it depends on a byte >= 0x80. */
size_t mc_pretok_ascii_match(const mc_pretok_ascii_t *p, const unsigned char *s, size_t len,
                             size_t pos);

#endif
