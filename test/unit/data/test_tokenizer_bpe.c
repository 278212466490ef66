/* HuggingFaceTokenizer and TikTokenizer (data/tok_hf.h, data/tok_tiktoken.h) on the fixtures of
 * test/fixtures/tokenizers/, with cases checked by hand against the tokens the tokenizers
 * package prints for them ('H' 'ell' 'o' 'Ġworld', ...); NFC (data/nfc.h); invalid UTF-8;
 * refused tokenizer.json features; several threads at once. The whole corpora are compared with
 * the Python packages by test/integration/test_tokenizers_bpe.sh. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/nfc.h"
#include "data/pretok_regex.h"
#include "data/tokenizer.h"
#include "test/unit/fixture.h"

static mc_tokenizer_t *hf(const char *style, bool legacy)
{
    char dir[4096], rel[64], err[512] = "";
    snprintf(rel, sizeof(rel), "tokenizers/%s", style);
    assert_int_equal(mc_fx_path(dir, sizeof(dir), rel), 0);
    mc_tokenizer_t *t = mc_tokenizer_build(
        &(mc_tokenizer_spec_t){
            .type = "HuggingFaceTokenizer", .tokenizer_model = dir, .legacy = legacy},
        err, sizeof(err));
    if (!t) fail_msg("%s: %s", style, err);
    return t;
}

static mc_tokenizer_t *tiktoken(const char *pattern, const char *const *special, int nspecial,
                                char *err, size_t n)
{
    char path[4096];
    assert_int_equal(mc_fx_path(path, sizeof(path), "tokenizers/tiktoken.json"), 0);
    return mc_tokenizer_build(&(mc_tokenizer_spec_t){.type = "TikTokenizer",
                                                     .tokenizer_model = path,
                                                     .vocab_size = 2103,
                                                     .tiktoken_pattern = pattern,
                                                     .tiktoken_num_special_tokens = 100,
                                                     .tiktoken_special_tokens = special,
                                                     .n_tiktoken_special_tokens = nspecial},
                              err, n);
}

/* The ids of text equal want[0..n), and they decode back to text. */
static void expect_ids(const mc_tokenizer_t *t, const char *text, const int32_t *want, size_t n)
{
    mc_ids_t ids = {0};
    char err[512] = "";
    if (mc_tokenizer_encode(t, text, strlen(text), &ids, err, sizeof(err)) != 0)
        fail_msg("encode '%s': %s", text, err);
    if (ids.n != n) fail_msg("'%s': %zu ids, expected %zu", text, ids.n, n);
    for (size_t i = 0; i < n; i++)
        if (ids.v[i] != want[i])
            fail_msg("'%s': id %zu is %d, expected %d", text, i, ids.v[i], want[i]);
    mc_ids_free(&ids);
}

#define IDS(...) (const int32_t[]){__VA_ARGS__}, sizeof((const int32_t[]){__VA_ARGS__}) / 4

static void test_llama3_style(void **state)
{
    (void)state;
    mc_tokenizer_t *t = hf("llama3", false);
    assert_int_equal(mc_tokenizer_vocab_size(t), 2002); /* 2000 + two added tokens */
    assert_int_equal(mc_tokenizer_eod(t), 2001);        /* <|end_of_text|> */
    expect_ids(t, "Hello world", IDS(39, 412, 78, 874)); /* H ell o Ġworld */
    /* 's by the case-insensitive group; digits one at a time (vocab has no 2-3 digit tokens) */
    expect_ids(t, "It's 2024!", IDS(813, 322, 220, 17, 15, 17, 19, 0));
    expect_ids(t, "<|end_of_text|>x", IDS(2001, 87));     /* the added token cut out first */
    expect_ids(t, "cafe\xcc\x81", IDS(1817, 518, 136, 223)); /* no normalizer: e + U+0301 */
    expect_ids(t, "  a\n\nb", IDS(220, 258, 198, 198, 65)); /* Ġ Ġa Ċ Ċ b */
    mc_tokenizer_free(t);
    t = hf("llama3", true); /* Megatron's legacy tokenizer: the template's BOS */
    expect_ids(t, "Hello world", IDS(2000, 39, 412, 78, 874));
    mc_tokenizer_free(t);
}

static void test_qwen2_style(void **state)
{
    (void)state;
    mc_tokenizer_t *t = hf("qwen2", true); /* a ByteLevel post-processor adds nothing */
    assert_int_equal(mc_tokenizer_vocab_size(t), 1503);
    assert_int_equal(mc_tokenizer_eod(t), 1500); /* <|endoftext|> */
    expect_ids(t, "Hello world", IDS(39, 412, 78, 874));
    /* NFC: e + U+0301 becomes U+00E9, bytes C3 A9: 'Ã' '©' */
    expect_ids(t, "cafe\xcc\x81", IDS(66, 64, 69, 127, 102));
    expect_ids(t, "<|im_start|>hi", IDS(1501, 376));
    mc_tokenizer_free(t);
    t = hf("nemo", true);
    assert_int_equal(mc_tokenizer_eod(t), 2);                 /* </s>, a trained special */
    expect_ids(t, "Hello world", IDS(1, 42, 415, 81, 878)); /* <s> H ell o Ġworld */
    mc_tokenizer_free(t);
}

static void test_tiktoken(void **state)
{
    (void)state;
    char err[512] = "";
    mc_tokenizer_t *v1 = tiktoken("v1", NULL, 0, err, sizeof(err));
    mc_tokenizer_t *v2 = tiktoken("v2", NULL, 0, err, sizeof(err));
    if (!v1 || !v2) fail_msg("%s", err);
    assert_int_equal(mc_tokenizer_vocab_size(v1), 2103);
    assert_int_equal(mc_tokenizer_eod(v1), 2); /* </s> of <unk> <s> </s> */
    /* ranks + 100: H ell o Ġworld are ranks 72 412 111 874 */
    expect_ids(v1, "Hello world", IDS(172, 512, 211, 974));
    /* v1 keeps the piece whole and it is a token (rank 2000); v2 cuts it at case changes */
    expect_ids(v1, "CamelCaseWords", IDS(2100));
    expect_ids(v2, "CamelCaseWords", IDS(167, 653, 208, 167, 840, 187, 454, 215));
    /* special-token text is ordinary text (encode_ordinary) */
    mc_ids_t ids = {0};
    assert_int_equal(mc_tokenizer_encode(v2, "</s>", 4, &ids, err, sizeof(err)), 0);
    for (size_t i = 0; i < ids.n; i++) assert_true(ids.v[i] >= 100);
    mc_ids_free(&ids);
    size_t len;
    char *s = mc_tokenizer_decode(v2, (const int32_t[]){2, 172}, 2, &len);
    assert_non_null(s);
    assert_int_equal(len, 5);
    assert_memory_equal(s, "</s>H", 5);
    free(s);
    mc_tokenizer_free(v1);
    mc_tokenizer_free(v2);
    static const char *const no_eos[] = {"<unk>", "<s>"};
    assert_null(tiktoken("v1", no_eos, 2, err, sizeof(err)));
    assert_non_null(strstr(err, "must include <unk>, <s> and </s>"));
    assert_null(tiktoken("v3", NULL, 0, err, sizeof(err)));
    assert_non_null(strstr(err, "--tiktoken-pattern v1 or v2"));
}

/* Any bytes encode, and decode back to themselves: invalid UTF-8 is never matched by the
 * pattern, so it forms pieces of its own, merged as bytes (NFC leaves it as it is). */
static void test_invalid_utf8(void **state)
{
    (void)state;
    static const char text[] = "a\xff" "b \xc3 caf\xc3\xa9\xed\xa0\x80 x\xf4\x90\x80\x80y";
    char err[512] = "";
    mc_tokenizer_t *ts[4] = {hf("llama3", false), hf("qwen2", false), hf("nemo", false),
                             tiktoken("v1", NULL, 0, err, sizeof(err))};
    for (int k = 0; k < 4; k++) {
        assert_non_null(ts[k]);
        mc_ids_t ids = {0};
        assert_int_equal(mc_tokenizer_encode(ts[k], text, sizeof(text) - 1, &ids, err, sizeof(err)), 0);
        size_t len;
        char *s = mc_tokenizer_decode(ts[k], ids.v, ids.n, &len);
        assert_non_null(s);
        assert_int_equal(len, sizeof(text) - 1);
        assert_memory_equal(s, text, len);
        free(s);
        mc_ids_free(&ids);
        mc_tokenizer_free(ts[k]);
    }
}

/* NFC of a UTF-8 string; "=": already NFC by the quick check (no copy). */
static void expect_nfc(const char *in, const char *want)
{
    char *out;
    size_t n;
    assert_int_equal(mc_nfc(in, strlen(in), &out, &n), 0);
    if (!out) {
        if (strcmp(want, "=") != 0 && strcmp(want, in) != 0)
            fail_msg("NFC left '%s' as it is, expected '%s'", in, want);
        return;
    }
    if (n != strlen(want) || memcmp(out, want, n) != 0)
        fail_msg("NFC('%s') = '%.*s', expected '%s'", in, (int)n, out, want);
    free(out);
}

static void test_nfc(void **state)
{
    (void)state;
    expect_nfc("plain ASCII", "=");
    expect_nfc("caf\xc3\xa9", "=");                    /* U+00E9 is stable */
    expect_nfc("cafe\xcc\x81", "caf\xc3\xa9");         /* e + U+0301 composes */
    expect_nfc("\xe2\x84\xab", "\xc3\x85");            /* U+212B ANGSTROM SIGN: singleton */
    expect_nfc("\xe0\xa5\x98", "\xe0\xa4\x95\xe0\xa4\xbc"); /* U+0958: excluded, decomposed */
    /* a + U+0323 + U+0307 and a + U+0307 + U+0323: both U+1EA1 U+0307 (reordered by class) */
    expect_nfc("a\xcc\xa3\xcc\x87", "\xe1\xba\xa1\xcc\x87");
    expect_nfc("a\xcc\x87\xcc\xa3", "\xe1\xba\xa1\xcc\x87");
    expect_nfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81"); /* jamo L V T: U+AC01 */
    expect_nfc("\xea\xb0\x80\xe1\x86\xa8", "\xea\xb0\x81");             /* LV + T */
    expect_nfc("\xcc\x81" "e", "\xcc\x81" "e");          /* a leading mark stays */
    expect_nfc("e\xff\xcc\x81", "e\xff\xcc\x81");       /* an invalid byte blocks composition */
}

/* Writes dir/tokenizer.json (and a config with an eos) and expects the build to fail naming
 * what. */
static void expect_refused(const char *json, const char *what)
{
    char dir[] = "/tmp/mc_tokbpe_XXXXXX", path[4200], err[512] = "";
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"eos_token\": \"a\"}", f);
    fclose(f);
    mc_tokenizer_t *t = mc_tokenizer_build(
        &(mc_tokenizer_spec_t){.type = "HuggingFaceTokenizer", .tokenizer_model = dir}, err,
        sizeof(err));
    if (t || !strstr(err, what)) fail_msg("expected an error naming '%s', got '%s'", what, err);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    unlink(path);
    rmdir(dir);
}

static void test_refused_features(void **state)
{
    (void)state;
    char byte_vocab[4096] = "{", *p = byte_vocab + 1;
    /* the 256 byte-level characters (bytes_to_unicode's image) as a vocab */
    for (int b = 0, extra = 0; b < 256; b++) {
        int keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        int cp = keep ? b : 0x100 + extra++;
        p += sprintf(p, "%s\"\\u%04x\":%d", b ? "," : "", cp, b);
    }
    strcpy(p, "}");
    char json[8192];
    expect_refused("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}", "model type 'WordPiece'");
    snprintf(json, sizeof(json),
             "{\"model\":{\"type\":\"BPE\",\"dropout\":0.1,\"vocab\":%s,\"merges\":[]}}", byte_vocab);
    expect_refused(json, "dropout");
    snprintf(json, sizeof(json), "{\"model\":{\"type\":\"BPE\",\"vocab\":%s,\"merges\":[\"a z9\"]}}",
             byte_vocab);
    expect_refused(json, "merge 0 is not two tokens");
    snprintf(json, sizeof(json), "{\"model\":{\"type\":\"BPE\",\"vocab\":%s,\"merges\":[\"a b\"]}}",
             byte_vocab);
    expect_refused(json, "merge 0 makes a token that is not in the vocab");
    expect_refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}",
                   "no byte-level token for byte 0x00");
    snprintf(json, sizeof(json),
             "{\"model\":{\"type\":\"BPE\",\"vocab\":%s,\"merges\":[]},\"pre_tokenizer\":"
             "{\"type\":\"Whitespace\"}}",
             byte_vocab);
    expect_refused(json, "pre_tokenizer 'Whitespace'");
    snprintf(json, sizeof(json),
             "{\"model\":{\"type\":\"BPE\",\"vocab\":%s,\"merges\":[]},\"pre_tokenizer\":"
             "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
             "\"added_tokens\":[{\"id\":300,\"content\":\"<x>\",\"lstrip\":true}]}",
             byte_vocab);
    expect_refused(json, "sets lstrip");
}

/* The four patterns data/pretok_ascii.c matches by hand (as tokenizer.json and Megatron write
 * them). */
static const char *const FAST_PATTERNS[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
};

/* The hand-made matcher cuts as PCRE2 does: each pattern, exactly (fast path) and with a
 * never-matching alternative appended (PCRE2 only), on random strings of the characters that
 * decide between the alternatives, a few non-ASCII ones among them (\u00e9, NBSP, NEL, long s,
 * an Arabic digit, a combining mark, an invalid byte). */
static void test_fast_path_is_pcre2(void **state)
{
    (void)state;
    static const char *const units[] = {
        "a", "Z", "e", "S", "l", "L", "r", "v", "d", "m", "t", "0", "7", "'", " ", "  ", "\t",
        "\n", "\r", "\r\n", "/", "!", ".", "-", "\x0b", "\x1c", "\xc3\xa9", "\xc2\xa0", "\xc2\x85",
        "\xc5\xbf", "\xd9\xa3", "\xcc\x81", "\xff", "A", "b", "123"};
    const size_t nu = sizeof(units) / sizeof(units[0]);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t k = 0; k < sizeof(FAST_PATTERNS) / sizeof(FAST_PATTERNS[0]); k++) {
        char slow[1024], err[512] = "";
        snprintf(slow, sizeof(slow), "%s|(?!)", FAST_PATTERNS[k]);
        mc_pretok_regex_t *f = mc_pretok_regex_new(FAST_PATTERNS[k], "fast", err, sizeof(err));
        mc_pretok_regex_t *sl = mc_pretok_regex_new(slow, "slow", err, sizeof(err));
        assert_non_null(f);
        assert_non_null(sl);
        for (int r = 0; r < 20000; r++) {
            char text[256];
            size_t len = 0, a[256], b[256], na, nb;
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            for (int u = 0, n = (int)(x % 24); u < n; u++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                const char *piece = units[x % nu];
                memcpy(text + len, piece, strlen(piece));
                len += strlen(piece);
            }
            assert_int_equal(mc_pretok_regex_pieces(f, text, len, a, 256, &na), 0);
            assert_int_equal(mc_pretok_regex_pieces(sl, text, len, b, 256, &nb), 0);
            if (na != nb || memcmp(a, b, na * sizeof(size_t)) != 0)
                fail_msg("pattern %zu: the fast path and PCRE2 cut '%.*s' differently", k,
                         (int)len, text);
        }
        mc_pretok_regex_free(f);
        mc_pretok_regex_free(sl);
    }
}

static void *encode_many(void *arg)
{
    const mc_tokenizer_t *t = arg;
    static const char text[] = "First Citizen:\nBefore we proceed any further, hear me speak. ";
    mc_ids_t *ids = calloc(1, sizeof(*ids));
    char err[256];
    for (int r = 0; r < 200; r++)
        if (mc_tokenizer_encode(t, text, sizeof(text) - 1, ids, err, sizeof(err)) != 0) break;
    return ids;
}

static void test_threads(void **state)
{
    (void)state;
    mc_tokenizer_t *t = hf("qwen2", false);
    pthread_t th[4];
    for (int k = 0; k < 4; k++) assert_int_equal(pthread_create(&th[k], NULL, encode_many, t), 0);
    mc_ids_t *first = NULL;
    for (int k = 0; k < 4; k++) {
        mc_ids_t *ids;
        pthread_join(th[k], (void **)&ids);
        assert_int_not_equal(ids->n, 0);
        if (!first) {
            first = ids;
            continue;
        }
        assert_int_equal(ids->n, first->n);
        assert_memory_equal(ids->v, first->v, ids->n * sizeof(int32_t));
        mc_ids_free(ids);
        free(ids);
    }
    mc_ids_free(first);
    free(first);
    mc_tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama3_style), cmocka_unit_test(test_qwen2_style),
        cmocka_unit_test(test_tiktoken),     cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_nfc),          cmocka_unit_test(test_refused_features),
        cmocka_unit_test(test_threads),      cmocka_unit_test(test_fast_path_is_pcre2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
