/* --test-mode's comparison (train/realtime_test.h, Megatron's run_realtime_tests): a gathered
 * buffer of every rank's q/k layernorm tensors, equal or with one element changed on one rank,
 * and the norm of the difference Megatron prints (torch.norm(src - tgt)). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "train/realtime_test.h"

enum { RANKS = 3, N = 2, LEN = 4 };
static const long NUMEL[N] = {LEN, LEN};
static const char *const NAMES[N] = {"decoder.layers.0.self_attention.q_layernorm.weight",
                                     "decoder.layers.0.self_attention.k_layernorm.weight"};

static void fill(float *all)
{
    for (int r = 0; r < RANKS; r++)
        for (int i = 0; i < N * LEN; i++) all[r * N * LEN + i] = 1.0f + 0.25f * (float)i;
}

static int compare(const float *all, int me)
{
    return mc_realtime_compare((const unsigned char *)all, sizeof(float) * N * LEN, RANKS, me, N,
                               NUMEL, NAMES, MC_DT_F32, "DP");
}

static void test_equal(void **state)
{
    (void)state;
    float all[RANKS * N * LEN];
    fill(all);
    for (int me = 0; me < RANKS; me++) assert_int_equal(compare(all, me), 0);
}

/* Rank 2's k_layernorm weight has one element off by 3 and one by 4: the norm is 5. Rank 2
 * differs from both others; ranks 0 and 1 each from rank 2 only; the q tensor agrees. */
static void test_planted(void **state)
{
    (void)state;
    float all[RANKS * N * LEN];
    fill(all);
    all[2 * N * LEN + LEN + 1] += 3.0f;
    all[2 * N * LEN + LEN + 3] -= 4.0f;
    assert_int_equal(compare(all, 0), 1);
    assert_int_equal(compare(all, 1), 1);
    assert_int_equal(compare(all, 2), 2);
    /* a bit that changes nothing numerically still differs: -0.0 against 0.0 */
    fill(all);
    all[0] = 0.0f;
    all[N * LEN] = -0.0f;
    all[2 * N * LEN] = 0.0f;
    assert_int_equal(compare(all, 1), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal),
        cmocka_unit_test(test_planted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
