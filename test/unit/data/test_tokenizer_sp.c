/* The SentencePiece tokenizers (data/tokenizer.h, data/tokenizer_sp.h) on the fixture models of
 * test/fixtures/tokenizers (test/ref/make_sp_models.py), hand-checked:
 * - sp_bpe_bytefallback.model: pieces <unk> <s> </s> at 0..2, the 256 byte pieces <0x00>..<0xFF>
 *   at 3..258 (so byte b is id 3 + b), no pad piece.
 * - sp_unigram.model: <unk> <s> </s> <pad> <MASK> [INST] at 0..5 (pad_id 3; <MASK> and [INST]
 *   user-defined), 2000 pieces.
 * Megatron's special tokens of the legacy SentencePieceTokenizer follow the pieces in the order
 * <CLS> <SEP> <EOD> <MASK> pad bos eos <extra_id_N>, each only when the model lacks it.
 * The id-for-id comparison on whole corpora is test/integration/test_tokenizer_sp.sh. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"
#include "test/unit/fixture.h"

#define BPE "tokenizers/sp_bpe_bytefallback.model"
#define UNI "tokenizers/sp_unigram.model"

static mc_tokenizer_t *build(const char *model, const char *type, bool legacy, int64_t extra)
{
    char path[4096], err[512] = "";
    assert_int_equal(mc_fx_path(path, sizeof(path), model), 0);
    mc_tokenizer_t *t = mc_tokenizer_build(&(mc_tokenizer_spec_t){.type = type,
                                                                  .tokenizer_model = path,
                                                                  .vocab_extra_ids = extra,
                                                                  .legacy = legacy},
                                           err, sizeof(err));
    if (!t) fail_msg("cannot build %s on %s: %s", type, model, err);
    return t;
}

/* text encodes to exactly want[0..n). */
static void expect_ids(const mc_tokenizer_t *t, const char *text, const int32_t *want, size_t n)
{
    mc_ids_t ids = {0};
    char err[256] = "";
    if (mc_tokenizer_encode(t, text, strlen(text), &ids, err, sizeof(err)) != 0)
        fail_msg("encode '%s': %s", text, err);
    if (ids.n != n) fail_msg("'%s': %zu ids, want %zu", text, ids.n, n);
    for (size_t i = 0; i < n; i++)
        if (ids.v[i] != want[i]) fail_msg("'%s': id %zu is %d, want %d", text, i, ids.v[i], want[i]);
    mc_ids_free(&ids);
}
#define EXPECT(t, text, ...)                                                                       \
    do {                                                                                           \
        const int32_t w_[] = {__VA_ARGS__};                                                        \
        expect_ids(t, text, w_, sizeof(w_) / sizeof(w_[0]));                                       \
    } while (0)

static void expect_decoded(const mc_tokenizer_t *t, const int32_t *ids, size_t n, const char *want)
{
    size_t len = 0;
    char *s = mc_tokenizer_decode(t, ids, n, &len);
    assert_non_null(s);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(s, want, len);
    free(s);
}

/* GPTSentencePieceTokenizer: plain SentencePiece ids; eod = eos; bytes fall back to 3 + byte. */
static void test_gpt_sentencepiece(void **state)
{
    (void)state;
    mc_tokenizer_t *t = build(BPE, "GPTSentencePieceTokenizer", false, 0);
    assert_int_equal(mc_tokenizer_vocab_size(t), 1000);
    assert_int_equal(mc_tokenizer_train_vocab_size(t), 1000);
    assert_int_equal(mc_tokenizer_eod(t), 2);
    assert_int_equal(mc_tokenizer_pad(t), -1);
    EXPECT(t, "Hello world", 329, 429, 942, 880); /* ▁H ell o ▁world */
    expect_ids(t, "", NULL, 0);
    /* "▁" then the UTF-8 bytes of é (C3 A9) and 😀 (F0 9F 98 80): no pieces for them */
    EXPECT(t, "\xc3\xa9\xf0\x9f\x98\x80", 939, 3 + 0xC3, 3 + 0xA9, 3 + 0xF0, 3 + 0x9F, 3 + 0x98,
           3 + 0x80);
    /* identity normalisation keeps both spaces: ▁ ▁ ▁ x */
    EXPECT(t, "  x", 939, 939, 939, 994);
    const int32_t hw[] = {329, 429, 942, 880};
    expect_decoded(t, hw, 4, "Hello world");
    assert_null(mc_tokenizer_decode(t, (const int32_t[]){1000}, 1, NULL));
    mc_tokenizer_free(t);
}

/* Llama2Tokenizer: Megatron's default system encodes plainly; the legacy class puts bos first
 * (also before an empty text). Neither has extra tokens. */
static void test_llama2(void **state)
{
    (void)state;
    mc_tokenizer_t *t = build(BPE, "Llama2Tokenizer", false, 0);
    EXPECT(t, "Hello world", 329, 429, 942, 880);
    assert_int_equal(mc_tokenizer_eod(t), 2);
    mc_tokenizer_free(t);
    t = build(BPE, "Llama2Tokenizer", true, 0);
    EXPECT(t, "Hello world", 1, 329, 429, 942, 880);
    EXPECT(t, "", 1);
    assert_int_equal(mc_tokenizer_vocab_size(t), 1000);
    assert_int_equal(mc_tokenizer_eod(t), 2);
    assert_int_equal(mc_tokenizer_pad(t), -1); /* the legacy class has no `pad` */
    mc_tokenizer_free(t);
}

/* The legacy SentencePieceTokenizer on the unigram model: <CLS> <SEP> <EOD> are added (2000..2002),
 * <MASK>, <pad>, <s>, </s> are the model's (4, 3, 1, 2), then 12 extra ids (2003..2014); special
 * tokens split the text. */
static void test_sentencepiece_legacy_unigram(void **state)
{
    (void)state;
    mc_tokenizer_t *t = build(UNI, "SentencePieceTokenizer", true, 12);
    assert_int_equal(mc_tokenizer_vocab_size(t), 2015);
    assert_int_equal(mc_tokenizer_train_vocab_size(t), 2015);
    assert_int_equal(mc_tokenizer_eod(t), 2002);
    assert_int_equal(mc_tokenizer_pad(t), 3);
    EXPECT(t, "x", 10, 483);                       /* ▁ x */
    EXPECT(t, "x<EOD>y", 10, 483, 2002, 10, 43);   /* x, <EOD>, y (▁ y) */
    EXPECT(t, "<s>x</s>", 1, 10, 483, 2);          /* the model's bos and eos pieces */
    EXPECT(t, "</s>x<s>", 2, 10, 483, 1);          /* the earliest first */
    EXPECT(t, "ab<extra_id_10>", 18, 76, 2013);    /* ▁a b, <extra_id_10> (not _1) */
    EXPECT(t, "<CLS><SEP><MASK><pad>", 2000, 2001, 4, 3);
    EXPECT(t, "<EOD", 10, 0, 534, 60, 376);        /* no special token: plain ids */
    const int32_t ids[] = {10, 483, 2002, 10, 43};
    expect_decoded(t, ids, 5, "x <EOD> y"); /* Megatron's detokenize spaces special tokens */
    assert_null(mc_tokenizer_decode(t, (const int32_t[]){2015}, 1, NULL));
    mc_tokenizer_free(t);
}

/* Without --legacy-tokenizer the same type is the plain library class (no special tokens, eod =
 * eos, the model's pad), while training still pads the legacy vocabulary. */
static void test_sentencepiece_default(void **state)
{
    (void)state;
    mc_tokenizer_t *t = build(UNI, "SentencePieceTokenizer", false, 12);
    assert_int_equal(mc_tokenizer_vocab_size(t), 2000);
    assert_int_equal(mc_tokenizer_train_vocab_size(t), 2015);
    assert_int_equal(mc_tokenizer_eod(t), 2);
    assert_int_equal(mc_tokenizer_pad(t), 3);
    EXPECT(t, "x<EOD>y", 10, 483, 0, 534, 60, 376, 0, 43); /* ▁ x <unk>(<) E O D <unk>(>) y */
    EXPECT(t, "<MASK>", 10, 4);                            /* a user-defined piece */
    EXPECT(t, "x  y", 10, 483, 10, 43);                    /* extra space removed */
    mc_tokenizer_free(t);
}

/* The BPE model has no pad piece: the legacy class adds <PAD> after <CLS> <SEP> <EOD> <MASK>. */
static void test_sentencepiece_legacy_no_pad(void **state)
{
    (void)state;
    mc_tokenizer_t *t = build(BPE, "SentencePieceTokenizer", true, 0);
    assert_int_equal(mc_tokenizer_vocab_size(t), 1005);
    assert_int_equal(mc_tokenizer_eod(t), 1002);
    assert_int_equal(mc_tokenizer_pad(t), 1004);
    EXPECT(t, "<PAD><MASK>", 1004, 1003);
    mc_tokenizer_free(t);
}

static void expect_build_error(const char *type, const char *model, int64_t extra,
                               const char *want)
{
    char err[512] = "";
    mc_tokenizer_t *t = mc_tokenizer_build(
        &(mc_tokenizer_spec_t){.type = type, .tokenizer_model = model, .vocab_extra_ids = extra},
        err, sizeof(err));
    assert_null(t);
    if (!strstr(err, want)) fail_msg("error '%s' lacks '%s'", err, want);
}

static void test_bad_input(void **state)
{
    (void)state;
    char path[4096];
    expect_build_error("Llama2Tokenizer", NULL, 0, "Llama2Tokenizer needs a SentencePiece model");
    expect_build_error("GPTSentencePieceTokenizer", "/nonexistent/x.model", 0,
                       "cannot load the SentencePiece model '/nonexistent/x.model'");
    assert_int_equal(mc_fx_path(path, sizeof(path), "bpe_corpus.txt"), 0);
    expect_build_error("SentencePieceTokenizer", path, 0, "cannot load the SentencePiece model");
    assert_int_equal(mc_fx_path(path, sizeof(path), UNI), 0);
    expect_build_error("SentencePieceTokenizer", path, -1, "--vocab-extra-ids must be in");
}

/* Encoding from several threads at once gives each thread the same ids. */
static void *encode_many(void *arg)
{
    const mc_tokenizer_t *t = arg;
    static const char text[] = "First Citizen:<EOD>\nBefore we proceed any further, hear me speak.";
    mc_ids_t first = {0}, ids = {0};
    char err[256];
    long bad = mc_tokenizer_encode(t, text, sizeof(text) - 1, &first, err, sizeof(err));
    for (int i = 0; i < 200 && !bad; i++) {
        ids.n = 0;
        bad = mc_tokenizer_encode(t, text, sizeof(text) - 1, &ids, err, sizeof(err)) != 0 ||
              ids.n != first.n || memcmp(ids.v, first.v, ids.n * sizeof(int32_t)) != 0;
    }
    mc_ids_free(&first);
    mc_ids_free(&ids);
    return (void *)bad;
}

static void test_threads(void **state)
{
    (void)state;
    mc_tokenizer_t *t = build(UNI, "SentencePieceTokenizer", true, 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, encode_many, t), 0);
    for (int i = 0; i < 4; i++) {
        void *bad;
        pthread_join(th[i], &bad);
        assert_null(bad);
    }
    mc_tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt_sentencepiece),
        cmocka_unit_test(test_llama2),
        cmocka_unit_test(test_sentencepiece_legacy_unigram),
        cmocka_unit_test(test_sentencepiece_default),
        cmocka_unit_test(test_sentencepiece_legacy_no_pad),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
