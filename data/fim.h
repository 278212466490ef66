/* Fill-in-the-middle samples as Megatron's GPTFIMDataset makes them (megatron/training/datasets/
 * fim_dataset.py, Megatron-LM main of 2026-08; pretrain_gpt.py builds it for --fim-data).
 *
 * A sample's text (seq_length + 1 ids, read as GPTDataset reads it) is cut at every eod id; each
 * piece (the last one, after the last eod, even when empty) is transformed, the pieces are joined
 * with the eods again, and the result is cut back to the original length or filled up with the
 * FIM pad id. Transforming a piece:
 *   - with --fim-split-sample (a token): a piece holding that token draws binomial(1, fim_rate);
 *     0 keeps the piece, 1 permutes each fragment between the split tokens (empty ones skipped,
 *     the one after the last split token always) at --fim-fragment-rate; a piece without the
 *     token is permuted at fim_rate;
 *   - permuting at rate r: binomial(1, r) (drawn even for r = 0); 0 keeps the ids. 1: the ids are decoded to text with
 *     the tokenizer's special tokens left out; text starting with --fim-no-prefix is kept as the
 *     ids; else randint(0, len + 1, size=2) over the text's characters (code points), sorted,
 *     cut it into prefix, middle and suffix, each encoded again; binomial(1, fim_spm_rate)
 *     picks SPM  [<prefix>, <suffix>] suffix [<middle>] prefix middle
 *     or PSM     [<prefix>] prefix [<suffix>] suffix [<middle>] middle.
 * The draws come from one numpy RandomState(--seed) per GPTDataset, in the order samples are read
 * (data/source.c keeps one per dataset and DataLoader worker). */
#ifndef MC_DATA_FIM_H
#define MC_DATA_FIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/mt19937.h"
#include "data/tokenizer.h"

typedef struct {
    double rate, spm_rate;                    /* --fim-rate, --fim-spm-rate */
    double fragment_rate;                     /* --fim-fragment-rate (needed with split >= 0) */
    int32_t prefix, middle, suffix, pad, eod; /* the ids of the --fim-*-token strings */
    int32_t split;                            /* --fim-split-sample's id, or -1 */
    const uint32_t *no_prefix;                /* --fim-no-prefix as code points, or NULL */
    size_t no_prefix_len;
} mc_fim_params_t;

/* The tokenizer as FIM uses it: decode(ids) with the special tokens removed (UTF-8 bytes,
 * malloc'd) and encode(bytes). Return NULL / -1 on failure. */
typedef struct {
    char *(*decode)(void *ctx, const int32_t *ids, size_t n, size_t *len);
    int (*encode)(void *ctx, const char *s, size_t len, mc_ids_t *out);
    void *ctx;
} mc_fim_codec_t;

/* Transforms text[0..len) in place (drawing from rng). 0, or -1 with err (out of memory, a
 * tokenizer failure). */
int mc_fim_sample(const mc_fim_params_t *p, const mc_fim_codec_t *c, mc_mt19937_t *rng,
                  int32_t *text, int len, char *err, size_t n);

/* UTF-8 bytes to code points as Python's bytes.decode('utf-8', errors='replace') (each maximal
 * invalid subpart one U+FFFD). *out malloc'd; returns the count, or -1 out of memory. */
int64_t mc_fim_utf8_decode(const char *s, size_t len, uint32_t **out);

#endif
