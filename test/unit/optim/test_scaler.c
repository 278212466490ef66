/* Megatron's loss scalers (optim/scaler.h; MEGATRON.md section 7, grad_scaler.py): which one a
 * run gets, and DynamicGradScaler.update step by step (hysteresis not reset by good steps, growth
 * resets it, the minimum clamps). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "optim/scaler.h"

static mc_optim_config_t config(bool fp16, bool bf16, double loss_scale)
{
    mc_optim_config_t a;
    memset(&a, 0, sizeof(a));
    a.fp16 = fp16;
    a.bf16 = bf16;
    a.loss_scale = loss_scale;
    a.initial_loss_scale = 4294967296.0;
    a.min_loss_scale = 1.0;
    a.loss_scale_window = 1000;
    a.hysteresis = 2;
    return a;
}

static void test_which_scaler(void **state)
{
    (void)state;
    mc_scaler_t s;
    mc_optim_config_t a = config(false, false, 0);
    mc_scaler_init(&s, &a); /* fp32: none, even with --loss-scale (Megatron ignores it) */
    assert_false(s.enabled);
    assert_true(mc_scaler_value(&s) == 1.0);
    a = config(false, false, 128);
    mc_scaler_init(&s, &a);
    assert_false(s.enabled);
    a = config(false, true, 0); /* bf16: none */
    mc_scaler_init(&s, &a);
    assert_false(s.enabled);
    assert_true(mc_scaler_value(&s) == 1.0);
    a = config(false, true, 128); /* bf16 --loss-scale: constant */
    mc_scaler_init(&s, &a);
    assert_true(s.enabled && !s.dynamic && mc_scaler_value(&s) == 128.0);
    mc_scaler_update(&s, true);
    mc_scaler_update(&s, true);
    assert_true(mc_scaler_value(&s) == 128.0);
    a = config(true, false, 0); /* fp16: dynamic from --initial-loss-scale */
    mc_scaler_init(&s, &a);
    assert_true(s.enabled && s.dynamic && mc_scaler_value(&s) == 4294967296.0);
    assert_int_equal(s.hysteresis_tracker, 2);
    a = config(true, false, 1024); /* fp16 --loss-scale: constant */
    mc_scaler_init(&s, &a);
    assert_true(s.enabled && !s.dynamic && mc_scaler_value(&s) == 1024.0);
}

static void test_dynamic_update(void **state)
{
    (void)state;
    mc_optim_config_t a = config(true, false, 0);
    a.initial_loss_scale = 1024;
    a.loss_scale_window = 3;
    a.min_loss_scale = 128;
    mc_scaler_t s;
    mc_scaler_init(&s, &a);
    /* (found_inf, scale after, growth tracker, hysteresis tracker) */
    const struct { bool inf; double scale; int growth, hyst; } steps[] = {
        {true, 1024, 0, 1},  /* first overflow: hysteresis absorbs it */
        {true, 512, 0, 0},   /* second: back off */
        {false, 512, 1, 0},  /* a good step does not reset hysteresis */
        {true, 256, 0, -1},  /* so the next overflow backs off at once */
        {false, 256, 1, -1}, {false, 256, 2, -1},
        {false, 512, 0, 2},  /* window of 3 good steps: grow, hysteresis reset */
        {true, 512, 0, 1},   {true, 256, 0, 0}, {true, 128, 0, -1},
        {true, 128, 0, -2},  /* clamped at --min-loss-scale */
    };
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        mc_scaler_update(&s, steps[i].inf);
        if (s.scale != steps[i].scale || s.growth_tracker != steps[i].growth ||
            s.hysteresis_tracker != steps[i].hyst)
            fail_msg("step %zu: scale %g growth %d hysteresis %d, want %g %d %d", i, s.scale, s.growth_tracker,
                     s.hysteresis_tracker, steps[i].scale, steps[i].growth, steps[i].hyst);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_which_scaler),
        cmocka_unit_test(test_dynamic_update),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
