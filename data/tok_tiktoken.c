/* TikTokenizer: Megatron's tiktoken vocabulary over the BPE core (see data/tok_tiktoken.h). */
#include "data/tok_tiktoken.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "data/bpe.h"
#include "data/pretok_regex.h"

/* Megatron's PATTERN_TIKTOKEN and PATTERN_TIKTOKEN_V2 (megatron/training/tokenizer). */
static const char PATTERN_V1[] = "[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]++"
                                 "[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+";
static const char PATTERN_V2[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

struct mc_tiktoken {
    mc_bpe_t *bpe;
    mc_pretok_regex_t *split;
    char **special; /* num_special names, id = index */
    int64_t num_special, vocab_size;
    int32_t eod;
};

/* Standard base64 with padding, as Python's b64decode reads Megatron's files. Returns the
 * decoded length, or -1. out has room for len * 3 / 4 bytes. */
static long b64_decode(const char *s, size_t len, unsigned char *out)
{
    if (len % 4) return -1;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            char c = s[i + k];
            int d = c >= 'A' && c <= 'Z'   ? c - 'A'
                    : c >= 'a' && c <= 'z' ? c - 'a' + 26
                    : c >= '0' && c <= '9' ? c - '0' + 52
                    : c == '+'             ? 62
                    : c == '/'             ? 63
                                           : -1;
            if (c == '=' && i + 4 == len && k >= 2) pad++, d = 0;
            else if (d < 0 || pad) return -1;
            v = v << 6 | (uint32_t)d;
        }
        out[o++] = (unsigned char)(v >> 16);
        if (pad < 2) out[o++] = (unsigned char)(v >> 8);
        if (pad < 1) out[o++] = (unsigned char)v;
    }
    return (long)o;
}

/* The special tokens: the list given (or <unk> <s> </s>), then <SPECIAL_i> fillers. */
static int load_special(mc_tiktoken_t *t, const mc_tiktoken_spec_t *sp, char *err, size_t n)
{
    static const char *const def[] = {"<unk>", "<s>", "</s>"};
    const char *const *list = sp->special ? sp->special : def;
    const int nl = sp->special ? sp->nspecial : 3;
    if (nl > t->num_special || t->num_special >= t->vocab_size) {
        mc_errf(err, n,
                "TikTokenizer needs len(special tokens) (%d) <= --tiktoken-num-special-tokens "
                "(%" PRId64 ") < vocab size (%" PRId64 ")",
                nl, t->num_special, t->vocab_size);
        return -1;
    }
    if (!(t->special = calloc((size_t)t->num_special, sizeof(char *)))) return -2;
    for (int64_t i = 0; i < t->num_special; i++) {
        char buf[40];
        snprintf(buf, sizeof(buf), "<SPECIAL_%" PRId64 ">", i);
        if (!(t->special[i] = strdup(i < nl ? list[i] : buf))) return -2;
        for (int64_t j = 0; j < i; j++)
            if (strcmp(t->special[j], t->special[i]) == 0) {
                mc_errf(err, n, "TikTokenizer: special token '%s' is given twice", t->special[i]);
                return -1;
            }
    }
    t->eod = -1;
    bool unk = false, bos = false;
    for (int i = 0; i < nl; i++) {
        unk |= strcmp(list[i], "<unk>") == 0;
        bos |= strcmp(list[i], "<s>") == 0;
        if (strcmp(list[i], "</s>") == 0) t->eod = i;
    }
    if (!unk || !bos || t->eod < 0) {
        mc_errf(err, n, "TikTokenizer: the special tokens must include <unk>, <s> and </s>");
        return -1;
    }
    return 0;
}

/* One rank's entry: exactly rank (== i), token_bytes, token_str. The bytes go to raw. */
static long rank_entry(const json_t *e, size_t i, unsigned char *raw, const char *path, char *err,
                       size_t n)
{
    const json_t *r = json_object_get(e, "rank"), *b = json_object_get(e, "token_bytes");
    if (!json_is_object(e) || json_object_size(e) != 3 || !json_object_get(e, "token_str") ||
        !json_is_integer(r) || json_integer_value(r) != (json_int_t)i || !json_is_string(b)) {
        mc_errf(err, n,
                "%s: entry %zu is not {\"rank\": %zu, \"token_bytes\": base64, \"token_str\": ...}",
                path, i, i);
        return -1;
    }
    long len = b64_decode(json_string_value(b), json_string_length(b), raw);
    if (len <= 0 || (i < 256 && (len != 1 || raw[0] != i))) {
        mc_errf(err, n, "%s: entry %zu's token_bytes %s", path, i,
                len <= 0 ? "is not base64 of some bytes" : "must be the single byte of its rank");
        return -1;
    }
    return len;
}

/* The first vocab_size - num_special ranks as tokens, then every split of a token into two
 * tokens as a merge of the token's rank. */
static int load_ranks(mc_tiktoken_t *t, const json_t *root, const char *path, char *err, size_t n)
{
    const size_t inner = (size_t)(t->vocab_size - t->num_special);
    if (!json_is_array(root) || json_array_size(root) < inner) {
        mc_errf(err, n,
                "%s: expected a JSON list of at least %zu ranks (vocab size %" PRId64 " - %" PRId64
                " special tokens), found %zu",
                path, inner, t->vocab_size, t->num_special,
                json_is_array(root) ? json_array_size(root) : 0);
        return -1;
    }
    size_t total = 0;
    for (size_t i = 0; i < inner; i++)
        total += json_string_length(json_object_get(json_array_get(root, i), "token_bytes"));
    unsigned char *raw = malloc(total + 4);
    size_t *off = malloc((inner + 1) * sizeof(size_t));
    char *key = malloc(total * 2 + 8);
    int rc = raw && off && key ? 0 : -2;
    if (off) off[0] = 0;
    for (size_t i = 0; i < inner && rc == 0; i++) {
        long len = rank_entry(json_array_get(root, i), i, raw + off[i], path, err, n);
        if (len < 0) rc = -1;
        else off[i + 1] = off[i] + (size_t)len;
        size_t kl = rc ? 0 : mc_bpe_byte_key(raw + off[i], (size_t)len, key);
        if (!rc && mc_bpe_token_id(t->bpe, key, kl) >= 0) {
            mc_errf(err, n, "%s: entry %zu repeats the bytes of an earlier rank", path, i);
            rc = -1;
        }
        if (!rc && mc_bpe_add_token(t->bpe, key, kl, (int32_t)(i + t->num_special)) < 0) rc = -2;
    }
    for (size_t i = 256; i < inner && rc == 0; i++) {
        const unsigned char *w = raw + off[i];
        const size_t len = off[i + 1] - off[i];
        for (size_t j = 1; j < len && rc == 0; j++) {
            char *kr = key + 2 * j + 4;
            size_t ll = mc_bpe_byte_key(w, j, key), lr = mc_bpe_byte_key(w + j, len - j, kr);
            if (mc_bpe_token_id(t->bpe, key, ll) >= 0 && mc_bpe_token_id(t->bpe, kr, lr) >= 0 &&
                mc_bpe_add_merge(t->bpe, key, ll, kr, lr, (uint32_t)i, false) < 0)
                rc = -2;
        }
    }
    free(raw);
    free(off);
    free(key);
    return rc;
}

static int load_all(mc_tiktoken_t *t, const mc_tiktoken_spec_t *sp, char *err, size_t n)
{
    const char *path = sp->path;
    size_t pl = path ? strlen(path) : 0;
    if (pl < 5 || strcmp(path + pl - 5, ".json") != 0) {
        mc_errf(err, n,
                "TikTokenizer needs --tokenizer-model FILE.json (Megatron's tiktoken "
                "vocabulary), got '%s'",
                path ? path : "");
        return -1;
    }
    const char *pat = !sp->pattern                     ? NULL
                      : strcmp(sp->pattern, "v1") == 0 ? PATTERN_V1
                      : strcmp(sp->pattern, "v2") == 0 ? PATTERN_V2
                                                       : NULL;
    if (!pat) {
        mc_errf(err, n, "TikTokenizer needs --tiktoken-pattern v1 or v2");
        return -1;
    }
    int rc = load_special(t, sp, err, n);
    if (rc == 0 && !(t->split = mc_pretok_regex_new(pat, "TikTokenizer", err, n))) rc = -1;
    if (rc == 0 && !(t->bpe = mc_bpe_new())) rc = -2;
    if (rc == 0) {
        json_error_t je;
        json_t *root = json_load_file(path, JSON_ALLOW_NUL, &je); /* token_str \u0000 */
        if (!root) {
            mc_errf(err, n, "TikTokenizer: cannot read %s: %s (line %d)", path, je.text, je.line);
            return -1;
        }
        rc = load_ranks(t, root, path, err, n);
        json_decref(root);
    }
    if (rc == 0 && mc_bpe_finish(t->bpe, true) < 0) rc = -2;
    if (rc == -2) mc_errf(err, n, "TikTokenizer: out of memory loading %s", path);
    return rc;
}

mc_tiktoken_t *mc_tiktoken_load(const mc_tiktoken_spec_t *spec, char *err, size_t n)
{
    mc_tiktoken_t *t = calloc(1, sizeof(*t));
    if (!t) {
        mc_errf(err, n, "TikTokenizer: out of memory");
        return NULL;
    }
    t->vocab_size = spec->vocab_size > 0 ? spec->vocab_size : (int64_t)1 << 17;
    t->num_special = spec->num_special;
    if (t->num_special < 0 || t->vocab_size >= INT32_MAX) {
        mc_errf(err, n,
                "TikTokenizer: --tiktoken-num-special-tokens must be >= 0 and the vocab "
                "size < 2**31");
    } else if (load_all(t, spec, err, n) == 0) {
        return t;
    }
    mc_tiktoken_free(t);
    return NULL;
}

void mc_tiktoken_free(mc_tiktoken_t *t)
{
    if (!t) return;
    mc_bpe_free(t->bpe);
    mc_pretok_regex_free(t->split);
    for (int64_t i = 0; t->special && i < t->num_special; i++) free(t->special[i]);
    free(t->special);
    free(t);
}

int64_t mc_tiktoken_vocab_size(const mc_tiktoken_t *t) { return t->vocab_size; }
int32_t mc_tiktoken_eod(const mc_tiktoken_t *t) { return t->eod; }

int mc_tiktoken_encode(const mc_tiktoken_t *t, const char *text, size_t len, mc_ids_t *ids,
                       char *err, size_t n)
{
    return mc_pretok_regex_encode(t->split, t->bpe, text, len, ids, err, n);
}

char *mc_tiktoken_decode(const mc_tiktoken_t *t, const int32_t *ids, size_t count, size_t *out_len)
{
    size_t cap = 64, o = 0;
    char *out = malloc(cap);
    for (size_t i = 0; i < count && out; i++) {
        size_t l = 0;
        char *piece = NULL;
        const char *src = ids[i] >= 0 && ids[i] < t->num_special ? t->special[ids[i]] : NULL;
        if (src) l = strlen(src);
        else src = piece = mc_bpe_decode(t->bpe, &ids[i], 1, &l);
        if (!src || ids[i] >= t->vocab_size) {
            free(piece);
            free(out);
            return NULL;
        }
        while (o + l > cap) cap *= 2;
        char *nb = realloc(out, cap);
        if (!nb) free(out);
        out = nb;
        if (out) memcpy(out + o, src, l);
        o += l;
        free(piece);
    }
    if (out && out_len) *out_len = o;
    return out;
}
