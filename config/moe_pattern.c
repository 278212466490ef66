/* --moe-layer-freq (config/moe_pattern.h): Megatron eval()s the list expression after checking
 * its alphabet; this is a small evaluator of the same expressions, Python's meaning kept (an int
 * times a list repeats it, a count below one gives an empty list, ints and lists do not mix
 * under '+'). */
#include "config/moe_pattern.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

#define MAX_ELEMS (1 << 20) /* a pattern longer than this is no model's */

typedef struct {
    bool is_list;
    long long v; /* an int */
    signed char *e;
    long n; /* a list of ints, each 0..127 or -1 for "other" */
} val_t;

typedef struct {
    const char *s, *p;
    char *err;
    size_t n;
    int failed;
} parser_t;

static void fail(parser_t *ps, const char *why)
{
    if (!ps->failed)
        mc_errf(ps->err, ps->n, "argument --moe-layer-freq: invalid pattern '%.200s' (%s)", ps->s,
                why);
    ps->failed = 1;
}

static void drop(val_t *v)
{
    free(v->e);
    v->e = NULL, v->n = 0;
}

static bool grow(parser_t *ps, val_t *v, long n)
{
    if (n > MAX_ELEMS) {
        fail(ps, "longer than any model's layers");
        return false;
    }
    signed char *e = realloc(v->e, (size_t)(n > 0 ? n : 1));
    if (!e) mc_fatal("out of host memory evaluating --moe-layer-freq");
    v->e = e;
    return true;
}

static val_t expr(parser_t *ps);

/* list literal: '[' (expr (',' expr)* ','?)? ']' of ints */
static val_t list_literal(parser_t *ps)
{
    val_t l = {.is_list = true};
    ps->p++;
    while (!ps->failed && *ps->p != ']') {
        val_t x = expr(ps);
        if (ps->failed) break;
        if (x.is_list) {
            drop(&x);
            fail(ps, "a list inside a list");
            break;
        }
        if (!grow(ps, &l, l.n + 1)) break;
        l.e[l.n++] = (signed char)(x.v >= 0 && x.v <= 127 ? x.v : -1);
        if (*ps->p == ',') ps->p++;
        else if (*ps->p != ']') fail(ps, "expected ',' or ']'");
    }
    if (!ps->failed) ps->p++;
    else drop(&l);
    return l;
}

static val_t atom(parser_t *ps)
{
    val_t v = {0};
    if (*ps->p == '[') return list_literal(ps);
    if (*ps->p == '(') {
        ps->p++;
        v = expr(ps);
        if (!ps->failed && *ps->p != ')') fail(ps, "expected ')'");
        if (ps->failed) drop(&v);
        else ps->p++;
        return v;
    }
    if (!isdigit((unsigned char)*ps->p)) {
        fail(ps, *ps->p ? "unexpected character" : "unexpected end");
        return v;
    }
    while (isdigit((unsigned char)*ps->p)) {
        v.v = v.v * 10 + (*ps->p++ - '0');
        if (v.v > MAX_ELEMS) v.v = MAX_ELEMS + 1; /* only ever a count or an element */
    }
    return v;
}

/* a * b: ints multiply, a list and an int repeat the list */
static val_t times(parser_t *ps, val_t a, val_t b)
{
    if (a.is_list && b.is_list) {
        drop(&a), drop(&b);
        fail(ps, "a list times a list");
        return a;
    }
    if (!a.is_list && !b.is_list)
        return (val_t){.v = a.v * b.v > MAX_ELEMS ? MAX_ELEMS + 1 : a.v * b.v};
    val_t l = a.is_list ? a : b;
    long long k = a.is_list ? b.v : a.v;
    val_t r = {.is_list = true};
    long n = k > 0 ? l.n * (long)k : 0;
    if (k > 0 && l.n > 0 && (k > MAX_ELEMS || n > MAX_ELEMS)) n = MAX_ELEMS + 1;
    if (grow(ps, &r, n)) {
        for (long i = 0; i < n; i++) r.e[i] = l.e[i % l.n];
        r.n = n;
    } else {
        drop(&r);
    }
    drop(&l);
    return r;
}

static val_t term(parser_t *ps)
{
    val_t a = atom(ps);
    while (!ps->failed && *ps->p == '*') {
        ps->p++;
        val_t b = atom(ps);
        if (ps->failed) {
            drop(&a);
            return a;
        }
        a = times(ps, a, b);
    }
    return a;
}

static val_t expr(parser_t *ps)
{
    val_t a = term(ps);
    while (!ps->failed && *ps->p == '+') {
        ps->p++;
        val_t b = term(ps);
        if (!ps->failed && a.is_list != b.is_list) fail(ps, "a list plus an int");
        if (!ps->failed && !a.is_list) a.v = a.v + b.v > MAX_ELEMS ? MAX_ELEMS + 1 : a.v + b.v;
        else if (!ps->failed && grow(ps, &a, a.n + b.n)) {
            if (b.n) memcpy(a.e + a.n, b.e, (size_t)b.n);
            a.n += b.n;
        }
        drop(&b);
        if (ps->failed) drop(&a);
    }
    return a;
}

/* The list of a pattern expression into is_moe; returns the MoE layer count or -1. */
static int from_list(const char *freq, int num_layers, bool *is_moe, char *err, size_t n)
{
    parser_t ps = {.s = freq, .p = freq, .err = err, .n = n};
    if (strspn(freq, "0123456789,[]()+*") != strlen(freq)) {
        fail(&ps, "only digits and , [ ] ( ) + * may appear");
        return -1;
    }
    val_t v = expr(&ps);
    if (!ps.failed && *ps.p) fail(&ps, "unexpected text after the expression");
    if (!ps.failed && !v.is_list) fail(&ps, "not a list");
    if (ps.failed) {
        drop(&v);
        return -1;
    }
    int moe = 0, bad = -1;
    for (long i = 0; i < v.n && bad < 0; i++)
        if (v.e[i] != 0 && v.e[i] != 1) bad = (int)i;
    if (bad < 0 && (v.n == num_layers || num_layers < 0))
        for (long i = 0; i < v.n && num_layers >= 0; i++) moe += is_moe[i] = v.e[i] == 1;
    long len = v.n;
    drop(&v);
    if (bad >= 0)
        return mc_errf(err, n,
                       "--moe-layer-freq '%.200s': layer %d is neither 0 (dense) nor 1 (MoE)", freq,
                       bad);
    if (len != num_layers && num_layers >= 0)
        return mc_errf(err, n,
                       "--moe-layer-freq '%.200s' has %ld layers, expected --num-layers (%d)", freq,
                       len, num_layers);
    return moe;
}

int mc_moe_layer_pattern(const char *freq, int num_layers, bool *is_moe, char *err, size_t n)
{
    if (strchr(freq, '[')) return from_list(freq, num_layers, is_moe, err, n);
    char *end;
    long f = strtol(freq, &end, 10);
    if (end == freq || *end || f < 1)
        return mc_errf(err, n,
                       "argument --moe-layer-freq: invalid value '%.200s' (a positive int N: one "
                       "MoE layer every N layers, or a list pattern such as ([1]*3+[0])*2)",
                       freq);
    int moe = 0;
    for (int i = 0; i < num_layers; i++) moe += is_moe[i] = i % f == 0; /* none when < 0 */
    return moe;
}
