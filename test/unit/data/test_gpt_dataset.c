/* Megatron's GPT dataset sampling (MEGATRON.md 2.1-2.9): split parsing and rounding, blending,
 * the document / sample / shuffle indices, sample fetch and fields, the DP sampler, and the
 * real thing: Megatron core_v0.15.0's own GPTDataset on tinyshakespeare
 * ($MEGATRON_C_SHARED/data/megatron-ref/sample_order_public.json), reproduced exactly. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/blend.h"
#include "data/gpt_dataset.h"
#include "data/sampler.h"
#include "data/sha256.h"
#include "trainer/config.h"

/* ---- SHA-256 for the reference file's array hashes (data/sha256.h) ------------------------ */

typedef mc_sha256_t sha256_t;
static void sha256_init(sha256_t *s) { mc_sha256_init(s); }
static void sha256_update(sha256_t *s, const void *data, size_t n) { mc_sha256_update(s, data, n); }
static void sha256_hex(sha256_t *s, char out[65])
{
    uint8_t d[32];
    mc_sha256_final(s, d);
    for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

static void sha256_of(const void *data, size_t n, char out[65])
{
    sha256_t s;
    sha256_init(&s);
    sha256_update(&s, data, n);
    sha256_hex(&s, out);
}

/* sha256 of int32 values written as little-endian int64 (torch .long() tensors). */
static void sha256_i64_of_i32(const int32_t *v, size_t n, char out[65])
{
    sha256_t s;
    sha256_init(&s);
    for (size_t i = 0; i < n; i++) {
        int64_t x = v[i];
        sha256_update(&s, &x, 8); /* x86/ARM are little-endian, as the reference */
    }
    sha256_hex(&s, out);
}

static void test_sha256_self(void **state)
{
    (void)state;
    char h[65];
    sha256_of("abc", 3, h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha256_of("", 0, h);
    assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

/* Hash of a dataset's index array in the dtype Megatron stores it in. */
static void index_hashes(const mc_gpt_dataset_t *d, char doc[65], char sample[65], char shuf[65])
{
    sha256_of(d->document_index, sizeof(int32_t) * (size_t)d->document_index_len, doc);
    sha256_of(d->sample_index,
              (d->sample_index_int64 ? 8 : 4) * 2 * (size_t)(d->length + 1), sample);
    sha256_of(d->shuffle_index, (d->shuffle_index_int64 ? 8 : 4) * (size_t)d->length, shuf);
}

/* ---- split (2.2) --------------------------------------------------------------------------- */

static void check_range(const char *split, int64_t N, const int64_t want[3][2],
                        const int want_present[3])
{
    double be[3][2];
    int present[3];
    char err[256];
    assert_int_equal(mc_split_matrix(split, be, present, err, sizeof err), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(present[i], want_present[i]);
        if (!present[i]) continue;
        int64_t b, e;
        mc_split_range(be[i], N, &b, &e);
        assert_int_equal(b, want[i][0]);
        assert_int_equal(e, want[i][1]);
    }
}

static void test_split_examples(void **state)
{
    (void)state;
    const int all[3] = {1, 1, 1};
    const int64_t r1000[3][2] = {{0, 969}, {969, 999}, {999, 1000}};
    const int64_t r10[3][2] = {{0, 10}, {10, 10}, {10, 10}};
    check_range("969, 30, 1", 1000, r1000, all);
    check_range("969,30,1", 10, r10, all);
    /* The default the builder uses when --split is absent. */
    check_range("969, 30, 1", 1000, r1000, all);

    double be[3][2];
    int present[3];
    char err[256];
    assert_int_equal(mc_split_matrix("969, 30, 1", be, present, err, sizeof err), 0);
    assert_true(be[0][1] == 969.0 / 1000.0);
    assert_true(be[1][1] == 969.0 / 1000.0 + 30.0 / 1000.0);

    /* Padding with zeros; a zero weight gives no dataset (None). */
    const int p100[3] = {1, 0, 0}, p110[3] = {1, 1, 0}, p010[3] = {0, 1, 0};
    const int64_t r_a[3][2] = {{0, 7}, {0, 0}, {0, 0}};
    check_range("1", 7, r_a, p100);
    const int64_t r_b[3][2] = {{0, 99}, {99, 100}, {0, 0}};
    check_range("99,1", 100, r_b, p110);
    const int64_t r_c[3][2] = {{0, 0}, {0, 5}, {0, 0}};
    check_range("0,1,0", 5, r_c, p010);
    /* Round half to even: 0.5 * 5 = 2.5 -> 2; 0.5 * 7 = 3.5 -> 4. */
    const int64_t r_d[3][2] = {{0, 2}, {2, 5}, {0, 0}};
    check_range("1,1", 5, r_d, p110);
    const int64_t r_e[3][2] = {{0, 4}, {4, 7}, {0, 0}};
    check_range("1,1", 7, r_e, p110);
    /* re.findall(r"[.0-9]+"): separators are anything else; "-" is not a sign. */
    const int64_t r_f[3][2] = {{0, 90}, {90, 98}, {98, 100}};
    check_range("90/8 -2", 100, r_f, all);
    check_range(" 0.9 ,0.08, 0.02 ", 100, r_f, all);
}

static void test_split_errors(void **state)
{
    (void)state;
    double be[3][2];
    int present[3];
    char err[256];
    assert_int_equal(mc_split_matrix("1,2,3,4", be, present, err, sizeof err), -1);
    assert_int_equal(mc_split_matrix("1.2.3", be, present, err, sizeof err), -1);
    assert_int_equal(mc_split_matrix("0,0,0", be, present, err, sizeof err), -1);
    assert_int_equal(mc_split_matrix("", be, present, err, sizeof err), -1);
    assert_int_equal(mc_split_matrix(".", be, present, err, sizeof err), -1);
}

/* ---- blend (2.8) --------------------------------------------------------------------------- */

static void test_py_float(void **state)
{
    (void)state;
    double x;
    assert_int_equal(mc_parse_py_float("0.3", &x), 0);
    assert_true(x == 0.3);
    assert_int_equal(mc_parse_py_float(" 1e-1 ", &x), 0);
    assert_true(x == 0.1);
    assert_int_equal(mc_parse_py_float("1_000.5", &x), 0);
    assert_true(x == 1000.5);
    assert_int_equal(mc_parse_py_float("5.", &x), 0);
    assert_true(x == 5.0);
    assert_int_equal(mc_parse_py_float("-.5", &x), 0);
    assert_true(x == -0.5);
    assert_int_equal(mc_parse_py_float("Infinity", &x), 0);
    assert_true(isinf(x));
    assert_int_equal(mc_parse_py_float("nan", &x), 0);
    assert_true(isnan(x));
    const char *bad[] = {"", "a", "0x10", "1__0", "_1", "1_", "1e", ".", "1.2.3", "/data/x", "1 2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(mc_parse_py_float(bad[i], &x), -1);
}

static void test_blend_from_list(void **state)
{
    (void)state;
    mc_blend_t b;
    char err[256];
    char *l1[] = {"0.3", "a", "0.7", " b "};
    assert_int_equal(mc_blend_from_list(&b, l1, 4, err, sizeof err), 0);
    assert_int_equal(b.n, 2);
    assert_non_null(b.weights);
    assert_true(b.weights[0] == 0.3 && b.weights[1] == 0.7);
    assert_string_equal(b.prefixes[0], "a");
    assert_string_equal(b.prefixes[1], "b");
    mc_blend_free(&b);

    char *l2[] = {"a", "b"};
    assert_int_equal(mc_blend_from_list(&b, l2, 2, err, sizeof err), 0);
    assert_int_equal(b.n, 2);
    assert_null(b.weights);
    assert_string_equal(b.prefixes[1], "b");
    mc_blend_free(&b);

    char *l3[] = {"only"};
    assert_int_equal(mc_blend_from_list(&b, l3, 1, err, sizeof err), 0);
    assert_int_equal(b.n, 1);
    assert_null(b.weights);
    mc_blend_free(&b);

    /* Odd length: all prefixes even if some look like numbers. */
    char *l4[] = {"1", "a", "b"};
    assert_int_equal(mc_blend_from_list(&b, l4, 3, err, sizeof err), 0);
    assert_int_equal(b.n, 3);
    assert_null(b.weights);
    mc_blend_free(&b);

    /* A weight, then a non-weight: any(is_none) consumes the iterator, all() of the rest holds. */
    char *l5[] = {"0.5", "a", "x", "b"};
    assert_int_equal(mc_blend_from_list(&b, l5, 4, err, sizeof err), 0);
    assert_int_equal(b.n, 4);
    assert_null(b.weights);
    mc_blend_free(&b);

    /* A non-weight, then a weight: Megatron's assert fails. */
    char *l6[] = {"x", "a", "0.5", "b"};
    assert_int_equal(mc_blend_from_list(&b, l6, 4, err, sizeof err), -1);
    assert_int_equal(mc_blend_from_list(&b, l6, 0, err, sizeof err), -1);
}

static void test_numpy_sum(void **state)
{
    (void)state;
    /* numpy.sum of a[i] = (i*7919 % 1000003) / 1000003.0 * (1 + i%7), numpy 1.24.2. */
    static const struct { int n; double want, sequential; } cases[] = {
        {5, 0x1.445c7bfd1633ep-2, 0x1.445c7bfd1633ep-2},
        {9, 0x1.11ae089d8abbcp+0, 0x1.11ae089d8abbcp+0},
        {100, 0x1.3801f644329b5p+7, 0x1.3801f644329b4p+7},
        {300, 0x1.0f892db01bfadp+9, 0x1.0f892db01bfafp+9},
        {1000, 0x1.ee842c01148fap+10, 0x1.ee842c01148fcp+10},
    };
    double a[1000];
    for (int i = 0; i < 1000; i++) a[i] = (double)((i * 7919) % 1000003) / 1000003.0 * (1 + i % 7);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        assert_true(mc_numpy_sum(a, cases[c].n) == cases[c].want);
        double s = 0;
        for (int i = 0; i < cases[c].n; i++) s += a[i];
        assert_true(s == cases[c].sequential); /* the cases that differ do test the order */
    }
    double w[3] = {1, 1, 1};
    mc_normalize(w, 3, w);
    assert_true(w[0] == 0x1.5555555555555p-2 && w[2] == 0x1.5555555555555p-2);
}

static void test_blending_indices(void **state)
{
    (void)state;
    int16_t di[20];
    int64_t dsi[20];
    double w[2] = {0.3, 0.7};
    mc_normalize(w, 2, w);
    mc_normalize(w, 2, w);
    assert_int_equal(mc_build_blending_indices(di, dsi, w, 2, 12), 0);
    const int16_t want[12] = {1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1};
    const int64_t want_s[12] = {0, 0, 1, 2, 1, 3, 4, 2, 5, 6, 3, 7};
    for (int i = 0; i < 12; i++) {
        assert_int_equal(di[i], want[i]);
        assert_int_equal(dsi[i], want_s[i]);
    }
    /* Three datasets, weights 1:2:3 (helpers.cpp ported to Python for the expectation). */
    double w3[3] = {1, 2, 3};
    mc_normalize(w3, 3, w3);
    mc_normalize(w3, 3, w3);
    assert_int_equal(mc_build_blending_indices(di, dsi, w3, 3, 20), 0);
    const int16_t want3[20] = {2, 1, 0, 2, 1, 2, 0, 2, 1, 2, 1, 2, 0, 2, 1, 2, 1, 2, 0, 2};
    const int64_t want3s[20] = {0, 0, 0, 1, 1, 2, 1, 3, 2, 4, 3, 5, 2, 6, 4, 7, 5, 8, 3, 9};
    for (int i = 0; i < 20; i++) {
        assert_int_equal(di[i], want3[i]);
        assert_int_equal(dsi[i], want3s[i]);
    }
    /* Exhaustive (size None): exactly sizes[k] from each. */
    const int64_t sizes[3] = {3, 5, 2};
    assert_int_equal(mc_build_exhaustive_blending_indices(di, dsi, sizes, 3), 0);
    const int16_t wante[10] = {1, 0, 2, 1, 0, 1, 2, 1, 0, 1};
    const int64_t wantes[10] = {0, 0, 0, 1, 1, 2, 1, 3, 2, 4};
    for (int i = 0; i < 10; i++) {
        assert_int_equal(di[i], wante[i]);
        assert_int_equal(dsi[i], wantes[i]);
    }
}

static void test_sizes_per_dataset(void **state)
{
    (void)state;
    double w[2] = {0.3, 0.7};
    mc_normalize(w, 2, w);
    const int64_t t[3] = {4000, 96, 16};
    const int64_t buf[2][3] = {{1206, 30, 6}, {2814, 69, 13}};
    const int64_t tgt[2][3] = {{1200, 29, 5}, {2800, 68, 12}};
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 3; i++) {
            assert_int_equal(mc_size_for_dataset(w[j], t[i], 0.005), buf[j][i]);
            assert_int_equal(mc_size_for_dataset(w[j], t[i], 0.0), tgt[j][i]);
        }
    double w3[3] = {1, 2, 3};
    mc_normalize(w3, 3, w3);
    const int64_t t3[3] = {1000, 7, 1};
    const int64_t buf3[3][3] = {{168, 3, 2}, {336, 4, 2}, {503, 5, 2}};
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 3; i++)
            assert_int_equal(mc_size_for_dataset(w3[j], t3[i], 0.005), buf3[j][i]);
}

/* ---- requested sizes (2.1) ------------------------------------------------------------------- */

static void test_num_samples_from_args(void **state)
{
    (void)state;
    mc_args_t a;
    mc_args_defaults(&a);
    a.train_iters = 500;
    a.global_batch_size = 8;
    a.eval_global_batch_size = 8;
    a.eval_interval = 100;
    a.eval_iters = 2;
    int64_t ns[3];
    mc_gpt_num_samples(&a, ns);
    assert_int_equal(ns[0], 4000);
    assert_int_equal(ns[1], 96);
    assert_int_equal(ns[2], 16);
    a.train_samples = 1234;
    a.train_iters = 1234 / 8;
    a.eval_global_batch_size = 4;
    mc_gpt_num_samples(&a, ns);
    assert_int_equal(ns[0], 1234);
    assert_int_equal(ns[1], (154 / 100 + 1) * 2 * 4);
    assert_int_equal(ns[2], 8);
    /* --train-iters near INT64_MAX (found by fuzz_flags): the counts saturate, no overflow */
    a.train_samples = 0;
    a.train_iters = INT64_MAX;
    a.eval_interval = 1;
    mc_gpt_num_samples(&a, ns);
    assert_true(ns[0] == INT64_MAX && ns[1] == INT64_MAX);
}

/* ---- sample fields (2.7) --------------------------------------------------------------------- */

static void test_sample_fields(void **state)
{
    (void)state;
    enum { S = 8, EOD = 9 };
    /* text: 5 6 EOD 7 EOD EOD 3 4 | -1 (pad at the end) */
    const int32_t text[S + 1] = {5, 6, EOD, 7, EOD, EOD, 3, -1, -1};
    int32_t tok[S], lab[S], pos[S], seg[S];
    float lm[S];
    mc_sample_opts_t o = {.eod = EOD, .pad = MC_PAD_TOKEN_ID};
    mc_gpt_sample_fields(text, S, &o, tok, lab, lm, pos, seg);
    const int32_t wt[S] = {5, 6, EOD, 7, EOD, EOD, 3, 0};
    const int32_t wl[S] = {6, EOD, 7, EOD, EOD, 3, 0, 0};
    const float wm[S] = {1, 1, 1, 1, 1, 1, 0, 0};
    for (int i = 0; i < S; i++) {
        assert_int_equal(tok[i], wt[i]);
        assert_int_equal(lab[i], wl[i]);
        assert_true(lm[i] == wm[i]);
        assert_int_equal(pos[i], i);
        assert_int_equal(seg[i], 0);
    }
    o.eod_mask_loss = true;
    o.reset_position_ids = true;
    o.reset_attention_mask = true;
    mc_gpt_sample_fields(text, S, &o, tok, lab, lm, pos, seg);
    const float wm2[S] = {1, 1, 0, 1, 0, 0, 0, 0};
    const int32_t wp[S] = {0, 1, 2, 0, 1, 0, 0, 1};
    const int32_t ws[S] = {0, 0, 0, 1, 1, 2, 3, 3};
    for (int i = 0; i < S; i++) {
        assert_true(lm[i] == wm2[i]);
        assert_int_equal(pos[i], wp[i]);
        assert_int_equal(seg[i], ws[i]);
    }
    /* Each flag alone. */
    o = (mc_sample_opts_t){.eod = EOD, .pad = MC_PAD_TOKEN_ID, .reset_attention_mask = true};
    mc_gpt_sample_fields(text, S, &o, tok, lab, lm, pos, NULL);
    for (int i = 0; i < S; i++) {
        assert_int_equal(pos[i], i);
        assert_true(lm[i] == wm[i]);
    }
    o = (mc_sample_opts_t){.eod = EOD, .pad = MC_PAD_TOKEN_ID, .reset_position_ids = true};
    mc_gpt_sample_fields(text, S, &o, tok, lab, lm, pos, seg);
    for (int i = 0; i < S; i++) {
        assert_int_equal(pos[i], wp[i]);
        assert_int_equal(seg[i], 0);
    }
}

/* ---- synthetic indices against numpy ------------------------------------------------------- */

/* 300 sequences, len[i] = 1 + (i*7919) % 97, then len[17] = 0, len[18] = 1, len[250] = 400.
 * Expected values: Megatron's _build_document_index / _build_shuffle_index run with numpy
 * 1.24.2's RandomState, and helpers.cpp build_sample_idx ported line by line to Python; sha256
 * of the int32 / int32 [n+1,2] / uint32 arrays. */
#define SYN_S 300
static void syn_lengths(int32_t *len)
{
    for (int i = 0; i < SYN_S; i++) len[i] = 1 + (i * 7919) % 97;
    len[17] = 0;
    len[18] = 1;
    len[250] = 400;
}

static const struct {
    int64_t beg, end, num_samples;
    int seq;
    int64_t seed;
    int drop_last;
    int64_t length, epochs;
    int separate;
    int64_t tokens;
    const char *doc, *sample, *shuffle;
} SYN[] = {
    {0, 300, -1, 16, 1234, 1, 927, 1, 0, 14845,
     "c9c7835f7707ac88fa355ed32b08e95cce063a42e52ef0f56cfa209260e6d6d6",
     "beffb496121efb9b8da288be6e29d77a1084041873c4ad3f1813fc9e3e4d218d",
     "0b9a5106170bbbb4ae233306af9ddae8075703dcc579d54013926abed90e83af"},
    {0, 270, 100, 16, 1234, 1, 838, 1, 0, 13422,
     "48ad2346403d90d348ec18ef558798ddee56cfadfe292ad3639c891c4074a3c0",
     "ac0cea7d62c744521495de174145bf9ecdc9239e04fa47ee597bc22f1e6b5230",
     "2edbe483cc56d40d538c918fc91badb4f9ea26e59508a38ac1536d9b314e9096"},
    {0, 270, 5000, 16, 1234, 1, 5033, 6, 0, 13422,
     "f327568112b5684203c3db85a290a1afa91518e3dde54fbf43349503d07b8c88",
     "4e31a2bcab193a011a8ac74d3657918ccc406f674846e37bf278c9bcbe6e83b1",
     "434ac024df925006cd0c698fee2cdd40931da82b20df44b744d4697251330575"},
    {0, 270, 1700, 16, 7, 1, 2516, 3, 1, 13422,
     "6de098ad086698f1882a4ed3871e6a960ac78dc7fa0982a4c2c5d7bd329f3c50",
     "202b6f0417ae741cc584e715052c233b8114ca6e1ab3fa32050fe52b17e3c952",
     "9b0cedfdbb5d5f6a8d1007129c62fccc28c0adbec518274fe14619ee87d906c4"},
    {0, 270, 2500, 16, 7, 1, 2516, 3, 0, 13422,
     "a4ba2af65e7fdae1ef3e8ad51c61cd076abd701de940d4658b3b1c3b88803343",
     "a2cdadac68cf8419a6ad95088f3fd74c31b86f95653f9f4060845a1224d5cb2a",
     "e312941a1e1429cefa28e8855c7993bbcb119b3806a8d486561bbf976670b360"},
    {270, 300, 50, 8, 99, 0, 178, 1, 0, 1423,
     "5ff6accba9e1454d44886e1b988dc37e3dafa3b1e11ed67ea7fd5166eec09b7a",
     "c9753be1be5e9690e02de74182fd482bcc3a4e5fab27536f45fb0a526ffb3b1b",
     "9f3b87052acf9c1db6365a492c69e7b49b2f7b957d306be591cc4e82d0b4ad89"},
    {270, 300, 50, 8, 99, 1, 177, 1, 0, 1423,
     "5ff6accba9e1454d44886e1b988dc37e3dafa3b1e11ed67ea7fd5166eec09b7a",
     "0d7c07ce64f332cb9f347396559ee5b9f875be843c650a51bdcbaf9a02a4fe81",
     "c0e97f705d51c2dbc702d2ae7cfa7a85347df3eb706237e2c0d1d15d4e0dadcd"},
    {10, 20, 3, 2, 0, 0, 165, 1, 0, 330,
     "f4590851728ed76f524cb1c944c5c4f5a2c27e2084cbad5515085b79ae05e0ae",
     "6448f47f1d4c8a54e93f4f8bd73921b5479b68d3adee88b9977462b75ee8f85e",
     "70871b8b51a7e9c9c5f246bd8df3f6c2b1975afcd34b221623f4f7503ae345d8"},
};

static void test_synthetic_indices(void **state)
{
    (void)state;
    int32_t len[SYN_S];
    syn_lengths(len);
    for (size_t c = 0; c < sizeof SYN / sizeof SYN[0]; c++) {
        mc_gpt_dataset_t d;
        char err[256];
        int split = SYN[c].drop_last ? MC_SPLIT_TRAIN : MC_SPLIT_VALID;
        int rc = mc_gpt_dataset_build(&d, len, SYN_S, SYN[c].beg, SYN[c].end, SYN[c].num_samples,
                                      split, SYN[c].seq, SYN[c].seed, SYN[c].drop_last, err,
                                      sizeof err);
        if (rc) print_error("case %zu: %s\n", c, err);
        assert_int_equal(rc, 0);
        assert_int_equal(d.length, SYN[c].length);
        assert_int_equal(d.num_epochs, SYN[c].epochs);
        assert_int_equal(d.separate_final_epoch, SYN[c].separate);
        assert_int_equal(d.tokens_per_epoch, SYN[c].tokens);
        assert_false(d.sample_index_int64);
        assert_false(d.shuffle_index_int64);
        char h1[65], h2[65], h3[65];
        index_hashes(&d, h1, h2, h3);
        assert_string_equal(h1, SYN[c].doc);
        assert_string_equal(h2, SYN[c].sample);
        assert_string_equal(h3, SYN[c].shuffle);
        if (SYN[c].num_samples >= 0) assert_true(d.length >= SYN[c].num_samples);
        mc_gpt_dataset_free(&d);
    }
}

/* The errors Megatron would hang or assert on. */
static void test_build_errors(void **state)
{
    (void)state;
    int32_t len[SYN_S];
    syn_lengths(len);
    mc_gpt_dataset_t d;
    char err[256];
    /* empty split: Megatron's _get_num_epochs loops forever */
    assert_int_equal(mc_gpt_dataset_build(&d, len, SYN_S, 10, 10, 5, 1, 16, 1, true, err,
                                          sizeof err), -1);
    assert_non_null(strstr(err, "valid"));
    /* seeds numpy rejects */
    assert_int_equal(mc_gpt_dataset_build(&d, len, SYN_S, 0, 10, 5, 0, 16, -1, true, err,
                                          sizeof err), -1);
    assert_int_equal(mc_gpt_dataset_build(&d, len, SYN_S, 0, 10, 5, 0, 16, 1ll << 32, true, err,
                                          sizeof err), -1);
    assert_int_equal(mc_gpt_dataset_build(&d, len, SYN_S, 0, 10, 5, 0, 16, 4294967295ll, true,
                                          err, sizeof err), 0);
    mc_gpt_dataset_free(&d);
    assert_int_equal(mc_gpt_dataset_build(&d, len, SYN_S, 0, 400, 5, 0, 16, 1, true, err,
                                          sizeof err), -1);
}

/* Sample text through an in-memory indexed dataset (uint16 tokens: token = 1 + (seq*131 + off)
 * % 60000), checked against an independent walk of the sample index: every sample is the
 * seq_length + 1 tokens starting at its (document position, offset), and consecutive samples
 * share one token. */
static int32_t syn_token(int64_t seq, int64_t off) { return (int32_t)(1 + (seq * 131 + off) % 60000); }

typedef struct {
    mc_indexed_t x;
    int32_t len[SYN_S];
    int64_t ptr[SYN_S];
    uint16_t *bin;
} syn_indexed_t;

static void syn_indexed(syn_indexed_t *s)
{
    memset(s, 0, sizeof *s);
    syn_lengths(s->len);
    int64_t total = 0;
    for (int i = 0; i < SYN_S; i++) {
        s->ptr[i] = total * 2;
        total += s->len[i];
    }
    s->bin = malloc(sizeof(uint16_t) * (size_t)total);
    assert_non_null(s->bin);
    for (int i = 0; i < SYN_S; i++)
        for (int o = 0; o < s->len[i]; o++) s->bin[s->ptr[i] / 2 + o] = (uint16_t)syn_token(i, o);
    s->x.prefix = "synthetic";
    s->x.dtype = MC_DTYPE_UINT16;
    s->x.itemsize = 2;
    s->x.num_sequences = SYN_S;
    s->x.sequence_lengths = s->len;
    s->x.sequence_pointers = s->ptr;
    s->x.bin = (const uint8_t *)s->bin;
    s->x.bin_size = (size_t)total * 2;
}

static void test_synthetic_text(void **state)
{
    (void)state;
    syn_indexed_t s;
    syn_indexed(&s);
    for (size_t c = 0; c < sizeof SYN / sizeof SYN[0]; c++) {
        mc_gpt_dataset_t d;
        char err[256];
        int split = SYN[c].drop_last ? MC_SPLIT_TRAIN : MC_SPLIT_VALID;
        assert_int_equal(mc_gpt_dataset_build(&d, s.len, SYN_S, SYN[c].beg, SYN[c].end,
                                              SYN[c].num_samples, split, SYN[c].seq,
                                              SYN[c].seed, SYN[c].drop_last, err, sizeof err), 0);
        d.indexed = &s.x;
        const int L = SYN[c].seq + 1;
        int32_t *text = malloc(sizeof(int32_t) * (size_t)L);
        int32_t *prev_last = malloc(sizeof(int32_t) * (size_t)(d.length + 1));
        /* inverse of the shuffle, to visit samples in sample-index order */
        int64_t *inv = malloc(sizeof(int64_t) * (size_t)d.length);
        assert_true(text && prev_last && inv);
        for (int64_t i = 0; i < d.length; i++) inv[mc_gpt_dataset_shuffle_at(&d, i)] = i;
        int padded = 0;
        for (int64_t j = 0; j < d.length; j++) {
            assert_int_equal(mc_gpt_dataset_text(&d, inv[j], MC_PAD_TOKEN_ID, text, err,
                                                 sizeof err), 0);
            int64_t pos, off;
            mc_gpt_dataset_sample_at(&d, j, &pos, &off);
            int k = 0;
            while (k < L && pos < d.document_index_len) {
                int32_t seq = d.document_index[pos];
                if (off < s.len[seq]) {
                    assert_int_equal(text[k], syn_token(seq, off));
                    k++;
                    off++;
                } else {
                    pos++;
                    off = 0;
                }
            }
            for (; k < L; k++, padded++) assert_int_equal(text[k], MC_PAD_TOKEN_ID);
            if (j > 0) assert_int_equal(text[0], prev_last[j - 1]);
            prev_last[j] = text[L - 1];
        }
        /* Only the partial validation sample is short. */
        assert_int_equal(padded > 0, !SYN[c].drop_last && (SYN[c].tokens * SYN[c].epochs - 1) %
                                                              SYN[c].seq != 0);
        assert_int_equal(mc_gpt_dataset_text(&d, d.length, MC_PAD_TOKEN_ID, text, err,
                                             sizeof err), -1);
        free(text);
        free(prev_last);
        free(inv);
        mc_gpt_dataset_free(&d);
    }
    free(s.bin);
}

/* ---- sampler (2.9) --------------------------------------------------------------------------- */

static void test_sampler(void **state)
{
    (void)state;
    mc_sampler_t s;
    char err[256];
    int64_t idx[4];
    /* total 21, mbs 2, dp 3: blocks of 6 at 0, 6, 12; 18..20 is incomplete and dropped. */
    assert_int_equal(mc_sampler_init(&s, 21, 0, 2, 3, 1, err, sizeof err), 0);
    for (int b = 0; b < 3; b++) {
        assert_int_equal(mc_sampler_next(&s, idx), 1);
        assert_int_equal(idx[0], 6 * b + 2);
        assert_int_equal(idx[1], 6 * b + 3);
        assert_int_equal(idx[0], mc_sampler_index(0, 2, 3, 1, b, 0));
    }
    assert_int_equal(mc_sampler_next(&s, idx), 0);
    /* exactly full */
    assert_int_equal(mc_sampler_init(&s, 18, 12, 2, 3, 2, err, sizeof err), 0);
    assert_int_equal(mc_sampler_next(&s, idx), 1);
    assert_int_equal(idx[0], 16);
    assert_int_equal(idx[1], 17);
    assert_int_equal(mc_sampler_next(&s, idx), 0);
    /* Megatron's asserts */
    assert_int_equal(mc_sampler_init(&s, 0, 0, 2, 3, 0, err, sizeof err), -1);
    assert_int_equal(mc_sampler_init(&s, 10, 10, 2, 3, 0, err, sizeof err), -1);
    assert_int_equal(mc_sampler_init(&s, 10, 0, 0, 3, 0, err, sizeof err), -1);
    assert_int_equal(mc_sampler_init(&s, 10, 0, 2, 3, 3, err, sizeof err), -1);
}

/* ---- the real thing: Megatron's own output ------------------------------------------------- */

static char *shared_path(const char *rel)
{
    const char *env = getenv("MEGATRON_C_SHARED");
    const char *base = env && *env ? env : "../shared";
    size_t len = strlen(base) + strlen(rel) + 2;
    char *p = malloc(len);
    if (p) snprintf(p, len, "%s/%s", base, rel);
    return p;
}

static json_t *jpath(json_t *o, const char *a, const char *b, const char *c)
{
    o = json_object_get(o, a);
    if (o && b) o = json_object_get(o, b);
    if (o && c) o = json_object_get(o, c);
    return o;
}

static int64_t jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) fail_msg("reference: '%s' missing or not an integer", key);
    return json_integer_value(v);
}

static void check_index_record(json_t *rec, const char *dtype, int64_t rows, int cols,
                               const char *hash)
{
    assert_non_null(rec);
    assert_string_equal(json_string_value(json_object_get(rec, "dtype")), dtype);
    json_t *shape = json_object_get(rec, "shape");
    assert_int_equal(json_integer_value(json_array_get(shape, 0)), rows);
    if (cols) assert_int_equal(json_integer_value(json_array_get(shape, 1)), cols);
    assert_string_equal(json_string_value(json_object_get(rec, "sha256")), hash);
}

/* The datasets of configs.p, built from the arguments its megatron_c_flags give; the split
 * matrix checked against the one Megatron printed. */
static mc_gpt_datasets_t *ref_build(json_t *cfg, char *prefix)
{
    /* Arguments as in configs.p.megatron_c_flags. */
    const char *flags = json_string_value(json_object_get(cfg, "megatron_c_flags"));
    assert_non_null(flags);
    assert_non_null(strstr(flags, "--seq-length 32 --split 90,8,2 --seed 7 --train-iters 500 "
                                  "--global-batch-size 8 --eval-interval 100 --eval-iters 2"));
    mc_args_t a;
    mc_args_defaults(&a);
    a.n_data_path = 1;
    a.data_path[0] = prefix;
    a.seq_length = 32;
    snprintf(a.split, sizeof a.split, "90,8,2");
    a.seed = 7;
    a.train_iters = 500;
    a.global_batch_size = 8;
    a.eval_global_batch_size = 8;
    a.eval_interval = 100;
    a.eval_iters = 2;
    mc_gpt_data_config_t c;
    mc_gpt_data_config_from_args(&c, &a, 50256, MC_PAD_TOKEN_ID);
    c.cache_path = NULL; /* build fresh (the cache has its own tests) and write nothing in shared */
    json_t *tv = json_object_get(cfg, "train_val_test_num_samples");
    for (int i = 0; i < 3; i++)
        assert_int_equal(c.num_samples[i], json_integer_value(json_array_get(tv, (size_t)i)));

    /* The split matrix Megatron printed. */
    double be[3][2];
    int present[3];
    char err[512];
    assert_int_equal(mc_split_matrix(c.split, be, present, err, sizeof err), 0);
    json_t *sm = jpath(cfg, "GPTDatasetConfig", "split_matrix", NULL);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++)
            assert_true(be[i][k] == json_number_value(json_array_get(json_array_get(sm, (size_t)i),
                                                                     (size_t)k)));

    mc_gpt_datasets_t *D = mc_gpt_datasets_build(&c, err, sizeof err);
    if (!D) fail_msg("build: %s", err);
    return D;
}

/* One sample Megatron logged for split sp: indices, documents, tokens, labels, loss mask. */
static void ref_check_sample(mc_gpt_datasets_t *D, int sp, const mc_gpt_dataset_t *g, json_t *smp)
{
    int32_t text[33], tok[32], lab[32], pos[32];
    float lm[32];
    char err[512];
    int64_t idx = jint(smp, "idx");
    int64_t j = mc_gpt_dataset_shuffle_at(g, idx);
    assert_int_equal(j, jint(smp, "shuffle_index[idx]"));
    int64_t b, bo, e, eo;
    mc_gpt_dataset_sample_at(g, j, &b, &bo);
    mc_gpt_dataset_sample_at(g, j + 1, &e, &eo);
    json_t *sj = json_object_get(smp, "sample_index[j]");
    json_t *sj1 = json_object_get(smp, "sample_index[j+1]");
    assert_int_equal(b, json_integer_value(json_array_get(sj, 0)));
    assert_int_equal(bo, json_integer_value(json_array_get(sj, 1)));
    assert_int_equal(e, json_integer_value(json_array_get(sj1, 0)));
    assert_int_equal(eo, json_integer_value(json_array_get(sj1, 1)));
    json_t *docs = json_object_get(smp, "document_ids");
    assert_int_equal((int64_t)json_array_size(docs), e - b + 1);
    for (int64_t k = b; k <= e; k++)
        assert_int_equal(g->document_index[k],
                         json_integer_value(json_array_get(docs, (size_t)(k - b))));

    if (mc_gpt_datasets_text(D, sp, idx, text, err, sizeof err)) fail_msg("%s", err);
    int64_t one = idx;
    if (mc_gpt_datasets_batch(D, sp, &one, 1, tok, lab, lm, pos, NULL, err, sizeof err))
        fail_msg("%s", err);
    json_t *jt = json_object_get(smp, "tokens");
    assert_int_equal(json_array_size(jt), 32);
    float lsum = 0;
    for (int k = 0; k < 32; k++) {
        assert_int_equal(tok[k], json_integer_value(json_array_get(jt, (size_t)k)));
        assert_int_equal(text[k], tok[k]);
        assert_int_equal(lab[k], text[k + 1]);
        assert_int_equal(pos[k], k);
        lsum += lm[k];
    }
    json_t *f8 = json_object_get(smp, "first8");
    for (int k = 0; k < 8; k++)
        assert_int_equal(tok[k], json_integer_value(json_array_get(f8, (size_t)k)));
    assert_int_equal(lab[31], jint(smp, "labels_last"));
    assert_true(lsum == (float)json_number_value(json_object_get(smp, "loss_mask_sum")));
    char ht[65], hl[65];
    sha256_i64_of_i32(tok, 32, ht);
    sha256_i64_of_i32(lab, 32, hl);
    assert_string_equal(ht, json_string_value(json_object_get(smp, "tokens_sha256")));
    assert_string_equal(hl, json_string_value(json_object_get(smp, "labels_sha256")));
}

/* Split sp against Megatron's record of it; returns the samples checked. */
static int ref_check_split(mc_gpt_datasets_t *D, json_t *cfg, int sp)
{
    static const char *names[3] = {"train", "valid", "test"};
    int checked = 0;
    json_t *r = jpath(cfg, "splits", names[sp], NULL);
    assert_non_null(r);
    assert_int_equal(mc_gpt_datasets_components(D, sp), 1);
    assert_false(mc_gpt_datasets_blended(D, sp));
    const mc_gpt_dataset_t *g = mc_gpt_datasets_component(D, sp, 0);
    assert_int_equal(mc_gpt_datasets_len(D, sp), jint(r, "len"));
    assert_int_equal(g->length, jint(r, "len"));
    assert_int_equal(g->num_samples_requested, jint(r, "num_samples_requested"));
    json_t *range = json_object_get(r, "split_sequence_range");
    assert_int_equal(g->seq_begin, json_integer_value(json_array_get(range, 0)));
    assert_int_equal(g->seq_end, json_integer_value(json_array_get(range, 1)));
    assert_int_equal(g->tokens_per_epoch, jint(r, "num_tokens_per_epoch"));
    assert_int_equal(g->num_epochs, jint(r, "num_epochs"));
    const char *sep = json_string_value(jpath(r, "megatron_logged_values",
                                              "separate_final_epoch", NULL));
    assert_non_null(sep);
    assert_string_equal(sep, g->separate_final_epoch ? "True" : "False");

    char h1[65], h2[65], h3[65];
    index_hashes(g, h1, h2, h3);
    check_index_record(json_object_get(r, "document_index"), "int32", g->document_index_len,
                       0, h1);
    check_index_record(json_object_get(r, "sample_index"),
                       g->sample_index_int64 ? "int64" : "int32", g->length + 1, 2, h2);
    check_index_record(json_object_get(r, "shuffle_index"),
                       g->shuffle_index_int64 ? "int64" : "uint32", g->length, 0, h3);

    json_t *samples = json_object_get(r, "samples");
    assert_true(json_array_size(samples) >= 50);
    size_t si;
    json_t *smp;
    json_array_foreach(samples, si, smp) {
        ref_check_sample(D, sp, g, smp);
        checked++;
    }
    return checked;
}

/* Data-parallel rank r's micro-batches of the sampler's iteration, fresh and resumed. */
static void ref_check_sampler_rank(mc_gpt_datasets_t *D, json_t *S, int r, int mbs, int dp,
                                   int gbs, int it, int nmb)
{
    const mc_gpt_dataset_t *train = mc_gpt_datasets_component(D, 0, 0);
    int32_t text[33];
    char err[512];
    char key[32];
    snprintf(key, sizeof key, "dp_rank_%d", r);
    json_t *fresh = jpath(S, "fresh_start", key, NULL);
    json_t *resume = jpath(S, "resume_at_iteration_3", key, NULL);
    json_t *dl = jpath(S, "dataloader_check", key, NULL);
    assert_true(fresh && resume && dl);
    mc_sampler_t from0, from_it;
    assert_int_equal(mc_sampler_init(&from0, mc_gpt_datasets_len(D, 0), 0, mbs, dp, r, err,
                                     sizeof err), 0);
    assert_int_equal(mc_sampler_init(&from_it, mc_gpt_datasets_len(D, 0), (int64_t)it * gbs,
                                     mbs, dp, r, err, sizeof err), 0);
    int64_t ia[2], ib[2];
    for (int k = 0; k < it * nmb; k++) assert_int_equal(mc_sampler_next(&from0, ia), 1);
    for (int m = 0; m < nmb; m++) {
        assert_int_equal(mc_sampler_next(&from0, ia), 1);
        assert_int_equal(mc_sampler_next(&from_it, ib), 1);
        for (int j = 0; j < mbs; j++) {
            int64_t want = json_integer_value(json_array_get(json_array_get(fresh, (size_t)m),
                                                             (size_t)j));
            assert_int_equal(ia[j], want);
            assert_int_equal(ib[j], json_integer_value(json_array_get(
                                        json_array_get(resume, (size_t)m), (size_t)j)));
            assert_int_equal(mc_sampler_index((int64_t)it * gbs, mbs, dp, r, m, j), want);
            /* the sample each global index resolves to */
            char gk[32];
            snprintf(gk, sizeof gk, "%lld", (long long)want);
            json_t *gs = jpath(S, "samples", gk, NULL);
            assert_non_null(gs);
            assert_int_equal(jint(gs, "dp_rank"), r);
            assert_int_equal(jint(gs, "microbatch"), m);
            assert_int_equal(mc_gpt_dataset_shuffle_at(train, want),
                             jint(gs, "shuffle_index[idx]"));
            if (mc_gpt_datasets_text(D, 0, want, text, err, sizeof err)) fail_msg("%s", err);
            char ht[65];
            sha256_i64_of_i32(text, 32, ht);
            assert_string_equal(ht, json_string_value(json_object_get(gs, "tokens_sha256")));
        }
        /* the micro-batch as the loader stacks it: tokens [mbs, 32] int64 */
        int32_t btok[2 * 32], blab[2 * 32], bpos[2 * 32], bseg[2 * 32];
        float blm[2 * 32];
        if (mc_gpt_datasets_batch(D, 0, ia, mbs, btok, blab, blm, bpos, bseg, err, sizeof err))
            fail_msg("%s", err);
        json_t *entry = json_array_get(dl, (size_t)m);
        assert_int_equal(jint(entry, "microbatch"), m);
        char hb[65];
        sha256_i64_of_i32(btok, (size_t)mbs * 32, hb);
        assert_string_equal(hb, json_string_value(json_object_get(entry,
                                                                  "batch_tokens_sha256")));
    }
}

static void test_megatron_reference(void **state)
{
    (void)state;
    char *jp = shared_path("data/megatron-ref/sample_order_public.json");
    char *prefix = shared_path("data/megatron-ref/tinyshakespeare_text_document");
    char *idxp = shared_path("data/megatron-ref/tinyshakespeare_text_document.idx");
    assert_true(jp && prefix && idxp);
    if (access(jp, R_OK) != 0 || access(idxp, R_OK) != 0) {
        print_message("skipping: %s or the dataset is absent (set MEGATRON_C_SHARED)\n", jp);
        free(jp);
        free(prefix);
        free(idxp);
        skip();
    }
    json_error_t jerr;
    json_t *root = json_load_file(jp, 0, &jerr);
    if (!root) fail_msg("%s: %s (line %d)", jp, jerr.text, jerr.line);
    json_t *cfg = jpath(root, "configs", "p", NULL);
    assert_non_null(cfg);
    mc_gpt_datasets_t *D = ref_build(cfg, prefix);

    int checked = 0;
    for (int sp = 0; sp < 3; sp++) checked += ref_check_split(D, cfg, sp);
    assert_true(checked >= 150);

    /* The DP sampler of iteration 3: mbs 2, dp 4, gbs 16 (2 micro-batches). */
    json_t *S = json_object_get(cfg, "sampler");
    assert_non_null(S);
    const int mbs = (int)jint(S, "micro_batch_size"), dp = (int)jint(S, "data_parallel_size");
    const int gbs = (int)jint(S, "global_batch_size"), it = (int)jint(S, "iteration_0based");
    assert_int_equal(mbs, 2);
    assert_int_equal(dp, 4);
    assert_int_equal(jint(S, "total_samples (len(train_ds))"), mc_gpt_datasets_len(D, 0));
    const int nmb = gbs / (mbs * dp);
    assert_int_equal(nmb, jint(S, "num_microbatches (ConstantNumMicroBatchesCalculator.get())"));
    for (int r = 0; r < dp; r++) ref_check_sampler_rank(D, S, r, mbs, dp, gbs, it, nmb);

    mc_gpt_datasets_free(D);
    json_decref(root);
    free(jp);
    free(prefix);
    free(idxp);
}

/* ---- builder over synthetic files: blends and per-split paths ------------------------------- */

/* Datasets A (300 sequences), B (200), C (150) written as Megatron's IndexedDatasetBuilder
 * writes them (uint16, one sequence per document): sequence i of dataset `salt` has
 * L = 1 + (i*7919 + salt*31) % 97 tokens, 1 + (i*131 + o + salt*17) % 60000 for o < L-1, then
 * eod 60001. Expected values: Megatron core_v0.15.0's BlendedMegatronDatasetBuilder,
 * GPTDataset and BlendedDataset themselves (helpers.cpp compiled, numpy 1.24.2, torch 1.13,
 * gloo world size 1) on those files: per split the length, the blend's dataset_index (int16) and
 * dataset_sample_index (int64) hashes, per component the requested size, length, epochs,
 * sequence range and index hashes, and over every sample i of the split: "text" = sha256 of
 * (tokens, labels[-1]) as int64, "fields" = sha256 of (loss_mask float32, position_ids int64,
 * attention_mask bool [s, s]) concatenated over i. */
#define SYN_EOD 60001

typedef struct {
    int64_t num_samples, length, epochs, begin, end;
    const char *doc, *sample, *shuffle;
} comp_ref_t;

typedef struct {
    const char *tag;
    int split;
    int64_t len; /* -1: no dataset */
    int blended;
    const char *dataset_index, *dataset_sample_index, *text, *fields;
    int ncomp;
    comp_ref_t comp[3];
} split_ref_t;

static const split_ref_t BUILDER_REF[] = {
/* weighted */
    {"weighted", 0, 500, 1, "9b3ea3e9b3d4b9874c4e140e3a93d6174434a7a2e0737931e6ed3c10f79a5f27", "9cca4eb0689b04577b145c71664c3bce6a50556c2815ff72d7fcd895d3eec28b", "691a5e6ec1c2b52dba308348cf543c9b8d1ac2ce4c2d84099ae2508dc2993e33", "c268c6160544fcca6a944a8fd62449c4db1bb5ac82f1be3acc64dbd0b96c3bf8", 2, {{151, 828, 1, 0, 270, "48ad2346403d90d348ec18ef558798ddee56cfadfe292ad3639c891c4074a3c0", "9bccfeab4d9bac1c9240089671476944982ba002f38ebff903002fd723171da3", "991604e6a80a7b3fd569d01f07dc8465d11c9dd12429bb635d60f58dec9a9ad3"}, {352, 551, 1, 0, 180, "3e19918bdb4fc20888c4720a69cb839c21c1f4c7944964813bcc5e478767a07c", "223384d41c2d6940ef4a03661045f4de807a216b4b6f7ab229a1c63b5e73bde7", "e850a8fe34c45d2dba004e6ee733c669c789d1928864b7eb7e5800585e84599c"}}},
    {"weighted", 1, 40, 1, "c487803904592ebf9522b518f668399c98cc324e107481d7e0a93871df23ef0d", "65af6adb96262ed755c659a2b11913abcffd9cfe60340e220d91d670f0b4711a", "25948541181b92d73f4d04cb0d397ffce782a90c5bcdaca0606b73e51c65f29d", "4c1707f71822d613782d527595b4a111d7ad214a95850ba70723d096b0fe628a", 2, {{13, 73, 1, 270, 294, "cc08b6a784dc6ce51257d0f5d7d86bfbf3ef7567ffd01206801a3e96e45a30b8", "44e55129eb6cd81cc8ab61f13db894ee56acad2187d04325af76351eb9e7037e", "f7cccd83bbfe3ab92f482f91450ffc6986053e2a7e335e41250da49f54f6581b"}, {29, 47, 1, 180, 196, "6bc3e42675408533c4b452dcd1eb215684a0ef50f88d3df6c37a880c0312cad2", "f31fe80cca22af1d27f93b109cda770bff49f041260f118c1581e006dac6aaee", "308eeda327364a647ff832ce7160b85a697a051ca6eb7789640a1ae0bf9c46cb"}}},
    {"weighted", 2, 20, 1, "9b20ac19e40e069e024df555046d713e4a126b371b682dd37a4030f92efb2a94", "1b04f9399e672533a14065b205868682ca6d7a90d66c9a7ed31916edea5131ca", "816333fd473c124a0ec03556971c5d6e934d15067077c746208a67ff97dcc29e", "72e260ec271fe8681e33bd3b98ff5c994c755d1b5076d9c2f2167b539890be74", 2, {{7, 18, 1, 294, 300, "db8ae97c94f5114d539b006e4a11ed7fc52739e0c52d3a50eb9348c7fc32400a", "23a60012eaaf58dd365caaf057a64a5f65dd924286059bbda91b9faeb6c6ea59", "4a74d5fd597aa29713457053ad2f38233327e3422e38542dc1e8aa580a08eed6"}, {15, 15, 1, 196, 200, "4d2a4808c122819cd352934ff5a7fe3b39e138a3dfa4bf6d695f7452ebbba7b9", "8f250e98cf3cc7654712c891770bf8e016d0ad7d7199efbc97f9923edce95c8b", "ff8e63452bb2f8f81eb6b92cb8025c9309516ceb00cd2a930ea3bbe79cb84885"}}},
/* unweighted */
    {"unweighted", 0, 300, 1, "dad1b25e1eaa7ef47b8104ff703b449acf044e9845232fbef7837cdbcb0aad53", "053184515a96ff13c9d463634b46861e9235058b882650b0c2fea295ecb7fa49", "38900bfb574b898c2c12a6a274364da6fac02d8028495fd3944b1573f125dfc7", "972c12070e2f6b6b9ffac91daf4a0e4a3853d0aebcdb340c9c51073969152b64", 3, {{-1, 737, 1, 0, 240, "49bcc5c3d6e576d9a70eadd3fc472f1641185664bd6e104ba7f14c7973d30bd4", "f5ccb33c1d315c8bc482f89798791f7c4344526e954a5af77df91a0fd82174e8", "a8f1bd083f9602a0c665f160e10052a59e1848063b2faef7b8156bd7fc42b056"}, {-1, 492, 1, 0, 160, "4705bfa4d23e4441bc839300a7e6b32d130e36d0831be470adb877b53ae0a740", "c5bf41509bc9fac703bbfd1fff2aa0dcfeef9757080a7a779d05e7596ddc30fc", "9779390c63c07d102f4f10ac1e9d7ca7b9407bb60b7e68026667cd2316ce3f57"}, {-1, 369, 1, 0, 120, "0a00b7acdeae14e17362d1acfd661f7f5650556b9aa5b03f130d5ee349eb1238", "8c54076fc66ccd8cb4f96d08cc5bbfd6f336bbe01d9964d4119a2eb64323e234", "a933b144474b45fd5d406f4bb98cccbf6ab6a860807a4d9b41a6633c666f5a6f"}}},
    {"unweighted", 1, 16, 1, "270b4cd7967a2fb4eab2ca24462f155b3479670a95604c10fab527636745e9b0", "8cb4ddc64199b5ecf4b3a21f743aecd83d5bdfb2beae281f0edcc4dcdb2c01bd", "7c457d67f01c1a300c9561fa55da3e66769266d1a8e49cf820f4abb363d60c09", "5f8bd1732860cb17273d05319ee7c37de91f56d19170013c830851d7a3747072", 3, {{-1, 138, 1, 240, 285, "50c090fcdc10e847aca8110bdfd405451fe4ce2d57685e7ee03abc629a1f591e", "be0e6a91997004a3988f87106eeacd4a6fedc9ae0797f0e3c0e4ee88bbe55831", "ec379907f379f48426ebe59244900cd42ec0ef8c6a2823c79f98a73b5080a82b"}, {-1, 95, 1, 160, 190, "784aab11378521bdf58979ea2c21ad80b1d08d3c0a78d34ebbc384c092731256", "270e0e2e8cf0ee52d3a8d30bb94f099df900bbf5c61d43299548915355659c06", "0d98b7d19df6306292613cff150abed4f5c36d443d5e1fe1532be760092f2592"}, {-1, 69, 1, 120, 142, "b19590d75d4e73733a4a88b53e71ee7fb3a80f1ba53773905f445ba9777ff3aa", "aa93bba7dcefcc15b04be03472651d4706172eb67fb6a8328b94a186a541b831", "06f476eb6f52a50c39fa6353c33a8e2bdedb8f51b977f42b955afe028a2db26e"}}},
    {"unweighted", 2, 8, 1, "a6f33fb6f107f33d64bed59fe23e6d54a08e0f1f08333ae3196be4298199758e", "44a5f476911da0457f425357bf2bdbf578ab63580b271bd736f954d926d615f2", "4710c709f05d389dd2ea8aa72a7380a925d8eac994357ec8f593f6cc75d9b355", "042748aaac5acdaf5bc2db9b8eaa3d2015603cd7393de566b662a3529a56e80b", 3, {{-1, 45, 1, 285, 300, "b113696aa9236c9e55e25e2feb8f94b836ce396d2b54b0f9446a3873ef699a91", "43ed9314de824ce5d6148acd3b47a94c0a23cb9eb1d4f8b7d3f8cba0dde97642", "fe8894a6886a0cd32cdd4fcd6587bdf658cdd5e06cce04f7b12ffc638bb897ca"}, {-1, 28, 1, 190, 200, "7263fd0730cf39df9c94974642b00525461b8a26df43a77e971ab5f9e08380b1", "ecb2c5e04f8d58d4af54b77677e9e704c1d1ed6cba1c4039dcff1678bcc1daec", "1584d8efe1663e7c88830579c9edbe8338f6128bb5b74b43d82454f16485c3d7"}, {-1, 22, 1, 142, 150, "c14209350a23d0b3ae8bee4d1d16d648a2f826e9d9fa7866e908c8a099d2f984", "30326606f1f3bf4c653d82ba58618244ec9a1d7484aceb54aaf4dbf7c72dea9b", "8eb160f1cb92015f7e2905557a25678c2cd393d7dc61ec9d326edf9d6014cd16"}}},
/* per_split */
    {"per_split", 0, 400, 1, "c7e01cd73db8f020238c0e0c0df4b1336ee56b5bea3918faafcc99a9f2fe39be", "2dfb19b3ea3d9f133c34c479694930b8daaa85504b204703e60a02f53d401220", "deb43f50869e28eb6eee3611987cb31a793200287112d91b2881e0dd220b9bfa", "1470ed09563838887757784912ec8d20b48c23c990ea0df19e0799442712c6d1", 2, {{101, 921, 1, 0, 300, "7f5d527e562f5a8aae313045c36946abc86625c76073e285dd5080896fcb1bf5", "8076f49a691221e1eeed5648b57c0fc6cea27c7e0bffa6cfc51794d1fbf24264", "3c86fa0761dd4ab51f370cd1d24957c540bdd7f0b2a308cc27de83bcaef977fe"}, {302, 615, 1, 0, 200, "2bd1095c37eddc329b85553957cd4f75d4d84d5a79713d28761239141425070f", "ded1e8b22ea66110f9cf56cd7c68e43ff827a3be990c9cf6aa08fc28c4ade8fd", "28a56402326612a735a54839d31f65a53f79d83352d5c17e7a37b0a190de9f37"}}},
    {"per_split", 1, 461, 0, NULL, NULL, "1032e051fd6f0c0bcfc01d09c91e73536eb038fcf5cb91410e44d8ca0ce89467", "e6d1a4e79b36e3f33768ca621ee165712caada4f31a482b18ce7be1d3fb45e8c", 1, {{30, 461, 1, 0, 150, "70a0edaa8af7fdcfa5a2eb5bdae6b0e9596c741350901a79c00b97f0dbe30b89", "0a4ca24dd77ef2e8298dd4232ccec0e894fc3747855894d63f409a272194e7eb", "c5c2c2b1a056b52d43a192252d70eebf0c4eb7c60bb22296d66f8b3c6be72333"}}},
    {"per_split", 2, 10, 1, "0045ac59690ac3721ac3aff3ef1462aa03f4fa77fe437aa10cdfbde47dd3e151", "6704f9b916727af2bfec8959ba1e5169950094684104280469621569d4081bc8", "258cc6a4b7dce6e3847a3481d276cb4696e86d2152a4f39a22c3082d98892f74", "ade77c51058b7176171bd464a18ba0e5033365b2f0ce6262faa2492a8a2fbaa0", 2, {{-1, 921, 1, 0, 300, "7f5d527e562f5a8aae313045c36946abc86625c76073e285dd5080896fcb1bf5", "8076f49a691221e1eeed5648b57c0fc6cea27c7e0bffa6cfc51794d1fbf24264", "3c86fa0761dd4ab51f370cd1d24957c540bdd7f0b2a308cc27de83bcaef977fe"}, {-1, 615, 1, 0, 200, "2bd1095c37eddc329b85553957cd4f75d4d84d5a79713d28761239141425070f", "ded1e8b22ea66110f9cf56cd7c68e43ff827a3be990c9cf6aa08fc28c4ade8fd", "28a56402326612a735a54839d31f65a53f79d83352d5c17e7a37b0a190de9f37"}}},
/* epochs */
    {"epochs", 0, 3000, 1, "053e4a6f3fa009a6b07a93df5646339272d47b60e98963a2996fa75a80fd11c0", "3d180d73e0434866108663e37e7f4f4ea37b7924127b10daea615a39167f3cd7", "334a0757b5960fa22825b994e119e9011b927eabb477d08a78a65c867b326ab6", "ce80dcd6cc4105e9496183c1b0da2eef249cf9d1d9d7c058d372f1800382db2d", 2, {{1508, 1805, 2, 0, 294, "f52054f619ce5b9bd8ed30faa7524e802f801d5c3cede11dff41fccde9a5ddae", "bb35e6574bfefd6bf75bd5b5f28a9f74a209ca16996a5b9133e17cb53f8d4f37", "77a2be0b47c231fd18bf19f3c148b5bde98aae02e7db6a73c9a94d0d201c4ba8"}, {1508, 1805, 4, 0, 147, "eab63317f75606f07676999e52de4f6f651ee8ef2b0231d5393bde8aaf64bb9a", "b1a70557ef6e16fdd918fc32e5c2c16524d8e13b2d79dcc1d23c9dca4e73ad06", "1db43ffd49c8b718de4f2b918f75991b1d3dd92b75ac65725f93515fbb5e5b9c"}}},
    {"epochs", 1, 10, 1, "801faa4b646f3e29bc3e98006d349ee540a3c2e695fa4564023f46ba92c68261", "ff5db122907cb565aeec142fd73e46e6966268718f3bc6389f8426fff7e7b1d0", "9ba6d15b67ce4915ca80fc5bfae49b43ecf58c2c3f1fecfc0a8ecd90b043017c", "ade77c51058b7176171bd464a18ba0e5033365b2f0ce6262faa2492a8a2fbaa0", 2, {{6, 10, 1, 294, 297, "ebbad099ea4038fc3ef199d6cc361006da56a4d14dd7951f6e868384a4431253", "64570906522d06ff89b6adcae9bbd689c2c4c31db7b07d485d1613a777653ad3", "954ee0bfa9731ab9e4eb6e3194b141b385890c4130bc662f2732f69bb62cef89"}, {6, 11, 2, 147, 148, "c1ff92beb99ff3127f8f3162e071f23f7fce206d429e2411da4bca6d9578ef99", "c9cd31e971c7c7f521f359bbddd02c1282e226bfda0ad93f14ddd3e1dc3d8962", "58762a49a1481953f9518dfdda51fc61426b4efb8d9225fa02be8ba4fb4a75a4"}}},
    {"epochs", 2, 10, 1, "801faa4b646f3e29bc3e98006d349ee540a3c2e695fa4564023f46ba92c68261", "ff5db122907cb565aeec142fd73e46e6966268718f3bc6389f8426fff7e7b1d0", "172cadc09fa9569f0080ed42f5bf78e7280e788b05a9bd5d516e5beca57eac37", "a34f86d2f37180e11a1ae9ebd22709395832fc6a3bb60055aae04b73acfda902", 2, {{6, 8, 1, 297, 300, "4e081e45951537c76503eb426c929effa3e376e8b4d315c11ee3e70f6c9ad551", "6ff568cece2ca6f94cce313b08e86434737a3c8cf947f75a78c82244bbfec0e6", "ba9d6a97b48cfea7a189e633ded69948dc4483ddbb4a999f8513c635bb3060cb"}, {6, 9, 2, 148, 150, "f05e4f643cd79d683444eb9558b1b5594dfe8b8a2660365470cb605dc1f1f631", "7ae25b8fc98da58cb123f1714d2e8b96119dc21dacd2ab78b1ef85adf5bfe9d4", "b39b9d50d2217be1009fdc6c96e9103d7a3c97bc0bd5ad13ef86d53059a1a613"}}},
/* single_flags */
    {"single_flags", 0, 984, 0, NULL, NULL, "2558b3ca059610829ac273a067242ca4cf5f4a001b4e8ea6dda7a4808bfbb2a1", "f8758fc9ba76c62549f90f29828e0d5acbe0dd02dc43e509bc3c49dba76e9428", 1, {{700, 984, 1, 0, 160, "744bfea1593f30e07d367966c2872732f716955f31f14fffddb6cbab6b59b2d3", "17db3e68ea05772d33cac6c92827cec24e38e159882bd2a2fa532bd745315056", "018bd17db8f33c7f6b075255a64ee8c00d19e9005125e6dd6922ff2af6c63c30"}}},
    {"single_flags", 1, 246, 0, NULL, NULL, "5481e3320ba314cb7c006e8a6365ad07bad56565c83742ec56c4149f198a5893", "8dae7b648957a365c1f3bdf95b1d50681022a54aa1b9b15e78e8193b0b32512c", 1, {{50, 246, 1, 160, 200, "1f4b0d5b905a5e7baf839f31353c3d22c55010b2ea36f00f637f0ac4fb6798ed", "2a091de4ca21fa8bb388ee698a8d766e459543a4df531c87a22547026bc02f24", "9de688606ce332a97f7b2d29100c5eb2395249c12cd788037b0b12db7217b041"}}},
    {.tag = "single_flags", .split = 2, .len = -1},
};

static void write_le(FILE *f, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) fputc((int)((v >> (8 * i)) & 0xff), f);
}

/* The .idx/.bin pair of MEGATRON.md section 1; returns the sha256 of both files. */
static void write_synthetic(const char *dir, const char *name, int S, int salt, char hidx[65],
                            char hbin[65])
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *bin = fopen(path, "wb");
    assert_non_null(bin);
    int32_t *len = malloc(sizeof(int32_t) * (size_t)S);
    assert_non_null(len);
    for (int i = 0; i < S; i++) {
        len[i] = 1 + (i * 7919 + salt * 31) % 97;
        for (int o = 0; o < len[i]; o++)
            write_le(bin, o < len[i] - 1 ? (uint64_t)(1 + (i * 131 + o + salt * 17) % 60000)
                                         : SYN_EOD, 2);
    }
    fclose(bin);
    snprintf(path, sizeof path, "%s/%s.idx", dir, name);
    FILE *idx = fopen(path, "wb");
    assert_non_null(idx);
    fwrite("MMIDIDX\0\0", 1, 9, idx);
    write_le(idx, 1, 8);
    write_le(idx, MC_DTYPE_UINT16, 1);
    write_le(idx, (uint64_t)S, 8);
    write_le(idx, (uint64_t)S + 1, 8);
    for (int i = 0; i < S; i++) write_le(idx, (uint32_t)len[i], 4);
    uint64_t ptr = 0;
    for (int i = 0; i < S; i++) {
        write_le(idx, ptr, 8);
        ptr += 2 * (uint64_t)len[i];
    }
    for (int i = 0; i <= S; i++) write_le(idx, (uint64_t)i, 8);
    fclose(idx);
    free(len);
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s.%s", dir, name, k ? "bin" : "idx");
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        sha256_t h;
        sha256_init(&h);
        uint8_t buf[4096];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&h, buf, got);
        fclose(f);
        sha256_hex(&h, k ? hbin : hidx);
    }
}

static void check_builder_split(mc_gpt_datasets_t *D, const split_ref_t *r, int seq)
{
    int sp = r->split;
    if (r->len < 0) {
        assert_int_equal(mc_gpt_datasets_components(D, sp), 0);
        assert_int_equal(mc_gpt_datasets_len(D, sp), 0);
        return;
    }
    assert_int_equal(mc_gpt_datasets_len(D, sp), r->len);
    assert_int_equal(mc_gpt_datasets_blended(D, sp), r->blended);
    assert_int_equal(mc_gpt_datasets_components(D, sp), r->ncomp);
    for (int k = 0; k < r->ncomp; k++) {
        const mc_gpt_dataset_t *g = mc_gpt_datasets_component(D, sp, k);
        const comp_ref_t *c = &r->comp[k];
        assert_int_equal(g->num_samples_requested, c->num_samples);
        assert_int_equal(g->length, c->length);
        assert_int_equal(g->num_epochs, c->epochs);
        assert_int_equal(g->seq_begin, c->begin);
        assert_int_equal(g->seq_end, c->end);
        char h1[65], h2[65], h3[65];
        index_hashes(g, h1, h2, h3);
        assert_string_equal(h1, c->doc);
        assert_string_equal(h2, c->sample);
        assert_string_equal(h3, c->shuffle);
    }
    if (r->blended) {
        int16_t *di = malloc(sizeof(int16_t) * (size_t)r->len);
        int64_t *dsi = malloc(sizeof(int64_t) * (size_t)r->len);
        assert_true(di && dsi);
        for (int64_t i = 0; i < r->len; i++) {
            int c;
            mc_gpt_datasets_blend_at(D, sp, i, &c, &dsi[i]);
            di[i] = (int16_t)c;
        }
        char h1[65], h2[65];
        sha256_of(di, sizeof(int16_t) * (size_t)r->len, h1);
        sha256_of(dsi, sizeof(int64_t) * (size_t)r->len, h2);
        assert_string_equal(h1, r->dataset_index);
        assert_string_equal(h2, r->dataset_sample_index);
        free(di);
        free(dsi);
    }
    /* every sample, through the batch builder (micro-batches of 3) */
    const int mb = 3;
    size_t cells = (size_t)mb * (size_t)seq;
    int32_t *tok = malloc(sizeof(int32_t) * cells), *lab = malloc(sizeof(int32_t) * cells);
    int32_t *pos = malloc(sizeof(int32_t) * cells), *seg = malloc(sizeof(int32_t) * cells);
    float *lm = malloc(sizeof(float) * cells);
    uint8_t *mask = malloc((size_t)seq * (size_t)seq);
    assert_true(tok && lab && pos && seg && lm && mask);
    sha256_t ht, hf;
    sha256_init(&ht);
    sha256_init(&hf);
    char err[512];
    for (int64_t i0 = 0; i0 < r->len; i0 += mb) {
        int b = r->len - i0 < mb ? (int)(r->len - i0) : mb;
        int64_t idx[3] = {i0, i0 + 1, i0 + 2};
        if (mc_gpt_datasets_batch(D, sp, idx, b, tok, lab, lm, pos, seg, err, sizeof err))
            fail_msg("%s", err);
        for (int rr = 0; rr < b; rr++) {
            const int32_t *t = tok + rr * seq, *l = lab + rr * seq, *p = pos + rr * seq;
            const int32_t *g = seg + rr * seq;
            for (int k = 0; k < seq; k++) {
                int64_t x = t[k];
                sha256_update(&ht, &x, 8);
            }
            int64_t last = l[seq - 1];
            sha256_update(&ht, &last, 8);
            sha256_update(&hf, lm + rr * seq, sizeof(float) * (size_t)seq);
            for (int k = 0; k < seq; k++) {
                int64_t x = p[k];
                sha256_update(&hf, &x, 8);
            }
            for (int q = 0; q < seq; q++) /* True = masked */
                for (int k = 0; k < seq; k++)
                    mask[q * seq + k] = !(k <= q && g[k] == g[q]);
            sha256_update(&hf, mask, (size_t)seq * (size_t)seq);
        }
    }
    char h1[65], h2[65];
    sha256_hex(&ht, h1);
    sha256_hex(&hf, h2);
    assert_string_equal(h1, r->text);
    assert_string_equal(h2, r->fields);
    free(tok);
    free(lab);
    free(pos);
    free(seg);
    free(lm);
    free(mask);
}

static void test_builder_blends(void **state)
{
    (void)state;
    char dir[] = "/tmp/mc_gpt_dataset_XXXXXX";
    assert_non_null(mkdtemp(dir));
    static const struct { const char *name; int S, salt; const char *idx, *bin; } files[3] = {
        {"A", 300, 1, "e1e532bb5719d3b3a4a679f3e1c2ef64d2b17547d3a4d202d39c203c5b6f12a5",
         "8f5257eb2177dd4220c82505fb4031438325a3a5d00386e8de2550fac852e8d5"},
        {"B", 200, 2, "6156ca38dc4469164da15cb36d046f28f4e9e0e1c9ef3931ac520832957edeef",
         "980f3ffbe1938e8e86a421c7939912594883da2bf093effab17de24df539549d"},
        {"C", 150, 3, "703515921243aa15bd40a6e6c41cdd4b763e28fca6704df3c5bc500bd9a9b920",
         "37f555e6a69c8b66d903bb2875bbe38fc02067d380b9bb3a9902c1e51abc4319"},
    };
    char A[4200], B[4200], C[4200];
    for (int f = 0; f < 3; f++) {
        char hi[65], hb[65];
        write_synthetic(dir, files[f].name, files[f].S, files[f].salt, hi, hb);
        assert_string_equal(hi, files[f].idx); /* byte-identical to Megatron's builder */
        assert_string_equal(hb, files[f].bin);
    }
    snprintf(A, sizeof A, "%s/A", dir);
    snprintf(B, sizeof B, "%s/B", dir);
    snprintf(C, sizeof C, "%s/C", dir);

    char *weighted[] = {"0.3", A, "0.7", B};
    char *unweighted[] = {A, B, C};
    char *tr[] = {"1", A, "3", B}, *va[] = {C}, *te[] = {A, B};
    char *epochs[] = {"0.5", A, "0.5", C};
    char *single[] = {B};
    struct {
        const char *tag;
        mc_gpt_data_config_t c;
    } cfgs[] = {
        {"weighted", {.n_data_path = 4, .data_path = weighted, .split = "90,8,2", .seq_length = 16,
                      .seed = 1234, .num_samples = {500, 40, 20}}},
        {"unweighted", {.n_data_path = 3, .data_path = unweighted, .split = "80,15,5",
                        .seq_length = 16, .seed = 1234, .num_samples = {300, 16, 8}}},
        {"per_split", {.n_split_data_path = {4, 1, 2}, .split_data_path = {tr, va, te},
                       .seq_length = 16, .seed = 99, .num_samples = {400, 30, 10}}},
        {"epochs", {.n_data_path = 4, .data_path = epochs, .split = "98,1,1", .seq_length = 16,
                    .seed = 7, .num_samples = {3000, 10, 10}}},
        {"single_flags", {.n_data_path = 1, .data_path = single, .split = "80,20,0",
                          .seq_length = 8, .seed = 5, .num_samples = {700, 50, 0}}},
    };
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
        mc_gpt_data_config_t *c = &cfgs[k].c;
        c->mid_level_dataset_surplus = 0.005;
        c->drop_last_partial_validation_sequence =
            strcmp(cfgs[k].tag, "unweighted") && strcmp(cfgs[k].tag, "single_flags");
        c->sample = (mc_sample_opts_t){.eod = SYN_EOD, .pad = MC_PAD_TOKEN_ID};
        if (!strcmp(cfgs[k].tag, "epochs"))
            c->sample.reset_position_ids = c->sample.reset_attention_mask =
                c->sample.eod_mask_loss = true;
        if (!strcmp(cfgs[k].tag, "single_flags"))
            c->sample.reset_position_ids = c->sample.eod_mask_loss = true;
        char err[512];
        mc_gpt_datasets_t *D = mc_gpt_datasets_build(c, err, sizeof err);
        if (!D) fail_msg("%s: %s", cfgs[k].tag, err);
        int seen = 0;
        for (size_t r = 0; r < sizeof BUILDER_REF / sizeof BUILDER_REF[0]; r++) {
            if (strcmp(BUILDER_REF[r].tag, cfgs[k].tag)) continue;
            check_builder_split(D, &BUILDER_REF[r], c->seq_length);
            seen++;
        }
        assert_int_equal(seen, 3);
        mc_gpt_datasets_free(D);
    }

    /* Errors: an empty split (Megatron asserts tokens_per_epoch > 1), a weighted blend whose
     * weights do not parse after one that does, a missing prefix. */
    char err[512];
    mc_gpt_data_config_t bad = {.n_data_path = 3, .data_path = unweighted, .split = "969,30,1",
                                .seq_length = 16, .seed = 1, .num_samples = {10, 10, 10},
                                .mid_level_dataset_surplus = 0.005};
    assert_null(mc_gpt_datasets_build(&bad, err, sizeof err));
    assert_non_null(strstr(err, "test split"));
    char *mixed[] = {"x", A, "0.5", B};
    bad.data_path = mixed;
    bad.n_data_path = 4;
    bad.split = "1,1,1";
    assert_null(mc_gpt_datasets_build(&bad, err, sizeof err));
    /* Components with no sample (seq_length above their token count) in an unweighted blend:
     * their weight (length) is 0, which BlendedDataset asserts against. */
    bad.data_path = unweighted;
    bad.n_data_path = 3;
    bad.split = "1";
    bad.seq_length = 20000;
    assert_null(mc_gpt_datasets_build(&bad, err, sizeof err));
    assert_non_null(strstr(err, "weight 0"));
    bad.seq_length = 16;
    char missing[4300];
    snprintf(missing, sizeof missing, "%s/nope", dir);
    char *miss[] = {missing};
    bad.data_path = miss;
    bad.n_data_path = 1;
    assert_null(mc_gpt_datasets_build(&bad, err, sizeof err));
    assert_non_null(strstr(err, "nope"));

    for (int f = 0; f < 3; f++)
        for (int k = 0; k < 2; k++) {
            char path[4300];
            snprintf(path, sizeof path, "%s/%s.%s", dir, files[f].name, k ? "bin" : "idx");
            unlink(path);
        }
    rmdir(dir);
}

/* build must fail with one line containing want (and no newline) */
static void expect_build_error(const mc_gpt_data_config_t *c, const char *want)
{
    char err[512] = "";
    mc_gpt_datasets_t *D = mc_gpt_datasets_build(c, err, sizeof err);
    if (D) {
        mc_gpt_datasets_free(D);
        fail_msg("built, expected an error with '%s'", want);
    }
    if (!strstr(err, want)) fail_msg("'%s' lacks '%s'", err, want);
    assert_null(strchr(err, '\n'));
}

/* The first failing sample of the train split: its return code, err set. */
static int first_bad_sample(mc_gpt_datasets_t *D, char *err, size_t n)
{
    int32_t text[17];
    for (int64_t i = 0; i < mc_gpt_datasets_len(D, MC_SPLIT_TRAIN); i++) {
        int rc = mc_gpt_datasets_text(D, MC_SPLIT_TRAIN, i, text, err, n);
        if (rc) return rc;
    }
    return 0;
}

/* Users' mistakes, each one line naming what to change: weights that are zero, NaN or infinite,
 * a surplus too large for int64, a split with no train part, token ids beyond the padded
 * vocabulary or negative (an .idx whose dtype byte says int8 over uint16 tokens). */
static void test_builder_user_errors(void **state)
{
    (void)state;
    char dir[] = "/tmp/mc_gpt_user_XXXXXX", A[4200], B[4200], hi[65], hb[65];
    assert_non_null(mkdtemp(dir));
    write_synthetic(dir, "A", 300, 1, hi, hb);
    write_synthetic(dir, "B", 200, 2, hi, hb);
    snprintf(A, sizeof A, "%s/A", dir);
    snprintf(B, sizeof B, "%s/B", dir);
    char *zero[] = {"0", A, "0", B}, *nan[] = {"nan", A, "1", B}, *inf[] = {"inf", A, "1", B};
    char *big[] = {"1e308", A, "1e308", B}, *ok[] = {"0.3", A, "0.7", B}, *one[] = {A};
    mc_gpt_data_config_t c = {.n_data_path = 4, .data_path = zero, .split = "90,8,2",
                              .seq_length = 16, .seed = 1, .num_samples = {100, 10, 10},
                              .mid_level_dataset_surplus = 0.005,
                              .sample = {.eod = SYN_EOD, .pad = MC_PAD_TOKEN_ID}};
    expect_build_error(&c, "--data-path: the weight 0 of");
    c.data_path = nan;
    expect_build_error(&c, "the weight nan of");
    c.data_path = inf;
    expect_build_error(&c, "the weight inf of");
    c.data_path = big;
    expect_build_error(&c, "sum to infinity");
    c.data_path = ok;
    c.mid_level_dataset_surplus = 1e300;
    expect_build_error(&c, "--mid-level-dataset-surplus 1e+300");
    c.mid_level_dataset_surplus = 0.005;

    /* no train split, but train samples wanted; none wanted: fine */
    c.data_path = one;
    c.n_data_path = 1;
    c.split = "0,100,0";
    expect_build_error(&c, "--split '0,100,0' leaves the train split empty");
    c.num_samples[MC_SPLIT_TRAIN] = 0;
    char err[512];
    mc_gpt_datasets_t *D = mc_gpt_datasets_build(&c, err, sizeof err);
    if (!D) fail_msg("%s", err);
    mc_gpt_datasets_free(D);
    c.num_samples[MC_SPLIT_TRAIN] = 100;
    mc_gpt_data_config_t per = {.n_split_data_path = {0, 1, 0}, .split_data_path = {NULL, one},
                                .seq_length = 16, .seed = 1, .num_samples = {100, 10, 10}};
    expect_build_error(&per, "no --train-data-path");

    /* Token ids: the synthetic ones reach SYN_EOD; below the limit they pass. */
    c.split = "90,8,2";
    c.vocab_limit = SYN_EOD + 1;
    D = mc_gpt_datasets_build(&c, err, sizeof err);
    if (!D) fail_msg("%s", err);
    assert_int_equal(first_bad_sample(D, err, sizeof err), 0);
    mc_gpt_datasets_free(D);
    c.vocab_limit = 1000;
    D = mc_gpt_datasets_build(&c, err, sizeof err);
    if (!D) fail_msg("%s", err);
    assert_int_equal(first_bad_sample(D, err, sizeof err), MC_DATA_BAD_TOKENS);
    char want[4300];
    snprintf(want, sizeof want, "%s.bin: token id ", A);
    if (!strstr(err, want) || !strstr(err, "of document ") ||
        !strstr(err, "outside the vocabulary [0, 1000)"))
        fail_msg("%s", err);
    mc_gpt_datasets_free(D);
    /* dtype byte 2 (int8) over uint16 tokens: bytes >= 128 are negative ids */
    char path[4300];
    snprintf(path, sizeof path, "%s.idx", A);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, 17, SEEK_SET), 0);
    fputc(MC_DTYPE_INT8, f);
    fclose(f);
    c.vocab_limit = 0;
    D = mc_gpt_datasets_build(&c, err, sizeof err);
    if (!D) fail_msg("%s", err);
    assert_int_equal(first_bad_sample(D, err, sizeof err), MC_DATA_BAD_TOKENS);
    if (!strstr(err, "negative")) fail_msg("%s", err);
    mc_gpt_datasets_free(D);

    for (int k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "%s/%s.%s", dir, k / 2 ? "B" : "A", k % 2 ? "bin" : "idx");
        unlink(path);
    }
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_self),
        cmocka_unit_test(test_split_examples),
        cmocka_unit_test(test_split_errors),
        cmocka_unit_test(test_py_float),
        cmocka_unit_test(test_blend_from_list),
        cmocka_unit_test(test_numpy_sum),
        cmocka_unit_test(test_blending_indices),
        cmocka_unit_test(test_sizes_per_dataset),
        cmocka_unit_test(test_num_samples_from_args),
        cmocka_unit_test(test_sample_fields),
        cmocka_unit_test(test_synthetic_indices),
        cmocka_unit_test(test_build_errors),
        cmocka_unit_test(test_synthetic_text),
        cmocka_unit_test(test_sampler),
        cmocka_unit_test(test_megatron_reference),
        cmocka_unit_test(test_builder_blends),
        cmocka_unit_test(test_builder_user_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
