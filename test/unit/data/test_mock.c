/* --mock-data as Megatron builds it (gpt_dataset.py): numpy's default_rng (PCG64 seeded by a
 * SeedSequence, Generator.integers for int32), MockGPTLowLevelDataset's documents, and the
 * MockGPTDatasets of BlendedMegatronDatasetBuilder over the split "1,1,1".
 * Expected values: the PCG64 ones from numpy 1.24.2
 *   numpy.random.PCG64(seed).random_raw(3)
 *   numpy.random.default_rng(seed).integers(low, high, size=k, dtype=numpy.int32)
 * and the datasets from Megatron-LM's own code (main d98e8a64ddf3), run by
 * test/ref/megatron_mock.py: len(dataset), the split's documents and the SHA-256 of the
 * seq_length+1 token ids (little-endian int64) of samples 0, 1, 2, 1000 and the last. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/gpt_dataset.h"
#include "data/mock.h"
#include "data/pcg64.h"
#include "data/sha256.h"

static void test_pcg64_raw(void **state)
{
    (void)state;
    static const struct {
        uint64_t seed, want[3];
    } cases[] = {
        {0, {11749869230777074271ull, 4976686463289251617ull, 755828109848996024ull}},
        {1234, {18016930633132456890ull, 7013373421822782593ull, 17030886991259909300ull}},
        {4294967295ull, {4647538520743280031ull, 4041050679407036418ull, 5299467714154781845ull}},
        /* two 32-bit entropy words */
        {1099511627781ull, {87427594128977387ull, 6872972437549564694ull, 10832470946844950135ull}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mc_pcg64_t r;
        mc_pcg64_seed(&r, cases[c].seed);
        for (int i = 0; i < 3; i++) assert_true(mc_pcg64_next64(&r) == cases[c].want[i]);
    }
}

static void test_integers_i32(void **state)
{
    (void)state;
    mc_pcg64_t r;
    int32_t got[12];
    /* MockGPTLowLevelDataset's call: two values per 64-bit draw, low word first */
    const int32_t want[12] = {3484, 2609, 2094, 1105, 1261, 168, 309, 68, 718, 3331, 2660, 3738};
    mc_pcg64_seed(&r, 0);
    mc_pcg64_integers_i32(&r, 1, 4096, 12, got);
    assert_memory_equal(got, want, sizeof want);
    /* a range of 3e9 values: Lemire's rejection draws again often; negative low */
    const int32_t want5[8] = {915008770,   -1432040342, 45976682,    390702091,
                              -642595861,  1438571141,  -1338207894, -666228791};
    mc_pcg64_seed(&r, 5);
    mc_pcg64_integers_i32(&r, -1500000000, 1500000000, 8, got);
    assert_memory_equal(got, want5, sizeof want5);
}

static void test_mock_documents(void **state)
{
    (void)state;
    mc_mock_data_t d;
    assert_int_equal(mc_mock_init(&d, 512, 511), 0);
    const int32_t *L = d.sequence_lengths;
    const int32_t first[5] = {3484, 2609, 2094, 1105, 1261};
    assert_memory_equal(L, first, sizeof first);
    assert_int_equal(L[33332], 2812);
    assert_int_equal(L[33333], 706);
    assert_int_equal(L[66666], 3170);
    assert_int_equal(L[66667], 338);
    assert_int_equal(L[99997], 61);
    assert_int_equal(L[99998], 100);
    assert_int_equal(L[99999], 769);
    int64_t sum[3] = {0, 0, 0};
    for (int k = 0; k < MC_MOCK_NUM_DOCS; k++) sum[k < 33333 ? 0 : k < 66667 ? 1 : 2] += L[k];
    assert_int_equal(sum[0], 68190290);
    assert_int_equal(sum[1], 68159742);
    assert_int_equal(sum[2], 68287065);
    /* document 3 (1105 tokens): (1, 2, ..., 1104) % 512, then eod */
    int32_t t[8];
    mc_mock_get(&d, 3, 0, 3, t);
    assert_int_equal(t[0], 1);
    assert_int_equal(t[2], 3);
    mc_mock_get(&d, 3, 509, 4, t); /* tokens 510, 511, 512 % 512 = 0, 1 */
    const int32_t wrap[4] = {510, 511, 0, 1};
    assert_memory_equal(t, wrap, sizeof wrap);
    mc_mock_get(&d, 3, 1102, 3, t);
    const int32_t end[3] = {1103 % 512, 1104 % 512, 511};
    assert_memory_equal(t, end, sizeof end);
    mc_mock_free(&d);
}

typedef struct {
    int64_t index;
    const char *sha256;
} sample_t;

typedef struct {
    int seq_length;
    int64_t seed, vocab;
    int32_t eod;
    int64_t sizes[3];
    int64_t len[3];
    sample_t samples[3][5]; /* 0, 1, 2, 1000, len - 1 */
} ref_t;

static const ref_t REFS[] = {
    {64, 1234, 512, 511, {400, 32, 16}, {1065473, 1064995, 1066985}, {
         {{0, "cd58a237502031c06b66453777403b367d0af451a2c902940d0fc8fe409bc1ef"},
          {1, "bb42cd95634a5e8340ec6c752cf6139446b4603f28ca3208d173ae8db36d33b7"},
          {2, "6f6ac5acde44ebc863ab0270941c62a86340e520f170b6e2d3b19e3d57ac6013"},
          {1000, "a733631a5ade23bb4ba93d47cd76bbff153227d17ba93c7011df2530189d091f"},
          {1065472, "d8b5fddc6bf7f3109657f9b1d463fd5af9903a25659df9053cb3574495f3a2ed"}},
         {{0, "92e9af2b065e7b2ffd0a3b42798db50ecd982f77d2772d51240b1a613c3dbcd8"},
          {1, "4d2e011ecac1f3103d7839416e3f9c0a9a71beaed2d829ff7033d60880ca9e97"},
          {2, "a733631a5ade23bb4ba93d47cd76bbff153227d17ba93c7011df2530189d091f"},
          {1000, "15d438ef0429086a62f0af9c940ffed189d27a93c9b007de60f85796246b7b2b"},
          {1064994, "1cc1d3c3311357dcb9e46c99ffc40f074737eaedd91adc374cd9d0e94a5fbd67"}},
         {{0, "4fbc4c4bb4c1c8d36faaac5341d3e92608a834f272a88cc1e8f343d4ed36751f"},
          {1, "39932cc62032842509e5b47a4aad149d993477139356c041c73f30ac4e030c37"},
          {2, "adb189677bbcca23cabf656ea330fb243970613c8defaa6acb37e873baf33d5b"},
          {1000, "46adbe5dd190b7b7f518c67b5ae3469d1f2f3dbbf997b7fb7c5a4858e8729958"},
          {1066984, "6a6aca24e94d2f48f64acbbd4faff70f84d15eb031d518d0c25bd3988cceb7b0"}},
     }},
    /* NullTokenizer --vocab-size 64: 65 ids, eod 64 */
    {17, 0, 65, 64, {40, 48, 8}, {4011193, 4009396, 4016886}, {
         {{0, "de1ba047ada52d5a6c97e2f249e15e2f0c4c1efe03b71338155e4743fd3ac2e8"},
          {1, "1a053915ce24353819db69c0fa512c517dadfaccf3bf5c75820808c16689fc9e"},
          {2, "557928c5c9f3e60cc71c09c94c817763e343213d57b46b9745fe74a4ef933ec0"},
          {1000, "b8a385aa065448a4c652eae620966bc009c38ad5730b2bee7a38fd6fe22eeb50"},
          {4011192, "98cf9381e5bf35be8cc07eb8766e522276244e17c50ac1cab1d3a320ae95d018"}},
         {{0, "2b9417e01d74ba0cdcfd97aea2caebcdfac75c5a12dcae81de44642ef542fb1b"},
          {1, "de1ba047ada52d5a6c97e2f249e15e2f0c4c1efe03b71338155e4743fd3ac2e8"},
          {2, "b843c31ebb0ee6e17cb5a4bdea9a1d282b35475e979f6a2546edd1811cde0bf2"},
          {1000, "347f313fc21dc65921ab9787e7c4e7396680bc76ea981c8f5cf6a827e92c1a5a"},
          {4009395, "03acc2fd48106adff18000380e5c07aaf03ae4537404a8cd8b6de98113698fd2"}},
         {{0, "2b9417e01d74ba0cdcfd97aea2caebcdfac75c5a12dcae81de44642ef542fb1b"},
          {1, "521dca5cbc3df2190f83beecf0747054695647544eba1e364b96345591d6ce96"},
          {2, "de1ba047ada52d5a6c97e2f249e15e2f0c4c1efe03b71338155e4743fd3ac2e8"},
          {1000, "c8b77acc5aa65c25a1b15d5bb9788f92985e526c34b3a3888da2d97af7390f94"},
          {4016885, "07287c0c7f76ea215862c4db7a344487590b7112f1b017b48e74e2ae2eec3738"}},
     }},
    /* GPT-2's vocabulary; the train split needs two epochs (a separate final one) */
    {2048, 7, 50257, 50256, {50000, 0, 0}, {66592, 33281, 33343}, {
         {{0, "6888144b41d1e7a30d38aac64a8ea7818c19aa976958c5d44274466dbf31f2cd"},
          {1, "328415c99537ae589d05b88c8a5ef76ed1624d1ed3cb019abf52adf08bd9e975"},
          {2, "2b0cc6df790c253532392c617f0a9c70410a09a0b1997d7baa448ae5130d4b2e"},
          {1000, "2bf74fdf8d380281ee9afa0464bfc1dc53805fde1ecb78fc55b64dea4783646b"},
          {66591, "fc79570eec463681e82a33193bef13d1fc5469522a562c83a1c4fc8499c926ee"}},
         {{0, "09d98ab040fba34e5e12fe7b54ea24b5842c9bf1984b82b77c8e448f326ff62e"},
          {1, "aa383549e997c073cc57fb329d07ba16416923529eb402a1f02e63b81d8a84be"},
          {2, "f37c5792cf841367c4e0575048b74af48ec44e75df8c8b26411b758de1007ed5"},
          {1000, "70b2d67a5868e25d80a05113204d7e656675f2a394294106d8f3ae1ef45d3d05"},
          {33280, "3d01dfcd52a0409f303e37e516a070b40175acb605129f453271dced8fa9c1cd"}},
         {{0, "046303d743359f34f12b63731465608ffe4b8a8fc194e90278c2882d3f8711ed"},
          {1, "a9ed7a7bb04b8545f98471f6fba97a578053839df94710b5c0bfa683a0a4d976"},
          {2, "4166410da430f83b6db2ea63c0617d26f37e3e934bce52f8d4bb7a43ff3273af"},
          {1000, "e810796c70e5f75efa103746802ef0baf1c32a5d2ecd76b684b86464a3ac1be2"},
          {33342, "773c4a47f769b6e042eb85c0f1d587db21c7181d491804a293bbcbac951fc50b"}},
     }},
};

static void sha256_i64(const int32_t *v, size_t n, char hex[65])
{
    mc_sha256_t s;
    uint8_t d[32];
    mc_sha256_init(&s);
    for (size_t i = 0; i < n; i++) {
        int64_t x = v[i];
        mc_sha256_update(&s, &x, 8); /* little-endian, as the reference */
    }
    mc_sha256_final(&s, d);
    for (int i = 0; i < 32; i++) sprintf(hex + 2 * i, "%02x", d[i]);
}

static mc_gpt_datasets_t *build(const ref_t *r, const char *split)
{
    mc_gpt_data_config_t c;
    memset(&c, 0, sizeof c);
    c.mock = true;
    c.mock_vocab_size = r->vocab;
    c.split = split; /* Megatron ignores --split for mock data */
    c.seq_length = r->seq_length;
    c.seed = r->seed;
    memcpy(c.num_samples, r->sizes, sizeof c.num_samples);
    c.mid_level_dataset_surplus = 0.005;
    c.drop_last_partial_validation_sequence = true;
    c.sample.eod = r->eod;
    c.sample.pad = MC_PAD_TOKEN_ID;
    char err[512] = "";
    mc_gpt_datasets_t *D = mc_gpt_datasets_build(&c, err, sizeof err);
    if (!D) fail_msg("%s", err);
    return D;
}

static void test_megatron_mock_datasets(void **state)
{
    (void)state;
    static const int64_t range[3][2] = {{0, 33333}, {33333, 66667}, {66667, 100000}};
    for (size_t k = 0; k < sizeof REFS / sizeof REFS[0]; k++) {
        const ref_t *r = &REFS[k];
        mc_gpt_datasets_t *D = build(r, k == 0 ? "90,8,2" : NULL);
        int32_t *text = malloc(sizeof(int32_t) * ((size_t)r->seq_length + 1));
        assert_non_null(text);
        for (int sp = 0; sp < 3; sp++) {
            assert_int_equal(mc_gpt_datasets_len(D, sp), r->len[sp]);
            assert_int_equal(mc_gpt_datasets_components(D, sp), 1);
            const mc_gpt_dataset_t *g = mc_gpt_datasets_component(D, sp, 0);
            assert_int_equal(g->seq_begin, range[sp][0]);
            assert_int_equal(g->seq_end, range[sp][1]);
            for (int j = 0; j < 5; j++) {
                const sample_t *s = &r->samples[sp][j];
                char err[256], hex[65];
                assert_int_equal(mc_gpt_datasets_text(D, sp, s->index, text, err, sizeof err), 0);
                sha256_i64(text, (size_t)r->seq_length + 1, hex);
                if (strcmp(hex, s->sha256) != 0)
                    fail_msg("config %zu split %d sample %lld: %s, Megatron's %s", k, sp,
                             (long long)s->index, hex, s->sha256);
            }
        }
        free(text);
        mc_gpt_datasets_free(D);
    }
}

/* The split is "1,1,1" whatever --split says: the same datasets with and without it. */
static void test_split_ignored(void **state)
{
    (void)state;
    const ref_t *r = &REFS[2];
    mc_gpt_datasets_t *a = build(r, "969,30,1"), *b = build(r, "100,0,0");
    for (int sp = 0; sp < 3; sp++)
        assert_int_equal(mc_gpt_datasets_len(a, sp), mc_gpt_datasets_len(b, sp));
    mc_gpt_datasets_free(a);
    mc_gpt_datasets_free(b);
}

static void test_mock_errors(void **state)
{
    (void)state;
    /* no tokenizer vocabulary (mock_vocab_size 0): an error naming it, not a memory failure */
    mc_gpt_data_config_t c;
    memset(&c, 0, sizeof c);
    c.mock = true;
    c.seq_length = 16;
    c.seed = 1;
    char err[512] = "";
    assert_null(mc_gpt_datasets_build(&c, err, sizeof err));
    assert_non_null(strstr(err, "vocabulary"));
    c.n_data_path = 1; /* with --data-path */
    char *paths[] = {"x"};
    c.data_path = paths;
    c.mock_vocab_size = 8;
    assert_null(mc_gpt_datasets_build(&c, err, sizeof err));
    assert_non_null(strstr(err, "exclusive"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pcg64_raw),
        cmocka_unit_test(test_integers_i32),
        cmocka_unit_test(test_mock_documents),
        cmocka_unit_test(test_megatron_mock_datasets),
        cmocka_unit_test(test_split_ignored),
        cmocka_unit_test(test_mock_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
