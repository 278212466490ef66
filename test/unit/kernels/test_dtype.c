/* fp32 <-> bf16/fp16 conversions (kernels/dtype.h): round to nearest even, subnormals, overflow to
 * infinity, NaN kept a NaN. The rounding is checked against its definition: for every sampled
 * float the result is a representable value nearest to it in double arithmetic, and a tie goes to
 * the even significand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/dtype.h"

/* The two 16-bit neighbours around x's rounding: decode(h) for h and h's successor. */
static double decode(mc_dtype_t dt, uint16_t h)
{
    return dt == MC_DT_BF16 ? (double)mc_f32_from_bf16(h) : (double)mc_f32_from_f16(h);
}
static uint16_t encode(mc_dtype_t dt, float x)
{
    return dt == MC_DT_BF16 ? mc_bf16_from_f32(x) : mc_f16_from_f32(x);
}

/* The value from which everything rounds to infinity: the midpoint between the largest finite
 * value (whose significand is odd) and the next power of two, a tie that goes to infinity. */
static double inf_from(mc_dtype_t dt) { return dt == MC_DT_BF16 ? 0x1.ffp127 : 65520.0; }

/* x (finite) converts to the nearest representable value, ties to even. */
static void check_one(mc_dtype_t dt, float x)
{
    const uint16_t h = encode(dt, x);
    const double v = decode(dt, h), ax = fabs((double)x);
    if (ax >= inf_from(dt)) {
        if (!isinf(v) || (v > 0) != (x > 0)) fail_msg("%a should overflow to inf, got %a", (double)x, v);
        return;
    }
    if (!isfinite(v)) fail_msg("%a gave %a", (double)x, v);
    if (x != 0 && signbit(v) != signbit((double)x) && v != 0) fail_msg("%a changed sign (%a)", (double)x, v);
    /* the neighbours of h in magnitude */
    const uint16_t mag = h & 0x7fffu, sign = h & 0x8000u;
    const double up = mag < (dt == MC_DT_BF16 ? 0x7f7fu : 0x7bffu) ? fabs(decode(dt, sign | (mag + 1))) : INFINITY;
    const double down = mag > 0 ? fabs(decode(dt, sign | (mag - 1))) : 0.0;
    const double err = fabs(fabs(v) - ax);
    if (fabs(up - ax) < err || fabs(ax - down) < err)
        fail_msg("%a -> %a is not the nearest (%a, %a)", (double)x, v, down, up);
    if ((fabs(up - ax) == err || (mag > 0 && fabs(ax - down) == err)) && (mag & 1u))
        fail_msg("%a -> %a: a tie went to the odd significand", (double)x, v);
}

static uint32_t lcg(uint32_t *s) { return *s = *s * 1664525u + 1013904223u; }

static void sweep(mc_dtype_t dt)
{
    uint32_t s = 12345;
    /* random bit patterns (every exponent, incl. subnormals) */
    for (int i = 0; i < 2000000; i++) {
        const float x = mc_bits_f32(lcg(&s));
        if (isfinite(x)) check_one(dt, x);
    }
    /* exact ties and near-ties around every 16-bit value: the midpoints and one fp32 ulp on
     * either side */
    for (uint32_t h = 0; h < 0x7fffu; h++) {
        const double a = decode(dt, (uint16_t)h), b = decode(dt, (uint16_t)(h + 1));
        if (!isfinite(a) || !isfinite(b)) break;
        const float mid = (float)((a + b) / 2); /* exact in fp32 for both formats */
        check_one(dt, mid);
        check_one(dt, -mid);
        check_one(dt, nextafterf(mid, 0));
        check_one(dt, nextafterf(mid, INFINITY));
    }
}

static void test_bf16_rounding(void **state)
{
    (void)state;
    sweep(MC_DT_BF16);
}

static void test_fp16_rounding(void **state)
{
    (void)state;
    sweep(MC_DT_F16);
}

static void test_known_values(void **state)
{
    (void)state;
    /* bf16 */
    assert_int_equal(mc_bf16_from_f32(1.0f), 0x3f80);
    assert_int_equal(mc_bf16_from_f32(-2.0f), 0xc000);
    assert_int_equal(mc_bf16_from_f32(1.0f + 0x1p-8f), 0x3f80);        /* tie: to even */
    assert_int_equal(mc_bf16_from_f32(1.0f + 3 * 0x1p-8f), 0x3f82);    /* tie: to even (up) */
    assert_int_equal(mc_bf16_from_f32(INFINITY), 0x7f80);
    assert_int_equal(mc_bf16_from_f32(3.4028235e38f), 0x7f80);         /* FLT_MAX rounds to inf */
    assert_true(isnan(mc_f32_from_bf16(mc_bf16_from_f32(NAN))));
    assert_true(isnan(mc_f32_from_bf16(mc_bf16_from_f32(mc_bits_f32(0x7f800001u))))); /* payload in low bits */
    assert_int_equal(mc_bf16_from_f32(0x1p-133f), 0x0001);            /* smallest bf16 subnormal */
    /* fp16 */
    assert_int_equal(mc_f16_from_f32(1.0f), 0x3c00);
    assert_int_equal(mc_f16_from_f32(-2.0f), 0xc000);
    assert_int_equal(mc_f16_from_f32(65504.0f), 0x7bff);
    assert_int_equal(mc_f16_from_f32(65519.996f), 0x7bff);
    assert_int_equal(mc_f16_from_f32(65520.0f), 0x7c00);               /* tie to even: inf */
    assert_int_equal(mc_f16_from_f32(-1e6f), 0xfc00);
    assert_int_equal(mc_f16_from_f32(0x1p-14f), 0x0400);               /* smallest normal */
    assert_int_equal(mc_f16_from_f32(0x1p-24f), 0x0001);               /* smallest subnormal */
    assert_int_equal(mc_f16_from_f32(0x1p-25f), 0x0000);               /* tie to even: 0 */
    assert_int_equal(mc_f16_from_f32(0x1.8p-24f), 0x0002);             /* 1.5 units: to even 2 */
    assert_int_equal(mc_f16_from_f32(0x1.000002p-25f), 0x0001);        /* just above half a unit */
    assert_int_equal(mc_f16_from_f32(-0.0f), 0x8000);
    assert_true(isnan(mc_f32_from_f16(mc_f16_from_f32(NAN))));
    assert_true(mc_f32_from_f16(0x7c00) == INFINITY);
    assert_true(mc_f32_from_f16(0x0001) == 0x1p-24f);
    assert_true(mc_f32_from_f16(0x03ff) == 0x1.ff8p-15f);
}

/* Every 16-bit value survives the round trip through fp32 (NaNs stay NaN). */
static void test_round_trip(void **state)
{
    (void)state;
    for (uint32_t h = 0; h <= 0xffffu; h++) {
        const float b = mc_f32_from_bf16((uint16_t)h), f = mc_f32_from_f16((uint16_t)h);
        if (isnan(b)) assert_true(isnan(mc_f32_from_bf16(mc_bf16_from_f32(b))));
        else assert_int_equal(mc_bf16_from_f32(b), h);
        if (isnan(f)) assert_true(isnan(mc_f32_from_f16(mc_f16_from_f32(f))));
        else assert_int_equal(mc_f16_from_f32(f), h);
    }
}

/* mc_convert between every pair of float types, in place where allowed. */
static void test_convert(void **state)
{
    (void)state;
    enum { N = 37 };
    float src[N], back[N];
    uint16_t h[N];
    for (int i = 0; i < N; i++) src[i] = (float)(i - 18) * 0.3337f;
    const mc_dtype_t types[] = {MC_DT_BF16, MC_DT_F16};
    for (int t = 0; t < 2; t++) {
        mc_convert(h, types[t], src, MC_DT_F32, N);
        mc_convert(back, MC_DT_F32, h, types[t], N);
        for (int i = 0; i < N; i++) {
            assert_true(back[i] == mc_round_to(types[t], src[i]));
            assert_true(mc_load_f32(h, types[t], i) == back[i]);
        }
        /* narrowing in place gives the same bits */
        float tmp[N];
        for (int i = 0; i < N; i++) tmp[i] = src[i];
        mc_convert(tmp, types[t], tmp, MC_DT_F32, N);
        for (int i = 0; i < N; i++) assert_int_equal(((uint16_t *)tmp)[i], h[i]);
        /* 16-bit to the other 16-bit type goes through fp32 */
        uint16_t o[N];
        mc_convert(o, types[1 - t], h, types[t], N);
        for (int i = 0; i < N; i++) assert_true(mc_load_f32(o, types[1 - t], i) == mc_round_to(types[1 - t], back[i]));
    }
    assert_int_equal(mc_dtype_size(MC_DT_BF16), 2);
    assert_int_equal(mc_dtype_size(MC_DT_F16), 2);
    assert_string_equal(mc_dtype_name(MC_DT_BF16), "bf16");
    assert_string_equal(mc_dtype_name(MC_DT_F16), "fp16");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_values),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_fp16_rounding),
        cmocka_unit_test(test_convert),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
