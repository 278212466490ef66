/* Megatron's SentencePiece tokenizers; see data/tokenizer_sp.h. */
#define _GNU_SOURCE /* memmem */
#include "data/tokenizer_sp.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "data/spm.h"

enum { SP_PLAIN, SP_SPECIAL, SP_BOS }; /* how text becomes ids */

typedef struct {
    char *text;
    size_t len;
    int32_t id;
} sp_special_t;

struct mc_sp_tok {
    mc_spm_t *sp;
    mc_spm_info_t info;
    int mode;
    int64_t vocab_size, train_vocab_size;
    int32_t eod, pad;
    sp_special_t *special; /* the legacy SentencePieceTokenizer's, in Megatron's order */
    size_t n_special, n_added;
};

/* Megatron's _add_special_token: an existing special token or model piece keeps its id; any
 * other token gets the next id after the pieces and the tokens added before it. Its id, or -1
 * out of memory. */
static int32_t add_special(mc_sp_tok_t *t, const char *tok)
{
    for (size_t i = 0; i < t->n_special; i++)
        if (strcmp(t->special[i].text, tok) == 0) return t->special[i].id;
    int32_t id = mc_spm_piece_to_id(t->sp, tok);
    if (id < 0) id = t->info.piece_size + (int32_t)t->n_added++;
    sp_special_t *s = realloc(t->special, (t->n_special + 1) * sizeof(*s));
    if (!s) return -1;
    t->special = s;
    char *copy = strdup(tok);
    if (!copy) return -1;
    s[t->n_special++] = (sp_special_t){copy, strlen(copy), id};
    return id;
}

/* The piece of id, or dflt when the model has none (Python's IndexError). */
static const char *piece_or(const mc_sp_tok_t *t, int32_t id, const char *dflt)
{
    return id >= 0 && id < t->info.piece_size ? mc_spm_id_to_piece(t->sp, id, NULL) : dflt;
}

/* _SentencePieceTokenizer._initalize: the special tokens; sets eod and pad (legacy ones). */
static int legacy_specials(mc_sp_tok_t *t, int64_t extra_ids, char *err, size_t n)
{
    static const char *const fixed[] = {"<CLS>", "<SEP>", "<EOD>", "<MASK>"};
    int32_t id = 0;
    for (int i = 0; i < 4 && id >= 0; i++) {
        id = add_special(t, fixed[i]);
        if (i == 2) t->eod = id;
    }
    if (id >= 0) id = t->pad = add_special(t, piece_or(t, t->info.pad_id, "<PAD>"));
    if (id >= 0) id = add_special(t, piece_or(t, t->info.bos_id, "<BOS>"));
    if (id >= 0) id = add_special(t, piece_or(t, t->info.eos_id, "<EOS>"));
    for (int64_t i = 0; i < extra_ids && id >= 0; i++) {
        char tok[40];
        snprintf(tok, sizeof(tok), "<extra_id_%lld>", (long long)i);
        id = add_special(t, tok);
    }
    if (id < 0) {
        mc_errf(err, n, "SentencePieceTokenizer: out of memory");
        return -1;
    }
    return 0;
}

static int build_kind(mc_sp_tok_t *t, const mc_tokenizer_spec_t *spec, char *err, size_t n)
{
    const bool legacy = spec->legacy;
    t->mode = SP_PLAIN;
    t->eod = t->info.eos_id;
    t->pad = t->info.pad_id;
    t->vocab_size = t->train_vocab_size = t->info.piece_size;
    if (strcmp(spec->type, "SentencePieceTokenizer") == 0) {
        if (spec->vocab_extra_ids < 0 || spec->vocab_extra_ids > 1000000) {
            mc_errf(err, n, "--vocab-extra-ids must be in [0, 1000000], got %lld",
                    (long long)spec->vocab_extra_ids);
            return -1;
        }
        const int32_t eos = t->eod, pad = t->pad;
        if (legacy_specials(t, spec->vocab_extra_ids, err, n) != 0) return -1;
        t->train_vocab_size = t->info.piece_size + (int64_t)t->n_added;
        if (legacy) {
            t->mode = SP_SPECIAL;
            t->vocab_size = t->train_vocab_size;
        } else {
            t->eod = eos;
            t->pad = pad;
        }
    } else if (strcmp(spec->type, "Llama2Tokenizer") == 0 && legacy) {
        t->mode = SP_BOS;
        t->pad = -1;
    } else if (strcmp(spec->type, "GPTSentencePieceTokenizer") != 0 &&
               strcmp(spec->type, "Llama2Tokenizer") != 0) {
        mc_errf(err, n, "'%s' is not a SentencePiece tokenizer type", spec->type);
        return -1;
    }
    return 0;
}

mc_sp_tok_t *mc_sp_tok_build(const mc_tokenizer_spec_t *spec, char *err, size_t n)
{
    if (!spec->tokenizer_model || !*spec->tokenizer_model) {
        mc_errf(err, n, "%s needs a SentencePiece model file (--tokenizer-model FILE.model)",
                spec->type);
        return NULL;
    }
    mc_sp_tok_t *t = calloc(1, sizeof(*t));
    if (!t) {
        mc_errf(err, n, "%s: out of memory", spec->type);
        return NULL;
    }
    t->sp = mc_spm_load(spec->tokenizer_model, err, n);
    if (!t->sp) {
        free(t);
        return NULL;
    }
    t->info = mc_spm_info(t->sp);
    if (build_kind(t, spec, err, n) != 0) {
        mc_sp_tok_free(t);
        return NULL;
    }
    return t;
}

void mc_sp_tok_free(mc_sp_tok_t *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n_special; i++) free(t->special[i].text);
    free(t->special);
    mc_spm_free(t->sp);
    free(t);
}

int64_t mc_sp_tok_vocab_size(const mc_sp_tok_t *t) { return t->vocab_size; }
int64_t mc_sp_tok_train_vocab_size(const mc_sp_tok_t *t) { return t->train_vocab_size; }
int32_t mc_sp_tok_eod(const mc_sp_tok_t *t) { return t->eod; }
int32_t mc_sp_tok_pad(const mc_sp_tok_t *t) { return t->pad; }

/* Appends encode_as_ids(text[0..len)). */
static int encode_plain(const mc_sp_tok_t *t, const char *text, size_t len, mc_ids_t *ids,
                        char *err, size_t n)
{
    int32_t *v;
    size_t count;
    if (mc_spm_encode(t->sp, text, len, true, &v, &count, err, n) != 0) return -1;
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) rc = mc_ids_push(ids, v[i]);
    free(v);
    if (rc != 0) mc_errf(err, n, "SentencePiece: out of memory");
    return rc;
}

/* The legacy SentencePieceTokenizer.tokenize: text up to the earliest special token (the first
 * in Megatron's order on a tie) through SentencePiece, then that token's id, and on after it.
 * Byte search finds what Python's str.index finds: both are valid UTF-8 (self-synchronising). */
static int encode_special(const mc_sp_tok_t *t, const char *text, size_t len, mc_ids_t *ids,
                          char *err, size_t n)
{
    size_t *pos = malloc((t->n_special ? t->n_special : 1) * sizeof(size_t));
    if (!pos) {
        mc_errf(err, n, "SentencePiece: out of memory");
        return -1;
    }
    for (size_t k = 0; k < t->n_special; k++) pos[k] = 0; /* stale: searched again below */
    size_t idx = 0;
    int rc = 0;
    for (bool first = true; rc == 0; first = false) {
        size_t best = SIZE_MAX;
        for (size_t k = 0; k < t->n_special; k++) {
            if (pos[k] != SIZE_MAX && (first || pos[k] < idx)) {
                const char *hit =
                    memmem(text + idx, len - idx, t->special[k].text, t->special[k].len);
                pos[k] = hit ? (size_t)(hit - text) : SIZE_MAX;
            }
            if (pos[k] != SIZE_MAX && (best == SIZE_MAX || pos[k] < pos[best])) best = k;
        }
        if (best == SIZE_MAX) break;
        rc = encode_plain(t, text + idx, pos[best] - idx, ids, err, n);
        if (rc == 0 && mc_ids_push(ids, t->special[best].id) != 0) {
            mc_errf(err, n, "SentencePiece: out of memory");
            rc = -1;
        }
        idx = pos[best] + t->special[best].len;
    }
    free(pos);
    return rc != 0 ? -1 : encode_plain(t, text + idx, len - idx, ids, err, n);
}

int mc_sp_tok_encode(const mc_sp_tok_t *t, const char *text, size_t len, mc_ids_t *ids, char *err,
                     size_t n)
{
    if (!text) text = "";
    if (t->mode == SP_SPECIAL) return encode_special(t, text, len, ids, err, n);
    if (t->mode == SP_BOS) {
        if (t->info.bos_id < 0) {
            mc_errf(err, n,
                    "Llama2Tokenizer: the model has no bos piece (its bos_id is -1), which "
                    "Megatron's legacy Llama2Tokenizer puts before every text");
            return -1;
        }
        if (mc_ids_push(ids, t->info.bos_id) != 0) {
            mc_errf(err, n, "SentencePiece: out of memory");
            return -1;
        }
    }
    return encode_plain(t, text, len, ids, err, n);
}

/* The special token with this id (legacy SentencePieceTokenizer), or NULL. */
static const sp_special_t *special_of(const mc_sp_tok_t *t, int32_t id)
{
    for (size_t i = 0; i < t->n_special; i++)
        if (t->special[i].id == id) return &t->special[i];
    return NULL;
}

/* Appends decode_ids(ids[0..count)) to *out (grown; *len bytes), then " TOKEN " when s is not
 * NULL. -1 on a bad id or out of memory. */
static int append_decoded(const mc_sp_tok_t *t, const int32_t *ids, size_t count, char **out,
                          size_t *len, const sp_special_t *s)
{
    size_t dl = 0, tl = s ? s->len + 2 : 0;
    char *d = mc_spm_decode(t->sp, ids, count, &dl);
    if (!d) return -1;
    char *o = realloc(*out, *len + dl + tl + 1);
    if (!o) {
        free(d);
        return -1;
    }
    memcpy(o + *len, d, dl);
    if (s) {
        o[*len + dl] = ' ';
        memcpy(o + *len + dl + 1, s->text, s->len);
        o[*len + dl + tl - 1] = ' ';
    }
    o[*len + dl + tl] = 0;
    *len += dl + tl;
    *out = o;
    free(d);
    return 0;
}

char *mc_sp_tok_decode(const mc_sp_tok_t *t, const int32_t *ids, size_t count, size_t *out_len)
{
    char *out = NULL;
    size_t len = 0, last = 0;
    int rc = 0;
    /* Megatron's legacy detokenize: each special token as " TOKEN " between decoded runs. */
    for (size_t i = 0; t->mode == SP_SPECIAL && i < count && rc == 0; i++) {
        const sp_special_t *s = special_of(t, ids[i]);
        if (!s) continue;
        rc = append_decoded(t, ids + last, i - last, &out, &len, s);
        last = i + 1;
    }
    if (rc == 0) rc = append_decoded(t, ids + last, count - last, &out, &len, NULL);
    if (rc != 0) {
        free(out);
        return NULL;
    }
    if (out_len) *out_len = len;
    return out;
}
