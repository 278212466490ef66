/* Context parallelism's chunks (config/cp_layout.h) against Megatron's get_batch_on_this_cp_rank
 * (core/utils.py): each [b, S] tensor viewed as [b, 2cp, S/(2cp)], chunks r and 2cp-1-r kept, in
 * that order, as [b, S/cp]; the positions rank r's rows stand for; the comm type names. The
 * equivalence runs of test_cp.sh cannot see another partition used consistently, this can. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "config/cp_layout.h"

enum { B = 3, S = 24 };

/* Megatron's index: the column of the whole row that rank r's column k holds. */
static int megatron_col(int cp, int r, int k)
{
    const int C = S / (2 * cp);
    return k < C ? r * C + k : (2 * cp - 1 - r) * C + (k - C);
}

static void check_rank(int cp, int r, int seen[B][S])
{
    int32_t tok[B * S], lab[B * S], pos[B * S];
    float mask[B * S];
    for (int i = 0; i < B; i++)
        for (int j = 0; j < S; j++) {
            tok[i * S + j] = 1000 * i + j;
            lab[i * S + j] = 1000 * i + j + 1;
            pos[i * S + j] = j;
            mask[i * S + j] = (float)(j % 3);
        }
    mc_cp_batch_on_this_rank(tok, lab, mask, pos, B, S, cp, r);
    const int L = S / cp;
    for (int i = 0; i < B; i++)
        for (int k = 0; k < L; k++) {
            const int j = megatron_col(cp, r, k);
            assert_int_equal(tok[i * L + k], 1000 * i + j);
            assert_int_equal(lab[i * L + k], 1000 * i + j + 1);
            assert_int_equal(pos[i * L + k], j);
            assert_true(mask[i * L + k] == (float)(j % 3));
            assert_int_equal(mc_cp_position(S, cp, r, k), j);
            seen[i][j]++;
        }
}

/* Every rank at cp 2, 3 and 4 (S = 24 is a multiple of 2cp for each): Megatron's columns, and
 * together every position exactly once. */
static void test_chunks_as_megatron(void **state)
{
    (void)state;
    const int cps[] = {2, 3, 4};
    for (size_t c = 0; c < sizeof(cps) / sizeof(cps[0]); c++) {
        int seen[B][S];
        memset(seen, 0, sizeof(seen));
        for (int r = 0; r < cps[c]; r++) check_rank(cps[c], r, seen);
        for (int i = 0; i < B; i++)
            for (int j = 0; j < S; j++) assert_int_equal(seen[i][j], 1);
    }
}

/* cp 1 keeps the batch as it is; NULL arrays are left out. */
static void test_cp1_and_null(void **state)
{
    (void)state;
    int32_t tok[S];
    for (int j = 0; j < S; j++) tok[j] = j;
    mc_cp_batch_on_this_rank(tok, NULL, NULL, NULL, 1, S, 1, 0);
    for (int j = 0; j < S; j++) assert_int_equal(tok[j], j);
    mc_cp_batch_on_this_rank(tok, NULL, NULL, NULL, 1, S, 2, 1);
    for (int k = 0; k < S / 2; k++) assert_int_equal(tok[k], megatron_col(2, 1, k));
    for (int k = 0; k < 5; k++) assert_int_equal(mc_cp_position(S, 1, 0, k), k);
}

/* Transformer Engine's names, and Megatron's help's "allgather" as all_gather. */
static void test_comm_names(void **state)
{
    (void)state;
    assert_int_equal(mc_cp_comm_parse("p2p"), MC_CP_P2P);
    assert_int_equal(mc_cp_comm_parse("a2a"), MC_CP_A2A);
    assert_int_equal(mc_cp_comm_parse("all_gather"), MC_CP_ALLGATHER);
    assert_int_equal(mc_cp_comm_parse("allgather"), MC_CP_ALLGATHER);
    assert_int_equal(mc_cp_comm_parse("a2a+p2p"), MC_CP_A2A_P2P);
    assert_int_equal(mc_cp_comm_parse("ring"), -1);
    assert_string_equal(mc_cp_comm_name(MC_CP_ALLGATHER), "all_gather");
    assert_string_equal(mc_cp_comm_name(MC_CP_A2A_P2P), "a2a+p2p");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunks_as_megatron),
        cmocka_unit_test(test_cp1_and_null),
        cmocka_unit_test(test_comm_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
