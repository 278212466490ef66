/* Philox4x32-10 known answers (Random123 kat_vectors) and the dropout word/keep rule. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/philox.h"

static void check_kat(const uint32_t ctr[4], const uint32_t key[2], const uint32_t want[4])
{
    mc_philox_ctr_t c = {{ctr[0], ctr[1], ctr[2], ctr[3]}};
    mc_philox_ctr_t r = mc_philox4x32_10(c, key[0], key[1]);
    for (int i = 0; i < 4; i++) assert_int_equal(r.v[i], want[i]);
}

static void test_kat_zero(void **state)
{
    (void)state;
    const uint32_t ctr[4] = {0, 0, 0, 0}, key[2] = {0, 0};
    const uint32_t want[4] = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};
    check_kat(ctr, key, want);
}

static void test_kat_ones(void **state)
{
    (void)state;
    const uint32_t ctr[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
    const uint32_t key[2] = {0xffffffffu, 0xffffffffu};
    const uint32_t want[4] = {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu};
    check_kat(ctr, key, want);
}

static void test_kat_pi(void **state)
{
    (void)state;
    const uint32_t ctr[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
    const uint32_t key[2] = {0xa4093822u, 0x299f31d0u};
    const uint32_t want[4] = {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u};
    check_kat(ctr, key, want);
}

static void test_unit_range(void **state)
{
    (void)state;
    assert_true(mc_u32_to_unit(0u) == 0.0f);
    assert_true(mc_u32_to_unit(0xffffffffu) < 1.0f);
    assert_true(mc_u32_to_unit(0xffffffffu) == 1.0f - 1.0f / 16777216.0f);
    assert_true(mc_u32_to_unit(0x80000000u) == 0.5f);
    assert_true(mc_u32_to_unit(0x000000ffu) == 0.0f); /* only the top 24 bits count */
}

/* The dropout word of element e is word e&3 of the Philox block for counter e>>2. */
static void test_dropout_bits_layout(void **state)
{
    (void)state;
    const uint64_t seed = 0x123456789abcdefull;
    for (uint64_t e = 0; e < 64; e++) {
        mc_philox_ctr_t c = {{(uint32_t)(e >> 2), 5u, 7u, (3u << 4) | 2u}};
        uint32_t k1 = (uint32_t)(seed >> 32) ^ (MC_PHILOX_TAG_DROPOUT << 16);
        mc_philox_ctr_t r = mc_philox4x32_10(c, (uint32_t)seed, k1);
        assert_int_equal(mc_dropout_bits(seed, 7, 3, 2, 5, e), r.v[e & 3]);
    }
}

/* Every field of the key/counter changes the stream. */
static void test_dropout_bits_fields(void **state)
{
    (void)state;
    uint32_t base = mc_dropout_bits(42, 1, 1, 2, 0, 0);
    assert_int_not_equal(base, mc_dropout_bits(43, 1, 1, 2, 0, 0));
    assert_int_not_equal(base, mc_dropout_bits(42ull | (1ull << 32), 1, 1, 2, 0, 0));
    assert_int_not_equal(base, mc_dropout_bits(42, 2, 1, 2, 0, 0));
    assert_int_not_equal(base, mc_dropout_bits(42, 1, 2, 2, 0, 0));
    assert_int_not_equal(base, mc_dropout_bits(42, 1, 1, 3, 0, 0));
    assert_int_not_equal(base, mc_dropout_bits(42, 1, 1, 2, 1, 0));
    assert_int_not_equal(base, mc_dropout_bits(42, 1, 1, 2, 1ull << 32, 0));
    assert_int_not_equal(base, mc_dropout_bits(42, 1, 1, 2, 0, 1));
    assert_int_not_equal(base, mc_dropout_bits(42, 1, 1, 2, 0, 4));
}

/* keep(p) keeps about 1-p of the elements; p = 0 keeps everything, p = 1 nothing. */
static void test_dropout_keep_rate(void **state)
{
    (void)state;
    const long n = 200000;
    const float ps[] = {0.1f, 0.5f, 0.9f};
    for (int k = 0; k < 3; k++) {
        long kept = 0;
        for (long e = 0; e < n; e++) kept += mc_dropout_keep(1234, 3, 2, 4, 9, (uint64_t)e, ps[k]);
        double rate = (double)kept / n, want = 1.0 - ps[k];
        /* 6 sigma of a binomial */
        assert_true(rate > want - 6 * 0.0012 && rate < want + 6 * 0.0012);
    }
    for (long e = 0; e < 1000; e++) {
        assert_true(mc_dropout_keep(7, 1, 1, 1, 0, (uint64_t)e, 0.0f));
        assert_false(mc_dropout_keep(7, 1, 1, 1, 0, (uint64_t)e, 1.0f));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kat_zero),
        cmocka_unit_test(test_kat_ones),
        cmocka_unit_test(test_kat_pi),
        cmocka_unit_test(test_unit_range),
        cmocka_unit_test(test_dropout_bits_layout),
        cmocka_unit_test(test_dropout_bits_fields),
        cmocka_unit_test(test_dropout_keep_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
