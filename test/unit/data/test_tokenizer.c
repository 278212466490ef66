/* Tokenizers (data/tokenizer.h): GPT2BPETokenizer against the ids of test/ref/gpt2_tokenizer_ref.py
 * (test/fixtures/bpe_corpus.txt) and of Megatron itself (tinyshakespeare), round trips, several
 * threads at once, merge semantics on a tiny vocab, NullTokenizer, and bad files.
 * Tests that need ../shared/data (or $MEGATRON_C_SHARED) skip when it is absent. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data/tokenizer.h"
#include "test/unit/fixture.h"

/* ---------------------------------------------------------------------------------------- */
/* helpers                                                                                  */

static const char *shared_dir(void)
{
    const char *d = getenv("MEGATRON_C_SHARED");
    return d && *d ? d : "../shared";
}

static void shared_path(char *buf, size_t n, const char *rel)
{
    snprintf(buf, n, "%s/%s", shared_dir(), rel);
}

static int have_gpt2(void)
{
    char v[4096], m[4096];
    shared_path(v, sizeof(v), "data/gpt2/gpt2-vocab.json");
    shared_path(m, sizeof(m), "data/gpt2/gpt2-merges.txt");
    return access(v, R_OK) == 0 && access(m, R_OK) == 0;
}

#define NEED_GPT2()                                                                                \
    do {                                                                                           \
        if (!have_gpt2()) {                                                                        \
            printf("# skipped: no GPT-2 vocab/merges under %s/data/gpt2\n", shared_dir());         \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

static mc_tokenizer_t *gpt2(void)
{
    char v[4096], m[4096], err[512] = "";
    shared_path(v, sizeof(v), "data/gpt2/gpt2-vocab.json");
    shared_path(m, sizeof(m), "data/gpt2/gpt2-merges.txt");
    mc_tokenizer_t *t = mc_tokenizer_build(
        &(mc_tokenizer_spec_t){
            .type = "GPT2BPETokenizer", .vocab_file = v, .merge_file = m, .vocab_size = 0},
        err, sizeof(err));
    if (!t) fail_msg("cannot build GPT2BPETokenizer: %s", err);
    return t;
}

static char *tmp_file(const char *content, size_t len)
{
    const char *dir = getenv("TMPDIR");
    char *path = malloc(4096);
    assert_non_null(path);
    snprintf(path, 4096, "%s/mc_tok_XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, len), (ssize_t)len);
    close(fd);
    return path;
}

static char *tmp_str(const char *content) { return tmp_file(content, strlen(content)); }

static void rm_tmp(char *path)
{
    unlink(path);
    free(path);
}

/* Compares full arrays; prints the first difference. 0 if equal. */
static int diff_ids(const char *what, const int32_t *got, size_t ng, const int32_t *want, size_t nw)
{
    if (ng == nw && (nw == 0 || memcmp(got, want, nw * sizeof(int32_t)) == 0)) return 0;
    size_t i = 0;
    while (i < ng && i < nw && got[i] == want[i]) i++;
    printf("# %s: %zu ids, expected %zu; first difference at %zu:", what, ng, nw, i);
    printf(" got");
    for (size_t k = i; k < ng && k < i + 6; k++) printf(" %d", got[k]);
    printf(" | expected");
    for (size_t k = i; k < nw && k < i + 6; k++) printf(" %d", want[k]);
    printf("\n");
    return 1;
}

static int one_line(const char *err) { return err[0] && !strchr(err, '\n'); }

/* ---------------------------------------------------------------------------------------- */
/* the corpus fixture                                                                       */

typedef struct {
    char name[64];
    unsigned char *in;
    size_t len;
    int32_t *ids;
    size_t nids;
} tcase_t;

typedef struct {
    tcase_t *c;
    size_t n;
} corpus_t;

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static void corpus_free(corpus_t *cp)
{
    for (size_t i = 0; i < cp->n; i++) {
        free(cp->c[i].in);
        free(cp->c[i].ids);
    }
    free(cp->c);
}

static corpus_t load_corpus(void)
{
    char path[4096];
    assert_int_equal(mc_fx_path(path, sizeof(path), "bpe_corpus.txt"), 0);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s (run `/usr/bin/python3 test/ref/gpt2_tokenizer_ref.py "
                 "--fixture test/fixtures/bpe_corpus.txt`)",
                 path);
    corpus_t cp = {0};
    size_t cap = 0, lcap = 0;
    char *line = NULL;
    ssize_t ll;
    int lineno = 0;
    while ((ll = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        if (ll > 0 && line[ll - 1] == '\n') line[--ll] = 0;
        if (line[0] == '#' || ll == 0) continue;
        char *t1 = strchr(line, '\t');
        char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t1 || !t2 || (size_t)(t1 - line) >= sizeof(cp.c[0].name))
            fail_msg("%s:%d: malformed line", path, lineno);
        if (cp.n == cap) {
            cap = cap ? cap * 2 : 256;
            cp.c = realloc(cp.c, cap * sizeof(tcase_t));
            assert_non_null(cp.c);
        }
        tcase_t *c = &cp.c[cp.n++];
        memset(c, 0, sizeof(*c));
        memcpy(c->name, line, (size_t)(t1 - line));
        size_t hl = (size_t)(t2 - t1 - 1);
        if (hl % 2) fail_msg("%s:%d: odd hex length", path, lineno);
        c->len = hl / 2;
        c->in = malloc(c->len + 1);
        assert_non_null(c->in);
        for (size_t i = 0; i < c->len; i++) {
            int hi = hexval(t1[1 + 2 * i]), lo = hexval(t1[2 + 2 * i]);
            if (hi < 0 || lo < 0) fail_msg("%s:%d: bad hex", path, lineno);
            c->in[i] = (unsigned char)(hi * 16 + lo);
        }
        size_t icap = 16;
        c->ids = malloc(icap * sizeof(int32_t));
        assert_non_null(c->ids);
        char *p = t2 + 1;
        while (*p) {
            char *e;
            long v = strtol(p, &e, 10);
            if (e == p || v < 0 || v > INT32_MAX) fail_msg("%s:%d: bad id list", path, lineno);
            if (c->nids == icap) {
                icap *= 2;
                c->ids = realloc(c->ids, icap * sizeof(int32_t));
                assert_non_null(c->ids);
            }
            c->ids[c->nids++] = (int32_t)v;
            p = e;
            while (*p == ' ') p++;
        }
    }
    free(line);
    fclose(f);
    return cp;
}

static void test_corpus_fixture(void **state)
{
    NEED_GPT2();
    mc_tokenizer_t *t = gpt2();
    corpus_t cp = load_corpus();
    assert_true(cp.n >= 300);
    int bad = 0, badrt = 0;
    char err[256];
    for (size_t i = 0; i < cp.n; i++) {
        tcase_t *c = &cp.c[i];
        mc_ids_t ids = {0};
        err[0] = 0;
        if (mc_tokenizer_encode(t, (const char *)c->in, c->len, &ids, err, sizeof(err)) != 0)
            fail_msg("%s: encode failed: %s", c->name, err);
        bad += diff_ids(c->name, ids.v, ids.n, c->ids, c->nids);
        /* decode(encode(x)) == x for every input (invalid UTF-8 included: byte-wise rule) */
        size_t ol = 12345;
        char *out = mc_tokenizer_decode(t, ids.v, ids.n, &ol);
        if (!out || ol != c->len || (ol && memcmp(out, c->in, ol) != 0)) {
            printf("# %s: decode(encode(x)) != x\n", c->name);
            badrt++;
        }
        free(out);
        mc_ids_free(&ids);
    }
    printf("# %zu corpus cases: %d with wrong ids, %d failed round trips\n", cp.n, bad, badrt);
    corpus_free(&cp);
    mc_tokenizer_free(t);
    assert_int_equal(bad, 0);
    assert_int_equal(badrt, 0);
}

/* ---------------------------------------------------------------------------------------- */
/* tinyshakespeare: Megatron's own ids                                                      */

typedef struct {
    char **text;
    size_t *len;
    int32_t **ids;
    size_t *nids;
    size_t n;
    size_t total;
} docs_t;

static void docs_free(docs_t *d)
{
    for (size_t i = 0; i < d->n; i++) {
        free(d->text[i]);
        free(d->ids[i]);
    }
    free(d->text);
    free(d->len);
    free(d->ids);
    free(d->nids);
}

/* 0 with the documents and Megatron's ids (eod included), or -1 if the files are absent. */
static int load_shakespeare(docs_t *d)
{
    char tp[4096], ip[4096];
    shared_path(tp, sizeof(tp), "data/text/tinyshakespeare.jsonl");
    shared_path(ip, sizeof(ip), "data/megatron-ref/tinyshakespeare_tokens.jsonl");
    FILE *ft = fopen(tp, "r"), *fi = fopen(ip, "r");
    if (!ft || !fi) {
        if (ft) fclose(ft);
        if (fi) fclose(fi);
        return -1;
    }
    memset(d, 0, sizeof(*d));
    size_t cap = 0, c1 = 0, c2 = 0;
    char *l1 = NULL, *l2 = NULL;
    for (;;) {
        ssize_t a = getline(&l1, &c1, ft), b = getline(&l2, &c2, fi);
        if (a < 0 || b < 0) {
            assert_true(a < 0 && b < 0); /* same number of lines */
            break;
        }
        if (d->n == cap) {
            cap = cap ? cap * 2 : 1024;
            d->text = realloc(d->text, cap * sizeof(char *));
            d->len = realloc(d->len, cap * sizeof(size_t));
            d->ids = realloc(d->ids, cap * sizeof(int32_t *));
            d->nids = realloc(d->nids, cap * sizeof(size_t));
            assert_true(d->text && d->len && d->ids && d->nids);
        }
        json_error_t je;
        json_t *o = json_loads(l1, 0, &je);
        if (!o) fail_msg("%s: line %zu: %s", tp, d->n + 1, je.text);
        json_t *txt = json_object_get(o, "text");
        assert_true(json_is_string(txt));
        size_t tl = json_string_length(txt);
        d->text[d->n] = malloc(tl + 1);
        memcpy(d->text[d->n], json_string_value(txt), tl + 1);
        d->len[d->n] = tl;
        json_decref(o);
        json_t *arr = json_loads(l2, 0, &je);
        if (!arr || !json_is_array(arr)) fail_msg("%s: line %zu: not an array", ip, d->n + 1);
        size_t na = json_array_size(arr);
        d->ids[d->n] = malloc((na ? na : 1) * sizeof(int32_t));
        for (size_t k = 0; k < na; k++)
            d->ids[d->n][k] = (int32_t)json_integer_value(json_array_get(arr, k));
        d->nids[d->n] = na;
        d->total += na;
        json_decref(arr);
        d->n++;
    }
    free(l1);
    free(l2);
    fclose(ft);
    fclose(fi);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_tinyshakespeare_matches_megatron(void **state)
{
    NEED_GPT2();
    docs_t d;
    if (load_shakespeare(&d) < 0) {
        printf("# skipped: no tinyshakespeare files under %s/data\n", shared_dir());
        skip();
    }
    mc_tokenizer_t *t = gpt2();
    int32_t eod = mc_tokenizer_eod(t);
    assert_int_equal(d.n, 7222);
    int bad = 0;
    size_t total = 0;
    double t0 = now_s();
    mc_ids_t ids = {0};
    for (size_t i = 0; i < d.n; i++) {
        ids.n = 0;
        char err[256] = "";
        assert_int_equal(mc_tokenizer_encode(t, d.text[i], d.len[i], &ids, err, sizeof(err)), 0);
        assert_int_equal(mc_ids_push(&ids, eod), 0); /* --append-eod */
        total += ids.n;
        char what[64];
        snprintf(what, sizeof(what), "document %zu", i);
        if (diff_ids(what, ids.v, ids.n, d.ids[i], d.nids[i]) && ++bad > 10) break;
    }
    double dt = now_s() - t0;
    printf("# tinyshakespeare: %zu documents, %zu tokens, %.1f ms, %.2fM tokens/s (one thread)\n",
           d.n, total, dt * 1e3, (double)total / dt / 1e6);
    mc_ids_free(&ids);
    assert_int_equal(bad, 0);
    assert_int_equal(total, 330807);
    /* the whole text as one document decodes back to itself */
    size_t all = 0;
    for (size_t i = 0; i < d.n; i++) all += d.len[i] + 1;
    char *cat = malloc(all);
    size_t o = 0;
    for (size_t i = 0; i < d.n; i++) {
        memcpy(cat + o, d.text[i], d.len[i]);
        o += d.len[i];
        cat[o++] = '\n';
    }
    mc_ids_t one = {0};
    char err[256] = "";
    assert_int_equal(mc_tokenizer_encode(t, cat, o, &one, err, sizeof(err)), 0);
    size_t ol = 0;
    char *back = mc_tokenizer_decode(t, one.v, one.n, &ol);
    assert_non_null(back);
    assert_int_equal(ol, o);
    assert_memory_equal(back, cat, o);
    free(back);
    free(cat);
    mc_ids_free(&one);
    mc_tokenizer_free(t);
    docs_free(&d);
}

/* ---------------------------------------------------------------------------------------- */
/* threads                                                                                  */

typedef struct {
    const mc_tokenizer_t *t;
    const docs_t *d;
    int32_t **out;
    size_t *nout;
    int ok;
} worker_t;

static void *worker(void *arg)
{
    worker_t *w = arg;
    w->ok = 1;
    for (size_t i = 0; i < w->d->n; i++) {
        mc_ids_t ids = {0};
        if (mc_tokenizer_encode(w->t, w->d->text[i], w->d->len[i], &ids, NULL, 0) != 0) w->ok = 0;
        w->out[i] = ids.v;
        w->nout[i] = ids.n;
    }
    return NULL;
}

static void test_threads_identical(void **state)
{
    NEED_GPT2();
    /* documents: the corpus fixture plus tinyshakespeare when present */
    corpus_t cp = load_corpus();
    docs_t sh;
    int have_sh = load_shakespeare(&sh) == 0;
    docs_t d = {0};
    d.n = cp.n + (have_sh ? sh.n : 0);
    d.text = calloc(d.n, sizeof(char *));
    d.len = calloc(d.n, sizeof(size_t));
    assert_true(d.text && d.len);
    for (size_t i = 0; i < cp.n; i++) {
        d.text[i] = (char *)cp.c[i].in;
        d.len[i] = cp.c[i].len;
    }
    for (size_t i = 0; have_sh && i < sh.n; i++) {
        d.text[cp.n + i] = sh.text[i];
        d.len[cp.n + i] = sh.len[i];
    }
    mc_tokenizer_t *t = gpt2();
    enum { NT = 4 };
    worker_t w[NT + 1];
    pthread_t th[NT];
    for (int k = 0; k <= NT; k++) {
        w[k] = (worker_t){t, &d, calloc(d.n, sizeof(int32_t *)), calloc(d.n, sizeof(size_t)), 0};
        assert_true(w[k].out && w[k].nout);
    }
    worker(&w[NT]); /* single-threaded reference */
    for (int k = 0; k < NT; k++) assert_int_equal(pthread_create(&th[k], NULL, worker, &w[k]), 0);
    for (int k = 0; k < NT; k++) assert_int_equal(pthread_join(th[k], NULL), 0);
    int bad = 0;
    for (int k = 0; k <= NT; k++) {
        assert_true(w[k].ok);
        for (size_t i = 0; i < d.n; i++) {
            if (k < NT)
                bad += diff_ids("thread", w[k].out[i], w[k].nout[i], w[NT].out[i], w[NT].nout[i]);
            free(w[k].out[i]);
        }
        free(w[k].out);
        free(w[k].nout);
    }
    assert_int_equal(bad, 0);
    mc_tokenizer_free(t);
    free(d.text);
    free(d.len);
    if (have_sh) docs_free(&sh);
    corpus_free(&cp);
}

/* ---------------------------------------------------------------------------------------- */
/* round trips of random bytes; GPT-2 constants                                             */

static uint64_t rng_state = 0x123456789ABCDEFull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static void test_random_roundtrip(void **state)
{
    NEED_GPT2();
    mc_tokenizer_t *t = gpt2();
    static const char *pieces[] = {" ",
                                   "  ",
                                   "\n",
                                   "\t",
                                   "'s",
                                   "'",
                                   "a",
                                   "Z",
                                   "1",
                                   "\xc3\xa9",
                                   "\xe4\xb8\xad",
                                   "\xf0\x9f\x98\x80",
                                   "\xe3\x80\x80",
                                   "\xc2\xa0",
                                   "\x80",
                                   "\xff",
                                   "\xed\xa0\x80",
                                   "\xf0\x9f",
                                   "!",
                                   "\x1c"};
    unsigned char buf[4096];
    for (int it = 0; it < 3000; it++) {
        size_t len = 0;
        size_t target = rnd() % (it < 2000 ? 64 : 2000);
        while (len < target) {
            if (rnd() % 2) {
                buf[len++] = (unsigned char)rnd();
            } else {
                const char *p = pieces[rnd() % (sizeof(pieces) / sizeof(pieces[0]))];
                size_t pl = strlen(p);
                if (len + pl > sizeof(buf)) break;
                memcpy(buf + len, p, pl);
                len += pl;
            }
        }
        mc_ids_t ids = {0};
        char err[256] = "";
        assert_int_equal(mc_tokenizer_encode(t, (const char *)buf, len, &ids, err, sizeof(err)), 0);
        for (size_t i = 0; i < ids.n; i++) assert_true(ids.v[i] >= 0 && ids.v[i] < 50257);
        size_t ol = 0;
        char *out = mc_tokenizer_decode(t, ids.v, ids.n, &ol);
        assert_non_null(out);
        assert_int_equal(ol, len);
        if (len) assert_memory_equal(out, buf, len);
        free(out);
        mc_ids_free(&ids);
    }
    mc_tokenizer_free(t);
}

static void test_gpt2_constants(void **state)
{
    NEED_GPT2();
    mc_tokenizer_t *t = gpt2();
    assert_int_equal(mc_tokenizer_vocab_size(t), 50257);
    assert_int_equal(mc_tokenizer_eod(t), 50256);
    int32_t ids[] = {50256};
    size_t ol = 0;
    char *s = mc_tokenizer_decode(t, ids, 1, &ol);
    assert_non_null(s);
    assert_int_equal(ol, 13);
    assert_memory_equal(s, "<|endoftext|>", 13);
    free(s);
    /* the special token's text is not special when encoding (Megatron's legacy tokenizer) */
    mc_ids_t e = {0};
    assert_int_equal(mc_tokenizer_encode(t, "<|endoftext|>", 13, &e, NULL, 0), 0);
    assert_true(e.n > 1);
    mc_ids_free(&e);
    s = mc_tokenizer_decode(t, NULL, 0, &ol);
    assert_non_null(s);
    assert_int_equal(ol, 0);
    free(s);
    int32_t bad1[] = {15496, 50257}, bad2[] = {-1};
    assert_null(mc_tokenizer_decode(t, bad1, 2, &ol));
    assert_null(mc_tokenizer_decode(t, bad2, 1, &ol));
    /* appends to what is there */
    mc_ids_t a = {0};
    assert_int_equal(mc_ids_push(&a, 7), 0);
    assert_int_equal(mc_tokenizer_encode(t, "Hello world", 11, &a, NULL, 0), 0);
    assert_int_equal(a.n, 3);
    assert_int_equal(a.v[0], 7);
    assert_int_equal(a.v[1], 15496);
    assert_int_equal(a.v[2], 995);
    assert_int_equal(mc_tokenizer_encode(t, "", 0, &a, NULL, 0), 0);
    assert_int_equal(a.n, 3);
    mc_ids_free(&a);
    mc_tokenizer_free(t);
}

/* ---------------------------------------------------------------------------------------- */
/* merge semantics on a tiny vocabulary (needs no shared data)                              */

/* Encodes text with the tokenizer and compares against want[0..n). */
static void expect_ids(const mc_tokenizer_t *t, const char *text, size_t tl, const int32_t *want,
                       size_t n)
{
    mc_ids_t ids = {0};
    char err[256] = "";
    if (mc_tokenizer_encode(t, text, tl, &ids, err, sizeof(err)) != 0) fail_msg("encode: %s", err);
    if (diff_ids(text, ids.v, ids.n, want, n)) fail_msg("wrong ids for '%s'", text);
    mc_ids_free(&ids);
}

#define EXPECT(t, text, ...)                                                                       \
    do {                                                                                           \
        const int32_t w_[] = {__VA_ARGS__};                                                        \
        expect_ids(t, text, strlen(text), w_, sizeof(w_) / sizeof(w_[0]));                         \
    } while (0)

static void test_tiny_vocab_semantics(void **state)
{
    /* 'Ġ' is the byte-level image of ' ' (U+0120). */
    char *v = tmp_str("{\"a\": 0, \"b\": 1, \"aa\": 2, \"ab\": 3, \"aaa\": 4, \"Ġ\": 5, \"Ġa\": 6,"
                      " \"c\": 7, \"<|endoftext|>\": 8, \"bc\": 9, \"abc\": 10, \"x\": 11}");
    /* Megatron keeps lines [1:-1] of the file: ranks (a a)=0 (a b)=1 (Ġ a)=2 (b c)=3 (aa a)=4,
     * a blank line (5), (ab c)=8 (a repeated pair keeps its last rank, not 6), (c c)=7; the
     * unterminated last line (x x) is dropped. "cc" is not in the vocab: id 0. Expected ids
     * checked with test/ref/gpt2_tokenizer_ref.py's GPT2Ref on the same files. */
    char *m = tmp_str("#version: test\na a\na b\nĠ a\nb c\naa a\n\nab c\nc c\nab c\nx x");
    char err[256] = "";
    mc_tokenizer_t *t = mc_tokenizer_build(
        &(mc_tokenizer_spec_t){
            .type = "GPT2BPETokenizer", .vocab_file = v, .merge_file = m, .vocab_size = 0},
        err, sizeof(err));
    if (!t) fail_msg("%s", err);
    assert_int_equal(mc_tokenizer_vocab_size(t), 12);
    assert_int_equal(mc_tokenizer_eod(t), 8);
    EXPECT(t, "aaa", 4);      /* aa a (left to right, no overlap), then aaa */
    EXPECT(t, "aaaa", 2, 2);  /* aa aa */
    EXPECT(t, "aaaaa", 2, 4); /* aa aa a, then aa aaa */
    EXPECT(t, "aab", 2, 1);   /* (a a)=0 before (a b)=1 */
    EXPECT(t, "ab", 3);
    EXPECT(t, "abc", 10);
    EXPECT(t, "abcc", 3, 0); /* (c c)=7 before (ab c)=8 */
    EXPECT(t, " a", 6);
    EXPECT(t, "xx", 11, 11);
    EXPECT(t, "cc", 0);
    EXPECT(t, "a bc", 0, 5, 9); /* pieces "a" and " bc" */
    mc_tokenizer_free(t);
    rm_tmp(v);
    rm_tmp(m);
}

/* ---------------------------------------------------------------------------------------- */
/* NullTokenizer                                                                            */

static void null_err(const mc_tokenizer_t *t, const char *text)
{
    mc_ids_t ids = {0};
    char err[256] = "";
    if (mc_tokenizer_encode(t, text, strlen(text), &ids, err, sizeof(err)) == 0)
        fail_msg("NullTokenizer accepted '%s'", text);
    assert_true(one_line(err));
    mc_ids_free(&ids);
}

static void test_null_tokenizer(void **state)
{
    char err[256] = "";
    mc_tokenizer_t *t = mc_tokenizer_build(
        &(mc_tokenizer_spec_t){
            .type = "NullTokenizer", .vocab_file = NULL, .merge_file = NULL, .vocab_size = 5000},
        err, sizeof(err));
    assert_non_null(t);
    assert_int_equal(mc_tokenizer_vocab_size(t), 5001);
    assert_int_equal(mc_tokenizer_eod(t), 5000);
    EXPECT(t, "1 2 3", 1, 2, 3);
    EXPECT(t, "0", 0);
    EXPECT(t, "5000", 5000); /* eod itself */
    EXPECT(t, "42\n", 42);   /* int() strips whitespace */
    EXPECT(t, "\t7 8\r\n", 7, 8);
    EXPECT(t, "+9 -0 0012 1_000", 9, 0, 12, 1000);
    EXPECT(t, "3\xe3\x80\x80", 3); /* U+3000 is str.isspace */
    EXPECT(t, "4\x1c", 4);         /* so is U+001C */
    null_err(t, "");               /* int('') */
    null_err(t, "1  2");           /* split(' ') gives an empty field */
    null_err(t, " 1");
    null_err(t, "1 ");
    null_err(t, "abc");
    null_err(t, "1.5");
    null_err(t, "5001"); /* outside [0, eod] */
    null_err(t, "-1");
    null_err(t, "99999999999999999999999");
    null_err(t, "1__0");
    null_err(t, "_1");
    null_err(t, "1_");
    null_err(t, "+");
    null_err(t, "1\xff");
    int32_t ids[] = {1, 22, 5000};
    size_t ol = 0;
    char *s = mc_tokenizer_decode(t, ids, 3, &ol);
    assert_non_null(s);
    assert_int_equal(ol, 9);
    assert_memory_equal(s, "1 22 5000", 9);
    free(s);
    s = mc_tokenizer_decode(t, ids, 0, &ol);
    assert_non_null(s);
    assert_int_equal(ol, 0);
    free(s);
    int32_t bad[] = {5001};
    assert_null(mc_tokenizer_decode(t, bad, 1, &ol));
    mc_tokenizer_free(t);
    err[0] = 0;
    assert_null(mc_tokenizer_build(
        &(mc_tokenizer_spec_t){
            .type = "NullTokenizer", .vocab_file = NULL, .merge_file = NULL, .vocab_size = -1},
        err, sizeof(err)));
    assert_true(one_line(err));
}

/* ---------------------------------------------------------------------------------------- */
/* bad input files and arguments                                                            */

static void expect_build_fail(const char *type, const char *vocab, const char *merges,
                              const char *must_name)
{
    char err[512] = "";
    mc_tokenizer_t *t = mc_tokenizer_build(
        &(mc_tokenizer_spec_t){
            .type = type, .vocab_file = vocab, .merge_file = merges, .vocab_size = 0},
        err, sizeof(err));
    if (t) {
        mc_tokenizer_free(t);
        fail_msg("build succeeded (vocab %s, merges %s)", vocab ? vocab : "-",
                 merges ? merges : "-");
    }
    printf("# %s\n", err);
    assert_true(one_line(err));
    if (must_name && !strstr(err, must_name))
        fail_msg("error does not name %s: %s", must_name, err);
}

static void test_bad_files(void **state)
{
    const char *good_merges = "#version: 0.2\na b\n";
    char *gm = tmp_str(good_merges);
    char *gv = tmp_str("{\"a\": 0, \"b\": 1, \"ab\": 2, \"<|endoftext|>\": 3}");
    expect_build_fail("GPT2BPETokenizer", "/nonexistent/vocab.json", gm, "/nonexistent/vocab.json");
    expect_build_fail("GPT2BPETokenizer", gv, "/nonexistent/merges.txt", "/nonexistent/merges.txt");
    const char *bad_vocabs[] = {
        "{\"a\": 0, \"b\": 1,", /* truncated */
        "not json",
        "",
        "[1, 2, 3]", /* not an object */
        "{\"a\": 0, \"b\": \"one\", \"<|endoftext|>\": 3}",
        "{\"a\": 0, \"b\": -1, \"<|endoftext|>\": 3}",
        "{\"a\": 0, \"b\": 1.5, \"<|endoftext|>\": 3}",
        "{\"a\": 0, \"b\": 1}", /* no <|endoftext|> */
        "{\"a\": 0, \"b\": 1, \"<|endoftext|>\": 3}\xff",
    };
    for (size_t i = 0; i < sizeof(bad_vocabs) / sizeof(bad_vocabs[0]); i++) {
        char *v = tmp_str(bad_vocabs[i]);
        expect_build_fail("GPT2BPETokenizer", v, gm, v);
        rm_tmp(v);
    }
    const char *bad_merges[] = {
        "#version: 0.2\na b\nab\n", /* one field */
        "#version: 0.2\na b c\n",   /* three fields */
        "#version: 0.2\na \xff\n",  /* not UTF-8 */
    };
    for (size_t i = 0; i < sizeof(bad_merges) / sizeof(bad_merges[0]); i++) {
        char *m = tmp_str(bad_merges[i]);
        expect_build_fail("GPT2BPETokenizer", gv, m, m);
        rm_tmp(m);
    }
    { /* the bad line is named */
        char *m = tmp_str("#version: 0.2\na b\n\nb a\nx y z\n");
        expect_build_fail("GPT2BPETokenizer", gv, m, "line 5");
        rm_tmp(m);
    }
    expect_build_fail("GPT2BPETokenizer", NULL, gm, "vocab");
    expect_build_fail("GPT2BPETokenizer", gv, NULL, "merge");
    expect_build_fail("SentencePieceTokenizer", gv, gm, "SentencePieceTokenizer");
    expect_build_fail(NULL, gv, gm, NULL);
    /* tolerated like Megatron: CRLF lines, blank lines, an empty merges file */
    const char *ok_merges[] = {"#version: 0.2\r\na b\r\n", "#version\n\n  \na b\n\n", ""};
    for (size_t i = 0; i < sizeof(ok_merges) / sizeof(ok_merges[0]); i++) {
        char *m = tmp_str(ok_merges[i]);
        char err[256] = "";
        mc_tokenizer_t *t = mc_tokenizer_build(
            &(mc_tokenizer_spec_t){
                .type = "GPT2BPETokenizer", .vocab_file = gv, .merge_file = m, .vocab_size = 0},
            err, sizeof(err));
        if (!t) fail_msg("merges #%zu refused: %s", i, err);
        if (i < 2) EXPECT(t, "ab", 2);
        else EXPECT(t, "ab", 0, 1);
        mc_tokenizer_free(t);
        rm_tmp(m);
    }
    rm_tmp(gm);
    rm_tmp(gv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_vocab_semantics),
        cmocka_unit_test(test_null_tokenizer),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_gpt2_constants),
        cmocka_unit_test(test_corpus_fixture),
        cmocka_unit_test(test_tinyshakespeare_matches_megatron),
        cmocka_unit_test(test_threads_identical),
        cmocka_unit_test(test_random_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
