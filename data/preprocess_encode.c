/* preprocess-data's workers' part: each line of a chunk parsed and tokenized, by the fast scanner
 * (json_scan.h) when it can, by jansson otherwise (which decides and words the error). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "data/preprocess_pipe.h"

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* Tokenizes text[0..len) onto tokens[k]; a non-empty result becomes one sequence. Returns the
 * tokens added, or -1 with msg set. */
static int64_t encode_text(mc_prep_pipe_t *p, mc_prep_chunk_t *c, int k, const char *text,
                           size_t len, char *msg, size_t n)
{
    mc_ids_t *t = &c->tokens[k];
    size_t before = t->n;
    char err[512] = "";
    if (mc_tokenizer_encode(p->tok, text, len, t, err, sizeof(err)) != 0) {
        snprintf(msg, n, "tokenizer: %s", err[0] ? err : "failed");
        return -1;
    }
    size_t added = t->n - before;
    if (added > (size_t)INT32_MAX) {
        snprintf(msg, n, "a text of more than 2^31-1 tokens");
        return -1;
    }
    if (added > 0 && mc_ids_push(&c->lens[k], (int32_t)added) != 0) {
        snprintf(msg, n, "out of memory");
        return -1;
    }
    return (int64_t)added;
}

/* Ends key k of document i: eod when non-empty and asked for, the sequence count. */
static int end_key(mc_prep_pipe_t *p, mc_prep_chunk_t *c, int k, int i, int64_t total,
                   size_t lens_before, char *msg, size_t n)
{
    if (total > 0 && p->a->append_eod) {
        if (mc_ids_push(&c->tokens[k], p->eod) != 0) {
            snprintf(msg, n, "out of memory");
            return -1;
        }
        c->lens[k].v[c->lens[k].n - 1]++;
    }
    c->nseq[(size_t)k * (size_t)c->lines_cap + (size_t)i] = (int32_t)(c->lens[k].n - lens_before);
    return 0;
}

/* A string value found by the scanner, as bytes (into the scratch buffer if it has escapes). */
static bool fast_text(mc_prep_scratch_t *sc, const char *raw, size_t n, bool esc, const char **text,
                      size_t *len)
{
    if (!esc) {
        *text = raw;
        *len = n;
        return true;
    }
    if (!mc_prep_grow((void **)&sc->buf, &sc->cap, n ? n : 1, 1)) return false;
    *len = mc_json_decode(raw, n, sc->buf);
    *text = sc->buf;
    return true;
}

/* The fast path: 1 done, -1 malformed (msg set), 0 not for the fast path (caller undoes any
 * output and asks jansson). */
static int encode_line_fast(mc_prep_pipe_t *p, mc_prep_chunk_t *c, int i, mc_prep_scratch_t *sc,
                            char *msg, size_t n)
{
    const char *line = c->text + c->line_off[i];
    size_t len = c->line_off[i + 1] - c->line_off[i];
    if (!mc_json_scan_object(line, len, p->a->json_keys, p->key_len, p->keys, sc->vals)) return 0;
    for (int k = 0; k < p->keys; k++)
        if (sc->vals[k].kind != 's' && sc->vals[k].kind != '[') return 0;
    for (int k = 0; k < p->keys; k++) {
        const mc_json_val_t *v = &sc->vals[k];
        size_t lens_before = c->lens[k].n;
        int64_t total = 0;
        const char *text;
        size_t tlen;
        if (v->kind == 's') {
            if (!fast_text(sc, v->p, v->n, v->esc, &text, &tlen)) return 0;
            if ((total = encode_text(p, c, k, text, tlen, msg, n)) < 0) return -1;
        } else { /* a validated list: walk its elements */
            mc_json_list_t it = mc_json_list(v);
            mc_json_val_t e;
            int more;
            while ((more = mc_json_list_next(&it, &e)) > 0) {
                if (!fast_text(sc, e.p, e.n, e.esc, &text, &tlen)) return 0;
                int64_t added = encode_text(p, c, k, text, tlen, msg, n);
                if (added < 0) return -1;
                total += added;
            }
            if (more < 0) return 0; /* not a string: jansson words the error */
        }
        if (end_key(p, c, k, i, total, lens_before, msg, n) != 0) return -1;
    }
    return 1;
}

static bool is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return false;
    return true;
}

/* The jansson path: 0, or -1 with msg (the line is malformed). */
static int encode_line_jansson(mc_prep_pipe_t *p, mc_prep_chunk_t *c, int i, char *msg, size_t n)
{
    const char *text = c->text + c->line_off[i];
    size_t len = c->line_off[i + 1] - c->line_off[i];
    if (is_blank(text, len)) {
        snprintf(msg, n, "blank line (every line must be one JSON object)");
        return -1;
    }
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &je);
    if (!root) {
        snprintf(msg, n, "malformed JSON: %s (column %d)", je.text, je.column);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(root)) {
        snprintf(msg, n, "not a JSON object (it is %s)", json_type_name(root));
        goto out;
    }
    for (int k = 0; k < p->keys; k++) {
        const char *key = p->a->json_keys[k];
        json_t *v = json_object_get(root, key);
        size_t lens_before = c->lens[k].n;
        int64_t total = 0;
        if (!v) {
            snprintf(msg, n, "no key \"%.100s\"", key);
            goto out;
        }
        if (json_is_string(v)) {
            total = encode_text(p, c, k, json_string_value(v), json_string_length(v), msg, n);
            if (total < 0) goto out;
        } else if (json_is_array(v)) { /* pre-split sentences, as Encoder.encode takes them */
            for (size_t j = 0; j < json_array_size(v); j++) {
                json_t *s = json_array_get(v, j);
                if (!json_is_string(s)) {
                    snprintf(msg, n, "\"%.100s\"[%zu] is %s, not a string", key, j,
                             json_type_name(s));
                    goto out;
                }
                int64_t added =
                    encode_text(p, c, k, json_string_value(s), json_string_length(s), msg, n);
                if (added < 0) goto out;
                total += added;
            }
        } else {
            snprintf(msg, n, "\"%.100s\" is %s, not a string", key, json_type_name(v));
            goto out;
        }
        if (end_key(p, c, k, i, total, lens_before, msg, n) != 0) goto out;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

void mc_prep_encode_chunk(mc_prep_pipe_t *p, mc_prep_chunk_t *c, mc_prep_scratch_t *sc)
{
    for (int k = 0; k < p->keys; k++) c->tokens[k].n = c->lens[k].n = 0;
    c->first_bad = -1;
    /* Where each key's output stood before the line, to undo a malformed line's part. */
    size_t *tm = (size_t *)(sc->vals + p->keys), *lm = tm + p->keys;
    char msg[ERR_LEN / 2];
    for (int i = 0; i < c->n_lines; i++) {
        for (int k = 0; k < p->keys; k++) tm[k] = c->tokens[k].n, lm[k] = c->lens[k].n;
        c->bad[i] = 0;
        int rc = encode_line_fast(p, c, i, sc, msg, sizeof(msg));
        if (rc == 0) {
            for (int k = 0; k < p->keys; k++) c->tokens[k].n = tm[k], c->lens[k].n = lm[k];
            rc = encode_line_jansson(p, c, i, msg, sizeof(msg)) == 0 ? 1 : -1;
        }
        if (rc > 0) continue;
        for (int k = 0; k < p->keys; k++) {
            c->tokens[k].n = tm[k];
            c->lens[k].n = lm[k];
            c->nseq[(size_t)k * (size_t)c->lines_cap + (size_t)i] = 0;
        }
        c->bad[i] = 1;
        if (c->first_bad < 0) {
            c->first_bad = i;
            snprintf(c->bad_msg, sizeof(c->bad_msg), "%.300s, line %lld: %s", p->files[c->file],
                     (long long)(c->first_line + i), msg);
        }
    }
}
