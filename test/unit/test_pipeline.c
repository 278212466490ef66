/* Activation slots of the pipeline executor (parallel/pipeline.c): how many microbatches each
 * model chunk keeps in flight under its schedule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "parallel/pipeline.h"

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
    int s[1];
    for (int pp = 1; pp <= 6; pp++)
        for (int r = 0; r < pp; r++)
            for (int M = 1; M <= 12; M++) {
                mc_pp_config_t c = {.pp_rank = r, .pp_size = pp, .vpp = 1, .num_microbatches = M};
                assert_int_equal(slots_of(c, s), 0);
                int want = (pp - r < M ? pp - r : M) + (r > 0 && M > pp - r ? 1 : 0);
                if (s[0] != want) printf("# pp %d rank %d M %d: %d slots, want %d\n", pp, r, M, s[0], want);
                assert_int_equal(s[0], want);
            }
}

/* Interleaved and forward-only schedules: every chunk has a slot, the slots together cover what
 * the schedule keeps for its backwards, and no chunk needs more than that plus the input received
 * one step ahead. (Each chunk's ring is sized for its own peak, so with interleaving the sum can
 * exceed the simultaneous peak: pp 4, vpp 2, M 8, rank 2 has 8 + 4 slots for 7 in flight.) */
static void test_bounds(void **state)
{
    (void)state;
    int s[4];
    for (int pp = 2; pp <= 4; pp++)
        for (int vpp = 1; vpp <= 3; vpp++)
            for (int M = pp; M <= 12; M += pp)
                for (int fo = 0; fo < 2; fo++)
                    for (int r = 0; r < pp; r++) {
                        mc_pp_config_t c = {.pp_rank = r, .pp_size = pp, .vpp = vpp,
                                            .num_microbatches = M, .overlap_p2p_comm = vpp > 1,
                                            .forward_only = fo};
                        assert_int_equal(slots_of(c, s), 0);
                        int sum = 0;
                        for (int k = 0; k < vpp; k++) {
                            assert_true(s[k] >= 1);
                            if (!fo) assert_true(s[k] <= mc_pp_max_inflight(&c) + 1);
                            sum += s[k];
                        }
                        if (fo) {
                            for (int k = 0; k < vpp; k++) assert_true(s[k] <= 2);
                        } else {
                            assert_true(sum >= mc_pp_max_inflight(&c));
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
