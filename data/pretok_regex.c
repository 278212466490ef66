/* Regex pre-tokenization with PCRE2 (see data/pretok_regex.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/pretok_regex.h"

#include <pcre2.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "data/pretok_ascii.h"

struct mc_pretok_regex {
    pcre2_code *code;
    const mc_pretok_ascii_t *ascii; /* the hand-made matcher of a known pattern, or NULL */
};

/* The pattern with \s as Unicode's White_Space: [\s\x{85}] outside a class, \s\x{85} inside
 * one, \S as [^\s\x{85}]. malloc'd, or NULL out of memory. */
static char *widen_space(const char *p)
{
    size_t len = strlen(p), o = 0;
    char *out = malloc(len * 12 + 1);
    if (!out) return NULL;
    bool in_class = false;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < len) {
            char e = p[++i];
            const char *rep = NULL;
            if (e == 's') rep = in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
            else if (e == 'S' && !in_class) rep = "[^\\s\\x{85}]";
            if (rep) {
                memcpy(out + o, rep, strlen(rep));
                o += strlen(rep);
            } else {
                out[o++] = c;
                out[o++] = e;
            }
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = true;
            out[o++] = c;
            if (i + 1 < len && p[i + 1] == '^') out[o++] = p[++i];
            if (i + 1 < len && p[i + 1] == ']') out[o++] = p[++i]; /* a leading ] is literal */
            continue;
        }
        if (c == ']' && in_class) in_class = false;
        out[o++] = c;
    }
    out[o] = 0;
    return out;
}

mc_pretok_regex_t *mc_pretok_regex_new(const char *pattern, const char *what, char *err, size_t n)
{
    char *pat = widen_space(pattern);
    mc_pretok_regex_t *r = calloc(1, sizeof(*r));
    if (!pat || !r) {
        free(pat);
        free(r);
        mc_errf(err, n, "%s: out of memory", what);
        return NULL;
    }
    int ec;
    PCRE2_SIZE eo;
    r->code = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
    free(pat);
    if (!r->code) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof(msg));
        mc_errf(err, n, "%s: the regex does not compile under PCRE2 (%s)", what, (char *)msg);
        free(r);
        return NULL;
    }
    pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE); /* else pcre2_match interprets: slower */
    r->ascii = mc_pretok_ascii_find(pattern);
    return r;
}

void mc_pretok_regex_free(mc_pretok_regex_t *r)
{
    if (!r) return;
    pcre2_code_free(r->code);
    free(r);
}

/* One encode call's state: the pending match [ms, me) found from an earlier position. */
typedef struct {
    const mc_pretok_regex_t *r;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *stack; /* made on the first JIT stack overflow (long whitespace runs) */
    size_t ms, me;
    int rc; /* the failing PCRE2 code, 0 */
} split_t;

static int match_at(split_t *c, const unsigned char *s, size_t len, size_t pos)
{
    int rc = pcre2_match(c->r->code, s, len, pos, 0, c->md, c->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !c->stack) {
        c->stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, NULL);
        if (!c->mctx) c->mctx = pcre2_match_context_create(NULL);
        if (!c->stack || !c->mctx) return rc;
        pcre2_jit_stack_assign(c->mctx, NULL, c->stack);
        rc = pcre2_match(c->r->code, s, len, pos, 0, c->md, c->mctx);
    }
    return rc;
}

static size_t regex_split(void *ctx, const unsigned char *s, size_t len, size_t pos)
{
    split_t *c = ctx;
    if (c->r->ascii && c->me <= pos) {
        size_t e = mc_pretok_ascii_match(c->r->ascii, s, len, pos);
        if (e) return e;
    }
    for (size_t from = pos; c->me <= pos;) {
        int rc = match_at(c, s, len, from);
        if (rc == PCRE2_ERROR_NOMATCH) {
            c->ms = c->me = len + 1; /* no more matches: the rest is one piece */
            return len;
        }
        if (rc < 0) {
            c->rc = rc;
            return 0;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        c->ms = ov[0];
        c->me = ov[1];
        if (c->me == c->ms) { /* an empty match cuts nothing: search on after it */
            from = c->ms + 1;
            c->me = c->ms = 0;
            if (from >= len) return len;
        }
    }
    return c->ms > pos ? c->ms : c->me;
}

int mc_pretok_regex_encode(const mc_pretok_regex_t *r, const mc_bpe_t *b, const char *text,
                           size_t len, mc_ids_t *ids, char *err, size_t n)
{
    split_t c = {.r = r};
    c.md = pcre2_match_data_create_from_pattern(r->code, NULL);
    if (!c.md) {
        mc_errf(err, n, "tokenizer: out of memory");
        return -1;
    }
    int rc = mc_bpe_encode_split(b, text, len, regex_split, &c, ids, err, n);
    if (rc < 0 && c.rc) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(c.rc, msg, sizeof(msg));
        mc_errf(err, n, "tokenizer: the pre-tokenizer's regex failed (%s)", (char *)msg);
    }
    pcre2_jit_stack_free(c.stack);
    pcre2_match_context_free(c.mctx);
    pcre2_match_data_free(c.md);
    return rc;
}

int mc_pretok_regex_pieces(const mc_pretok_regex_t *r, const char *text, size_t len, size_t *ends,
                           size_t cap, size_t *count)
{
    split_t c = {.r = r};
    int rc = (c.md = pcre2_match_data_create_from_pattern(r->code, NULL)) ? 0 : -1;
    *count = 0;
    for (size_t pos = 0; pos < len && rc == 0; pos = ends[(*count)++]) {
        size_t end = *count < cap ? regex_split(&c, (const unsigned char *)text, len, pos) : 0;
        if (end <= pos) rc = -1;
        else ends[*count] = end;
    }
    pcre2_jit_stack_free(c.stack);
    pcre2_match_context_free(c.mctx);
    pcre2_match_data_free(c.md);
    return rc;
}
