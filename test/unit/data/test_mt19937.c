/* numpy-compatible MT19937 (MEGATRON.md 2.10). Expected values come from numpy 1.24.2:
 *   rs = numpy.random.RandomState(seed)
 *   rs.randint(0, 2**32, size=k, dtype=numpy.uint64)   -> raw 32-bit outputs
 *   rs.randint(0, m + 1, dtype=numpy.uint64)           -> random_interval(m), the same masked
 *                                                          rejection as shuffle's draws, incl.
 *                                                          the 64-bit branch for m > 2^32 - 1
 *   rs.shuffle(arange(n))                              -> legacy shuffle */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "data/mt19937.h"

static void test_seed_outputs(void **state)
{
    (void)state;
    static const struct { uint32_t seed; uint32_t want[3]; } cases[] = {
        {1234u, {822569775u, 2137449171u, 2671936806u}},
        {0u, {2357136044u, 2546248239u, 3071714933u}},
        {4294967295u, {419326371u, 479346978u, 3918654476u}},
        {7u, {327741615u, 976413892u, 3349725721u}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mc_mt19937_t r;
        mc_mt19937_seed(&r, cases[c].seed);
        for (int i = 0; i < 3; i++) assert_int_equal(mc_mt19937_next32(&r), cases[c].want[i]);
    }
    mc_mt19937_t r;
    mc_mt19937_seed(&r, 1234u);
    const uint32_t want[5] = {822569775u, 2137449171u, 2671936806u, 3512589365u, 1880026316u};
    for (int i = 0; i < 5; i++) assert_int_equal(mc_mt19937_next32(&r), want[i]);
}

/* Across the 624-word regeneration boundary (RandomState(42), outputs 623, 624, 1299). */
static void test_regeneration(void **state)
{
    (void)state;
    mc_mt19937_t r;
    mc_mt19937_seed(&r, 42u);
    uint32_t v[1300];
    for (int i = 0; i < 1300; i++) v[i] = mc_mt19937_next32(&r);
    assert_int_equal(v[623], 1077437785u);
    assert_int_equal(v[624], 108880612u);
    assert_int_equal(v[1299], 2059789457u);
}

static void test_next64_high_word_first(void **state)
{
    (void)state;
    mc_mt19937_t r;
    mc_mt19937_seed(&r, 1234u);
    assert_true(mc_mt19937_next64(&r) == ((uint64_t)822569775u << 32 | 2137449171u));
}

static void test_shuffle_10(void **state)
{
    (void)state;
    mc_mt19937_t r;
    mc_mt19937_seed(&r, 1234u);
    int32_t x[10];
    for (int i = 0; i < 10; i++) x[i] = i;
    mc_mt19937_shuffle_i32(&r, x, 10);
    const int32_t want[10] = {7, 2, 9, 1, 0, 8, 4, 5, 6, 3};
    for (int i = 0; i < 10; i++) assert_int_equal(x[i], want[i]);
}

static void test_shuffle_100000(void **state)
{
    (void)state;
    const int n = 100000;
    int64_t *x = malloc(sizeof *x * n);
    assert_non_null(x);
    for (int i = 0; i < n; i++) x[i] = i;
    mc_mt19937_t r;
    mc_mt19937_seed(&r, 1234u);
    mc_mt19937_shuffle_i64(&r, x, n);
    const int64_t first[8] = {13504, 72599, 42217, 97650, 99120, 13165, 56244, 72729};
    const int64_t last[4] = {60620, 34086, 58067, 92975};
    for (int i = 0; i < 8; i++) assert_int_equal(x[i], first[i]);
    for (int i = 0; i < 4; i++) assert_int_equal(x[n - 4 + i], last[i]);
    uint64_t cs = 0; /* sum((i+1) * x[i]) mod 2^64 over the whole permutation */
    for (int i = 0; i < n; i++) cs += (uint64_t)(i + 1) * (uint64_t)x[i];
    assert_true(cs == 249814377431287ull);
    free(x);
}

/* Two shuffles in a row consume one state (as the doc index then the shuffle index do), and the
 * element type does not change the draws. RandomState(7): shuffle(arange(1000, int32)),
 * shuffle(arange(7, uint32)), then two raw outputs. */
static void test_sequential_shuffles(void **state)
{
    (void)state;
    mc_mt19937_t r;
    mc_mt19937_seed(&r, 7u);
    int32_t a[1000];
    for (int i = 0; i < 1000; i++) a[i] = i;
    mc_mt19937_shuffle_i32(&r, a, 1000);
    uint32_t b[7];
    for (int i = 0; i < 7; i++) b[i] = (uint32_t)i;
    mc_mt19937_shuffle_u32(&r, b, 7);
    const int32_t wa[5] = {778, 334, 271, 802, 216};
    const uint32_t wb[7] = {5, 0, 3, 2, 4, 1, 6};
    for (int i = 0; i < 5; i++) assert_int_equal(a[i], wa[i]);
    for (int i = 0; i < 7; i++) assert_int_equal(b[i], wb[i]);
    assert_int_equal(mc_mt19937_next32(&r), 662359493u);
    assert_int_equal(mc_mt19937_next32(&r), 1137292983u);
}

/* bounded(max) against numpy's randint(0, max+1, dtype=uint64), which uses the same masked
 * rejection (random_bounded_uint64, use_masked=True): one RandomState(1234) drawing, in order,
 * the maxima below. max = 2^32 rejects its first 64-bit draw (822569775 is odd, so bit 32 is
 * set) and accepts the next; 0xffffffff and 1 take the 32-bit branch. */
static void test_bounded_64bit_branch(void **state)
{
    (void)state;
    static const uint64_t maxes[] = {
        4294967296ull, 4294967301ull, 1099511627775ull, 25769803783ull, 10ull,
        9223372036854788153ull, 4294967295ull, 8589934592ull, 1ull, 4294967297ull,
        18446744073709551614ull,
    };
    static const uint64_t want[] = {
        3512589365ull, 2629000564ull, 656147994617ull, 9442566174ull, 10ull,
        2142364830204029370ull, 55437432ull, 2090933724ull, 1ull, 3061031881ull,
        14806086798845460726ull,
    };
    mc_mt19937_t r;
    mc_mt19937_seed(&r, 1234u);
    for (size_t i = 0; i < sizeof maxes / sizeof maxes[0]; i++) {
        uint64_t v = mc_mt19937_bounded(&r, maxes[i]);
        assert_true(v == want[i]);
        assert_true(v <= maxes[i]);
    }
    /* The stream continues where numpy's does. */
    assert_int_equal(mc_mt19937_next32(&r), 421988862u);
    assert_int_equal(mc_mt19937_next32(&r), 2410319279u);
    assert_int_equal(mc_mt19937_next32(&r), 240490034u);
}

/* bounded(0) draws nothing; bounded(2^k - 1) never rejects (one draw, masked). */
static void test_bounded_edges(void **state)
{
    (void)state;
    mc_mt19937_t r, q;
    mc_mt19937_seed(&r, 1234u);
    mc_mt19937_seed(&q, 1234u);
    assert_true(mc_mt19937_bounded(&r, 0) == 0);
    assert_int_equal(mc_mt19937_next32(&r), 822569775u);
    mc_mt19937_seed(&r, 1234u);
    assert_true(mc_mt19937_bounded(&r, 0xffu) == (822569775u & 0xffu));
    assert_true(mc_mt19937_bounded(&r, ~(uint64_t)0) == ((uint64_t)2137449171u << 32 | 2671936806u));
    /* max = 6: mask 7, draws rejected while (v & 7) == 7. */
    mc_mt19937_seed(&r, 1234u);
    uint64_t v = mc_mt19937_bounded(&r, 6);
    uint32_t w;
    do w = mc_mt19937_next32(&q) & 7u; while (w > 6);
    assert_true(v == w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_outputs),
        cmocka_unit_test(test_regeneration),
        cmocka_unit_test(test_next64_high_word_first),
        cmocka_unit_test(test_shuffle_10),
        cmocka_unit_test(test_shuffle_100000),
        cmocka_unit_test(test_sequential_shuffles),
        cmocka_unit_test(test_bounded_64bit_branch),
        cmocka_unit_test(test_bounded_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
