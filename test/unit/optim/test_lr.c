/* OptimizerParamScheduler in sample units (MEGATRON.md section 7). Values are hand-computed;
 * the hex-float constants are Megatron's get_lr/get_wd expressions evaluated by CPython on the
 * same libm, so those checks are bit-exact. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "optim/lr.h"
#include "trainer/config.h"

/* Iteration-based: train_iters 100, gbs 8, lr 1e-3 -> 1e-4, warmup 10 iters.
 * decay_steps = 800, warmup_steps = 80, wd_incr_steps = 800. */
static mc_args_t base_args(const char *style)
{
    mc_args_t a;
    memset(&a, 0, sizeof(a));
    a.global_batch_size = 8;
    a.micro_batch_size = 8;
    a.data_parallel_size = 1;
    a.train_iters = 100;
    a.lr = 1e-3;
    a.lr_set = true;
    a.min_lr = 1e-4;
    a.lr_warmup_iters = 10;
    a.lr_warmup_fraction = -1;
    a.lr_warmup_init = 0.0;
    snprintf(a.lr_decay_style, sizeof(a.lr_decay_style), "%s", style);
    snprintf(a.weight_decay_incr_style, sizeof(a.weight_decay_incr_style), "constant");
    a.weight_decay = 0.1;
    return a;
}

static mc_lr_sched_t sched(const mc_args_t *a)
{
    mc_lr_config_t c;
    mc_lr_config_from_args(&c, a);
    mc_lr_sched_t s;
    mc_lr_sched_init(&s, &c);
    return s;
}

#define assert_close(x, y) assert_true(fabs((x) - (y)) <= 1e-15 * fabs(y) + 1e-300)
#define assert_bits(x, y) assert_true((x) == (y))

static void test_units_iteration_based(void **state)
{
    (void)state;
    mc_args_t a = base_args("linear");
    mc_lr_sched_t s = sched(&a);
    assert_true(s.warmup_steps == 80.0);
    assert_int_equal(s.decay_steps, 800);
    assert_int_equal(s.wd_incr_steps, 800);
    assert_int_equal(s.num_steps, 0);
    assert_int_equal(s.decay_style, MC_LR_LINEAR);
    assert_true(s.max_lr == 1e-3 && s.min_lr == 1e-4 && s.init_lr == 0.0);

    a.lr_decay_iters = 50; /* decay over 50 iters, wd still over train_iters */
    s = sched(&a);
    assert_int_equal(s.decay_steps, 400);
    assert_int_equal(s.wd_incr_steps, 800);
}

static void test_units_sample_based(void **state)
{
    (void)state;
    mc_args_t a = base_args("linear");
    a.train_iters = 0;
    a.lr_warmup_iters = 0;
    a.train_samples = 1000;
    a.lr_warmup_samples = 100;
    mc_lr_sched_t s = sched(&a);
    assert_true(s.warmup_steps == 100.0);
    assert_int_equal(s.decay_steps, 1000); /* lr_decay_samples defaults to train_samples */
    assert_int_equal(s.wd_incr_steps, 1000);
    /* n = 550: ratio 450/900 = 0.5 */
    assert_close(mc_lr_at(&s, 550), 1e-4 + 0.5 * 9e-4);

    a.lr_decay_samples = 500;
    s = sched(&a);
    assert_int_equal(s.decay_steps, 500);
    assert_int_equal(s.wd_incr_steps, 1000);
    assert_true(mc_lr_at(&s, 501) == 1e-4);
}

static void test_units_warmup_fraction(void **state)
{
    (void)state;
    mc_args_t a = base_args("linear");
    a.lr_warmup_iters = 0;
    a.lr_warmup_fraction = 0.1; /* 0.1 * 800 */
    mc_lr_sched_t s = sched(&a);
    assert_true(s.warmup_steps == 80.0);

    a.lr_decay_iters = 50; /* fraction of the decay steps, not of train */
    s = sched(&a);
    assert_true(s.warmup_steps == 0.1 * 400);

    /* sample-based fraction */
    a = base_args("linear");
    a.train_iters = 0;
    a.lr_warmup_iters = 0;
    a.train_samples = 1000;
    a.lr_decay_samples = 600;
    a.lr_warmup_fraction = 0.25;
    s = sched(&a);
    assert_true(s.warmup_steps == 150.0);

    /* A non-integer warmup stays fractional, as in Python: 0.015 * 100 = 1.5 samples. */
    a = base_args("linear");
    a.global_batch_size = 1;
    a.lr_warmup_iters = 0;
    a.lr_warmup_fraction = 0.015;
    a.min_lr = 0.0;
    s = sched(&a);
    assert_true(s.warmup_steps == 0.015 * 100);
    assert_close(mc_lr_at(&s, 1), 1e-3 / 1.5);         /* still warming up at n = 1 */
    assert_bits(mc_lr_at(&s, 1), 0x1.5d867c3ece2a5p-11);
    assert_close(mc_lr_at(&s, 2), 1e-3 * (1.0 - 0.5 / 98.5)); /* decaying at n = 2 */
    snprintf(a.lr_decay_style, sizeof(a.lr_decay_style), "cosine");
    s = sched(&a);
    assert_bits(mc_lr_at(&s, 2), 0x1.062098f1bee1dp-10);
}

static void test_warmup(void **state)
{
    (void)state;
    mc_args_t a = base_args("cosine");
    mc_lr_sched_t s = sched(&a);
    assert_true(mc_lr_at(&s, 0) == 0.0);        /* the first update uses lr_warmup_init */
    assert_true(mc_lr_at(&s, 8) == 1e-3 * 8 / 80);
    assert_close(mc_lr_at(&s, 40), 5e-4);
    assert_true(mc_lr_at(&s, 80) == 1e-3);      /* n == warmup is still the warmup branch */

    a.lr_warmup_init = 1e-4;
    s = sched(&a);
    assert_true(mc_lr_at(&s, 0) == 1e-4);
    assert_close(mc_lr_at(&s, 40), 1e-4 + 9e-4 * 0.5);
    assert_true(mc_lr_at(&s, 80) == 1e-3);

    /* no warmup: lr(0) is max_lr for linear/cosine (ratio 0) */
    a = base_args("cosine");
    a.lr_warmup_iters = 0;
    s = sched(&a);
    assert_true(mc_lr_at(&s, 0) == 1e-3);
}

static void test_linear(void **state)
{
    (void)state;
    mc_args_t a = base_args("linear");
    mc_lr_sched_t s = sched(&a);
    /* n = 88: ratio 8/720 = 1/90, lr = 1e-4 + (89/90) * 9e-4 = 9.9e-4 */
    assert_close(mc_lr_at(&s, 88), 9.9e-4);
    assert_bits(mc_lr_at(&s, 88), 0x1.0385c67dfe32ap-10);
    assert_close(mc_lr_at(&s, 320), 7e-4);      /* ratio 1/3 */
    assert_bits(mc_lr_at(&s, 320), 0x1.6f0068db8bac8p-11);
    assert_close(mc_lr_at(&s, 440), 5.5e-4);    /* ratio 1/2 */
    assert_bits(mc_lr_at(&s, 440), 0x1.205bc01a36e2fp-11);
    assert_bits(mc_lr_at(&s, 123), 0x1.f01b866e43aa8p-11);
    assert_true(mc_lr_at(&s, 800) == 1e-4);     /* n == decay_steps: ratio 1 */
    assert_true(mc_lr_at(&s, 801) == 1e-4);     /* beyond: min_lr */
    assert_true(mc_lr_at(&s, 100000) == 1e-4);
}

static void test_cosine(void **state)
{
    (void)state;
    mc_args_t a = base_args("cosine");
    mc_lr_sched_t s = sched(&a);
    /* ratio 1/3: 0.5 * (cos(pi/3) + 1) = 0.75 -> 1e-4 + 0.75 * 9e-4 = 7.75e-4 */
    assert_close(mc_lr_at(&s, 320), 7.75e-4);
    assert_bits(mc_lr_at(&s, 320), 0x1.9652bd3c36114p-11);
    assert_close(mc_lr_at(&s, 440), 5.5e-4);    /* ratio 1/2 */
    assert_bits(mc_lr_at(&s, 88), 0x1.061277b41b856p-10);
    assert_bits(mc_lr_at(&s, 123), 0x1.0412e23dedef9p-10);
    assert_true(mc_lr_at(&s, 80) == 1e-3);
    assert_true(mc_lr_at(&s, 800) == 1e-4);     /* cos(pi) = -1 exactly: coeff 0 */
    assert_true(mc_lr_at(&s, 900) == 1e-4);
}

static void test_constant(void **state)
{
    (void)state;
    mc_args_t a = base_args("constant");
    mc_lr_sched_t s = sched(&a);
    assert_int_equal(s.decay_style, MC_LR_CONSTANT);
    assert_close(mc_lr_at(&s, 40), 5e-4);       /* warmup still applies */
    assert_true(mc_lr_at(&s, 80) == 1e-3);
    assert_true(mc_lr_at(&s, 81) == 1e-3);
    assert_true(mc_lr_at(&s, 800) == 1e-3);
    assert_true(mc_lr_at(&s, 100000) == 1e-3);  /* constant is checked before n > decay */

    a.lr_warmup_iters = 0;
    s = sched(&a);
    assert_true(mc_lr_at(&s, 0) == 1e-3);
}

static void test_inverse_sqrt(void **state)
{
    (void)state;
    mc_args_t a = base_args("inverse-square-root");
    a.global_batch_size = 4;
    a.lr_warmup_iters = 1;  /* warmup 4 samples, decay 400 */
    a.min_lr = 1e-5;
    mc_lr_sched_t s = sched(&a);
    assert_int_equal(s.decay_style, MC_LR_INVERSE_SQRT);
    assert_true(mc_lr_at(&s, 2) == 5e-4);       /* warmup */
    assert_true(mc_lr_at(&s, 4) == 1e-3);       /* n == warmup */
    assert_close(mc_lr_at(&s, 16), 5e-4);       /* 1e-3 * sqrt(4)/sqrt(16) */
    assert_bits(mc_lr_at(&s, 16), 0x1.0624dd2f1a9fcp-11);
    assert_close(mc_lr_at(&s, 100), 2e-4);      /* 1e-3 * 2/10 */
    assert_bits(mc_lr_at(&s, 100), 0x1.a36e2eb1c432dp-13);
    assert_bits(mc_lr_at(&s, 77), 0x1.ddfc3cbb3a35ap-13);
    assert_close(mc_lr_at(&s, 400), 1e-4);      /* n == decay: 1e-3 * 2/20 */
    assert_true(mc_lr_at(&s, 401) == 1e-5);     /* beyond: min_lr */

    /* n == warmup takes the warmup branch: with lr 7e-4 and warmup 34 samples the decay
     * formula 7e-4*sqrt(34)/sqrt(34) would give 0x1.6f0068db8bac8p-11, 1 ulp above 7e-4. */
    a = base_args("inverse-square-root");
    a.train_iters = 0;
    a.lr_warmup_iters = 0;
    a.train_samples = 1000;
    a.lr_warmup_samples = 34;
    a.lr = 7e-4;
    a.min_lr = 0.0;
    s = sched(&a);
    assert_true(mc_lr_at(&s, 34) == 7e-4);
    assert_true(mc_lr_at(&s, 34) != 7e-4 * pow(34, 0.5) / pow(34, 0.5));

    a = base_args("inverse-square-root");
    a.global_batch_size = 4;
    a.lr_warmup_iters = 1;
    a.min_lr = 3e-4;                            /* max(min_lr, lr) clamps */
    s = sched(&a);
    assert_true(mc_lr_at(&s, 100) == 3e-4);

    a = base_args("inverse-square-root");
    a.lr_warmup_iters = 0;                      /* warmup 0: max(warmup, 1) = 1, max(n, 1) */
    a.min_lr = 0.0;
    s = sched(&a);
    assert_true(mc_lr_at(&s, 0) == 1e-3);
    assert_true(mc_lr_at(&s, 1) == 1e-3);
    assert_close(mc_lr_at(&s, 25), 2e-4);
}

/* The scheduler advances by the global batch after each successful update, and the value read
 * after the step is what iteration i logs: lr(i*gbs). The first update used lr(0). */
static void test_logged_lr_is_lr_of_i_times_gbs(void **state)
{
    (void)state;
    mc_args_t a = base_args("cosine");
    mc_lr_sched_t s = sched(&a);
    const int64_t gbs = a.global_batch_size;
    assert_true(mc_lr_at(&s, s.num_steps) == 0.0); /* used by iteration 1 */
    for (int64_t i = 1; i <= 120; i++) {
        double used = mc_lr_at(&s, s.num_steps);
        assert_true(used == mc_lr_at(&s, (i - 1) * gbs)); /* iteration i used lr((i-1)*gbs) */
        mc_lr_sched_step(&s, gbs);
        assert_int_equal(s.num_steps, i * gbs);
        double logged = mc_lr_at(&s, s.num_steps);
        assert_true(logged == mc_lr_at(&s, i * gbs));
    }
    /* iteration 5 logs lr(40) = 5e-4; iteration 10 logs lr(80) = max */
    assert_close(mc_lr_at(&s, 5 * gbs), 5e-4);
    assert_true(mc_lr_at(&s, 10 * gbs) == 1e-3);

    /* A skipped update does not step: the next iteration reuses the same lr. */
    mc_lr_sched_t t = sched(&a);
    mc_lr_sched_step(&t, gbs);
    mc_lr_sched_step(&t, 0);
    assert_int_equal(t.num_steps, gbs);
}

/* --decoupled-lr: get_lr(param_group) with the group's max_lr and min_lr (--decoupled-min-lr,
 * else --min-lr), the scheduler's warmup and decay; the other group keeps --lr's. Warmup 80 and
 * decay 800 samples: at 40 half the max, at 440 the cosine's midpoint. */
static void test_decoupled_group(void **state)
{
    (void)state;
    mc_args_t a = base_args("cosine");
    a.decoupled_lr = -1;
    a.decoupled_min_lr = -1;
    mc_lr_sched_t s = sched(&a);
    assert_true(mc_decoupled_lr_at(&s, 40) < 0); /* no decoupled group */
    a.decoupled_lr = 5e-3;
    s = sched(&a);
    assert_close(mc_decoupled_lr_at(&s, 40), 2.5e-3);
    assert_close(mc_lr_at(&s, 40), 0.5e-3);
    assert_close(mc_decoupled_lr_at(&s, 440), 1e-4 + 0.5 * (5e-3 - 1e-4));
    assert_true(mc_decoupled_lr_at(&s, 801) == 1e-4);
    a.decoupled_min_lr = 2e-4;
    s = sched(&a);
    assert_close(mc_decoupled_lr_at(&s, 440), 2e-4 + 0.5 * (5e-3 - 2e-4));
    assert_true(mc_decoupled_lr_at(&s, 801) == 2e-4);
    assert_close(mc_lr_at(&s, 440), 1e-4 + 0.5 * (1e-3 - 1e-4));
}

static void test_weight_decay(void **state)
{
    (void)state;
    mc_args_t a = base_args("cosine");
    mc_lr_sched_t s = sched(&a);
    assert_int_equal(s.wd_incr_style, MC_WD_CONSTANT);
    assert_true(s.start_wd == 0.1 && s.end_wd == 0.1);
    assert_true(mc_wd_at(&s, 0) == 0.1);
    assert_true(mc_wd_at(&s, 400) == 0.1);
    assert_true(mc_wd_at(&s, 10000) == 0.1);

    snprintf(a.weight_decay_incr_style, sizeof(a.weight_decay_incr_style), "linear");
    a.start_weight_decay = 0.01;
    a.end_weight_decay = 0.1;
    a.start_weight_decay_set = a.end_weight_decay_set = true;
    s = sched(&a);
    assert_int_equal(s.wd_incr_style, MC_WD_LINEAR);
    assert_true(mc_wd_at(&s, 0) == 0.01);
    assert_close(mc_wd_at(&s, 200), 0.01 + 0.25 * 0.09);
    assert_bits(mc_wd_at(&s, 200), 0x1.0a3d70a3d70a4p-5);
    assert_close(mc_wd_at(&s, 400), 0.055);
    assert_bits(mc_wd_at(&s, 400), 0x1.c28f5c28f5c2ap-5);
    assert_bits(mc_wd_at(&s, 123), 0x1.868db8bac710dp-6);
    assert_true(mc_wd_at(&s, 800) == 0.1);      /* n == wd_incr_steps */
    assert_true(mc_wd_at(&s, 801) == 0.1);      /* beyond: end_wd */

    snprintf(a.weight_decay_incr_style, sizeof(a.weight_decay_incr_style), "cosine");
    a.start_weight_decay = 0.0;
    s = sched(&a);
    assert_int_equal(s.wd_incr_style, MC_WD_COSINE);
    assert_true(mc_wd_at(&s, 0) == 0.0);        /* cos(pi) = -1 */
    /* ratio 1/4: 0.5 * (cos(3pi/4) + 1) * 0.1 = 0.0146446609... */
    assert_close(mc_wd_at(&s, 200), 0.05 * (1.0 - sqrt(0.5)));
    assert_bits(mc_wd_at(&s, 200), 0x1.dfe051e68da40p-7);
    assert_close(mc_wd_at(&s, 400), 0.05);
    assert_bits(mc_wd_at(&s, 123), 0x1.76e0b91954e3ap-8);
    assert_true(mc_wd_at(&s, 800) == 0.1);
    assert_true(mc_wd_at(&s, 900) == 0.1);

    /* sample-based: over train_samples */
    a.train_iters = 0;
    a.lr_warmup_iters = 0;
    a.train_samples = 1000;
    s = sched(&a);
    assert_int_equal(s.wd_incr_steps, 1000);
    assert_close(mc_wd_at(&s, 500), 0.05);
}

/* Runs mc_lr_config_from_args and mc_lr_sched_init in a child and returns its exit status (-1 if
 * it did not exit). */
static int init_exit_status(const mc_args_t *a)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(99);
        mc_lr_config_t c;
        mc_lr_config_from_args(&c, a);
        mc_lr_sched_t s;
        mc_lr_sched_init(&s, &c);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_user_errors(void **state)
{
    (void)state;
    mc_args_t a = base_args("linear");
    assert_int_equal(init_exit_status(&a), 0);

    a.lr_warmup_iters = 100; /* warmup 800 == decay 800: Megatron asserts warmup < decay */
    assert_int_equal(init_exit_status(&a), 2);
    a.lr_warmup_iters = 99;
    assert_int_equal(init_exit_status(&a), 0);

    a = base_args("linear");
    a.lr_decay_iters = 5; /* decay 40 < warmup 80 */
    assert_int_equal(init_exit_status(&a), 2);

    a = base_args("linear");
    a.lr_decay_iters = -1; /* decay_steps must be > 0 */
    a.lr_warmup_iters = 0;
    assert_int_equal(init_exit_status(&a), 2);

    a = base_args("linear");
    a.lr_warmup_iters = 0;
    a.lr_warmup_fraction = 1.0; /* warmup == decay */
    assert_int_equal(init_exit_status(&a), 2);

    a = base_args("linear");
    a.train_iters = 0; /* neither train_iters nor train_samples */
    assert_int_equal(init_exit_status(&a), 2);

    a = base_args("linear");
    a.min_lr = 2e-3; /* max_lr >= min_lr */
    assert_int_equal(init_exit_status(&a), 2);

    a = base_args("linear");
    a.min_lr = -1e-5; /* min_lr >= 0 */
    assert_int_equal(init_exit_status(&a), 2);

    a = base_args("linear");
    a.lr_warmup_init = 2e-3; /* init_lr <= max_lr */
    assert_int_equal(init_exit_status(&a), 2);

    a = base_args("bogus");
    assert_int_equal(init_exit_status(&a), 2);
    a = base_args("WSD"); /* needs --lr-wsd-decay-*, which megatron-c does not have */
    assert_int_equal(init_exit_status(&a), 2);

    a = base_args("linear");
    snprintf(a.weight_decay_incr_style, sizeof(a.weight_decay_incr_style), "linear");
    assert_int_equal(init_exit_status(&a), 2); /* start/end weight decay not given */
    a.start_weight_decay = 0.1;
    a.end_weight_decay = 0.01;
    a.start_weight_decay_set = a.end_weight_decay_set = true;
    assert_int_equal(init_exit_status(&a), 2); /* end_wd >= start_wd */
    a.end_weight_decay = 0.1;
    assert_int_equal(init_exit_status(&a), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units_iteration_based),
        cmocka_unit_test(test_units_sample_based),
        cmocka_unit_test(test_units_warmup_fraction),
        cmocka_unit_test(test_warmup),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_cosine),
        cmocka_unit_test(test_constant),
        cmocka_unit_test(test_inverse_sqrt),
        cmocka_unit_test(test_logged_lr_is_lr_of_i_times_gbs),
        cmocka_unit_test(test_decoupled_group),
        cmocka_unit_test(test_weight_decay),
        cmocka_unit_test(test_user_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
