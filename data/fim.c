/* Megatron's GPTFIMDataset transform; see fim.h. The order of the RNG draws is the contract:
 * every binomial and randint below is where fim_dataset.py draws it. */
#include "data/fim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

static int push_ids(mc_ids_t *o, const int32_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (mc_ids_push(o, v[i])) return -1;
    return 0;
}

/* Length of the well-formed UTF-8 sequence at s[0..len), or 0 when s[0] starts none (then the
 * maximal subpart to replace is `*bad` bytes, at least 1). */
static size_t utf8_seq(const unsigned char *s, size_t len, size_t *bad)
{
    const unsigned c = s[0];
    size_t need;
    unsigned lo = 0x80, hi = 0xbf;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) need = 1;
    else if (c >= 0xe0 && c <= 0xef) {
        need = 2;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    } else {
        *bad = 1;
        return 0;
    }
    for (size_t k = 1; k <= need; k++) {
        const unsigned b = k < len ? s[k] : 0x100;
        const unsigned l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xbf;
        if (b < l || b > h) {
            *bad = k;
            return 0;
        }
    }
    return need + 1;
}

int64_t mc_fim_utf8_decode(const char *str, size_t len, uint32_t **out)
{
    const unsigned char *s = (const unsigned char *)str;
    uint32_t *cp = malloc((len + 1) * sizeof(uint32_t));
    if (!cp) return -1;
    int64_t m = 0;
    for (size_t i = 0; i < len;) {
        size_t bad = 0, k = utf8_seq(s + i, len - i, &bad);
        if (!k) {
            cp[m++] = 0xfffd;
            i += bad;
            continue;
        }
        uint32_t v = k == 1 ? s[i] : s[i] & (0x7f >> k);
        for (size_t j = 1; j < k; j++) v = v << 6 | (s[i + j] & 0x3f);
        cp[m++] = v;
        i += k;
    }
    *out = cp;
    return m;
}

/* Code points cp[0..n) to UTF-8 (no surrogates occur: they come from mc_fim_utf8_decode). */
static size_t utf8_encode(const uint32_t *cp, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const uint32_t c = cp[i];
        if (c < 0x80) out[o++] = (char)c;
        else if (c < 0x800) {
            out[o++] = (char)(0xc0 | c >> 6);
            out[o++] = (char)(0x80 | (c & 0x3f));
        } else if (c < 0x10000) {
            out[o++] = (char)(0xe0 | c >> 12);
            out[o++] = (char)(0x80 | (c >> 6 & 0x3f));
            out[o++] = (char)(0x80 | (c & 0x3f));
        } else {
            out[o++] = (char)(0xf0 | c >> 18);
            out[o++] = (char)(0x80 | (c >> 12 & 0x3f));
            out[o++] = (char)(0x80 | (c >> 6 & 0x3f));
            out[o++] = (char)(0x80 | (c & 0x3f));
        }
    }
    return o;
}

/* text_to_ids of the characters cp[0..n). */
static int encode_cps(const mc_fim_codec_t *c, const uint32_t *cp, size_t n, char *buf,
                      mc_ids_t *out)
{
    const size_t len = utf8_encode(cp, n, buf);
    return len ? c->encode(c->ctx, buf, len, out) : 0;
}

/* The three pieces of the text cp[0..L) at the sorted cut points, in SPM or PSM order. */
static int fim_arrange(const mc_fim_params_t *p, const mc_fim_codec_t *c, mc_mt19937_t *rng,
                       const uint32_t *cp, uint64_t L, mc_ids_t *out)
{
    uint64_t b0 = mc_mt19937_bounded(rng, L), b1 = mc_mt19937_bounded(rng, L);
    if (b0 > b1) {
        const uint64_t t = b0;
        b0 = b1;
        b1 = t;
    }
    mc_ids_t pre = {0}, mid = {0}, suf = {0};
    char *buf = malloc(4 * L + 1);
    int rc = !buf || encode_cps(c, cp, b0, buf, &pre) ||
                     encode_cps(c, cp + b0, b1 - b0, buf, &mid) ||
                     encode_cps(c, cp + b1, L - b1, buf, &suf)
                 ? -1
                 : 0;
    free(buf);
    if (!rc) {
        if (mc_mt19937_binomial1(rng, p->spm_rate)) /* SPM */
            rc = mc_ids_push(out, p->prefix) || mc_ids_push(out, p->suffix) ||
                 push_ids(out, suf.v, suf.n) || mc_ids_push(out, p->middle) ||
                 push_ids(out, pre.v, pre.n) || push_ids(out, mid.v, mid.n);
        else /* PSM */
            rc = mc_ids_push(out, p->prefix) || push_ids(out, pre.v, pre.n) ||
                 mc_ids_push(out, p->suffix) || push_ids(out, suf.v, suf.n) ||
                 mc_ids_push(out, p->middle) || push_ids(out, mid.v, mid.n);
    }
    mc_ids_free(&pre);
    mc_ids_free(&mid);
    mc_ids_free(&suf);
    return rc ? -1 : 0;
}

/* GPTFIMDataset._permute (truncate_or_pad=False) of seq[0..n) at rate, appended to out. */
static int fim_permute(const mc_fim_params_t *p, const mc_fim_codec_t *c, mc_mt19937_t *rng,
                       const int32_t *seq, size_t n, double rate, mc_ids_t *out)
{
    if (!mc_mt19937_binomial1(rng, rate)) return push_ids(out, seq, n);
    size_t blen = 0;
    char *bytes = n ? c->decode(c->ctx, seq, n, &blen) : calloc(1, 1);
    if (!bytes) return -1;
    uint32_t *cp = NULL;
    const int64_t L = mc_fim_utf8_decode(bytes, blen, &cp);
    free(bytes);
    if (L < 0) return -1;
    int rc;
    if (p->no_prefix && (size_t)L >= p->no_prefix_len &&
        memcmp(cp, p->no_prefix, p->no_prefix_len * sizeof(uint32_t)) == 0)
        rc = push_ids(out, seq, n);
    else rc = fim_arrange(p, c, rng, cp, (uint64_t)L, out);
    free(cp);
    return rc;
}

/* _fim_split_and_permute_sequence of seq[0..n). */
static int fim_split_permute(const mc_fim_params_t *p, const mc_fim_codec_t *c, mc_mt19937_t *rng,
                             const int32_t *seq, size_t n, mc_ids_t *out)
{
    bool any = false;
    for (size_t i = 0; p->split >= 0 && i < n && !any; i++) any = seq[i] == p->split;
    if (!any) return fim_permute(p, c, rng, seq, n, p->rate, out);
    if (!mc_mt19937_binomial1(rng, p->rate)) return push_ids(out, seq, n);
    size_t cur = 0;
    for (size_t loc = 0; loc < n; loc++) {
        if (seq[loc] != p->split) continue;
        /* an empty fragment is skipped with its split token, as Megatron does */
        if (loc > cur && (fim_permute(p, c, rng, seq + cur, loc - cur, p->fragment_rate, out) ||
                          mc_ids_push(out, p->split)))
            return -1;
        cur = loc + 1;
    }
    return fim_permute(p, c, rng, seq + cur, n - cur, p->fragment_rate, out);
}

int mc_fim_sample(const mc_fim_params_t *p, const mc_fim_codec_t *c, mc_mt19937_t *rng,
                  int32_t *text, int len, char *err, size_t n)
{
    mc_ids_t out = {0};
    size_t cur = 0;
    int rc = 0;
    for (size_t loc = 0; loc < (size_t)len && !rc; loc++) {
        if (text[loc] != p->eod) continue;
        /* only non-empty segments are permuted, and only they keep their eod */
        if (loc > cur)
            rc = fim_split_permute(p, c, rng, text + cur, loc - cur, &out) ||
                 mc_ids_push(&out, p->eod);
        cur = loc + 1;
    }
    if (!rc) rc = fim_split_permute(p, c, rng, text + cur, (size_t)len - cur, &out);
    if (rc) {
        mc_ids_free(&out);
        mc_errf(err, n, "fill-in-the-middle: out of memory or a tokenizer failure");
        return -1;
    }
    for (int i = 0; i < len; i++) text[i] = (size_t)i < out.n ? out.v[i] : p->pad;
    mc_ids_free(&out);
    return 0;
}
