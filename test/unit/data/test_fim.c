/* data/fim.c (Megatron's GPTFIMDataset transform) and data/mt19937.c's binomial(1, p): the
 * expected ids come from test/ref/fim_ref.py with a one-byte-per-id tokenizer (ids 200..205 are
 * <fim_prefix>, <fim_middle>, <fim_suffix>, <fim_pad>, eod and the split token), and the draws
 * from numpy's RandomState. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "data/bpe.h"
#include "data/fim.h"
#include "data/fim_stream.h"
#include "data/mt19937.h"

enum { PRE = 200, MID = 201, SUF = 202, PAD = 203, EOD = 204, SPLIT = 205 };

static char *toy_decode(void *ctx, const int32_t *ids, size_t n, size_t *len)
{
    (void)ctx;
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i++) s[i] = (char)ids[i];
    *len = n;
    return s;
}

static int toy_encode(void *ctx, const char *s, size_t len, mc_ids_t *out)
{
    (void)ctx;
    for (size_t i = 0; i < len; i++)
        if (mc_ids_push(out, (unsigned char)s[i])) return -1;
    return 0;
}

/* text: letters are their bytes, 'E' the eod, '|' the split token. */
static void check(uint32_t seed, double rate, double spm, const char *text, bool split, double frag,
                  const char *no_prefix, const int32_t *want)
{
    uint32_t np[16];
    size_t npl = 0;
    for (const char *c = no_prefix; c && *c; c++) np[npl++] = (unsigned char)*c;
    const mc_fim_params_t p = {.rate = rate,
                               .spm_rate = spm,
                               .fragment_rate = frag,
                               .prefix = PRE,
                               .middle = MID,
                               .suffix = SUF,
                               .pad = PAD,
                               .eod = EOD,
                               .split = split ? SPLIT : -1,
                               .no_prefix = no_prefix ? np : NULL,
                               .no_prefix_len = npl};
    const mc_fim_codec_t c = {.decode = toy_decode, .encode = toy_encode};
    int32_t ids[64];
    const int n = (int)strlen(text);
    for (int i = 0; i < n; i++) ids[i] = text[i] == 'E' ? EOD : text[i] == '|' ? SPLIT : text[i];
    mc_mt19937_t r;
    mc_mt19937_seed(&r, seed);
    char err[128];
    assert_int_equal(mc_fim_sample(&p, &c, &r, ids, n, err, sizeof(err)), 0);
    for (int i = 0; i < n; i++) assert_int_equal(ids[i], want[i]);
}

/* PSM: prefix "abcde", suffix "", middle "fgh"; 11 ids cut back to 8. */
static void test_psm_truncated(void **st)
{
    (void)st;
    check(1, 1.0, 0.0, "abcdefgh", false, 0, NULL,
          (int32_t[]){PRE, 'a', 'b', 'c', 'd', 'e', SUF, MID});
}

/* The same cut points (the SPM draw comes after randint) in SPM order. */
static void test_spm(void **st)
{
    (void)st;
    check(1, 1.0, 1.0, "abcdefgh", false, 0, NULL,
          (int32_t[]){PRE, SUF, MID, 'a', 'b', 'c', 'd', 'e'});
}

/* Segments between eods each permuted; an empty segment loses its eod. */
static void test_eod_segments(void **st)
{
    (void)st;
    check(7, 1.0, 0.5, "abEcdEEefg", false, 0, NULL,
          (int32_t[]){PRE, 'a', SUF, MID, 'b', EOD, PRE, SUF, 'd', MID});
}

/* Fragments between split tokens, each at the fragment rate; an empty one is dropped with its
 * split token. */
static void test_fragments(void **st)
{
    (void)st;
    check(3, 1.0, 1.0, "ab|cd||e", true, 1.0, NULL,
          (int32_t[]){PRE, SUF, 'a', 'b', MID, SPLIT, PRE, SUF});
}

/* No FIM (rate 0 draws nothing) but the dropped eod leaves room: padded with <fim_pad>. */
static void test_padding(void **st)
{
    (void)st;
    check(5, 0.0, 0.5, "abEEcdEf", false, 0, NULL,
          (int32_t[]){'a', 'b', EOD, 'c', 'd', EOD, 'f', PAD});
}

static void test_no_prefix(void **st)
{
    (void)st;
    check(1, 1.0, 0.0, "abcdefgh", false, 0, "ab",
          (int32_t[]){'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'});
}

static void test_rate_09(void **st)
{
    (void)st;
    check(2, 0.9, 0.0, "xyz", false, 0, NULL, (int32_t[]){PRE, SUF, 'y'});
}

/* RandomState(1234).binomial(1, p) for p cycling through ps, then randint(0, 1000). */
static void test_binomial_numpy(void **st)
{
    (void)st;
    static const double ps[] = {0.3, 0.5, 0.7, 1.0, 0.0, 0.999, 1e-9, 0.5000001};
    static const int want[64] = {0, 1, 1, 1, 0, 1, 0, 0, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1,
                                 0, 1, 1, 1, 1, 1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 1,
                                 0, 1, 0, 0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 1, 0, 1};
    mc_mt19937_t r;
    mc_mt19937_seed(&r, 1234);
    for (int i = 0; i < 64; i++) assert_int_equal(mc_mt19937_binomial1(&r, ps[i % 8]), want[i]);
    assert_int_equal((int)mc_mt19937_bounded(&r, 999), 617);
    mc_mt19937_seed(&r, 99);
    assert_true(mc_mt19937_next_double(&r) == 0.6722785586307918);
    assert_true(mc_mt19937_next_double(&r) == 0.4880783992405837);
}

/* Python's errors='replace': one U+FFFD per maximal invalid subpart. */
static void test_utf8_replace(void **st)
{
    (void)st;
    uint32_t *cp = NULL;
    const char s[] = "a\xe2\x82"
                     "b\xff\xf0\x9f\x98\x80";
    int64_t m = mc_fim_utf8_decode(s, sizeof(s) - 1, &cp);
    assert_int_equal(m, 5);
    const uint32_t want[] = {'a', 0xfffd, 'b', 0xfffd, 0x1f600};
    for (int i = 0; i < 5; i++) assert_int_equal(cp[i], want[i]);
    free(cp);
}

/* ---- the RandomStates per split, dataset and DataLoader worker (data/fim_stream.c) ---- */

/* A GPT-2 style vocabulary of the 256 bytes (ids 0..255, no merges), eod 256 and the FIM
 * tokens 257..260; the files' paths in vocab/merges. */
static void write_vocab(char *vocab, char *merges)
{
    const char *dir = getenv("TMPDIR");
    snprintf(vocab, 4096, "%s/mc_fim_vocab_XXXXXX", dir && *dir ? dir : "/tmp");
    snprintf(merges, 4096, "%s/mc_fim_merges_XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(vocab), fm = mkstemp(merges);
    assert_true(fd >= 0 && fm >= 0);
    FILE *f = fdopen(fd, "w");
    fputc('{', f);
    for (int b = 0; b < 256; b++) {
        unsigned char raw = (unsigned char)b;
        char key[8];
        size_t n = mc_bpe_byte_key(&raw, 1, key);
        fputs(b ? ",\"" : "\"", f);
        if (key[0] == '"' || key[0] == '\\') fputc('\\', f);
        fwrite(key, 1, n, f);
        fprintf(f, "\":%d", b);
    }
    fputs(",\"<|endoftext|>\":256,\"<fim_prefix>\":257,\"<fim_middle>\":258,"
          "\"<fim_suffix>\":259,\"<fim_pad>\":260}",
          f);
    fclose(f);
    assert_int_equal(write(fm, "#version: 0.2\n", 14), 14);
    close(fm);
}

static mc_fim_config_t fim_config(int workers)
{
    return (mc_fim_config_t){.on = true,
                             .rate = 1.0,
                             .spm_rate = 0.5,
                             .prefix = "<fim_prefix>",
                             .middle = "<fim_middle>",
                             .suffix = "<fim_suffix>",
                             .pad = "<fim_pad>",
                             .eod = "<|endoftext|>",
                             .num_workers = workers,
                             .seed = 3};
}

static void apply(mc_fim_streams_t *s, int split, int comp, int64_t mb, int32_t *out)
{
    static const char text[] = "hello there, world";
    const int n = (int)sizeof(text) - 1;
    for (int i = 0; i < n; i++) out[i] = (unsigned char)text[i];
    out[5] = 256; /* an eod: two documents */
    char err[256];
    assert_int_equal(mc_fim_streams_apply(s, split, comp, 2, mb, out, n, err, sizeof(err)), 0);
}

static void test_streams(void **st)
{
    (void)st;
    char vocab[4096], merges[4096], err[512];
    write_vocab(vocab, merges);
    const mc_tokenizer_spec_t spec = {
        .type = "GPT2BPETokenizer", .vocab_file = vocab, .merge_file = merges};
    mc_tokenizer_t *tok = mc_tokenizer_build(&spec, err, sizeof(err));
    if (!tok) fail_msg("%s", err);
    enum { N = 18 };
    int32_t a[N], b[N];
    mc_fim_config_t c = fim_config(2);
    mc_fim_streams_t *s = mc_fim_streams_open(&c, tok, err, sizeof(err));
    assert_non_null(s);
    apply(s, 0, 0, 0, a);
    assert_int_equal(a[0], 257); /* rate 1: a FIM sample */
    apply(s, 0, 0, 1, b);        /* worker 1: its own fresh state */
    assert_memory_equal(a, b, sizeof(a));
    apply(s, 0, 1, 0, b); /* the blend's second dataset: its own state */
    assert_memory_equal(a, b, sizeof(a));
    apply(s, 1, 0, 0, b); /* the validation split: its own dataset */
    assert_memory_equal(a, b, sizeof(a));
    apply(s, 0, 0, 2, b); /* worker 0 again: its state has moved on */
    assert_memory_not_equal(a, b, sizeof(a));
    mc_fim_streams_free(s);

    c = fim_config(0); /* the main process: one state */
    s = mc_fim_streams_open(&c, tok, err, sizeof(err));
    apply(s, 0, 0, 0, b);
    assert_memory_equal(a, b, sizeof(a));
    apply(s, 0, 0, 1, b);
    assert_memory_not_equal(a, b, sizeof(a));
    mc_fim_streams_free(s);

    c.middle = "<fim_mid>";
    assert_null(mc_fim_streams_open(&c, tok, err, sizeof(err)));
    assert_non_null(strstr(err, "--fim-middle-token '<fim_mid>': the tokenizer's vocabulary has "
                                "no such token"));
    mc_tokenizer_free(tok);
    unlink(vocab);
    unlink(merges);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_psm_truncated), cmocka_unit_test(test_spm),
        cmocka_unit_test(test_eod_segments),  cmocka_unit_test(test_fragments),
        cmocka_unit_test(test_padding),       cmocka_unit_test(test_no_prefix),
        cmocka_unit_test(test_rate_09),       cmocka_unit_test(test_binomial_numpy),
        cmocka_unit_test(test_utf8_replace),  cmocka_unit_test(test_streams),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
