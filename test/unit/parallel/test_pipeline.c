/* Activation slots of the pipeline executor (parallel/pipeline.c): how many microbatches each
 * model chunk keeps in flight under its schedule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "parallel/pipeline.h"
#include "test/unit/schedule_check.h"

static int slots_of(mc_pp_config_t c, int *s)
{
    char err[256];
    int rc = mc_pipeline_slots(&c, s, err, sizeof(err));
    if (rc) printf("# %s\n", err);
    return rc;
}

/* 1F1B: stage r keeps min(pp - r, M) forwards for their backwards (Megatron's in-flight count);
 * a stage that receives its input holds one more slot when the next input arrives during the
 * current backward (the receive and the gradient send share one batch). */
static void test_1f1b(void **state)
{
    (void)state;
    int s[MC_SLOT_GROUPS];
    for (int pp = 1; pp <= 6; pp++)
        for (int r = 0; r < pp; r++)
            for (int M = 1; M <= 12; M++) {
                mc_pp_config_t c = {.pp_rank = r, .pp_size = pp, .vpp = 1, .num_microbatches = M};
                assert_int_equal(slots_of(c, s), 0);
                int want = (pp - r < M ? pp - r : M) + (r > 0 && M > pp - r ? 1 : 0);
                const int g = r == pp - 1; /* the last stage's chunk has the loss */
                if (s[g] != want) printf("# pp %d rank %d M %d: %d slots, want %d\n", pp, r, M, s[g], want);
                assert_int_equal(s[g], want);
                assert_int_equal(s[1 - g], 0);
            }
}

/* Interleaved and forward-only schedules: the slots cover what the schedule keeps for its
 * backwards, and no group needs more than that plus an input received one step ahead. (The two
 * groups peak at different times, so their sum can exceed the simultaneous peak.) */
static void test_bounds(void **state)
{
    (void)state;
    int s[MC_SLOT_GROUPS];
    for (int pp = 2; pp <= 4; pp++)
        for (int vpp = 1; vpp <= 3; vpp++)
            for (int M = pp; M <= 12; M += pp)
                for (int fo = 0; fo < 2; fo++)
                    for (int r = 0; r < pp; r++) {
                        mc_pp_config_t c = {.pp_rank = r, .pp_size = pp, .vpp = vpp,
                                            .num_microbatches = M, .overlap_p2p_comm = vpp > 1,
                                            .forward_only = fo};
                        assert_int_equal(slots_of(c, s), 0);
                        const int sum = s[0] + s[1], in_flight = mc_pp_max_inflight(&c);
                        assert_int_equal(s[1] > 0, r == pp - 1); /* the loss: last rank only */
                        assert_true(s[0] > 0 || (vpp == 1 && r == pp - 1));
                        if (fo) {
                            assert_true(s[0] <= 2 && s[1] <= 2);
                        } else {
                            assert_true(sum >= in_flight);
                            assert_true(s[0] <= in_flight + 1 && s[1] <= in_flight + 1);
                        }
                    }
}

/* A configuration the schedule refuses is an error here too. */
static void test_invalid(void **state)
{
    (void)state;
    int s[2];
    char err[256];
    mc_pp_config_t c = {.pp_rank = 0, .pp_size = 4, .vpp = 2, .num_microbatches = 6,
                        .overlap_p2p_comm = true};
    assert_int_equal(mc_pipeline_slots(&c, s, err, sizeof(err)), -1);
    printf("# %s\n", err);
    assert_non_null(strstr(err, "micro-batches"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_1f1b),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
