/* Megatron's SentencePiece tokenizers (internal to data/tokenizer.c; the public interface is
 * data/tokenizer.h): SentencePieceTokenizer, GPTSentencePieceTokenizer and Llama2Tokenizer over
 * the SentencePiece library (data/spm.h), with Megatron core_v0.15.0's two tokenizer systems:
 *
 * - default (megatron/core/tokenizers, what pretrain_gpt.py's datasets and
 *   tools/preprocess_data.py use without --legacy-tokenizer): all three types are the same
 *   SentencePieceTokenizer library class: ids = encode_as_ids(text), eod = eos_id, pad = pad_id,
 *   vocab_size = the model's pieces; --vocab-extra-ids is not used.
 * - --legacy-tokenizer (megatron/training/tokenizer/tokenizer.py):
 *   SentencePieceTokenizer adds <CLS>, <SEP>, <EOD>, <MASK>, the pad, bos and eos pieces (<PAD>,
 *   <BOS>, <EOS> when the model has none) and <extra_id_0..N-1> (--vocab-extra-ids), each
 *   missing one after the model's pieces in that order; encoding splits the text at the first
 *   occurrence of any of them (the earliest in that order on a tie) and emits its id; eod =
 *   <EOD>, pad = the pad token's id, vocab_size = pieces + added tokens.
 *   GPTSentencePieceTokenizer: as the default. Llama2Tokenizer: [bos_id] + encode(text); pad
 *   none (Megatron's dataset gets an AttributeError and uses -1).
 *
 * Training's vocabulary (the padded embedding) is always the legacy class's vocab_size:
 * Megatron's global tokenizer is the legacy one even when its datasets use the default one.
 *
 * Text is handed to SentencePiece as the bytes given: for valid UTF-8 (all Megatron can see, a
 * str from JSON) the ids are Python's encode_as_ids(str); the library decides what invalid
 * UTF-8 becomes. A model without an eos piece has eod -1 (refused where an eod is written). */
#ifndef MC_DATA_TOKENIZER_SP_H
#define MC_DATA_TOKENIZER_SP_H

#include <stddef.h>
#include <stdint.h>

#include "data/tokenizer.h"

typedef struct mc_sp_tok mc_sp_tok_t;

/* spec->type is one of the three; NULL with one line in err on failure. */
mc_sp_tok_t *mc_sp_tok_build(const mc_tokenizer_spec_t *spec, char *err, size_t n);
void mc_sp_tok_free(mc_sp_tok_t *t);

int64_t mc_sp_tok_vocab_size(const mc_sp_tok_t *t);
int64_t mc_sp_tok_train_vocab_size(const mc_sp_tok_t *t);
/* -1 when the model has no such piece (eos for eod; pad). */
int32_t mc_sp_tok_eod(const mc_sp_tok_t *t);
int32_t mc_sp_tok_pad(const mc_sp_tok_t *t);

int mc_sp_tok_encode(const mc_sp_tok_t *t, const char *text, size_t len, mc_ids_t *ids, char *err,
                     size_t n);
/* Megatron's detokenize; NULL on an id outside the vocabulary. */
char *mc_sp_tok_decode(const mc_sp_tok_t *t, const int32_t *ids, size_t count, size_t *out_len);

#endif
