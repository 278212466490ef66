/* Tokenizers as Megatron builds them: GPT2BPETokenizer (data/bpe.c), NullTokenizer and the
 * SentencePiece types (data/tokenizer_sp.c).
 * See data/tokenizer.h. */
#include "base/error.h"
#include "data/tokenizer.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bpe.h"
#include "data/tok_hf.h"
#include "data/tok_tiktoken.h"
#include "data/tokenizer_sp.h"

enum { TOK_GPT2, TOK_NULL, TOK_SP, TOK_HF, TOK_TIKTOKEN };

struct mc_tokenizer {
    int kind;
    mc_bpe_t *bpe;      /* TOK_GPT2 */
    mc_sp_tok_t *sp;    /* TOK_SP */
    int64_t null_vocab; /* TOK_NULL: the --vocab-size given (= eod) */
    mc_hf_tok_t *hf;    /* TOK_HF */
    mc_tiktoken_t *tt;  /* TOK_TIKTOKEN */
};

void mc_ids_free(mc_ids_t *ids)
{
    if (!ids) return;
    free(ids->v);
    ids->v = NULL;
    ids->n = ids->cap = 0;
}

static mc_tokenizer_t *sp_build(const mc_tokenizer_spec_t *spec, char *err, size_t n)
{
    mc_sp_tok_t *sp = mc_sp_tok_build(spec, err, n);
    if (!sp) return NULL;
    mc_tokenizer_t *t = calloc(1, sizeof(*t));
    if (!t) {
        mc_sp_tok_free(sp);
        mc_errf(err, n, "%s: out of memory", spec->type);
        return NULL;
    }
    t->kind = TOK_SP;
    t->sp = sp;
    return t;
}

/* HuggingFaceTokenizer (tokenizer.json) or TikTokenizer (Megatron's tiktoken JSON). */
static mc_tokenizer_t *build_bpe_model(const mc_tokenizer_spec_t *spec, char *err, size_t n)
{
    mc_tokenizer_t *t = calloc(1, sizeof(*t));
    if (!t) {
        mc_errf(err, n, "%s: out of memory", spec->type);
        return NULL;
    }
    if (strcmp(spec->type, "HuggingFaceTokenizer") == 0) {
        t->kind = TOK_HF;
        t->hf = mc_hf_tok_load(spec->tokenizer_model, spec->legacy, err, n);
    } else {
        t->kind = TOK_TIKTOKEN;
        t->tt =
            mc_tiktoken_load(&(mc_tiktoken_spec_t){.path = spec->tokenizer_model,
                                                   .pattern = spec->tiktoken_pattern,
                                                   .vocab_size = spec->vocab_size,
                                                   .num_special = spec->tiktoken_num_special_tokens,
                                                   .special = spec->tiktoken_special_tokens,
                                                   .nspecial = spec->n_tiktoken_special_tokens},
                             err, n);
    }
    if (t->hf || t->tt) return t;
    free(t);
    return NULL;
}

mc_tokenizer_t *mc_tokenizer_build(const mc_tokenizer_spec_t *spec, char *err, size_t n)
{
    const char *type = spec->type, *vocab_file = spec->vocab_file, *merge_file = spec->merge_file;
    const int64_t vocab_size = spec->vocab_size;
    if (!type) {
        mc_errf(err, n, "no tokenizer type given (--tokenizer-type)");
        return NULL;
    }
    if (strcmp(type, "GPT2BPETokenizer") == 0) {
        if (!vocab_file || !*vocab_file) {
            mc_errf(err, n, "GPT2BPETokenizer needs a vocab file (--vocab-file)");
            return NULL;
        }
        if (!merge_file || !*merge_file) {
            mc_errf(err, n, "GPT2BPETokenizer needs a merge file (--merge-file)");
            return NULL;
        }
        mc_bpe_t *b = mc_bpe_load(vocab_file, merge_file, err, n);
        if (!b) return NULL;
        mc_tokenizer_t *t = calloc(1, sizeof(*t));
        if (!t) {
            mc_bpe_free(b);
            mc_errf(err, n, "GPT2BPETokenizer: out of memory");
            return NULL;
        }
        t->kind = TOK_GPT2;
        t->bpe = b;
        return t;
    }
    if (strcmp(type, "HuggingFaceTokenizer") == 0 || strcmp(type, "TikTokenizer") == 0)
        return build_bpe_model(spec, err, n);
    if (strcmp(type, "NullTokenizer") == 0) {
        if (vocab_size < 0 || vocab_size >= INT32_MAX) {
            mc_errf(err, n,
                    "NullTokenizer needs a vocab size in [0, %d) (--vocab-size), got %" PRId64,
                    INT32_MAX, vocab_size);
            return NULL;
        }
        mc_tokenizer_t *t = calloc(1, sizeof(*t));
        if (!t) {
            mc_errf(err, n, "NullTokenizer: out of memory");
            return NULL;
        }
        t->kind = TOK_NULL;
        t->null_vocab = vocab_size;
        return t;
    }
    if (mc_tokenizer_is_sentencepiece(type)) return sp_build(spec, err, n);
    mc_errf(err, n,
            "tokenizer type '%s' is not supported (supported: GPT2BPETokenizer, "
            "HuggingFaceTokenizer, TikTokenizer, NullTokenizer, SentencePieceTokenizer, "
            "GPTSentencePieceTokenizer, Llama2Tokenizer)",
            type);
    return NULL;
}

int mc_padded_vocab_size(int vocab_size, int divisible_by, int tp)
{
    int64_t multiple = (int64_t)divisible_by * tp;
    if (vocab_size <= 0 || multiple <= 0) return vocab_size;
    int64_t padded = (vocab_size + multiple - 1) / multiple * multiple;
    return padded > INT_MAX ? -1 : (int)padded;
}

bool mc_tokenizer_is_sentencepiece(const char *type)
{
    return strcmp(type, "SentencePieceTokenizer") == 0 ||
           strcmp(type, "GPTSentencePieceTokenizer") == 0 || strcmp(type, "Llama2Tokenizer") == 0;
}

void mc_tokenizer_free(mc_tokenizer_t *t)
{
    if (!t) return;
    mc_bpe_free(t->bpe);
    mc_sp_tok_free(t->sp);
    mc_hf_tok_free(t->hf);
    mc_tiktoken_free(t->tt);
    free(t);
}

int64_t mc_tokenizer_vocab_size(const mc_tokenizer_t *t)
{
    switch (t->kind) {
    case TOK_GPT2: return mc_bpe_vocab_size(t->bpe);
    case TOK_HF: return mc_hf_tok_vocab_size(t->hf);
    case TOK_TIKTOKEN: return mc_tiktoken_vocab_size(t->tt);
    case TOK_SP: return mc_sp_tok_vocab_size(t->sp);
    default: return t->null_vocab + 1;
    }
}

int32_t mc_tokenizer_eod(const mc_tokenizer_t *t)
{
    switch (t->kind) {
    case TOK_GPT2: return mc_bpe_eod(t->bpe);
    case TOK_HF: return mc_hf_tok_eod(t->hf);
    case TOK_TIKTOKEN: return mc_tiktoken_eod(t->tt);
    case TOK_SP: return mc_sp_tok_eod(t->sp);
    default: return (int32_t)t->null_vocab;
    }
}

int64_t mc_tokenizer_train_vocab_size(const mc_tokenizer_t *t)
{
    return t->kind == TOK_SP ? mc_sp_tok_train_vocab_size(t->sp) : mc_tokenizer_vocab_size(t);
}

int32_t mc_tokenizer_pad(const mc_tokenizer_t *t)
{
    return t->kind == TOK_SP ? mc_sp_tok_pad(t->sp) : -1;
}

/* Copies s[0..len) into out as a short printable quotation for an error message. */
static void quote(char *out, size_t cap, const unsigned char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 5 < cap; i++) {
        if (i == 24 && len > 28) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        unsigned c = s[i];
        if (c >= 0x20 && c < 0x7F && c != '\\') {
            out[o++] = (char)c;
        } else {
            snprintf(out + o, cap - o, "\\x%02x", c);
            o += 4;
        }
    }
    out[o] = 0;
}

/* Python's int() of one ' '-separated field: optional surrounding whitespace (str.isspace), an
 * optional sign, decimal digits with single underscores between them. Only ASCII digits (Python
 * also accepts other Unicode decimal digits). 0 and *v, or -1. */
static int py_int(const unsigned char *s, size_t len, int64_t *v)
{
    size_t a = 0, e, k;
    uint32_t cp;
    while (a < len && (k = mc_utf8_next(s, len, a, &cp)) && mc_py_isspace(cp)) a += k;
    e = a; /* end of the last non-space unit */
    for (size_t p = a; p < len;) {
        k = mc_utf8_next(s, len, p, &cp);
        int space = k && mc_py_isspace(cp);
        p += k ? k : 1;
        if (!space) e = p;
    }
    int neg = 0;
    if (a < e && (s[a] == '+' || s[a] == '-')) neg = s[a++] == '-';
    if (a >= e || s[a] < '0' || s[a] > '9') return -1;
    uint64_t x = 0;
    for (size_t i = a; i < e; i++) {
        unsigned c = s[i];
        if (c == '_') {
            if (i + 1 >= e || s[i + 1] < '0' || s[i + 1] > '9') return -1;
            continue;
        }
        if (c < '0' || c > '9') return -1;
        if (x > (uint64_t)INT64_MAX / 10)
            x = (uint64_t)INT64_MAX; /* saturate; range-checked later */
        else x = x * 10 + (c - '0');
    }
    if (x > (uint64_t)INT64_MAX) x = (uint64_t)INT64_MAX;
    *v = neg ? -(int64_t)x : (int64_t)x;
    return 0;
}

/* Megatron's _NullTokenizer.tokenize: [int(x) for x in text.split(' ')]. */
static int null_encode(const mc_tokenizer_t *t, const char *text, size_t len, mc_ids_t *ids,
                       char *err, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t p = 0;
    for (;;) {
        size_t e = p;
        while (e < len && s[e] != ' ') e++;
        int64_t v;
        char q[128];
        if (py_int(s + p, e - p, &v) < 0) {
            quote(q, sizeof(q), s + p, e - p);
            mc_errf(err, n,
                    "NullTokenizer: '%s' is not an integer (text must be ids separated by "
                    "single spaces)",
                    q);
            return -1;
        }
        if (v < 0 || v > t->null_vocab) {
            quote(q, sizeof(q), s + p, e - p);
            mc_errf(err, n,
                    "NullTokenizer: id %s is outside [0, %" PRId64 "] (vocab size %" PRId64
                    ", eod %" PRId64 ")",
                    q, t->null_vocab, t->null_vocab, t->null_vocab);
            return -1;
        }
        if (mc_ids_push(ids, (int32_t)v) < 0) {
            mc_errf(err, n, "NullTokenizer: out of memory");
            return -1;
        }
        if (e >= len) break;
        p = e + 1;
    }
    return 0;
}

int mc_tokenizer_encode(const mc_tokenizer_t *t, const char *text, size_t len, mc_ids_t *ids,
                        char *err, size_t n)
{
    if (len && !text) {
        mc_errf(err, n, "tokenizer: NULL text");
        return -1;
    }
    if (t->kind == TOK_GPT2) return mc_bpe_encode(t->bpe, text, len, ids, err, n);
    if (t->kind == TOK_SP) return mc_sp_tok_encode(t->sp, text, len, ids, err, n);
    if (t->kind == TOK_HF) return mc_hf_tok_encode(t->hf, text, len, ids, err, n);
    if (t->kind == TOK_TIKTOKEN) return mc_tiktoken_encode(t->tt, text, len, ids, err, n);
    return null_encode(t, text ? text : "", len, ids, err, n);
}

static char *null_decode(const mc_tokenizer_t *t, const int32_t *ids, size_t count, size_t *out_len)
{
    size_t total = 0;
    for (size_t i = 0; i < count; i++) {
        if (ids[i] < 0 || ids[i] > t->null_vocab) return NULL;
        total += 12;
    }
    char *out = malloc(total + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < count; i++)
        o += (size_t)snprintf(out + o, total + 1 - o, i ? " %d" : "%d", (int)ids[i]);
    if (out_len) *out_len = o;
    return out;
}

char *mc_tokenizer_decode(const mc_tokenizer_t *t, const int32_t *ids, size_t count,
                          size_t *out_len)
{
    if (count && !ids) return NULL;
    if (t->kind == TOK_GPT2) return mc_bpe_decode(t->bpe, ids, count, out_len);
    if (t->kind == TOK_SP) return mc_sp_tok_decode(t->sp, ids, count, out_len);
    if (t->kind == TOK_HF) return mc_hf_tok_decode(t->hf, ids, count, out_len);
    if (t->kind == TOK_TIKTOKEN) return mc_tiktoken_decode(t->tt, ids, count, out_len);
    return null_decode(t, ids, count, out_len);
}

bool mc_tokenizer_is_gpt2(const mc_tokenizer_t *t) { return t->kind == TOK_GPT2; }

/* vocab.json's keys are the bytes_to_unicode spelling of each token's bytes: a token's key is
 * found by decoding every id (a start-up cost of one pass over the vocabulary). */
int32_t mc_tokenizer_token_id(const mc_tokenizer_t *t, const char *token)
{
    if (t->kind != TOK_GPT2) return -2;
    const size_t want = strlen(token);
    const int64_t v = mc_bpe_vocab_size(t->bpe);
    char key[1024];
    for (int32_t id = 0; id < v; id++) {
        size_t len = 0;
        char *bytes = mc_bpe_decode(t->bpe, &id, 1, &len);
        if (!bytes) continue;
        size_t klen =
            2 * len <= sizeof(key) ? mc_bpe_byte_key((unsigned char *)bytes, len, key) : 0;
        free(bytes);
        if (klen == want && memcmp(key, token, want) == 0) return id;
    }
    return -1;
}
