/* data/spm.cc's chunk cache: encoding through it (text split at ASCII spaces, chunk ids cached
 * per thread) gives the library's ids exactly, on cases aimed at the split (whitespace of every
 * kind at chunk edges, NFKC-made spaces, punctuation, long chunks, literal U+2581, bytes that are
 * not UTF-8), on every tinyshakespeare document (skipped without ../shared or
 * $MEGATRON_C_SHARED), and with several threads at once, for both BPE fixture models (two flag
 * sets); it is off for the unigram one; data/spm_proto.c reads the model flags it rests on. */
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

#include "data/spm.h"
#include "data/spm_proto.h"
#include "test/unit/fixture.h"

static mc_spm_t *load(const char *file)
{
    char path[4096], err[512] = "";
    assert_int_equal(mc_fx_path(path, sizeof(path), file), 0);
    mc_spm_t *sp = mc_spm_load(path, err, sizeof(err));
    if (!sp) fail_msg("%s", err);
    return sp;
}

/* Cached ids of s[0..n) (twice: filling, then hitting the cache) equal the uncached ones. */
static void same_ids(const mc_spm_t *sp, const char *s, size_t n)
{
    int32_t *want, *got;
    size_t nw, ng;
    char err[256] = "";
    if (mc_spm_encode(sp, s, n, false, &want, &nw, err, sizeof(err)) != 0) fail_msg("%s", err);
    for (int pass = 0; pass < 2; pass++) {
        if (mc_spm_encode(sp, s, n, true, &got, &ng, err, sizeof(err)) != 0) fail_msg("%s", err);
        if (ng != nw) fail_msg("'%.*s': %zu ids cached, %zu uncached", (int)n, s, ng, nw);
        for (size_t i = 0; i < nw; i++)
            if (got[i] != want[i]) fail_msg("'%.*s': id %zu differs", (int)n, s, i);
        free(got);
    }
    free(want);
}

static const char *const cases[] = {
    "", " ", "   ", "a", " a", "a ", "  a  b  ", "a    b", "hello world", "\t", "\n\n",
    "a \tb", "a\t b", "a \n\n b", "\t\tx\t", "a\r\n b", "a \xc2\xa0 b", "a\xc2\xa0 b",
    "a \xc2\xa0"
    "b",
    "a \xe3\x80\x80 b", "\xe3\x80\x80"
                        "a\xe3\x80\x80 \xe3\x80\x80"
                        "b",
    "x \xc2\xa8 y \xc2\xa8y x\xc2\xa8 \xc2\xb4 \xcb\x9c \xe3\x82\x9b", /* NFKC: space + mark */
    "a \xe2\x80\x83 b \xe2\x80\xa8 c \xe2\x80\x8b d", "!!! ... ?! , ; \xef\xbc\x81", " . ",
    "(a) [b] {c}", "the the the  the   the", "caf\xc3\xa9 na\xc3\xafve e\xcc\x81",
    "a\xe2\x96\x81 b", "a \xe2\x96\x81"
                       "b",
    "\xe2\x96\x81", "\xf0\x9f\x98\x80 \xf0\x9f\x98\x80x", "\x01 \x7f b\xc2\x85 c",
    "\xff \xfe\xfd x\xc3 \xe2\x96 \xc3(", "\x80 \xe2 \xe2\x82 ", /* not UTF-8 */
    "wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww x",
    "supercalifragilisticexpialidocious supercalifragilisticexpialidocious",
    "[INST] x[INST]y [INST]", "\xe4\xb8\xad\xe6\x96\x87 \xe4\xb8\xad \xd0\xaf\xd0\xaf", /* unknowns */
};

/* Both flag sets the cache is on for: identity normalisation keeping every space (byte
 * fallback), and NFKC removing extra whitespace (<unk>, a user-defined symbol). */
static const char *const bpe_models[] = {"tokenizers/sp_bpe_bytefallback.model",
                                         "tokenizers/sp_bpe_nfkc.model"};

static void test_cases(void **state)
{
    (void)state;
    for (int m = 0; m < 2; m++) {
        mc_spm_t *sp = load(bpe_models[m]);
        assert_true(mc_spm_chunk_cache(sp));
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
            same_ids(sp, cases[i], strlen(cases[i]));
        mc_spm_free(sp);
    }
}

/* Unigram's Viterbi sums float scores over the whole text: not split, so no cache. */
static void test_unigram_off(void **state)
{
    (void)state;
    mc_spm_t *sp = load("tokenizers/sp_unigram.model");
    assert_false(mc_spm_chunk_cache(sp));
    mc_spm_free(sp);
}

typedef struct {
    const mc_spm_t *sp;
    char **text;
    size_t n;
} corpus_t;

static void *encode_all(void *arg)
{
    const corpus_t *c = arg;
    for (size_t i = 0; i < c->n; i++) same_ids(c->sp, c->text[i], strlen(c->text[i]));
    return NULL;
}

/* Every tinyshakespeare document, on 3 threads at once (each its own cache). */
static void test_corpus_threads(void **state)
{
    (void)state;
    const char *d = getenv("MEGATRON_C_SHARED");
    char path[4096];
    snprintf(path, sizeof(path), "%s/data/text/tinyshakespeare.jsonl", d && *d ? d : "../shared");
    FILE *f = fopen(path, "r");
    if (!f) skip();
    corpus_t c = {NULL, NULL, 0};
    char line[1 << 16];
    while (fgets(line, sizeof(line), f)) {
        json_t *j = json_loads(line, 0, NULL);
        const char *s = json_string_value(json_object_get(j, "text"));
        if (s) {
            c.text = realloc(c.text, (c.n + 1) * sizeof(char *));
            c.text[c.n++] = strdup(s);
        }
        json_decref(j);
    }
    fclose(f);
    assert_true(c.n > 100);
    for (int m = 0; m < 2; m++) {
        c.sp = load(bpe_models[m]);
        pthread_t th[3];
        for (int i = 0; i < 3; i++)
            assert_int_equal(pthread_create(&th[i], NULL, encode_all, &c), 0);
        for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
        mc_spm_free((mc_spm_t *)c.sp);
    }
    for (size_t i = 0; i < c.n; i++) free(c.text[i]);
    free(c.text);
}

/* The hand-read ModelProto fields: defaults, nested messages, and bad bytes refused. */
static void test_proto_flags(void **state)
{
    (void)state;
    mc_spm_proto_flags_t f;
    assert_int_equal(mc_spm_proto_flags(NULL, 0, &f), 0);
    assert_int_equal(f.model_type, 1);
    assert_true(f.split_by_whitespace && f.add_dummy_prefix && f.remove_extra_whitespaces);
    assert_false(f.treat_whitespace_as_suffix || f.byte_fallback);
    /* pieces {piece "a"}; trainer_spec {model_type 2, byte_fallback 1 (field 35: key 0x118),
     * treat_whitespace_as_suffix 1}; normalizer_spec {add_dummy_prefix 0} */
    const unsigned char m[] = {0x0a, 0x03, 0x0a, 0x01, 'a', 0x12, 0x08, 0x18, 0x02, 0x98,
                               0x02, 0x01, 0xc0, 0x01, 0x01, 0x1a, 0x02, 0x18, 0x00};
    assert_int_equal(mc_spm_proto_flags(m, sizeof(m), &f), 0);
    assert_int_equal(f.model_type, 2);
    assert_true(f.byte_fallback && f.treat_whitespace_as_suffix);
    assert_false(f.add_dummy_prefix);
    assert_true(f.remove_extra_whitespaces);
    const unsigned char bad[] = {0x12, 0x09, 0x18, 0x02}; /* length past the end */
    assert_int_equal(mc_spm_proto_flags(bad, sizeof(bad), &f), -1);
    assert_int_equal(f.model_type, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_unigram_off),
        cmocka_unit_test(test_corpus_threads),
        cmocka_unit_test(test_proto_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
