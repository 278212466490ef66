/* --step-batch-size-schedule (config/microbatches.h) against Megatron main's
 * StepBatchsizeNumMicroBatchesCalculator (megatron/core/num_microbatches_calculator.py at
 * d98e8a6): the values in the tables are what that class gives for the same schedule,
 * seq_length, micro batch size and dp (its _parse_schedule, update and get, and
 * training.update_train_iters' loop), run once by hand with CPython. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "config/microbatches.h"

static mc_args_t g_args; /* the calculator points into its schedule */

static void make(mc_microbatches_t *c, const char *sched, int seq, int mbs, int dp)
{
    memset(&g_args, 0, sizeof(g_args));
    char err[512] = "";
    int rc = mc_batch_schedule_parse(sched, seq, g_args.batch_schedule_samples,
                                     g_args.batch_schedule_size, MC_MAX_BATCH_SCHEDULE,
                                     &g_args.n_batch_schedule, err, sizeof(err));
    if (rc != 0) fail_msg("%s: %s", sched, err);
    g_args.micro_batch_size = mbs;
    g_args.data_parallel_size = dp;
    g_args.seq_length = seq;
    assert_int_equal(mc_microbatches_init(c, &g_args, err, sizeof(err)), 0);
}

typedef struct {
    const char *sched;
    int seq, mbs, dp;
    int n;                /* parsed entries */
    int64_t samples[6];   /* the parsed thresholds, in samples */
    int64_t consumed[8];  /* update(consumed) ... */
    int gbs[8], micro[8]; /* ... gives get_current_global_batch_size() and get() */
} case_t;

static const case_t CASES[] = {
    /* examples/gpt3/train_gpt3_175b_distributed.sh's schedule, seq 2048, mbs 1, dp 8 */
    {"0:16 2.4B:320 4.8B:624 7.2B:928 9.6B:1232 12B:1536",
     2048,
     1,
     8,
     6,
     {0, 1171875, 2343750, 3515625, 4687500, 5859375},
     {0, 1171874, 1171875, 1171876, 2343750, 5859375, 1000000000, 1},
     {16, 16, 320, 320, 624, 1536, 1536, 16},
     {2, 2, 40, 40, 78, 192, 192, 2}},
    /* gpt3_15b_8t_release's, seq 4096, dp 64 */
    {"0:384 200B:768 400B:1152",
     4096,
     1,
     64,
     3,
     {0, 48828125, 97656250},
     {0, 48828124, 48828125, 97656250, 97656249, 0, 0, 0},
     {384, 384, 768, 1152, 768, 384, 384, 384},
     {6, 6, 12, 18, 12, 6, 6, 6}},
    /* commas, blanks, lower-case and fractional suffixes, entries out of order: sorted */
    {" 1k:8,0:4  2.5K:16 ",
     32,
     2,
     1,
     3,
     {0, 31, 78},
     {0, 31, 32, 77, 78, 1000, 30, 0},
     {4, 8, 8, 8, 16, 16, 4, 4},
     {2, 4, 4, 4, 8, 8, 2, 2}},
    /* a threshold below seq_length tokens is 0 samples */
    {"16:16 96:8 64:6",
     32,
     1,
     1,
     3,
     {0, 2, 3},
     {0, 1, 2, 3, 4, 0, 0, 0},
     {16, 16, 6, 8, 8, 16, 16, 16},
     {16, 16, 6, 8, 8, 16, 16, 16}},
};

static void test_table(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof(CASES) / sizeof(CASES[0]); k++) {
        const case_t *t = &CASES[k];
        mc_microbatches_t c;
        make(&c, t->sched, t->seq, t->mbs, t->dp);
        assert_int_equal(g_args.n_batch_schedule, t->n);
        for (int i = 0; i < t->n; i++)
            assert_int_equal(g_args.batch_schedule_samples[i], t->samples[i]);
        assert_int_equal(c.global_batch_size, g_args.batch_schedule_size[t->n - 1]);
        for (int i = 0; i < 8; i++) {
            mc_microbatches_update(&c, t->consumed[i]);
            assert_int_equal(c.current_global_batch_size, t->gbs[i]);
            assert_int_equal(c.num_microbatches, t->micro[i]);
        }
    }
}

/* update_train_iters: iterations while consumed < train_samples, each its own batch; and the
 * consumed samples before an iteration (the loop's and inspect-data's seek). */
static void test_train_iters_and_seek(void **state)
{
    (void)state;
    mc_microbatches_t c;
    make(&c, "0:4 96:8 192:16", 32, 2, 1);                    /* samples 0:4 3:8 6:16 */
    assert_int_equal(mc_microbatches_train_iters(&c, 40), 4); /* 0 4 12 28 -> 44 */
    assert_int_equal(mc_microbatches_train_iters(&c, 12), 2); /* 0 4 -> 12 */
    assert_int_equal(mc_microbatches_train_iters(&c, 13), 3);
    assert_int_equal(mc_microbatches_seek(&c, 0), 0);
    assert_int_equal(c.current_global_batch_size, 4);
    assert_int_equal(mc_microbatches_seek(&c, 2), 12);
    assert_int_equal(c.current_global_batch_size, 16);
    assert_int_equal(mc_microbatches_seek(&c, 3), 28);
}

static void expect_bad(const char *sched, const char *words)
{
    int64_t s[MC_MAX_BATCH_SCHEDULE];
    int b[MC_MAX_BATCH_SCHEDULE], n;
    char err[512] = "";
    assert_int_equal(
        mc_batch_schedule_parse(sched, 32, s, b, MC_MAX_BATCH_SCHEDULE, &n, err, sizeof(err)), -1);
    if (!strstr(err, words) || strncmp(err, "--step-batch-size-schedule: ", 28) != 0)
        fail_msg("\"%s\": got \"%s\", expected \"%s\"", sched, err, words);
}

/* What Megatron's constructor refuses (ValueError, AssertionError, OverflowError). */
static void test_bad_schedules(void **state)
{
    (void)state;
    expect_bad("", "at least one entry");
    expect_bad("  , ", "at least one entry");
    expect_bad("0:16 x", "invalid schedule entry \"x\"");
    expect_bad("a:16", "invalid number");
    expect_bad("0:16 0x10:32", "invalid number");
    expect_bad("0:16 inf:32", "invalid number");
    expect_bad("0:16 1K:", "invalid number");
    expect_bad("64:16", "threshold 0, got 2 samples");
    expect_bad("0:16 10:32", "strictly increasing, got 0 before 0");
    expect_bad("0:16 64:32 64:48", "strictly increasing, got 2 before 2");
    expect_bad("0:0", "batch size must be positive, got 0");
    expect_bad("0:16 1K:-8", "batch size must be positive, got -8");
}

/* The loop's consistency check (update(consistency_check=True)) and setup's assertion. */
static void test_check(void **state)
{
    (void)state;
    mc_microbatches_t c;
    char err[512];
    make(&c, "0:2 64:12", 32, 2, 2); /* mbs x dp 4 */
    assert_int_equal(mc_microbatches_check(&c, &g_args, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "current global batch size (2) is too small"));
    mc_microbatches_update(&c, 2);
    assert_int_equal(mc_microbatches_check(&c, &g_args, err, sizeof(err)), 0);
    make(&c, "0:4 64:6", 32, 2, 2);
    mc_microbatches_update(&c, 2);
    assert_int_equal(mc_microbatches_check(&c, &g_args, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "current global batch size (6) is not divisible by "
                                "micro_batch_size (2) * data_parallel_size (2)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_train_iters_and_seek),
        cmocka_unit_test(test_bad_schedules),
        cmocka_unit_test(test_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
