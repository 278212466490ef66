/* Tokenizers as Megatron builds them (--tokenizer-type): GPT2BPETokenizer (byte-level BPE with
 * GPT-2's pre-tokenisation; ids of Megatron's legacy GPT-2 tokenizer = HF gpt2),
 * HuggingFaceTokenizer (tokenizer.json's byte-level BPE: data/tok_hf.h), TikTokenizer
 * (Megatron's tiktoken vocabulary: data/tok_tiktoken.h), NullTokenizer (text is space-separated
 * integer ids; eod = vocab_size) and the SentencePiece ones, SentencePieceTokenizer,
 * GPTSentencePieceTokenizer and Llama2Tokenizer (through the SentencePiece library; Megatron's
 * default and --legacy-tokenizer semantics in data/tokenizer_sp.h). */
#ifndef MC_DATA_TOKENIZER_H
#define MC_DATA_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>


/* A growable id vector. */
typedef struct {
    int32_t *v;
    size_t n, cap;
} mc_ids_t;

/* 0, or -1 out of memory. Inline: the BPE inner loop pushes every id. */
static inline int mc_ids_push(mc_ids_t *ids, int32_t id)
{
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 64;
        if (cap > SIZE_MAX / sizeof(int32_t)) return -1;
        int32_t *v = realloc(ids->v, cap * sizeof(int32_t));
        if (!v) return -1;
        ids->v = v;
        ids->cap = cap;
    }
    ids->v[ids->n++] = id;
    return 0;
}
void mc_ids_free(mc_ids_t *ids);

typedef struct mc_tokenizer mc_tokenizer_t;

/* What builds a tokenizer: Megatron's tokenizer arguments (--tokenizer-type and its files and
 * options), filled from the training or the preprocess-data arguments. */
typedef struct {
    const char *type;            /* --tokenizer-type */
    const char *vocab_file;      /* --vocab-file */
    const char *merge_file;      /* --merge-file */
    const char *tokenizer_model; /* --tokenizer-model */
    int64_t vocab_size;          /* --vocab-size (NullTokenizer; TikTokenizer, <= 0: 2**17) */
    int64_t vocab_extra_ids;     /* --vocab-extra-ids (legacy SentencePieceTokenizer) */
    /* TikTokenizer: --tiktoken-pattern, --tiktoken-num-special-tokens, and
     * --tiktoken-special-tokens (NULL: Megatron's default list) */
    const char *tiktoken_pattern;
    int64_t tiktoken_num_special_tokens;
    const char *const *tiktoken_special_tokens;
    int n_tiktoken_special_tokens;
    bool legacy; /* --legacy-tokenizer: Megatron's legacy classes (the SentencePiece types), and
                  * HuggingFaceTokenizer's post-processor tokens (tokenizer(text).input_ids) */
} mc_tokenizer_spec_t;

/* type "GPT2BPETokenizer" (needs vocab_file and merge_file), "HuggingFaceTokenizer" (needs
 * tokenizer_model, a directory), "TikTokenizer" (needs tokenizer_model, a .json file, and
 * tiktoken_pattern), a SentencePiece type (needs tokenizer_model, a .model file) or
 * "NullTokenizer" (needs vocab_size). NULL with one line in err on failure (missing/malformed
 * files named). */
mc_tokenizer_t *mc_tokenizer_build(const mc_tokenizer_spec_t *spec, char *err, size_t n);
void mc_tokenizer_free(mc_tokenizer_t *t);

/* Megatron's _vocab_size_with_padding: ceil(V / (divisible_by*tp)) * (divisible_by*tp); -1 when
 * that exceeds an int. */
int mc_padded_vocab_size(int vocab_size, int divisible_by, int tp);

/* SentencePieceTokenizer, GPTSentencePieceTokenizer or Llama2Tokenizer: a type whose
 * --tokenizer-model is a SentencePiece .model file. */
bool mc_tokenizer_is_sentencepiece(const char *type);

/* Megatron's tokenizer.vocab_size (GPT-2: 50257; Null: vocab_size + 1) and tokenizer.eod
 * (-1 for a SentencePiece model without an eos piece). */
int64_t mc_tokenizer_vocab_size(const mc_tokenizer_t *t);
int32_t mc_tokenizer_eod(const mc_tokenizer_t *t);
/* The vocabulary Megatron's training pads for the embedding: its global tokenizer's, always the
 * legacy class (differs from mc_tokenizer_vocab_size only for SentencePieceTokenizer without
 * --legacy-tokenizer). */
int64_t mc_tokenizer_train_vocab_size(const mc_tokenizer_t *t);
/* tokenizer.pad as Megatron's GPT dataset reads it: the pad id, or -1 (MC_PAD_TOKEN_ID) when the
 * tokenizer has none. */
int32_t mc_tokenizer_pad(const mc_tokenizer_t *t);

/* Appends the ids of text[0..len) (any bytes). Safe to call from several threads at once on the
 * same tokenizer. 0, or -1 (err).
 * GPT2BPETokenizer: valid UTF-8 gets exactly the ids of Megatron's legacy tokenizer on the
 * decoded str. Invalid UTF-8 is encoded byte-wise: each byte that is not part of a well-formed
 * UTF-8 sequence is, for the pre-tokenisation pattern, one character outside \s, \p{L} and
 * \p{N}, and goes through BPE as that byte; in Python terms, text.decode('utf-8',
 * 'surrogateescape') then each piece .encode('utf-8', 'surrogateescape') (see
 * test/ref/gpt2_tokenizer_ref.py). So decode(encode(x)) == x for any bytes. Megatron itself never
 * sees invalid UTF-8 (it reads strict UTF-8 JSON); a lone-surrogate escape such as "\ud800"
 * makes its tokenizer raise UnicodeEncodeError (and jansson refuses it when parsing).
 * The SentencePiece types: the library's ids for the bytes as given (Megatron encodes a str, so
 * valid UTF-8; see data/tokenizer_sp.h).
 * NullTokenizer: Megatron's [int(x) for x in text.split(' ')] (so "", "1  2" and " 1" are errors,
 * surrounding whitespace of each field is ignored; ASCII digits only), ids outside [0, eod]
 * are errors. */
int mc_tokenizer_encode(const mc_tokenizer_t *t, const char *text, size_t len, mc_ids_t *ids,
                        char *err, size_t n);
/* The bytes of ids (malloc'd, not NUL-terminated; *out_len set). NULL on an id out of range. */
char *mc_tokenizer_decode(const mc_tokenizer_t *t, const int32_t *ids, size_t count,
                          size_t *out_len);

/* GPT2BPETokenizer (the one type fill-in-the-middle data supports so far). */
bool mc_tokenizer_is_gpt2(const mc_tokenizer_t *t);
/* HF convert_tokens_to_ids of a vocabulary entry (GPT2BPETokenizer: a vocab.json key): its id,
 * -1 when the vocabulary has no such token, -2 for a type without this lookup yet. */
int32_t mc_tokenizer_token_id(const mc_tokenizer_t *t, const char *token);

#endif
