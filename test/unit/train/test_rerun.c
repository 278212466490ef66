/* Megatron's rerun state machine (train/rerun.h), driven as train_step drives it: the states,
 * the exit codes and checkpoint requests of each outcome, the error injector, the spiky-loss
 * rule, report_stats, and the words of the messages. Expected texts of QuickStats were made by
 * Megatron main's QuickStats class run in CPython. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/args.h"
#include "train/rerun.h"

static char *g_out;
static size_t g_out_len;
static FILE *g_stream;

/* another rank's flags, added by the world's reduction */
static double g_other[4];

static void reduce(void *ctx, double *v, int n, bool max)
{
    (void)ctx;
    for (int i = 0; i < n && i < 4; i++) v[i] = max ? fmax(v[i], g_other[i]) : v[i] + g_other[i];
}

static void start_checks(mc_rerun_t *r, const char *mode, int64_t rate, const char *type,
                         bool nan_check, bool spiky)
{
    mc_args_t a;
    memset(&a, 0, sizeof(a));
    snprintf(a.rerun_mode, sizeof(a.rerun_mode), "%s", mode);
    snprintf(a.error_injection_type, sizeof(a.error_injection_type), "%s", type);
    a.error_injection_rate = rate;
    a.check_for_nan_in_loss_and_grad = nan_check;
    a.check_for_spiky_loss = spiky;
    a.seed = 1234;
    memset(g_other, 0, sizeof(g_other));
    g_stream = open_memstream(&g_out, &g_out_len);
    mc_rerun_init(r, &a, 0, 0, true, g_stream);
    r->reduce = reduce;
}

static void start(mc_rerun_t *r, const char *mode, int64_t rate, const char *type, bool spiky)
{
    start_checks(r, mode, rate, type, true, spiky);
}

static void finish(mc_rerun_t *r)
{
    mc_rerun_free(r);
    fclose(g_stream);
    free(g_out);
    g_out = NULL;
}

static bool said(const char *line)
{
    fflush(g_stream);
    return g_out && strstr(g_out, line) != NULL;
}

/* the loss_func checks of one microbatch */
static void loss_checks(mc_rerun_t *r, double loss, bool spiky)
{
    mc_rerun_validate(r, loss, mc_rerun_is_nan, MC_RERUN_MSG_NAN, 0.0, true);
    mc_rerun_validate(r, loss, mc_rerun_is_inf, MC_RERUN_MSG_INF, 0.0, true);
    if (spiky) mc_rerun_validate(r, loss, mc_rerun_is_spiky_loss, MC_RERUN_MSG_SPIKY, 0.0, false);
}

/* One train_step: the forward-backward runs (each with its losses from next_loss), then the
 * exit decision. Returns the exit code; *runs: how often the forward-backward ran. */
static int step(mc_rerun_t *r, const double *losses, int *runs, bool *ckpt, bool spiky)
{
    *runs = 0;
    while (mc_rerun_should_run(r)) loss_checks(r, losses[(*runs)++], spiky);
    return mc_rerun_checkpoint_and_exit(r, ckpt);
}

static void test_first_iteration_not_validated(void **state)
{
    (void)state;
    mc_rerun_t r;
    start(&r, "validate_results", 1, "transient_error", false);
    assert_true(said("RerunStateMachine initialized in mode RerunMode.VALIDATE_RESULTS"));
    int runs;
    bool ckpt;
    const double nan_loss[] = {NAN};
    /* no checkpoint could be taken before the first optimizer step: no check at all */
    assert_int_equal(step(&r, nan_loss, &runs, &ckpt, false), 0);
    assert_int_equal(runs, 1);
    assert_false(said("Injecting"));
    assert_true(said("Result validation enabled"));
    finish(&r);
}

static void test_transient_fatal_exits_17(void **state)
{
    (void)state;
    mc_rerun_t r;
    start(&r, "validate_results", 1, "transient_error", false);
    int runs;
    bool ckpt;
    const double ok[] = {5.5, 5.5};
    assert_int_equal(step(&r, ok, &runs, &ckpt, false), 0);
    assert_int_equal(step(&r, ok, &runs, &ckpt, false), MC_RERUN_EXIT_FAILED_ON_RESULT_VALIDATION);
    assert_int_equal(runs, 2); /* the initial run and the re-run in place */
    assert_false(ckpt);
    assert_int_equal(r.state, MC_RERUN_RERUNNING_IN_PLACE);
    assert_true(said("Injecting error type Transient error\n"));
    assert_true(said("Unexpected result tensor(5.5000, device='cuda:0') on rank 0 at iteration #2 "
                     "invocation #1 (message='found NaN in local forward loss calculation')\n"));
    assert_true(said("Need to rerun step to check reproducibility of initial result\n"));
    assert_true(said("iteration #2: First rerun: unexpected result is not reproducible within the "
                     "tolerance (tensor(5.5000, device='cuda:0') != tensor(5.5000, "
                     "device='cuda:0'))!\n"));
    assert_true(said("iteration #2: Possible transient error!!\n"));
    assert_true(said("Exiting now. The job can be resumed from a previous checkpoint\n"));
    finish(&r);
}

static void test_persistent_fatal_checkpoints_and_exits_16(void **state)
{
    (void)state;
    mc_rerun_t r;
    start(&r, "validate_results", 1, "persistent_error", false);
    int runs;
    bool ckpt;
    const double ok[] = {5.5, 5.5};
    assert_int_equal(step(&r, ok, &runs, &ckpt, false), 0);
    assert_int_equal(step(&r, ok, &runs, &ckpt, false), MC_RERUN_EXIT_RESUME_TO_DISAMBIGUATE);
    assert_int_equal(runs, 2);
    assert_true(ckpt);
    assert_int_equal(r.state, MC_RERUN_WILL_RERUN_FROM_CHECKPOINT);
    assert_true(said("First rerun: unexpected result is reproducible within the tolerance "
                     "(tensor(5.5000, device='cuda:0') = tensor(5.5000, device='cuda:0')). Need "
                     "to rerun on a different GPU to verify correctness.!\n"));
    assert_true(said("Saving a checkpoint and exiting now. Please resume the job from the "
                     "checkpoint to rerun the last iteration and establish a diagnostic\n"));
    /* resumed with the machine's state on the same node and GPU: exit 16 again; elsewhere, the
     * persistent error does not reproduce: 17 */
    assert_true(mc_rerun_should_run(&r));
    assert_int_equal(r.state, MC_RERUN_RERUNNING_FROM_CHECKPOINT);
    loss_checks(&r, 5.5, false);
    assert_false(mc_rerun_should_run(&r));
    assert_int_equal(mc_rerun_checkpoint_and_exit(&r, &ckpt), MC_RERUN_EXIT_RESUME_TO_DISAMBIGUATE);
    assert_true(said("Got rescheduled on the same GPU. Need to resume again from the same "
                     "checkpoint (node: "));
    r.state = MC_RERUN_WILL_RERUN_FROM_CHECKPOINT, r.restart_again_requested = false;
    r.suspicious_device = 7;
    r.injected = MC_DIAG_PERSISTENT; /* maybe_miscompare consumed it before the GPU check */
    assert_true(mc_rerun_should_run(&r));
    loss_checks(&r, 5.5, false);
    assert_false(mc_rerun_should_run(&r));
    assert_int_equal(mc_rerun_checkpoint_and_exit(&r, &ckpt),
                     MC_RERUN_EXIT_FAILED_ON_RESULT_VALIDATION);
    assert_true(said("Second rerun: unexpected result is not reproducible on a different GPU, "
                     "therefore was likely incorrect (tensor(5.5000, device='cuda:0') != "
                     "tensor(5.5000, device='cuda:0'))\n"));
    assert_true(said("iteration #2: Possible persistent error!!\n"));
    finish(&r);
}

static void test_nan_reproduces_and_checkpoints(void **state)
{
    (void)state;
    mc_rerun_t r;
    start(&r, "validate_results", 0, "transient_error", false);
    int runs;
    bool ckpt;
    const double ok[] = {5.5}, nan_loss[] = {NAN, NAN};
    assert_int_equal(step(&r, ok, &runs, &ckpt, false), 0);
    assert_int_equal(step(&r, ok, &runs, &ckpt, false), 0);
    assert_int_equal(runs, 1);
    assert_int_equal(step(&r, nan_loss, &runs, &ckpt, false), MC_RERUN_EXIT_RESUME_TO_DISAMBIGUATE);
    assert_int_equal(runs, 2);
    assert_true(ckpt);
    assert_true(said("Unexpected result tensor(nan, device='cuda:0') on rank 0 at iteration #3 "
                     "invocation #1 (message='found NaN in local forward loss calculation')"));
    finish(&r);
}

static void test_not_fatal_continues(void **state)
{
    (void)state;
    for (int persistent = 0; persistent < 2; persistent++) {
        mc_rerun_t r; /* --no-check-for-nan-in-loss-and-grad --check-for-spiky-loss */
        start_checks(&r, "validate_results", 1, persistent ? "persistent_error" : "transient_error",
                     false, true);
        int runs;
        bool ckpt;
        const double ok[] = {5.5, 5.5};
        for (int it = 0; it < 3; it++) {
            runs = 0;
            while (mc_rerun_should_run(&r))
                mc_rerun_validate(&r, ok[runs++], mc_rerun_is_spiky_loss, MC_RERUN_MSG_SPIKY, 0.0,
                                  false);
            assert_int_equal(mc_rerun_checkpoint_and_exit(&r, &ckpt), 0);
            /* re-run, then on to the optimizer; a persistent injection stays pending until a
             * second re-run (from a checkpoint) that a non-fatal check never asks for, so
             * Megatron's injector injects nothing more */
            assert_int_equal(runs, it == 0 || (it == 2 && persistent) ? 1 : 2);
            assert_false(ckpt);
            assert_int_equal(r.state, MC_RERUN_NOT_RUNNING_YET);
        }
        assert_true(said("Continuing normal execution because failed validation was not fatal\n"));
        assert_true(said(persistent ? "iteration #2: First rerun: unexpected result is reproducible"
                                    : "iteration #2: Possible transient error!!"));
        finish(&r);
    }
}

static void test_other_rank_request_reruns_here(void **state)
{
    (void)state;
    mc_rerun_t r;
    start(&r, "validate_results", 0, "transient_error", false);
    int runs;
    bool ckpt;
    const double ok[] = {5.5, 5.5};
    assert_int_equal(step(&r, ok, &runs, &ckpt, false), 0);
    g_other[0] = 1; /* another rank rejected its result: this one re-runs too, and exits */
    assert_true(mc_rerun_should_run(&r));
    loss_checks(&r, 5.5, false);
    assert_true(mc_rerun_should_run(&r));
    g_other[0] = 0, g_other[1] = 1; /* that rank's result reproduced: checkpoint */
    loss_checks(&r, 5.5, false);
    assert_false(mc_rerun_should_run(&r));
    assert_int_equal(mc_rerun_checkpoint_and_exit(&r, &ckpt), MC_RERUN_EXIT_RESUME_TO_DISAMBIGUATE);
    assert_true(ckpt);
    finish(&r);
}

static void test_injection_rate(void **state)
{
    (void)state;
    mc_rerun_t r;
    start(&r, "validate_results", 4, "correct_result", false);
    int runs, reruns = 0;
    bool ckpt;
    const double ok[] = {5.5, 5.5};
    for (int i = 0; i < 200; i++) {
        const int code = step(&r, ok, &runs, &ckpt, false);
        if (runs == 2) {
            reruns++;
            assert_int_equal(code, MC_RERUN_EXIT_RESUME_TO_DISAMBIGUATE);
            r.state = MC_RERUN_NOT_RUNNING_YET, r.injected = MC_DIAG_NONE;
        }
    }
    /* about one validation in 4: each step draws once or twice (NaN, then Inf when missed) */
    assert_in_range(reruns, 60, 140);
    finish(&r);
}

static void test_spiky_loss_rule(void **state)
{
    (void)state;
    mc_rerun_t r;
    start(&r, "validate_results", 0, "transient_error", true);
    for (int i = 0; i < 99; i++) assert_false(mc_rerun_is_spiky_loss(&r, i == 50 ? -2.0 : 1.0));
    assert_false(said("Max value for loss"));
    assert_false(mc_rerun_is_spiky_loss(&r, 100.0)); /* the 100th sample: still measuring */
    assert_true(said("Max value for loss: 100.0\n"));
    assert_false(mc_rerun_is_spiky_loss(&r, 999.0));
    assert_true(mc_rerun_is_spiky_loss(&r, -1000.0));
    assert_false(mc_rerun_is_spiky_loss(&r, NAN));
    finish(&r);
}

/* disabled mode: no re-run; a rejected non-fatal result is Megatron's warning (the fatal NaN/Inf
 * checks are the step's one-line stop, train/step.c) */
static void test_disabled_warns(void **state)
{
    (void)state;
    mc_rerun_t r;
    start(&r, "disabled", 0, "transient_error", true);
    assert_false(said("RerunStateMachine initialized"));
    int runs;
    bool ckpt;
    const double one[] = {1.0}, spike[] = {20.0};
    for (int i = 0; i < 100; i++) assert_int_equal(step(&r, one, &runs, &ckpt, true), 0);
    assert_false(said("Unexpected result"));
    assert_int_equal(step(&r, spike, &runs, &ckpt, true), 0);
    assert_int_equal(runs, 1);
    assert_true(said(", device 0, iteration 101: Unexpected result tensor(20., device='cuda:0') "
                     "(message='Spiky loss')\n"));
    finish(&r);
}

static void test_report_stats(void **state)
{
    (void)state;
    mc_rerun_t r;
    start(&r, "report_stats", 0, "transient_error", false);
    assert_true(said("RerunStateMachine initialized in mode RerunMode.REPORT_DETERMINISM_STATS"));
    r.current_iteration = 0; /* train(): the loaded iteration */
    int runs;
    bool ckpt;
    const double same[] = {5.5, 5.5}, differ[] = {4.0, 5.0};
    assert_int_equal(step(&r, same, &runs, &ckpt, false), 0); /* iteration index 1: no report */
    assert_int_equal(runs, 2);
    assert_false(said("Stats on computation"));
    assert_int_equal(step(&r, differ, &runs, &ckpt, false), 0); /* index 2: report */
    assert_int_equal(runs, 2);
    assert_true(said("Stats on computation determinism in validation calls\n"
                     "  From validation call 'found NaN in local forward loss calculation':\n"
                     "    2/1 total/identical samples, rel. variability: avg= 1.111E-01, p50= "
                     "2.222E-01, p90= 2.222E-01, p99= 2.222E-01, p99.9= 2.222E-01, max: "
                     "2.222E-01\n"
                     "  From validation call 'found Inf in local forward loss calculation':\n"));
    finish(&r);
}

static void test_stats_text(void **state)
{
    (void)state;
    char buf[256];
    mc_rerun_stats_t s = {0};
    s.samples = malloc(2 * sizeof(double));
    s.samples[0] = 0.5, s.samples[1] = 0.25, s.n = 2, s.cap = 2, s.zero_cnt = 1, s.max = 0.5;
    mc_rerun_stats_text(&s, buf, sizeof(buf));
    assert_string_equal(buf, "3/1 total/identical samples, rel. variability: avg= 2.500E-01, "
                             "p50= 2.500E-01, p90= 5.000E-01, p99= 5.000E-01, p99.9= 5.000E-01, "
                             "max: 5.000E-01");
    free(s.samples);
    mc_rerun_stats_t z = {.zero_cnt = 1234};
    mc_rerun_stats_text(&z, buf, sizeof(buf));
    assert_string_equal(buf, "1,234 samples, all identical");
}

static void test_compare_and_tensor_text(void **state)
{
    (void)state;
    assert_true(mc_rerun_compare(1.0, 1.0) == 0.0);
    assert_true(mc_rerun_compare(NAN, NAN) == 0.0);
    assert_true(isinf(mc_rerun_compare(NAN, 1.0)));
    assert_true(isinf(mc_rerun_compare(1.0, INFINITY)));
    assert_true(mc_rerun_compare(1.0, 3.0) == 1.0);
    char b[64];
    mc_rerun_format_tensor(b, sizeof(b), 5.54523, 0, true);
    assert_string_equal(b, "tensor(5.5452, device='cuda:0')");
    mc_rerun_format_tensor(b, sizeof(b), 3.0, 1, true);
    assert_string_equal(b, "tensor(3., device='cuda:1')");
    mc_rerun_format_tensor(b, sizeof(b), INFINITY, 0, false);
    assert_string_equal(b, "tensor(inf)");
    mc_rerun_format_tensor(b, sizeof(b), 1e-5, 0, false);
    assert_string_equal(b, "tensor(1.0000e-05)");
    mc_rerun_format_tensor(b, sizeof(b), 0.0, 0, false);
    assert_string_equal(b, "tensor(0.)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_iteration_not_validated),
        cmocka_unit_test(test_transient_fatal_exits_17),
        cmocka_unit_test(test_persistent_fatal_checkpoints_and_exits_16),
        cmocka_unit_test(test_nan_reproduces_and_checkpoints),
        cmocka_unit_test(test_not_fatal_continues),
        cmocka_unit_test(test_other_rank_request_reruns_here),
        cmocka_unit_test(test_injection_rate),
        cmocka_unit_test(test_spiky_loss_rule),
        cmocka_unit_test(test_disabled_warns),
        cmocka_unit_test(test_report_stats),
        cmocka_unit_test(test_stats_text),
        cmocka_unit_test(test_compare_and_tensor_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
