/* The num microbatches calculator (config/microbatches.h) against Megatron's formula
 * (num_microbatches_calculator.py: start + increment * int(consumed / (ramp-up samples /
 * ((gbs - start) / increment))) while consumed <= ramp-up samples), with the values CPython gives
 * for that expression, and training.update_train_iters' iteration count counted by hand. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "config/microbatches.h"

static mc_args_t ramp_args(int start, int incr, int64_t samples, int gbs, int mbs, int dp)
{
    mc_args_t a;
    memset(&a, 0, sizeof(a));
    a.rampup_start = start;
    a.rampup_increment = incr;
    a.rampup_samples = samples;
    a.global_batch_size = gbs;
    a.micro_batch_size = mbs;
    a.data_parallel_size = dp;
    return a;
}

static int gbs_at(mc_microbatches_t *c, int64_t consumed)
{
    mc_microbatches_update(c, consumed);
    return c->current_global_batch_size;
}

/* Megatron's help example: --rampup-batch-size 16 8 300000 --global-batch-size 1024 is 126
 * increments of 300000 / 126 = 2380.95... samples. */
static void test_help_example(void **state)
{
    (void)state;
    mc_args_t a = ramp_args(16, 8, 300000, 1024, 2, 4);
    mc_microbatches_t c;
    char err[256];
    assert_int_equal(mc_microbatches_init(&c, &a, err, sizeof(err)), 0);
    assert_int_equal(c.current_global_batch_size, 16); /* update(0) in the constructor */
    assert_int_equal(c.num_microbatches, 2);            /* 16 / (2 x 4) */
    const int64_t consumed[] = {0, 2380, 2381, 4761, 4762, 150000, 299999, 300000, 300001};
    const int want[] = {16, 16, 24, 24, 32, 520, 1016, 1024, 1024};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_int_equal(gbs_at(&c, consumed[i]), want[i]);
        assert_int_equal(c.num_microbatches, want[i] / 8);
    }
}

/* update reports a change only when the batch changes; the float division truncates like
 * Python's int() (10 / (10 / 3) is 3 in CPython). */
static void test_update_and_rounding(void **state)
{
    (void)state;
    mc_args_t a = ramp_args(2, 2, 10, 8, 1, 1);
    mc_microbatches_t c;
    char err[256];
    assert_int_equal(mc_microbatches_init(&c, &a, err, sizeof(err)), 0);
    assert_false(mc_microbatches_update(&c, 3)); /* int(3 / 3.33) = 0: still 2 */
    assert_true(mc_microbatches_update(&c, 4));  /* 1: 4 */
    assert_int_equal(c.current_global_batch_size, 4);
    assert_int_equal(gbs_at(&c, 6), 4);
    assert_int_equal(gbs_at(&c, 7), 6);
    assert_int_equal(gbs_at(&c, 10), 8); /* consumed == ramp-up samples: int(10 / 3.33) = 3 */
    assert_int_equal(gbs_at(&c, 11), 8);
}

/* update_train_iters: --rampup-batch-size 4 4 48, gbs 16, 160 samples. The ramp's iterations
 * start at consumed 0 4 8 12 (batch 4), 16 24 (8), 32 44 (12): 8 iterations to 56 > 48, then
 * (160 - 56) // 16 = 6 more. Without a ramp-up: 160 // 16. */
static void test_train_iters(void **state)
{
    (void)state;
    mc_args_t a = ramp_args(4, 4, 48, 16, 2, 1);
    mc_microbatches_t c;
    char err[256];
    assert_int_equal(mc_microbatches_init(&c, &a, err, sizeof(err)), 0);
    assert_int_equal(mc_microbatches_train_iters(&c, 160), 14);
    assert_int_equal(c.current_global_batch_size, 4); /* the count leaves the calculator alone */
    assert_int_equal(mc_microbatches_train_iters(&c, 20), 5); /* 0 4 8 12 16 <= 20, to 24 */
    mc_args_t k = ramp_args(0, 0, 0, 16, 2, 1);
    assert_int_equal(mc_microbatches_init(&c, &k, err, sizeof(err)), 0);
    assert_int_equal(c.num_microbatches, 8);
    assert_int_equal(mc_microbatches_train_iters(&c, 160), 10);
}

/* The constructor's asserts and the consistency check, in Megatron's words. */
static void test_errors(void **state)
{
    (void)state;
    mc_microbatches_t c;
    char err[512];
    mc_args_t a = ramp_args(32, 8, 100, 16, 1, 1);
    assert_int_equal(mc_microbatches_init(&c, &a, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "expected global batch size to be greater than or equal to start "
                                "batch size, got 16 and 32"));
    a = ramp_args(3, 2, 100, 16, 1, 1);
    assert_int_equal(mc_microbatches_init(&c, &a, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "expected global batch size interval (13) to be divisible by "
                                "global batch size increment (2)"));
    a = ramp_args(16, 2, 100, 16, 1, 1);
    assert_int_equal(mc_microbatches_init(&c, &a, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "no increment"));
    a = ramp_args(2, 1, 6, 8, 2, 1); /* 2 3 4 ...: 3 is not a whole number of microbatches */
    assert_int_equal(mc_microbatches_init(&c, &a, err, sizeof(err)), 0);
    assert_int_equal(mc_microbatches_check(&c, &a, err, sizeof(err)), 0);
    mc_microbatches_update(&c, 1);
    assert_int_equal(c.current_global_batch_size, 3);
    assert_int_equal(mc_microbatches_check(&c, &a, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "current global batch size (3) is not divisible by "
                                "micro-batch-size (2) times data parallel size (1)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_example),
        cmocka_unit_test(test_update_and_rounding),
        cmocka_unit_test(test_train_iters),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
