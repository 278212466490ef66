/* Pipeline schedules and layer placement (MEGATRON.md sections 3.2 and 5; parallel/schedule.h).
 * The exact sequences below were traced by hand through Megatron-LM's schedules.py. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/schedule.h"
#include "test/unit/schedule_check.h"

static mc_pp_config_t cfg(int pp, int vpp, int M, int G, bool overlap, bool fwd_only)
{
    return (mc_pp_config_t){.pp_rank = 0, .pp_size = pp, .vpp = vpp, .num_microbatches = M,
                            .group_size = G, .overlap_p2p_comm = overlap,
                            .forward_only = fwd_only};
}

/* The text form of rank's list must be `want`. */
static void expect_seq(mc_pp_config_t c, int rank, const char *want)
{
    mc_pp_action_t *a = NULL;
    int n = -1;
    char err[512], buf[8192];
    c.pp_rank = rank;
    assert_int_equal(mc_pp_schedule(&c, &a, &n, err, sizeof err), 0);
    assert_true(mc_pp_format(a, n, buf, sizeof buf) < (int)sizeof buf);
    if (strcmp(buf, want))
        print_error("rank %d\n got: %s\nwant: %s\n", rank, buf, want);
    assert_string_equal(buf, want);
    free(a);
}

static void expect_error(mc_pp_config_t c, const char *want)
{
    mc_pp_action_t *a = (mc_pp_action_t *)&c; /* must be reset to NULL */
    int n = -1;
    char err[512];
    assert_int_equal(mc_pp_validate(&c, err, sizeof err), -1);
    assert_string_equal(err, want);
    err[0] = '\0';
    assert_int_equal(mc_pp_schedule(&c, &a, &n, err, sizeof err), -1);
    assert_string_equal(err, want);
    assert_null(a);
    assert_int_equal(n, 0);
}

static void sim_ok(mc_pp_config_t c, int *inflight)
{
    char err[512];
    if (mc_pp_simulate(&c, inflight, err, sizeof err))
        print_error("pp %d vpp %d M %d G %d overlap %d fwd_only %d: %s\n", c.pp_size, c.vpp,
                    c.num_microbatches, c.group_size, c.overlap_p2p_comm, c.forward_only, err);
    assert_int_equal(mc_pp_simulate(&c, inflight, err, sizeof err), 0);
}

/* The executor's communicator completes batches in order, so a compute's own collective may
 * wait behind a pending asynchronous batch: every list must also complete with all of its
 * batches synchronous (parallel/pipeline.h). */
static void sim_sync_ok(mc_pp_config_t c)
{
    mc_pp_action_t *lists[8];
    int n[8];
    char err[512];
    assert_true(c.pp_size <= 8);
    for (int r = 0; r < c.pp_size; r++) {
        mc_pp_config_t rc = c;
        rc.pp_rank = r;
        assert_int_equal(mc_pp_schedule(&rc, &lists[r], &n[r], err, sizeof err), 0);
        for (int i = 0; i < n[r]; i++) lists[r][i].async = false;
    }
    const int rc = mc_pp_simulate_lists(&c, lists, n, NULL, err, sizeof err);
    if (rc)
        print_error("all synchronous: pp %d vpp %d M %d G %d overlap %d flush %d: %s\n",
                    c.pp_size, c.vpp, c.num_microbatches, c.group_size, c.overlap_p2p_comm,
                    c.overlap_warmup_flush, err);
    for (int r = 0; r < c.pp_size; r++) free(lists[r]);
    assert_int_equal(rc, 0);
}

/* ---- tables and counts ---------------------------------------------------------------------- */

static void test_table_spec_example(void **state)
{
    /* MEGATRON.md 5.2: pp=2, vpp=2, M=4 (G = pp) */
    int mb[8], ch[8];
    const int want_mb[8] = {0, 1, 0, 1, 2, 3, 2, 3}, want_ch[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    mc_pp_table(4, 2, 2, mb, ch);
    for (int k = 0; k < 8; k++) {
        assert_int_equal(mb[k], want_mb[k]);
        assert_int_equal(ch[k], want_ch[k]);
    }
    /* The comment in schedules.py: PP2 N3 M5 VP2 */
    int mb2[10], ch2[10];
    const int w_mb2[10] = {0, 1, 2, 0, 1, 2, 3, 4, 3, 4}, w_ch2[10] = {0, 0, 0, 1, 1, 1, 0, 0, 1, 1};
    mc_pp_table(5, 2, 3, mb2, ch2);
    for (int k = 0; k < 10; k++) {
        assert_int_equal(mb2[k], w_mb2[k]);
        assert_int_equal(ch2[k], w_ch2[k]);
    }
}

static void test_table_old_formula(void **state)
{
    /* With G = pp and M % pp == 0 the table is the old closed form (MEGATRON.md 5.2). */
    for (int pp = 1; pp <= 4; pp++)
        for (int vpp = 1; vpp <= 3; vpp++)
            for (int M = pp; M <= 12; M += pp) {
                int mb[64], ch[64];
                mc_pp_table(M, vpp, pp, mb, ch);
                for (int k = 0; k < M * vpp; k++) {
                    assert_int_equal(ch[k], (k % (pp * vpp)) / pp);
                    assert_int_equal(mb[k], (k / (pp * vpp)) * pp + k % pp);
                }
            }
}

static void test_table_group_size(void **state)
{
    /* pp=2, vpp=2, M=6, G=3; and a remainder block: M=7, G=3 (blocks 3, 3, 1) */
    int mb[14], ch[14];
    const int w_mb[12] = {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5};
    const int w_ch[12] = {0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1};
    mc_pp_table(6, 2, 3, mb, ch);
    for (int k = 0; k < 12; k++) {
        assert_int_equal(mb[k], w_mb[k]);
        assert_int_equal(ch[k], w_ch[k]);
    }
    /* the last block (6) starts at 6 and 6 + 3 >= 7 takes the remainder */
    const int w_mb7[14] = {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 6};
    const int w_ch7[14] = {0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 1};
    mc_pp_table(7, 2, 3, mb, ch);
    for (int k = 0; k < 14; k++) {
        assert_int_equal(mb[k], w_mb7[k]);
        assert_int_equal(ch[k], w_ch7[k]);
    }
}

static int warmup(mc_pp_config_t c, int rank)
{
    c.pp_rank = rank;
    return mc_pp_warmup(&c);
}

static void test_warmup_interleaved(void **state)
{
    mc_pp_config_t c = cfg(2, 2, 4, 0, true, false);
    assert_int_equal(mc_pp_group_size(&c), 2);
    assert_int_equal(mc_pp_total(&c), 8);
    assert_int_equal(warmup(c, 0), 4); /* 1*2 + 1*2 */
    assert_int_equal(warmup(c, 1), 2); /* 0 + 2 */
    /* G enters through (vpp-1)*G: pp=2, vpp=2, M=6, G=3 */
    c = cfg(2, 2, 6, 3, true, false);
    assert_int_equal(warmup(c, 0), 5);
    assert_int_equal(warmup(c, 1), 3);
    /* capped at the total: pp=4, vpp=2, M=4 -> rank 0 wants 6 + 4 = 10 of 8 */
    c = cfg(4, 2, 4, 0, true, false);
    assert_int_equal(warmup(c, 0), 8);
    assert_int_equal(warmup(c, 1), 8);
    assert_int_equal(warmup(c, 2), 6);
    assert_int_equal(warmup(c, 3), 4);
    /* pp=3, vpp=3, M=6: (2-r)*2 + 2*3 */
    c = cfg(3, 3, 6, 0, false, false);
    assert_int_equal(warmup(c, 0), 10);
    assert_int_equal(warmup(c, 1), 8);
    assert_int_equal(warmup(c, 2), 6);
    /* forward only: everything is warmup */
    c = cfg(3, 2, 6, 0, false, true);
    for (int r = 0; r < 3; r++)
        assert_int_equal(warmup(c, r), 12);
}

static void test_warmup_1f1b(void **state)
{
    mc_pp_config_t c = cfg(4, 1, 8, 0, false, false);
    for (int r = 0; r < 4; r++)
        assert_int_equal(warmup(c, r), 3 - r);
    c = cfg(4, 1, 2, 0, false, false); /* M < pp: min(pp - r - 1, M) */
    assert_int_equal(warmup(c, 0), 2);
    assert_int_equal(warmup(c, 1), 2);
    assert_int_equal(warmup(c, 2), 1);
    assert_int_equal(warmup(c, 3), 0);
    c = cfg(4, 1, 2, 0, false, true); /* the same when forward only */
    assert_int_equal(warmup(c, 0), 2);
    assert_int_equal(warmup(c, 2), 1);
    c = cfg(1, 1, 5, 0, false, false);
    assert_int_equal(warmup(c, 0), 0);
}

static void test_max_inflight_formula(void **state)
{
    for (int pp = 1; pp <= 6; pp++)
        for (int M = 1; M <= 10; M++)
            for (int r = 0; r < pp; r++) {
                mc_pp_config_t c = cfg(pp, 1, M, 0, false, false);
                c.pp_rank = r;
                assert_int_equal(mc_pp_max_inflight(&c), pp - r < M ? pp - r : M);
                c.forward_only = true;
                assert_int_equal(mc_pp_max_inflight(&c), 0);
            }
    /* interleaved: min(warmup + 1, total) chunk activations */
    mc_pp_config_t c = cfg(2, 2, 4, 0, true, false);
    assert_int_equal(mc_pp_max_inflight(&c), 5);
    c.pp_rank = 1;
    assert_int_equal(mc_pp_max_inflight(&c), 3);
    c = cfg(4, 2, 4, 0, true, false); /* rank 0 is all warmup */
    assert_int_equal(mc_pp_max_inflight(&c), 8);
}

/* ---- exact sequences ------------------------------------------------------------------------ */

static void test_no_pipelining(void **state)
{
    expect_seq(cfg(1, 1, 3, 0, false, false), 0, "F0c0 B0c0 F1c0 B1c0 F2c0 B2c0");
    expect_seq(cfg(1, 1, 1, 0, false, false), 0, "F0c0 B0c0");
    expect_seq(cfg(1, 1, 3, 0, false, true), 0, "F0c0 F1c0 F2c0");
    int inflight[1];
    sim_ok(cfg(1, 1, 3, 0, false, false), inflight);
    assert_int_equal(inflight[0], 1);
}

static void test_1f1b_pp2(void **state)
{
    mc_pp_config_t c = cfg(2, 1, 3, 0, false, false);
    /* rank 0: warmup 1; send_forward_recv_backward in steady; recv_backward in cooldown */
    expect_seq(c, 0, "F0c0 [SN0c0] F1c0 [SN1c0 RN0c0] B0c0 F2c0 [SN2c0 RN1c0] B1c0 [RN2c0] B2c0");
    /* rank 1: the recv_forward before 1F1B; send_backward_recv_forward; send_backward last */
    expect_seq(c, 1, "[RP0c0] F0c0 B0c0 [SP0c0 RP1c0] F1c0 B1c0 [SP1c0 RP2c0] F2c0 B2c0 [SP2c0]");
}

static void test_1f1b_fewer_microbatches_than_stages(void **state)
{
    mc_pp_config_t c = cfg(4, 1, 2, 0, false, false);
    expect_seq(c, 0, "F0c0 [SN0c0] F1c0 [SN1c0] [RN0c0] B0c0 [RN1c0] B1c0");
    expect_seq(c, 1, "[RP0c0] F0c0 [SN0c0] [RP1c0] F1c0 [SN1c0] [RN0c0] B0c0 [SP0c0] [RN1c0] "
                     "B1c0 [SP1c0]");
    expect_seq(c, 2, "[RP0c0] F0c0 [SN0c0] [RP1c0] F1c0 [SN1c0 RN0c0] B0c0 [SP0c0] [RN1c0] B1c0 "
                     "[SP1c0]");
    expect_seq(c, 3, "[RP0c0] F0c0 B0c0 [SP0c0 RP1c0] F1c0 B1c0 [SP1c0]");
    int inflight[4];
    sim_ok(c, inflight);
    assert_int_equal(inflight[0], 2);
    assert_int_equal(inflight[1], 2);
    assert_int_equal(inflight[2], 2);
    assert_int_equal(inflight[3], 1);
}

static void test_1f1b_one_microbatch(void **state)
{
    mc_pp_config_t c = cfg(3, 1, 1, 0, false, false);
    expect_seq(c, 0, "F0c0 [SN0c0] [RN0c0] B0c0");
    expect_seq(c, 1, "[RP0c0] F0c0 [SN0c0] [RN0c0] B0c0 [SP0c0]");
    expect_seq(c, 2, "[RP0c0] F0c0 B0c0 [SP0c0]");
    sim_ok(c, NULL);
}

static void test_1f1b_forward_only(void **state)
{
    mc_pp_config_t c = cfg(2, 1, 3, 0, false, true);
    expect_seq(c, 0, "F0c0 [SN0c0] F1c0 [SN1c0] F2c0 [SN2c0]");
    expect_seq(c, 1, "[RP0c0] F0c0 [RP1c0] F1c0 [RP2c0] F2c0");
    c = cfg(3, 1, 4, 0, false, true);
    expect_seq(c, 1, "[RP0c0] F0c0 [SN0c0] [RP1c0] F1c0 [SN1c0] [RP2c0] F2c0 [SN2c0] [RP3c0] F3c0 "
                     "[SN3c0]");
    sim_ok(c, NULL);
}

/* pp=3, vpp=2, M=3, without p2p overlap: rank 0 is all warmup (4+3 >= 6), rank 1 has one steady
 * step, rank 2 three. Note the ring: rank 2's chunk 0 feeds rank 0's chunk 1 (RP on rank 0 comes
 * from rank 2) and rank 0's chunk 1 sends its input gradient back to rank 2 chunk 0. */
static void test_interleaved_sync_pp3(void **state)
{
    mc_pp_config_t c = cfg(3, 2, 3, 0, false, false);
    expect_seq(c, 0,
               "F0c0 [SN0c0] F1c0 [SN1c0] F2c0 [RP0c1 SN2c0] F0c1 [RP1c1 SN0c1] F1c1 [RP2c1 SN1c1] "
               "F2c1 [SN2c1] [RN0c1] B0c1 [SP0c1 RN1c1] B1c1 [SP1c1 RN2c1] B2c1 [SP2c1 RN0c0] "
               "B0c0 [RN1c0] B1c0 [RN2c0] B2c0");
    /* the last warmup step's send_forward_backward_recv_forward_backward also receives the
     * first gradient (RN0c1) */
    expect_seq(c, 1,
               "[RP0c0] F0c0 [RP1c0 SN0c0] F1c0 [RP2c0 SN1c0] F2c0 [RP0c1 SN2c0] F0c1 "
               "[RP1c1 SN0c1] F1c1 [RP2c1 SN1c1 RN0c1] F2c1 B0c1 [SP0c1 SN2c1 RN1c1] B1c1 "
               "[SP1c1 RN2c1] B2c1 [SP2c1 RN0c0] B0c0 [SP0c0 RN1c0] B1c0 [SP1c0 RN2c0] B2c0 "
               "[SP2c0]");
    expect_seq(c, 2,
               "[RP0c0] F0c0 [RP1c0 SN0c0] F1c0 [RP2c0 SN1c0] F2c0 [RP0c1 SN2c0] F0c1 B0c1 "
               "[SP0c1 RP1c1] F1c1 B1c1 [SP1c1 RP2c1] F2c1 B2c1 [SP2c1 RN0c0] B0c0 "
               "[SP0c0 RN1c0] B1c0 [SP1c0 RN2c0] B2c0 [SP2c0]");
    int inflight[3];
    sim_ok(c, inflight);
    assert_int_equal(inflight[0], 6);
    assert_int_equal(inflight[1], 6);
    assert_int_equal(inflight[2], 4);

    /* peers: rank 0 receives activations from (and sends gradients to) rank 2 */
    mc_pp_action_t *a;
    int n;
    char err[256];
    assert_int_equal(mc_pp_schedule(&c, &a, &n, err, sizeof err), 0);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < (a[i].type == MC_PP_P2P ? a[i].n_ops : 0); j++) {
            const mc_p2p_op_t *o = &a[i].ops[j];
            bool prev = o->dir == MC_P2P_SEND_PREV || o->dir == MC_P2P_RECV_PREV;
            assert_int_equal(o->peer, prev ? 2 : 1);
        }
    free(a);
}

/* pp=2, vpp=2, M=4 with overlap_p2p_comm (Megatron's default with VPP): the async batches of
 * pp_post_forward / pp_post_backward, and the async recv of the first gradient after warmup. */
static void test_interleaved_overlap_pp2(void **state)
{
    mc_pp_config_t c = cfg(2, 2, 4, 0, true, false);
    expect_seq(c, 0,
               "F0c0 [SN0c0] F1c0 [RP0c1 SN1c0] F0c1 [RP1c1 SN0c1] F1c1 [SN1c1] <RN0c1> "
               "F2c0 <SN2c0> B0c1 <SP0c1 RN1c1> F3c0 <RP2c1 SN3c0> B1c1 <SP1c1 RN0c0> "
               "F2c1 <RP3c1 SN2c1> B0c0 <RN1c0> F3c1 <SN3c1> B1c0 <RN2c1> "
               "B2c1 [SP2c1 RN3c1] B3c1 [SP3c1 RN2c0] B2c0 [RN3c0] B3c0");
    /* the last rank receives no gradient after warmup (its last chunk computes the loss) */
    expect_seq(c, 1,
               "[RP0c0] F0c0 [RP1c0 SN0c0] F1c0 [RP0c1 SN1c0] F0c1 <RP1c1> B0c1 <SP0c1> "
               "F1c1 <RP2c0> B1c1 <SP1c1 RN0c0> F2c0 <RP3c0 SN2c0> B0c0 <SP0c0 RN1c0> "
               "F3c0 <RP2c1 SN3c0> B1c0 <SP1c0> F2c1 <RP3c1> B2c1 <SP2c1> F3c1 B3c1 "
               "<SP3c1 RN2c0> B2c0 [SP2c0 RN3c0] B3c0 [SP3c0]");
    int inflight[2];
    sim_ok(c, inflight);
    assert_int_equal(inflight[0], 5);
    assert_int_equal(inflight[1], 3);
}

/* --overlap-p2p-communication-warmup-flush (pp=2, vpp=2, M=4): the warmup and cooldown batches
 * of the list above become asynchronous. Rank 1 posts the next forward's input receive before
 * each warmup forward and sends after it; rank 0 (the first) receives and sends after. In the
 * flush rank 0 (not the last) posts the next gradient's receive before each backward and sends
 * after it; rank 1 (the last) does both after. The computes keep their order. */
static void test_interleaved_warmup_flush_pp2(void **state)
{
    mc_pp_config_t c = cfg(2, 2, 4, 0, true, false);
    c.overlap_warmup_flush = true;
    expect_seq(c, 0,
               "F0c0 <SN0c0> F1c0 <RP0c1 SN1c0> F0c1 <RP1c1 SN0c1> F1c1 <SN1c1> <RN0c1> "
               "F2c0 <SN2c0> B0c1 <SP0c1 RN1c1> F3c0 <RP2c1 SN3c0> B1c1 <SP1c1 RN0c0> "
               "F2c1 <RP3c1 SN2c1> B0c0 <RN1c0> F3c1 <SN3c1> B1c0 <RN2c1> "
               "<RN3c1> B2c1 <SP2c1> <RN2c0> B3c1 <SP3c1> <RN3c0> B2c0 B3c0");
    expect_seq(c, 1,
               "[RP0c0] <RP1c0> F0c0 <SN0c0> <RP0c1> F1c0 <SN1c0> F0c1 <RP1c1> B0c1 <SP0c1> "
               "F1c1 <RP2c0> B1c1 <SP1c1 RN0c0> F2c0 <RP3c0 SN2c0> B0c0 <SP0c0 RN1c0> "
               "F3c0 <RP2c1 SN3c0> B1c0 <SP1c0> F2c1 <RP3c1> B2c1 <SP2c1> F3c1 B3c1 "
               "<SP3c1 RN2c0> B2c0 <SP2c0 RN3c0> B3c0 <SP3c0>");
    int inflight[2];
    sim_ok(c, inflight);
    assert_int_equal(inflight[0], 5);
    assert_int_equal(inflight[1], 3);
    /* evaluation: the forwards' batches are asynchronous too */
    c = cfg(2, 2, 2, 0, true, true);
    c.overlap_warmup_flush = true;
    expect_seq(c, 1, "[RP0c0] <RP1c0> F0c0 <SN0c0> <RP0c1> F1c0 <SN1c0> <RP1c1> F0c1 F1c1");
    sim_ok(c, NULL);
}

static void test_interleaved_group_size(void **state)
{
    /* pp=2, vpp=2, M=6, G=3 */
    mc_pp_config_t c = cfg(2, 2, 6, 3, true, false);
    int inflight[2];
    sim_ok(c, inflight);
    assert_int_equal(inflight[0], 6);
    assert_int_equal(inflight[1], 4);
    /* rank 0's forwards follow the table; the backwards its chunk-reversed order */
    expect_seq(c, 0,
               "F0c0 [SN0c0] F1c0 [RP0c1 SN1c0] F2c0 [RP1c1 SN2c0] F0c1 [RP2c1 SN0c1] F1c1 "
               "[SN1c1] <RN0c1> F2c1 <SN2c1> B0c1 <SP0c1 RN1c1> F3c0 <SN3c0> B1c1 <SP1c1 RN2c1> "
               "F4c0 <RP3c1 SN4c0> B2c1 <SP2c1 RN0c0> F5c0 <RP4c1 SN5c0> B0c0 <RN1c0> "
               "F3c1 <RP5c1 SN3c1> B1c0 <RN2c0> F4c1 <SN4c1> B2c0 <RN3c1> F5c1 <SN5c1> B3c1 "
               "<SP3c1 RN4c1> B4c1 [SP4c1 RN5c1] B5c1 [SP5c1 RN3c0] B3c0 [RN4c0] B4c0 [RN5c0] "
               "B5c0");
    /* a remainder block >= pp is allowed: pp=3, M=7, G=4 (7 % 4 = 3); M=8, G=4 */
    sim_ok(cfg(3, 2, 7, 4, false, false), NULL);
    sim_ok(cfg(3, 3, 8, 4, true, false), NULL);
}

static void test_interleaved_forward_only(void **state)
{
    mc_pp_config_t c = cfg(3, 2, 3, 0, false, true);
    expect_seq(c, 0, "F0c0 [SN0c0] F1c0 [SN1c0] F2c0 [RP0c1 SN2c0] F0c1 [RP1c1 SN0c1] F1c1 "
                     "[RP2c1 SN1c1] F2c1 [SN2c1]");
    expect_seq(c, 2, "[RP0c0] F0c0 [RP1c0 SN0c0] F1c0 [RP2c0 SN1c0] F2c0 [RP0c1 SN2c0] F0c1 "
                     "[RP1c1] F1c1 [RP2c1] F2c1");
    sim_ok(c, NULL);
}

/* ---- configuration errors ------------------------------------------------------------------- */

static void test_errors(void **state)
{
    /* M % G (G = pp by default) must be 0 or >= pp */
    expect_error(cfg(4, 2, 6, 0, true, false),
                 "The remainder of M (the total micro-batches) divided by N (number of contiguous "
                 "micro-batches in a virtual pipeline stage) should be 0, or larger than or equal "
                 "to the pipeline-parallel size, but it is 2. Otherwise, it introduces dependency "
                 "bubbles in the pipeline and reduces throughput.");
    expect_error(cfg(3, 2, 5, 3, false, false),
                 "The remainder of M (the total micro-batches) divided by N (number of contiguous "
                 "micro-batches in a virtual pipeline stage) should be 0, or larger than or equal "
                 "to the pipeline-parallel size, but it is 2. Otherwise, it introduces dependency "
                 "bubbles in the pipeline and reduces throughput.");
    /* pp <= G <= M */
    expect_error(cfg(4, 2, 3, 0, true, false),
                 "The number of contiguous micro-batches in a virtual pipeline stage should range "
                 "in [PP=4 , M=3]");
    expect_error(cfg(2, 2, 4, 1, true, false),
                 "The number of contiguous micro-batches in a virtual pipeline stage should range "
                 "in [PP=2 , M=4]");
    expect_error(cfg(2, 2, 4, 5, true, false),
                 "The number of contiguous micro-batches in a virtual pipeline stage should range "
                 "in [PP=2 , M=4]");
    /* interleaving needs pp > 1 (pp > 2 without p2p overlap) */
    expect_error(cfg(1, 2, 4, 0, true, false),
                 "When interleaved schedule is used, pipeline-model-parallel size should be greater "
                 "than 1");
    const char *gt2 = "When interleaved schedule is used and p2p communication overlap is disabled, "
                      "pipeline-model-parallel size should be greater than 2 to avoid having "
                      "multiple p2p sends and recvs between same 2 ranks per communication batch";
    expect_error(cfg(2, 2, 4, 0, false, false), gt2);
    expect_error(cfg(1, 2, 4, 0, false, false), gt2);
    mc_pp_config_t fl = cfg(3, 2, 6, 0, false, false);
    fl.overlap_warmup_flush = true;
    expect_error(fl, "Pipeline parallel communication overlapping in warmup and flush is only "
                     "compatible with overlap_p2p_comm but not batch_p2p_comm.");
    expect_error(cfg(2, 1, 4, 0, true, false),
                 "Non-interleaved pipeline parallelism does not support overlapping p2p "
                 "communication");
    expect_error(cfg(2, 1, 0, 0, false, false), "number of microbatches (0) must be at least 1");
    expect_error(cfg(0, 1, 1, 0, false, false), "pipeline-model-parallel size (0) must be at least 1");
    expect_error(cfg(2, 0, 1, 0, false, false), "number of model chunks (0) must be at least 1");
    mc_pp_config_t c = cfg(2, 1, 4, 0, false, false);
    c.pp_rank = 2;
    expect_error(c, "pipeline rank 2 is outside [0, 2)");
    /* the flag does not matter without pipelining; G does not without interleaving */
    char err[256];
    c = cfg(1, 1, 4, 7, true, false);
    assert_int_equal(mc_pp_validate(&c, err, sizeof err), 0);
    assert_string_equal(err, "");
    c = cfg(3, 1, 4, 1, false, false);
    assert_int_equal(mc_pp_validate(&c, err, sizeof err), 0);
}

/* ---- all ranks together --------------------------------------------------------------------- */

static void test_simulate_grid(void **state)
{
    int valid = 0, interleaved = 0;
    for (int pp = 1; pp <= 4; pp++)
        for (int vpp = 1; vpp <= 3; vpp++)
            for (int M = 1; M <= 12; M++)
                for (int G = 0; G <= M; G++)
                    for (int ov = 0; ov < 3; ov++)
                        for (int fo = 0; fo < 2; fo++) {
                            /* ov 2: overlap with --overlap-p2p-communication-warmup-flush */
                            mc_pp_config_t c = cfg(pp, vpp, M, G, ov > 0, fo);
                            c.overlap_warmup_flush = ov == 2;
                            char err[512];
                            if (mc_pp_validate(&c, err, sizeof err))
                                continue;
                            valid++;
                            interleaved += vpp > 1;
                            int inflight[4];
                            sim_ok(c, inflight);
                            sim_sync_ok(c);
                            for (int r = 0; r < pp; r++) {
                                c.pp_rank = r;
                                assert_int_equal(inflight[r], mc_pp_max_inflight(&c));
                                if (vpp == 1 && !fo)
                                    assert_int_equal(inflight[r], pp - r < M ? pp - r : M);
                                /* the shape of every list: ops in Megatron's batch order, no
                                 * empty batch, async only with overlap, one F (and B) per
                                 * microbatch and chunk */
                                mc_pp_action_t *a;
                                int n, nf = 0, nb = 0;
                                assert_int_equal(mc_pp_schedule(&c, &a, &n, err, sizeof err), 0);
                                for (int i = 0; i < n; i++) {
                                    if (a[i].type == MC_PP_COMPUTE) {
                                        nf += a[i].kind == MC_PP_FORWARD;
                                        nb += a[i].kind == MC_PP_BACKWARD;
                                        continue;
                                    }
                                    assert_true(a[i].n_ops >= 1);
                                    assert_true(!a[i].async || ov);
                                    for (int j = 1; j < a[i].n_ops; j++)
                                        assert_true(a[i].ops[j - 1].dir < a[i].ops[j].dir);
                                }
                                assert_int_equal(nf, M * vpp);
                                assert_int_equal(nb, fo ? 0 : M * vpp);
                                free(a);
                            }
                        }
    assert_true(valid > 1000);
    assert_true(interleaved > 300);
}

/* The simulator itself must catch broken lists. */
static void test_simulate_catches(void **state)
{
    mc_pp_config_t c = cfg(2, 1, 3, 0, false, false);
    mc_pp_action_t *l[2];
    int n[2];
    char err[512];
    for (int r = 0; r < 2; r++) {
        c.pp_rank = r;
        assert_int_equal(mc_pp_schedule(&c, &l[r], &n[r], err, sizeof err), 0);
    }
    assert_int_equal(mc_pp_simulate_lists(&c, l, n, NULL, err, sizeof err), 0);

    /* a receive naming the wrong microbatch: rank 1's [SP0c0 RP1c0] claims microbatch 2 */
    assert_int_equal(l[1][3].type, MC_PP_P2P);
    assert_int_equal(l[1][3].ops[1].dir, MC_P2P_RECV_PREV);
    l[1][3].ops[1].mb = 2;
    assert_int_equal(mc_pp_simulate_lists(&c, l, n, NULL, err, sizeof err), -1);
    assert_string_equal(err, "rank 0 sends the activation of microbatch 1 for rank 1 chunk 0 to "
                             "rank 1, which receives it as the activation of microbatch 2 for "
                             "rank 1 chunk 0");
    l[1][3].ops[1].mb = 1;

    /* a lost send: without rank 1's last [SP2c0] rank 0 waits forever in [RN2c0] */
    n[1]--;
    assert_int_equal(mc_pp_simulate_lists(&c, l, n, NULL, err, sizeof err), -1);
    assert_string_equal(err, "deadlock: rank 0 at action 8 [RN2c0]");
    n[1]++;

    /* backward out of order (B1 before B0 on rank 1) */
    mc_pp_action_t t = l[1][2];
    l[1][2] = l[1][5];
    l[1][5] = t;
    assert_int_equal(mc_pp_simulate_lists(&c, l, n, NULL, err, sizeof err), -1);
    assert_string_equal(err, "rank 1 action 2: backward of microbatch 1 chunk 0 is not the oldest "
                             "outstanding forward of its chunk");
    l[1][5] = l[1][2];
    l[1][2] = t;
    assert_int_equal(mc_pp_simulate_lists(&c, l, n, NULL, err, sizeof err), 0);
    free(l[0]);
    free(l[1]);

    /* each waiting for the other: rank 0 wants a gradient first, rank 1 an activation first */
    mc_pp_config_t c1 = cfg(2, 1, 1, 0, false, false);
    mc_pp_action_t r0[3] = {
        {.type = MC_PP_P2P, .n_ops = 1, .ops = {{MC_P2P_RECV_NEXT, 0, 0, 1}}},
        {.type = MC_PP_COMPUTE, .kind = MC_PP_FORWARD},
        {.type = MC_PP_COMPUTE, .kind = MC_PP_BACKWARD},
    };
    mc_pp_action_t r1[3] = {
        {.type = MC_PP_P2P, .n_ops = 1, .ops = {{MC_P2P_RECV_PREV, 0, 0, 0}}},
        {.type = MC_PP_COMPUTE, .kind = MC_PP_FORWARD},
        {.type = MC_PP_COMPUTE, .kind = MC_PP_BACKWARD},
    };
    mc_pp_action_t *l1[2] = {r0, r1};
    int n1[2] = {3, 3};
    assert_int_equal(mc_pp_simulate_lists(&c1, l1, n1, NULL, err, sizeof err), -1);
    assert_string_equal(err, "deadlock: rank 0 at action 0 [RN0c0], rank 1 at action 0 [RP0c0]");
    /* sending before computing */
    r0[0] = (mc_pp_action_t){.type = MC_PP_P2P, .n_ops = 1, .ops = {{MC_P2P_SEND_NEXT, 0, 0, 1}}};
    assert_int_equal(mc_pp_simulate_lists(&c1, l1, n1, NULL, err, sizeof err), -1);
    assert_string_equal(err, "rank 0 action 0: sends the activation of microbatch 0 chunk 0 before "
                             "computing it");
}

/* ---- layer placement ------------------------------------------------------------------------ */

static void expect_layers(mc_pp_layers_cfg_t c, int rank, int chunk, int first, int n)
{
    int f = -1, k = -1;
    char err[256];
    assert_int_equal(mc_pp_layers(&c, rank, chunk, &f, &k, err, sizeof err), 0);
    assert_int_equal(f, first);
    assert_int_equal(k, n);
}

static void expect_layers_error(mc_pp_layers_cfg_t c, const char *want)
{
    int f, k;
    char err[256];
    assert_int_equal(mc_pp_layers(&c, 0, 0, &f, &k, err, sizeof err), -1);
    assert_string_equal(err, want);
}

static void test_layers_even(void **state)
{
    /* MEGATRON.md 3.2: L=8, pp=2, vpp=2 */
    mc_pp_layers_cfg_t c = {8, 2, 2, 0, 0, false, false};
    expect_layers(c, 0, 0, 0, 2);
    expect_layers(c, 1, 0, 2, 2);
    expect_layers(c, 0, 1, 4, 2);
    expect_layers(c, 1, 1, 6, 2);
    /* without VPP: [p*L/pp, (p+1)*L/pp) */
    c = (mc_pp_layers_cfg_t){8, 2, 1, 0, 0, false, false};
    expect_layers(c, 0, 0, 0, 4);
    expect_layers(c, 1, 0, 4, 4);
    /* transformer_block.py's comment: 8 layers, 2 stages, 4 chunks: [0][2][4][6] / [1][3][5][7] */
    c = (mc_pp_layers_cfg_t){8, 2, 4, 0, 0, false, false};
    for (int v = 0; v < 4; v++) {
        expect_layers(c, 0, v, 2 * v, 1);
        expect_layers(c, 1, v, 2 * v + 1, 1);
    }
    c = (mc_pp_layers_cfg_t){5, 1, 1, 0, 0, false, false};
    expect_layers(c, 0, 0, 0, 5);
    expect_layers_error((mc_pp_layers_cfg_t){7, 2, 1, 0, 0, false, false},
                        "Number of layers should be divisible by the pipeline-model-parallel size");
    expect_layers_error((mc_pp_layers_cfg_t){8, 2, 3, 0, 0, false, false},
                        "number of layers per pipeline rank (4) must be divisible by the virtual "
                        "pipeline size (3)");
}

static void test_layers_uneven(void **state)
{
    /* first and last set: the middle rank takes the rest */
    mc_pp_layers_cfg_t c = {10, 3, 1, 2, 2, false, false};
    expect_layers(c, 0, 0, 0, 2);
    expect_layers(c, 1, 0, 2, 6);
    expect_layers(c, 2, 0, 8, 2);
    /* first only: ranks 1..pp-1 split the rest */
    c = (mc_pp_layers_cfg_t){10, 3, 1, 4, 0, false, false};
    expect_layers(c, 0, 0, 0, 4);
    expect_layers(c, 1, 0, 4, 3);
    expect_layers(c, 2, 0, 7, 3);
    /* last only */
    c = (mc_pp_layers_cfg_t){7, 3, 1, 0, 1, false, false};
    expect_layers(c, 0, 0, 0, 3);
    expect_layers(c, 1, 0, 3, 3);
    expect_layers(c, 2, 0, 6, 1);
    /* pp=2 with both: no middle stage */
    c = (mc_pp_layers_cfg_t){5, 2, 1, 3, 2, false, false};
    expect_layers(c, 0, 0, 0, 3);
    expect_layers(c, 1, 0, 3, 2);
    /* with VPP (get_transformer_layer_offset): a round of chunk v is first/vpp + middle/vpp +
     * last/vpp layers; L=12, pp=3, vpp=2, first=2, last=2: round 1 + 4 + 1 */
    c = (mc_pp_layers_cfg_t){12, 3, 2, 2, 2, false, false};
    expect_layers(c, 0, 0, 0, 1);
    expect_layers(c, 1, 0, 1, 4);
    expect_layers(c, 2, 0, 5, 1);
    expect_layers(c, 0, 1, 6, 1);
    expect_layers(c, 1, 1, 7, 4);
    expect_layers(c, 2, 1, 11, 1);

    expect_layers_error((mc_pp_layers_cfg_t){12, 3, 2, 3, 0, false, false},
                        "number of layers at first stage: 3 must be divisible by virtual pipeline "
                        "parallel degree 2");
    expect_layers_error((mc_pp_layers_cfg_t){12, 3, 2, 2, 3, false, false},
                        "number of layers at last stage: 3 must be divisible by virtual pipeline "
                        "parallel degree 2");
    expect_layers_error((mc_pp_layers_cfg_t){10, 4, 1, 3, 0, false, false},
                        "number of layers at middle stage: 7 must be divisible by the middle "
                        "pipeline model parallel size 3");
    expect_layers_error((mc_pp_layers_cfg_t){11, 3, 2, 2, 2, false, false},
                        "number of layers on each middle pipeline rank: 7 must be divisible by "
                        "virtual pipeline parallel degree 2");
    expect_layers_error((mc_pp_layers_cfg_t){6, 2, 1, 3, 2, false, false},
                        "decoder first/last pipeline num layers (3, 2) do not add up to num "
                        "layers 6");
    /* a middle stage without layers (TransformerConfig.__post_init__) */
    expect_layers_error((mc_pp_layers_cfg_t){8, 3, 1, 4, 4, false, false},
                        "Mismatch: 0 middle layers remaining but 1 middle PP stages available.");
}

/* Whenever a placement is accepted, virtual stages 0, 1, ... (chunk-major: v = c*pp + r) hold
 * consecutive layers covering [0, L) once (with the account-for flags too: acc bit 0 the
 * embedding, bit 1 the loss). */
static void test_layers_cover(void **state)
{
    int accepted = 0;
    for (int L = 1; L <= 16; L++)
        for (int pp = 1; pp <= 4; pp++)
            for (int vpp = 1; vpp <= 3; vpp++)
                for (int F = 0; F <= L; F++)
                    for (int Ls = 0; Ls <= L; Ls++)
                        for (int acc = 0; acc < 4; acc++) {
                            mc_pp_layers_cfg_t c = {L, pp, vpp, F, Ls, acc & 1, acc & 2};
                            int next = 0, f, k;
                            char err[256];
                            if (mc_pp_layers(&c, 0, 0, &f, &k, err, sizeof err)) continue;
                            accepted++;
                            for (int v = 0; v < pp * vpp; v++) {
                                assert_int_equal(
                                    mc_pp_layers(&c, v % pp, v / pp, &f, &k, err, sizeof err), 0);
                                assert_int_equal(f, next);
                                next += k;
                            }
                            assert_int_equal(next, L);
                            if (F)
                                for (int v = 0; v < vpp; v++) {
                                    mc_pp_layers(&c, 0, v, &f, &k, err, sizeof err);
                                    assert_int_equal(k * vpp, F);
                                }
                        }
    assert_true(accepted > 300);
}

static void test_pre_post_process(void **state)
{
    assert_true(mc_pp_is_pre_process(0, 0));
    assert_false(mc_pp_is_pre_process(0, 1));
    assert_false(mc_pp_is_pre_process(1, 0));
    assert_true(mc_pp_is_post_process(4, 2, 3, 1));
    assert_false(mc_pp_is_post_process(4, 2, 3, 0));
    assert_false(mc_pp_is_post_process(4, 2, 2, 1));
    assert_true(mc_pp_is_post_process(1, 1, 0, 0));
    assert_true(mc_pp_is_pre_process(0, 0) && mc_pp_is_post_process(1, 1, 0, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_spec_example),
        cmocka_unit_test(test_table_old_formula),
        cmocka_unit_test(test_table_group_size),
        cmocka_unit_test(test_warmup_interleaved),
        cmocka_unit_test(test_warmup_1f1b),
        cmocka_unit_test(test_max_inflight_formula),
        cmocka_unit_test(test_no_pipelining),
        cmocka_unit_test(test_1f1b_pp2),
        cmocka_unit_test(test_1f1b_fewer_microbatches_than_stages),
        cmocka_unit_test(test_1f1b_one_microbatch),
        cmocka_unit_test(test_1f1b_forward_only),
        cmocka_unit_test(test_interleaved_sync_pp3),
        cmocka_unit_test(test_interleaved_overlap_pp2),
        cmocka_unit_test(test_interleaved_warmup_flush_pp2),
        cmocka_unit_test(test_interleaved_group_size),
        cmocka_unit_test(test_interleaved_forward_only),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_simulate_grid),
        cmocka_unit_test(test_simulate_catches),
        cmocka_unit_test(test_layers_even),
        cmocka_unit_test(test_layers_uneven),
        cmocka_unit_test(test_layers_cover),
        cmocka_unit_test(test_pre_post_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
