/* HuggingFaceTokenizer: tokenizer.json's byte-level BPE (see data/tok_hf.h). */
#include "data/tok_hf.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "data/bpe.h"
#include "data/nfc.h"
#include "data/pretok_regex.h"

typedef struct {
    char *s;
    size_t len;
    int32_t id;
} added_t;

#define MAX_TEMPLATE 8

struct mc_hf_tok {
    mc_bpe_t *bpe;
    mc_pretok_regex_t *split; /* NULL: ByteLevel's own regex, GPT-2's pattern */
    bool nfc;
    added_t *added;
    size_t nadded;
    uint8_t first[256]; /* bytes that start an added token */
    int32_t pre[MAX_TEMPLATE], post[MAX_TEMPLATE];
    int npre, npost;
    int64_t vocab_size;
    int32_t eod;
};

/* A string member, or NULL (absent, null or not a string). */
static const char *str_of(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* True when the member is absent, null, false, or "" (an option left off). */
static bool off(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return !v || json_is_null(v) || json_is_false(v) ||
           (json_is_string(v) && json_string_length(v) == 0);
}

static int load_model(mc_hf_tok_t *t, const json_t *m, const char *path, char *err, size_t n)
{
    const char *type = str_of(m, "type");
    if (!type || strcmp(type, "BPE") != 0) {
        mc_errf(err, n, "%s: model type '%s' is not supported (only byte-level BPE)", path,
                type ? type : "?");
        return -1;
    }
    static const char *const refused[] = {"dropout", "continuing_subword_prefix",
                                          "end_of_word_suffix", "byte_fallback"};
    for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++)
        if (!off(m, refused[k])) {
            mc_errf(err, n, "%s: the BPE model's %s is not supported", path, refused[k]);
            return -1;
        }
    const json_t *vocab = json_object_get(m, "vocab"), *merges = json_object_get(m, "merges");
    if (!json_is_object(vocab) || !json_is_array(merges)) {
        mc_errf(err, n, "%s: the BPE model needs a vocab object and a merges list", path);
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)vocab, key, v)
    {
        json_int_t id = json_integer_value(v);
        if (!json_is_integer(v) || id < 0 || id >= INT32_MAX) {
            mc_errf(err, n, "%s: the id of token '%.40s' is not an integer in [0, %d)", path, key,
                    INT32_MAX);
            return -1;
        }
        if (mc_bpe_add_token(t->bpe, key, strlen(key), (int32_t)id) < 0) goto oom;
    }
    int lack = mc_bpe_lacking_byte(t->bpe);
    if (lack == -2) goto oom;
    if (lack >= 0) {
        mc_errf(err, n,
                "%s: the vocab has no byte-level token for byte 0x%02x (not a byte-level "
                "BPE vocabulary)",
                path, lack);
        return -1;
    }
    size_t k;
    json_t *mg;
    json_array_foreach(merges, k, mg)
    {
        const char *a = NULL, *b = NULL, *sp = NULL;
        size_t la = 0, lb = 0;
        if (json_is_string(mg) && (sp = strchr(json_string_value(mg), ' ')) &&
            !strchr(sp + 1, ' ')) { /* "a b" */
            a = json_string_value(mg);
            la = (size_t)(sp - a);
            b = sp + 1;
            lb = strlen(b);
        } else if (json_is_array(mg) && json_array_size(mg) == 2 &&
                   json_is_string(json_array_get(mg, 0)) && json_is_string(json_array_get(mg, 1))) {
            a = json_string_value(json_array_get(mg, 0));
            b = json_string_value(json_array_get(mg, 1));
            la = strlen(a);
            lb = strlen(b);
        }
        if (!a || !json_object_getn(vocab, a, la) || !json_object_getn(vocab, b, lb)) {
            mc_errf(err, n, "%s: merge %zu is not two tokens of the vocab", path, k);
            return -1;
        }
        int rc = k >= UINT32_MAX ? -1 : mc_bpe_add_merge(t->bpe, a, la, b, lb, (uint32_t)k, true);
        if (rc < 0) goto oom;
        if (rc > 0) {
            mc_errf(err, n, "%s: merge %zu makes a token that is not in the vocab", path, k);
            return -1;
        }
    }
    if (mc_bpe_finish(t->bpe, json_is_true(json_object_get(m, "ignore_merges"))) < 0) goto oom;
    return 0;
oom:
    mc_errf(err, n, "%s: out of memory", path);
    return -1;
}

static int load_normalizer(mc_hf_tok_t *t, const json_t *nz, const char *path, char *err, size_t n)
{
    if (!nz || json_is_null(nz)) return 0;
    const char *type = str_of(nz, "type");
    const json_t *seq = json_object_get(nz, "normalizers");
    if (type && strcmp(type, "Sequence") == 0 && json_is_array(seq) && json_array_size(seq) <= 1)
        return json_array_size(seq) ? load_normalizer(t, json_array_get(seq, 0), path, err, n) : 0;
    if (type && strcmp(type, "NFC") == 0) {
        t->nfc = true;
        return 0;
    }
    mc_errf(err, n, "%s: normalizer '%s' is not supported (none or NFC)", path, type ? type : "?");
    return -1;
}

/* ByteLevel: no prefix space, and the regex wanted (GPT-2's) or not (after a Split). */
static bool byte_level(const json_t *p, bool regex)
{
    const char *type = str_of(p, "type");
    return type && strcmp(type, "ByteLevel") == 0 && off(p, "add_prefix_space") &&
           json_is_true(json_object_get(p, "use_regex")) == regex;
}

static int load_pretok(mc_hf_tok_t *t, const json_t *pt, const char *path, char *err, size_t n)
{
    if (pt && byte_level(pt, true)) return 0;
    const char *type = pt ? str_of(pt, "type") : NULL;
    const json_t *seq = pt ? json_object_get(pt, "pretokenizers") : NULL;
    const json_t *sp = json_array_get(seq, 0);
    const char *pattern = str_of(json_object_get(sp, "pattern"), "Regex");
    const char *behavior = str_of(sp, "behavior"), *sptype = str_of(sp, "type");
    if (type && strcmp(type, "Sequence") == 0 && json_array_size(seq) == 2 && sptype &&
        strcmp(sptype, "Split") == 0 && pattern && behavior && strcmp(behavior, "Isolated") == 0 &&
        off(sp, "invert") && byte_level(json_array_get(seq, 1), false)) {
        t->split = mc_pretok_regex_new(pattern, path, err, n);
        return t->split ? 0 : -1;
    }
    mc_errf(err, n,
            "%s: pre_tokenizer '%s' is not supported (ByteLevel with its regex, or Sequence of "
            "Split (a Regex, Isolated) and ByteLevel, without add_prefix_space)",
            path, type ? type : "none");
    return -1;
}

static int load_added(mc_hf_tok_t *t, const json_t *arr, const char *path, char *err, size_t n)
{
    size_t k;
    json_t *a;
    t->added = calloc(json_array_size(arr) + 1, sizeof(added_t));
    if (!t->added) goto oom;
    json_array_foreach(arr, k, a)
    {
        const json_t *c = json_object_get(a, "content"), *id = json_object_get(a, "id");
        if (!json_is_string(c) || json_string_length(c) == 0 || !json_is_integer(id) ||
            json_integer_value(id) < 0 || json_integer_value(id) >= INT32_MAX) {
            mc_errf(err, n, "%s: added token %zu needs a content and an id", path, k);
            return -1;
        }
        static const char *const refused[] = {"single_word", "lstrip", "rstrip"};
        for (size_t r = 0; r < 3; r++)
            if (!off(a, refused[r])) {
                mc_errf(err, n, "%s: added token '%.40s' sets %s, which is not supported", path,
                        json_string_value(c), refused[r]);
                return -1;
            }
        added_t *d = &t->added[t->nadded++];
        d->len = json_string_length(c);
        d->id = (int32_t)json_integer_value(id);
        if (!(d->s = malloc(d->len))) goto oom;
        memcpy(d->s, json_string_value(c), d->len);
        t->first[(unsigned char)d->s[0]] = 1;
    }
    return 0;
oom:
    mc_errf(err, n, "%s: out of memory", path);
    return -1;
}

/* TemplateProcessing's single template: the special tokens' ids before and after $A. */
static int load_template(mc_hf_tok_t *t, const json_t *pp, const char *path, char *err, size_t n)
{
    const json_t *single = json_object_get(pp, "single");
    const json_t *special = json_object_get(pp, "special_tokens");
    size_t k;
    json_t *item;
    bool seen_a = false;
    json_array_foreach(single, k, item)
    {
        const json_t *st = json_object_get(json_object_get(item, "SpecialToken"), "id");
        if (json_object_get(item, "Sequence")) {
            seen_a = true;
            continue;
        }
        const json_t *ids = json_object_get(json_object_get(special, json_string_value(st)), "ids");
        size_t j;
        json_t *id;
        json_array_foreach(ids, j, id)
        {
            int *cnt = seen_a ? &t->npost : &t->npre;
            if (*cnt == MAX_TEMPLATE || !json_is_integer(id) || json_integer_value(id) < 0 ||
                json_integer_value(id) >= INT32_MAX)
                goto bad;
            (seen_a ? t->post : t->pre)[(*cnt)++] = (int32_t)json_integer_value(id);
        }
        if (!json_is_string(st) || !json_is_array(ids)) goto bad;
    }
    if (seen_a) return 0;
bad:
    mc_errf(err, n,
            "%s: the TemplateProcessing post-processor's single template is not "
            "special tokens around $A",
            path);
    return -1;
}

static int load_post(mc_hf_tok_t *t, const json_t *pp, const char *path, char *err, size_t n)
{
    if (!pp || json_is_null(pp)) return 0;
    const char *type = str_of(pp, "type");
    if (type && strcmp(type, "ByteLevel") == 0) return 0; /* offsets only */
    if (type && strcmp(type, "TemplateProcessing") == 0) return load_template(t, pp, path, err, n);
    if (type && strcmp(type, "Sequence") == 0) {
        size_t k;
        json_t *p;
        json_array_foreach(json_object_get(pp, "processors"), k,
                           p) if (load_post(t, p, path, err, n) < 0) return -1;
        return 0;
    }
    mc_errf(err, n, "%s: post_processor '%s' is not supported (ByteLevel, TemplateProcessing)",
            path, type ? type : "?");
    return -1;
}

/* transformers' token_to_id: an added token's id, else the model's. -1 if neither. */
static int64_t token_id(const mc_hf_tok_t *t, const json_t *vocab, const char *s)
{
    for (size_t k = 0; k < t->nadded; k++)
        if (t->added[k].len == strlen(s) && memcmp(t->added[k].s, s, t->added[k].len) == 0)
            return t->added[k].id;
    const json_t *v = json_object_get(vocab, s);
    return v ? json_integer_value(v) : -1;
}

/* eos_token of tokenizer_config.json, else of special_tokens_map.json: a string or an
 * AddedToken's {"content": ...}. */
static int load_eos(mc_hf_tok_t *t, const json_t *vocab, const char *dir, char *err, size_t n)
{
    static const char *const files[] = {"tokenizer_config.json", "special_tokens_map.json"};
    char path[4096];
    for (size_t f = 0; f < 2; f++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[f]);
        json_t *cfg = json_load_file(path, 0, NULL);
        const json_t *eos = json_object_get(cfg, "eos_token");
        const char *s = json_is_string(eos) ? json_string_value(eos) : str_of(eos, "content");
        int64_t id = s ? token_id(t, vocab, s) : -1;
        if (s && id < 0) {
            mc_errf(err, n, "%s: eos_token '%.40s' is not a token of tokenizer.json", path, s);
            json_decref(cfg);
            return -1;
        }
        json_decref(cfg);
        if (s) {
            t->eod = (int32_t)id;
            return 0;
        }
    }
    mc_errf(err, n,
            "%s: no eos_token in tokenizer_config.json or special_tokens_map.json (Megatron's "
            "eod is its id)",
            dir);
    return -1;
}

static int load_all(mc_hf_tok_t *t, const json_t *root, const char *dir, const char *path,
                    bool add_special, char *err, size_t n)
{
    const json_t *model = json_object_get(root, "model");
    const json_t *vocab = json_object_get(model, "vocab");
    if (load_model(t, model, path, err, n) < 0 ||
        load_normalizer(t, json_object_get(root, "normalizer"), path, err, n) < 0 ||
        load_pretok(t, json_object_get(root, "pre_tokenizer"), path, err, n) < 0 ||
        load_added(t, json_object_get(root, "added_tokens"), path, err, n) < 0 ||
        (add_special && load_post(t, json_object_get(root, "post_processor"), path, err, n) < 0))
        return -1;
    t->vocab_size = (int64_t)json_object_size(vocab);
    for (size_t k = 0; k < t->nadded; k++) {
        bool dup = json_object_getn(vocab, t->added[k].s, t->added[k].len) != NULL;
        for (size_t j = 0; j < k; j++)
            dup |= t->added[j].len == t->added[k].len &&
                   memcmp(t->added[j].s, t->added[k].s, t->added[k].len) == 0;
        t->vocab_size += !dup;
    }
    return load_eos(t, vocab, dir, err, n);
}

mc_hf_tok_t *mc_hf_tok_load(const char *dir, bool add_special, char *err, size_t n)
{
    if (!dir || !*dir) {
        mc_errf(err, n, "HuggingFaceTokenizer needs the tokenizer's directory (--tokenizer-model)");
        return NULL;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    json_error_t je;
    json_t *root = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!root) {
        mc_errf(err, n, "HuggingFaceTokenizer: cannot read %s: %s (line %d)", path, je.text,
                je.line);
        return NULL;
    }
    mc_hf_tok_t *t = calloc(1, sizeof(*t));
    if (t) t->bpe = mc_bpe_new();
    if (!t || !t->bpe) {
        mc_errf(err, n, "%s: out of memory", path);
    } else if (load_all(t, root, dir, path, add_special, err, n) == 0) {
        json_decref(root);
        return t;
    }
    json_decref(root);
    mc_hf_tok_free(t);
    return NULL;
}

void mc_hf_tok_free(mc_hf_tok_t *t)
{
    if (!t) return;
    mc_bpe_free(t->bpe);
    mc_pretok_regex_free(t->split);
    for (size_t k = 0; k < t->nadded; k++) free(t->added[k].s);
    free(t->added);
    free(t);
}

int64_t mc_hf_tok_vocab_size(const mc_hf_tok_t *t) { return t->vocab_size; }
int32_t mc_hf_tok_eod(const mc_hf_tok_t *t) { return t->eod; }

/* Text between added tokens: normalized, pre-tokenized, merged. */
static int encode_segment(const mc_hf_tok_t *t, const char *s, size_t len, mc_ids_t *ids, char *err,
                          size_t n)
{
    if (!len) return 0;
    char *norm = NULL;
    if (t->nfc) {
        if (mc_nfc(s, len, &norm, &len) < 0) {
            mc_errf(err, n, "tokenizer: out of memory normalizing %zu bytes", len);
            return -1;
        }
        if (norm) s = norm;
    }
    int rc = t->split ? mc_pretok_regex_encode(t->split, t->bpe, s, len, ids, err, n)
                      : mc_bpe_encode(t->bpe, s, len, ids, err, n);
    free(norm);
    return rc;
}

/* The longest added token at s[p..len), or -1. */
static int added_at(const mc_hf_tok_t *t, const char *s, size_t len, size_t p)
{
    int best = -1;
    for (size_t k = 0; k < t->nadded; k++) {
        const added_t *a = &t->added[k];
        if (a->len <= len - p && memcmp(s + p, a->s, a->len) == 0 &&
            (best < 0 || a->len > t->added[best].len))
            best = (int)k;
    }
    return best;
}

int mc_hf_tok_encode(const mc_hf_tok_t *t, const char *text, size_t len, mc_ids_t *ids, char *err,
                     size_t n)
{
    for (int k = 0; k < t->npre; k++)
        if (mc_ids_push(ids, t->pre[k]) < 0) goto oom;
    size_t seg = 0;
    for (size_t p = 0; p < len; p++) {
        if (!t->first[(unsigned char)text[p]]) continue;
        int a = added_at(t, text, len, p);
        if (a < 0) continue;
        if (encode_segment(t, text + seg, p - seg, ids, err, n) < 0) return -1;
        if (mc_ids_push(ids, t->added[a].id) < 0) goto oom;
        seg = p + t->added[a].len;
        p = seg - 1;
    }
    if (encode_segment(t, text + seg, len - seg, ids, err, n) < 0) return -1;
    for (int k = 0; k < t->npost; k++)
        if (mc_ids_push(ids, t->post[k]) < 0) goto oom;
    return 0;
oom:
    mc_errf(err, n, "tokenizer: out of memory");
    return -1;
}

char *mc_hf_tok_decode(const mc_hf_tok_t *t, const int32_t *ids, size_t count, size_t *out_len)
{
    size_t cap = 64, o = 0;
    char *out = malloc(cap);
    for (size_t i = 0; i < count && out; i++) {
        size_t l = 0;
        char *piece = NULL;
        const char *src = NULL;
        for (size_t k = 0; k < t->nadded && !src; k++)
            if (t->added[k].id == ids[i]) {
                src = t->added[k].s;
                l = t->added[k].len;
            }
        if (!src) src = piece = mc_bpe_decode(t->bpe, &ids[i], 1, &l);
        if (!src) {
            free(out);
            return NULL;
        }
        if (o + l > cap) {
            while (o + l > cap) cap *= 2;
            char *nb = realloc(out, cap);
            if (!nb) free(out);
            out = nb;
        }
        if (out) memcpy(out + o, src, l);
        o += l;
        free(piece);
    }
    if (out && out_len) *out_len = o;
    return out;
}
