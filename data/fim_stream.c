/* The FIM tokens and RandomStates of the datasets; see fim_stream.h. */
#include "data/fim_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "data/fim.h"
#include "data/mt19937.h"

struct mc_fim_streams {
    mc_fim_params_t p;
    const mc_tokenizer_t *tok;
    int32_t special; /* the id decode leaves out (GPT-2's only special token), or -1 */
    uint32_t *no_prefix;
    int workers; /* states per component: max(1, --num-workers) */
    uint32_t seed;
    int ncomp[3];
    mc_mt19937_t *rng[3]; /* [ncomp][workers] per split, made on first use */
};

/* ids_to_text(ids, remove_special_tokens=True). */
static char *codec_decode(void *ctx, const int32_t *ids, size_t n, size_t *len)
{
    const mc_fim_streams_t *s = ctx;
    int32_t *kept = malloc((n + 1) * sizeof(int32_t));
    if (!kept) return NULL;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] != s->special) kept[m++] = ids[i];
    char *out = m ? mc_tokenizer_decode(s->tok, kept, m, len) : calloc(1, 1);
    if (!m) *len = 0;
    free(kept);
    return out;
}

/* text_to_ids. One known difference: Megatron's (HF) GPT-2 tokenizer would turn the literal text
 * "<|endoftext|>" inside a decoded piece into the eod id; GPT-2 BPE here encodes its characters. */
static int codec_encode(void *ctx, const char *text, size_t len, mc_ids_t *out)
{
    const mc_fim_streams_t *s = ctx;
    char err[256];
    return mc_tokenizer_encode(s->tok, text, len, out, err, sizeof(err));
}

/* One --fim-*-token: its id, or -1 with err naming the flag. */
static int32_t token_of(const mc_tokenizer_t *tok, const char *flag, const char *token, char *err,
                        size_t n)
{
    const int32_t id = mc_tokenizer_token_id(tok, token);
    if (id < 0)
        mc_errf(err, n,
                "%s '%s': the tokenizer's vocabulary has no such token (fill-in-the-middle data "
                "needs its special tokens in the vocabulary; give the token the vocabulary spells, "
                "or a vocabulary that has it)",
                flag, token);
    return id;
}

static int lookup_tokens(mc_fim_streams_t *s, const mc_fim_config_t *c, char *err, size_t n)
{
    mc_fim_params_t *p = &s->p;
    if ((p->prefix = token_of(s->tok, "--fim-prefix-token", c->prefix, err, n)) < 0 ||
        (p->middle = token_of(s->tok, "--fim-middle-token", c->middle, err, n)) < 0 ||
        (p->suffix = token_of(s->tok, "--fim-suffix-token", c->suffix, err, n)) < 0 ||
        (p->pad = token_of(s->tok, "--fim-pad-token", c->pad, err, n)) < 0 ||
        (p->eod = token_of(s->tok, "--fim-eod-token", c->eod, err, n)) < 0)
        return -1;
    p->split = -1;
    if (c->split_sample &&
        (p->split = token_of(s->tok, "--fim-split-sample", c->split_sample, err, n)) < 0)
        return -1;
    s->special = mc_tokenizer_token_id(s->tok, "<|endoftext|>");
    return 0;
}

mc_fim_streams_t *mc_fim_streams_open(const mc_fim_config_t *c, const mc_tokenizer_t *tok,
                                      char *err, size_t n)
{
    if (!tok || !mc_tokenizer_is_gpt2(tok)) {
        mc_errf(err, n,
                "--fim-data is implemented for --tokenizer-type GPT2BPETokenizer only so far "
                "(its vocab.json holding the FIM tokens); not implemented yet for this tokenizer");
        return NULL;
    }
    mc_fim_streams_t *s = calloc(1, sizeof(*s));
    if (!s) {
        mc_errf(err, n, "--fim-data: out of memory");
        return NULL;
    }
    s->tok = tok;
    s->p.rate = c->rate;
    s->p.spm_rate = c->spm_rate;
    s->p.fragment_rate = c->fragment_rate;
    s->workers = c->num_workers > 0 ? c->num_workers : 1;
    s->seed = (uint32_t)c->seed;
    if (c->no_prefix) {
        const int64_t m = mc_fim_utf8_decode(c->no_prefix, strlen(c->no_prefix), &s->no_prefix);
        if (m < 0) goto oom;
        s->p.no_prefix = s->no_prefix;
        s->p.no_prefix_len = (size_t)m;
    }
    if (lookup_tokens(s, c, err, n)) {
        mc_fim_streams_free(s);
        return NULL;
    }
    return s;
oom:
    mc_errf(err, n, "--fim-data: out of memory");
    mc_fim_streams_free(s);
    return NULL;
}

void mc_fim_streams_free(mc_fim_streams_t *s)
{
    if (!s) return;
    for (int k = 0; k < 3; k++) free(s->rng[k]);
    free(s->no_prefix);
    free(s);
}

int mc_fim_streams_apply(mc_fim_streams_t *s, int split, int comp, int ncomp, int64_t microbatch,
                         int32_t *text, int len, char *err, size_t n)
{
    if (!s->rng[split]) {
        const size_t m = (size_t)ncomp * (size_t)s->workers;
        s->rng[split] = malloc(m * sizeof(mc_mt19937_t));
        if (!s->rng[split]) return mc_errf(err, n, "--fim-data: out of memory"), -1;
        for (size_t i = 0; i < m; i++) mc_mt19937_seed(&s->rng[split][i], s->seed);
        s->ncomp[split] = ncomp;
    }
    if (comp < 0 || comp >= s->ncomp[split])
        return mc_errf(err, n, "--fim-data: component %d out of range", comp), -1;
    const int w = (int)(microbatch % s->workers);
    const mc_fim_codec_t codec = {.decode = codec_decode, .encode = codec_encode, .ctx = s};
    return mc_fim_sample(&s->p, &codec, &s->rng[split][(size_t)comp * s->workers + w], text, len,
                         err, n);
}
