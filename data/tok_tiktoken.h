/* Megatron's TikTokenizer (CustomTikTokenizer) without Python: its JSON vocabulary (a list of
 * {"rank", "token_bytes" (base64), "token_str"}, ranks 0..255 the single bytes), cut to
 * vocab_size - num_special_tokens ranks; ids are rank + num_special_tokens; the special tokens
 * (default <unk>, <s>, </s>; padded with <SPECIAL_i> up to num_special_tokens) take ids
 * 0..num_special_tokens - 1; eod is </s>'s id; vocab_size is --vocab-size (default 2**17).
 * Text is encoded as tiktoken's encode_ordinary with the v1 or v2 pattern: a piece that is a
 * token is that token, else its bytes merge pair by pair, lowest rank of the joined bytes
 * first. Special-token text is ordinary text (Megatron's legacy tokenizer; core_v0.15.0's
 * default one refuses such text instead). */
#ifndef MC_DATA_TOK_TIKTOKEN_H
#define MC_DATA_TOK_TIKTOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer.h"

typedef struct mc_tiktoken mc_tiktoken_t;

typedef struct {
    const char *path;           /* --tokenizer-model */
    const char *pattern;        /* --tiktoken-pattern: v1 or v2 */
    int64_t vocab_size;         /* --vocab-size; <= 0: 131072 */
    int64_t num_special;        /* --tiktoken-num-special-tokens */
    const char *const *special; /* --tiktoken-special-tokens; NULL: <unk> <s> </s> */
    int nspecial;
} mc_tiktoken_spec_t;

/* NULL with one line in err naming what is wrong (Megatron's asserts, as messages). */
mc_tiktoken_t *mc_tiktoken_load(const mc_tiktoken_spec_t *spec, char *err, size_t n);
void mc_tiktoken_free(mc_tiktoken_t *t);
int64_t mc_tiktoken_vocab_size(const mc_tiktoken_t *t);
int32_t mc_tiktoken_eod(const mc_tiktoken_t *t);
/* Thread-safe. Invalid UTF-8: see data/pretok_regex.h. */
int mc_tiktoken_encode(const mc_tiktoken_t *t, const char *text, size_t len, mc_ids_t *ids,
                       char *err, size_t n);
char *mc_tiktoken_decode(const mc_tiktoken_t *t, const int32_t *ids, size_t count, size_t *out_len);

#endif
