/* Megatron's log line and validation block (MEGATRON.md section 8). Expected strings are
 * byte-exact: the first is section 8's example; the others were produced by Megatron's format
 * strings run in CPython. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train/log.h"
#include "comm/timers.h"

/* 2026-01-01 12:00:00 UTC */
#define T_2026_NOON 1767268800

static void set_tz(const char *tz)
{
    setenv("TZ", tz, 1);
    tzset();
}

static mc_log_line_t example_line(void)
{
    mc_log_line_t l;
    memset(&l, 0, sizeof(l));
    l.iteration = 10;
    l.train_iters = 100;
    l.consumed_samples = 640;
    l.elapsed_ms_per_iter = 123.4;
    l.has_lr = 1;
    l.lr = 1.5e-4;
    l.global_batch_size = 64;
    l.n_losses = 1;
    l.loss_names[0] = "lm loss";
    l.loss_values[0] = 10.34567;
    l.loss_scale = 1.0;
    l.has_grad_norm = 1;
    l.grad_norm = 3.456;
    return l;
}

static void test_example_line(void **state)
{
    (void)state;
    set_tz("UTC");
    mc_log_line_t l = example_line();
    struct timespec when = {T_2026_NOON, 0};
    char buf[1024];
    const char *want =
        " [2026-01-01 12:00:00.000000] iteration       10/     100 | consumed samples:          640 |"
        " elapsed time per iteration (ms): 123.4 | learning rate: 1.500000E-04 | global batch size:"
        "    64 | lm loss: 1.034567E+01 | loss scale: 1.0 | grad norm: 3.456 | number of skipped"
        " iterations:   0 | number of nan iterations:   0 |";
    int len = mc_format_log_line(buf, sizeof(buf), &l, &when);
    assert_string_equal(buf, want);
    assert_int_equal(len, (int)strlen(want));
}

/* --decoupled-lr: training_log adds the decoupled group's lr right after the learning rate. */
static void test_decoupled_lr_field(void **state)
{
    (void)state;
    set_tz("UTC");
    mc_log_line_t l = example_line();
    l.has_decoupled_lr = 1;
    l.decoupled_lr = 2.5e-3;
    struct timespec when = {T_2026_NOON, 0};
    char buf[1024];
    const char *want =
        " [2026-01-01 12:00:00.000000] iteration       10/     100 | consumed samples:          640 |"
        " elapsed time per iteration (ms): 123.4 | learning rate: 1.500000E-04 | decoupled learning"
        " rate: 2.500000E-03 | global batch size:    64 | lm loss: 1.034567E+01 | loss scale: 1.0 |"
        " grad norm: 3.456 | number of skipped iterations:   0 | number of nan iterations:   0 |";
    mc_format_log_line(buf, sizeof(buf), &l, &when);
    assert_string_equal(buf, want);
}

static void test_optional_fields(void **state)
{
    (void)state;
    set_tz("IST-5:30"); /* local time is UTC+5:30 */
    mc_log_line_t l;
    memset(&l, 0, sizeof(l));
    l.iteration = 12345;
    l.train_iters = 500000;
    l.consumed_samples = 790080;
    l.skipped_samples = 32;
    l.elapsed_ms_per_iter = 2345.678;
    l.has_throughput = 1;
    l.tflops_per_gpu = 45.67;
    l.has_lr = 0; /* None: omitted */
    l.global_batch_size = 64;
    l.n_losses = 3;
    l.loss_names[0] = "lm loss";
    l.loss_values[0] = 2.5;
    l.loss_names[1] = "aux loss";
    l.loss_values[1] = -1.0; /* avg < 0: omitted */
    l.loss_names[2] = "z loss";
    l.loss_values[2] = 0.0; /* avg >= 0 includes 0 */
    l.loss_scale = 65536.0;
    l.has_grad_norm = 0; /* skipped step: no grad norm */
    l.has_num_zeros = 1;
    l.num_zeros = 12345;
    l.has_params_norm = 1;
    l.params_norm = 262.1445;
    l.skipped_iters = 1;
    l.nan_iters = 1;
    struct timespec when = {T_2026_NOON, 123456789}; /* microseconds truncated */
    char buf[1024];
    const char *want =
        " [2026-01-01 17:30:00.123456] iteration    12345/  500000 | consumed samples:       790080 |"
        " skipped samples:           32 | elapsed time per iteration (ms): 2345.7 | throughput per"
        " GPU (TFLOP/s/GPU): 45.7 | global batch size:    64 | lm loss: 2.500000E+00 | z loss:"
        " 0.000000E+00 | loss scale: 65536.0 | num zeros: 12345.0 | params norm: 262.144 | number of"
        " skipped iterations:   1 | number of nan iterations:   1 |";
    int len = mc_format_log_line(buf, sizeof(buf), &l, &when);
    assert_string_equal(buf, want);
    assert_int_equal(len, (int)strlen(want));
    set_tz("UTC");
}

/* Wide numbers overflow their field widths as Python does; NaN and inf print as Python prints
 * them; a NaN loss is not >= 0 and is left out. */
static void test_wide_and_nonfinite(void **state)
{
    (void)state;
    set_tz("UTC");
    mc_log_line_t l;
    memset(&l, 0, sizeof(l));
    l.iteration = 100000000;
    l.train_iters = 123456789;
    l.consumed_samples = 1234567890123LL;
    l.elapsed_ms_per_iter = 0.04;
    l.has_throughput = 1;
    l.tflops_per_gpu = 1234.56;
    l.has_lr = 1;
    l.lr = INFINITY;
    l.global_batch_size = 12345;
    l.n_losses = 1;
    l.loss_names[0] = "lm loss";
    l.loss_values[0] = -NAN;
    l.loss_scale = 1.0;
    l.has_grad_norm = 1;
    l.grad_norm = -NAN; /* Python prints nan without a sign */
    l.has_num_zeros = 1;
    l.num_zeros = 0;
    l.has_params_norm = 1;
    l.params_norm = 1e6 / 3;
    l.nan_iters = 123;
    struct timespec when = {T_2026_NOON, 999999999};
    char buf[1024];
    const char *want =
        " [2026-01-01 12:00:00.999999] iteration 100000000/123456789 | consumed samples:"
        " 1234567890123 | elapsed time per iteration (ms): 0.0 | throughput per GPU (TFLOP/s/GPU):"
        " 1234.6 | learning rate: INF | global batch size: 12345 | loss scale: 1.0 | grad norm: nan"
        " | num zeros: 0.0 | params norm: 333333.333 | number of skipped iterations:   0 | number of"
        " nan iterations: 123 |";
    mc_format_log_line(buf, sizeof(buf), &l, &when);
    assert_string_equal(buf, want);

    /* {:.6E} of a NaN is "NAN" (eval block path) */
    const char *names[] = {"lm loss"};
    float v = -NAN;
    mc_format_eval_block(buf, sizeof(buf), "iteration 1", names, &v, 1);
    assert_non_null(strstr(buf, "| lm loss value: NAN | lm loss PPL: 4.851652E+08 | \n"));
}

static void test_truncation(void **state)
{
    (void)state;
    set_tz("UTC");
    mc_log_line_t l = example_line();
    struct timespec when = {T_2026_NOON, 0};
    char full[1024], small[40];
    int n = mc_format_log_line(full, sizeof(full), &l, &when);
    memset(small, 'x', sizeof(small));
    int m = mc_format_log_line(small, sizeof(small), &l, &when);
    assert_int_equal(m, n);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_memory_equal(small, full, sizeof(small) - 1);
    assert_int_equal(mc_format_log_line(NULL, 0, &l, &when), n);

    const char *names[] = {"lm loss"};
    float v = 25.0f;
    int k = mc_format_eval_block(full, sizeof(full), "iteration 25", names, &v, 1);
    assert_int_equal(mc_format_eval_block(small, sizeof(small), "iteration 25", names, &v, 1), k);
    assert_memory_equal(small, full, sizeof(small) - 1);
    assert_int_equal(small[sizeof(small) - 1], '\0');
}

static void test_eval_block(void **state)
{
    (void)state;
    char buf[2048];
    const char *names[] = {"lm loss"};
    float v = 25.0f; /* PPL = exp(min(20, 25)) = exp(20) */
    const char *line = " validation loss at iteration 25 | lm loss value: 2.500000E+01 |"
                       " lm loss PPL: 4.851652E+08 | ";
    char want[2048], dashes[512];
    size_t d = strlen(line) + 1;
    assert_int_equal(d, 94);
    memset(dashes, '-', d);
    dashes[d] = '\0';
    snprintf(want, sizeof(want), "%s\n%s\n%s\n", dashes, line, dashes);
    int len = mc_format_eval_block(buf, sizeof(buf), "iteration 25", names, &v, 1);
    assert_string_equal(buf, want);
    assert_int_equal(len, (int)strlen(want));

    v = 2.345678901f;
    line = " validation loss at iteration 50 on validation set | lm loss value: 2.345679E+00 |"
           " lm loss PPL: 1.044036E+01 | ";
    d = strlen(line) + 1;
    assert_int_equal(d, 112);
    memset(dashes, '-', d);
    dashes[d] = '\0';
    snprintf(want, sizeof(want), "%s\n%s\n%s\n", dashes, line, dashes);
    mc_format_eval_block(buf, sizeof(buf), "iteration 50 on validation set", names, &v, 1);
    assert_string_equal(buf, want);

    /* several values on one line; exactly 20 gives exp(20) too; a negative loss is printed */
    const char *names2[] = {"lm loss", "other"};
    float v2[] = {20.0f, -1.0f};
    line = " validation loss at iteration 50 on test set | lm loss value: 2.000000E+01 |"
           " lm loss PPL: 4.851652E+08 | other value: -1.000000E+00 | other PPL: 3.678794E-01 | ";
    d = strlen(line) + 1;
    memset(dashes, '-', d);
    dashes[d] = '\0';
    snprintf(want, sizeof(want), "%s\n%s\n%s\n", dashes, line, dashes);
    mc_format_eval_block(buf, sizeof(buf), "iteration 50 on test set", names2, v2, 2);
    assert_string_equal(buf, want);
}

/* The values Megatron prints come from float32 tensors: each value below prints differently from
 * its double (in brackets: what the double prints). Expected text from CPython:
 * '{:.6E}'.format(float(np.float32(v))), '{:.1f}', '{:.3f}', str(float(np.float32(n))). */
static void test_float32_fields(void **state)
{
    (void)state;
    set_tz("UTC");
    mc_log_line_t l = example_line();
    l.lr = 0.00023180194700000035;                    /* [2.318019E-04] */
    l.loss_values[0] = mc_log_average(4.3028234f, 1); /* [4.302823E+00] */
    l.loss_scale = 1.05;                              /* [1.1] */
    l.grad_norm = 2.281499993040293;                  /* [2.281] */
    l.has_num_zeros = 1;
    l.num_zeros = 16777217; /* [16777217] */
    l.has_params_norm = 1;  /* of the sum of squares 34277.37621887447 [185.142] */
    l.params_norm = mc_log_params_norm(mc_log_norm_2(34277.37621887447));
    struct timespec when = {T_2026_NOON, 0};
    char buf[1024];
    const char *want =
        " [2026-01-01 12:00:00.000000] iteration       10/     100 | consumed samples:          640 |"
        " elapsed time per iteration (ms): 123.4 | learning rate: 2.318020E-04 | global batch size:"
        "    64 | lm loss: 4.302824E+00 | loss scale: 1.0 | grad norm: 2.282 | num zeros:"
        " 16777216.0 | params norm: 185.141 | number of skipped iterations:   0 | number of nan"
        " iterations:   0 |";
    mc_format_log_line(buf, sizeof(buf), &l, &when);
    assert_string_equal(buf, want);
}

/* ' num zeros: {}' of a Python float (reduce_max_stat_across_model_parallel_group's float32):
 * repr's shortest digits, in fixed or exponent notation as CPython chooses. */
static void test_num_zeros_repr(void **state)
{
    (void)state;
    const struct {
        double v;
        const char *want;
    } cases[] = {
        {0, " num zeros: 0.0 |"},
        {123, " num zeros: 123.0 |"},
        {0.25, " num zeros: 0.25 |"},
        {1e-4, " num zeros: 9.999999747378752e-05 |"},
        {1e-5, " num zeros: 9.999999747378752e-06 |"},
        {1e15, " num zeros: 999999986991104.0 |"},
        {1e16, " num zeros: 1.0000000272564224e+16 |"},
        {1152921504606846976.0 + 12345.0, " num zeros: 1.152921504606847e+18 |"}, /* 2^60 + .. */
    };
    mc_log_line_t l = example_line();
    l.has_num_zeros = 1;
    struct timespec when = {T_2026_NOON, 0};
    char buf[1024];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        l.num_zeros = (float)cases[i].v;
        mc_format_log_line(buf, sizeof(buf), &l, &when);
        if (!strstr(buf, cases[i].want))
            fail_msg("%g: want '%s' in '%s'", cases[i].v, cases[i].want, buf);
    }
}

/* train_step's loss_reduced and training_log's total_loss_dict: three iterations of three
 * microbatches (masked loss sums, token counts), the first logged alone (main's first-iteration
 * line), then the average of the three. Expected from numpy's float32 arithmetic in Megatron's
 * order, formatted by '{:.6E}' (3.836356E+00 and 3.782742E+00 both when everything is double and
 * when each iteration's sums are formed in double and rounded once). */
static void test_loss_accumulation(void **state)
{
    (void)state;
    const double sums[3][3] = {{3034.340077401197, 3962.156294424756, 4600.807235186914},
                               {3369.0801763433246, 3434.7286759071158, 3470.8175748590575},
                               {4017.2201279395717, 3883.906158581183, 4789.041985289185}};
    const double tokens[3][3] = {{1023, 1000, 1000}, {1024, 1023, 1024}, {1023, 1000, 1023}};
    const char *want[3] = {" lm loss: 3.836355E+00 |", NULL, " lm loss: 3.782741E+00 |"};
    float total = 0.0f;
    mc_log_line_t l = example_line();
    struct timespec when = {T_2026_NOON, 0};
    char buf[1024];
    for (int it = 0; it < 3; it++) {
        float pair[2];
        mc_log_loss_report(sums[it], tokens[it], 3, pair);
        total += mc_log_loss_ratio(pair);
        if (!want[it]) continue;
        l.loss_values[0] = mc_log_average(total, it + 1);
        mc_format_log_line(buf, sizeof(buf), &l, &when);
        if (!strstr(buf, want[it]))
            fail_msg("iteration %d: want '%s' in '%s'", it + 1, want[it], buf);
    }
    /* no tokens: 0/0 is NaN, which the line leaves out (avg >= 0.0 is false) */
    const double zero = 0;
    float pair[2];
    mc_log_loss_report(&zero, &zero, 1, pair);
    assert_true(isnan(mc_log_loss_ratio(pair)));
}

/* evaluate(): each iteration's reduced [sum, tokens] added to a float32 pair, divided in float32;
 * PPL math.exp of that value (the double path prints 3.681744E+00 and 3.971561E+01). */
static void test_eval_float32(void **state)
{
    (void)state;
    const double sums[2][2] = {{3680.107304464687, 3105.1512077805337},
                               {4133.5672162661685, 4073.237375936871}};
    const double tokens[2][2] = {{1024, 1000}, {1024, 1024}};
    float total[2] = {0.0f, 0.0f};
    for (int it = 0; it < 2; it++) {
        float pair[2];
        mc_log_loss_report(sums[it], tokens[it], 2, pair);
        total[0] += pair[0];
        total[1] += pair[1];
    }
    const float v = mc_log_loss_ratio(total);
    const char *names[] = {"lm loss"};
    char buf[1024];
    mc_format_eval_block(buf, sizeof(buf), "iteration 4", names, &v, 1);
    assert_non_null(strstr(buf, " validation loss at iteration 4 | lm loss value: 3.681745E+00 |"
                                " lm loss PPL: 3.971562E+01 | \n"));
}

/* Timers.get_all_timers_string for the three --timing-log-option values: two ranks, a log
 * interval of 10 iterations; rank 0 did not use the optimizer timer. */
static void test_timers_block(void **state)
{
    (void)state;
    double all[2 * MC_TIMERS] = {0};
    all[0 * MC_TIMERS + MC_T_FORWARD_BACKWARD] = 1.0; /* seconds over the interval */
    all[1 * MC_TIMERS + MC_T_FORWARD_BACKWARD] = 2.0;
    all[1 * MC_TIMERS + MC_T_OPTIMIZER] = 0.5;
    char buf[1024];
    mc_timers_format(MC_TIMING_ALL, all, 2, 10, buf, sizeof(buf));
    assert_string_equal(buf, "times across ranks (ms):\n"
                             "  forward-backward:\n"
                             "     rank  0: 100.00\n"
                             "     rank  1: 200.00\n"
                             "  optimizer:\n"
                             "     rank  1: 50.00");
    mc_timers_format(MC_TIMING_MINMAX, all, 2, 10, buf, sizeof(buf));
    assert_string_equal(buf,
                        "(min, max) time across ranks (ms):\n"
                        "    forward-backward ...............................: (100.00, 200.00)\n"
                        "    optimizer ......................................: (50.00, 50.00)");
    mc_timers_format(MC_TIMING_MAX, all, 2, 10, buf, sizeof(buf));
    assert_string_equal(buf, "max time across ranks (ms):\n"
                             "    forward-backward ...............................: 200.00\n"
                             "    optimizer ......................................: 50.00");
    /* rank numbers are {:2d}: wider from 100 ranks on */
    static double many[120 * MC_TIMERS];
    many[119 * MC_TIMERS + MC_T_OPTIMIZER] = 0.001;
    mc_timers_format(MC_TIMING_ALL, many, 120, 1, buf, sizeof(buf));
    assert_string_equal(buf, "times across ranks (ms):\n  optimizer:\n     rank 119: 1.00");
    /* nothing timed: no block at all */
    memset(all, 0, sizeof(all));
    mc_timers_format(MC_TIMING_ALL, all, 2, 10, buf, sizeof(buf));
    assert_string_equal(buf, "");
    mc_timers_format(MC_TIMING_MINMAX, all, 2, 10, buf, sizeof(buf));
    assert_string_equal(buf, "");
    /* too long for the buffer: whole lines, then a marker */
    for (int r = 0; r < 120; r++) many[r * MC_TIMERS + MC_T_FORWARD_BACKWARD] = 1.0;
    char small[100];
    mc_timers_format(MC_TIMING_ALL, many, 120, 1, small, sizeof(small));
    assert_string_equal(small, "times across ranks (ms):\n"
                               "  forward-backward:\n"
                               "     rank  0: 1000.00\n"
                               "    ... (truncated)");
    assert_true(strlen(small) < sizeof(small));
    assert_int_equal(mc_timing_option("max"), MC_TIMING_MAX);
    assert_int_equal(mc_timing_option("minmax"), MC_TIMING_MINMAX);
    assert_int_equal(mc_timing_option("all"), MC_TIMING_ALL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_line),      cmocka_unit_test(test_decoupled_lr_field),
        cmocka_unit_test(test_optional_fields),   cmocka_unit_test(test_wide_and_nonfinite),
        cmocka_unit_test(test_truncation),        cmocka_unit_test(test_eval_block),
        cmocka_unit_test(test_float32_fields),    cmocka_unit_test(test_num_zeros_repr),
        cmocka_unit_test(test_loss_accumulation), cmocka_unit_test(test_eval_float32),
        cmocka_unit_test(test_timers_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
