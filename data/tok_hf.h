/* Megatron's HuggingFaceTokenizer for byte-level BPE tokenizer.json files (Llama 3, Qwen2,
 * Mistral NeMo, GPT-2 style), without Python:
 *   - model BPE (merges as "a b" strings or ["a", "b"] lists; ignore_merges), no dropout, no
 *     subword prefix or suffix, no byte fallback;
 *   - normalizer none or NFC; pre-tokenizer ByteLevel with GPT-2's regex, or Split (a regex,
 *     behavior Isolated) then ByteLevel without regex; no prefix space;
 *   - added tokens (special or not) are cut out of the text first, longest match leftmost, as
 *     the tokenizers library does (their lstrip/rstrip/single_word options are refused); all
 *     are matched before NFC (tokenizers matches normalized=true ones after it: the same unless
 *     NFC changes the characters next to such a token);
 *   - the post-processor's special tokens around the text (TemplateProcessing's single
 *     template, e.g. Llama 3's BOS) only when add_special: Megatron's legacy tokenizer
 *     (tokenizer(text).input_ids) adds them, core_v0.15.0's default one (tokenize() then
 *     convert_tokens_to_ids) does not.
 * vocab_size is len(tokenizer): the model's tokens and the added ones not among them; eod is the
 * id of tokenizer_config.json's (else special_tokens_map.json's) eos_token.
 * Anything else in tokenizer.json is refused in one line naming the feature. */
#ifndef MC_DATA_TOK_HF_H
#define MC_DATA_TOK_HF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer.h"

typedef struct mc_hf_tok mc_hf_tok_t;

/* dir holds tokenizer.json (and tokenizer_config.json). NULL with one line in err. */
mc_hf_tok_t *mc_hf_tok_load(const char *dir, bool add_special, char *err, size_t n);
void mc_hf_tok_free(mc_hf_tok_t *t);
int64_t mc_hf_tok_vocab_size(const mc_hf_tok_t *t);
int32_t mc_hf_tok_eod(const mc_hf_tok_t *t);
/* Thread-safe. Invalid UTF-8: see data/pretok_regex.h (NFC leaves those bytes as they are). */
int mc_hf_tok_encode(const mc_hf_tok_t *t, const char *text, size_t len, mc_ids_t *ids, char *err,
                     size_t n);
char *mc_hf_tok_decode(const mc_hf_tok_t *t, const int32_t *ids, size_t count, size_t *out_len);

#endif
