/* Megatron's tensor-parallel mappings (model/tp.c) alone, on the CPU backend: with one rank every
 * mapping is the identity and starts no collective; with two, each forward and backward starts
 * the collective Megatron's autograd function does, over the blocks it cuts, and gives the values
 * it gives. The second rank is played by a test communicator whose peer contributes known data
 * (its value at element i is PEER(i)), so the results are exact. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "model/tp.h"

#define N 12 /* elements of a rank's block */

static float peer_value(long i) { return 100.0f + (float)i; }

/* A communicator of two ranks, this one `rank`, the other holding peer_value everywhere (its
 * send buffer of a reduce-scatter, its block of a gather, its addend of an all-reduce). */
typedef struct {
    mc_comm_t c;
    mc_group_t g;
    int started[MC_COLL_KINDS];
    size_t last_count;
} fake_t;

static mc_req_t fake_start(mc_comm_t *c, const mc_coll_t *op)
{
    fake_t *f = (fake_t *)c;
    const int r = f->g.rank;
    float *recv = op->recv;
    const float *send = op->send;
    assert_int_equal(op->dt, MC_DT_F32);
    assert_ptr_equal(op->group, &f->g);
    f->started[op->kind]++;
    f->last_count = op->count;
    for (long i = 0; i < (long)op->count; i++) switch (op->kind) {
        case MC_COLL_ALL_REDUCE:
            recv[i] = op->op == MC_OP_MAX ? (recv[i] > peer_value(i) ? recv[i] : peer_value(i))
                                          : recv[i] + peer_value(i);
            break;
        case MC_COLL_ALL_GATHER:
            recv[r * (long)op->count + i] = send[i];
            recv[(1 - r) * (long)op->count + i] = peer_value(i);
            break;
        case MC_COLL_REDUCE_SCATTER:
            recv[i] = send[r * (long)op->count + i] + peer_value(r * (long)op->count + i);
            break;
        default: fail_msg("unexpected collective %d", op->kind);
        }
    return MC_REQ_DONE;
}

static void fake_wait(mc_comm_t *c, mc_req_t req) {}

static void fake_init(fake_t *f, int rank)
{
    memset(f, 0, sizeof(*f));
    f->g = (mc_group_t){.rank = rank, .size = 2, .name = "tp"};
    f->c.start = fake_start;
    f->c.wait = fake_wait;
}

static mc_tp_t tp_over(fake_t *f, int size, bool sp)
{
    return (mc_tp_t){.be = mc_backend_cpu(),
                     .comm = &f->c,
                     .group = &f->g,
                     .size = size,
                     .rank = size > 1 ? f->g.rank : 0,
                     .sp = sp,
                     .dt = MC_DT_F32};
}

static void fill(float *x, long n, float base)
{
    for (long i = 0; i < n; i++) x[i] = base + (float)i;
}

static int started(const fake_t *f)
{
    int n = 0;
    for (int k = 0; k < MC_COLL_KINDS; k++) n += f->started[k];
    return n;
}

/* One rank: identities and copies, no collective. */
static void test_one_rank(void **state)
{
    fake_t f;
    fake_init(&f, 0);
    const mc_tp_t tp = tp_over(&f, 1, false);
    float x[N], y[N], full[2 * N], work[2 * N];
    fill(x, N, 1);
    mc_tp_copy_backward(&tp, x, N);
    mc_tp_reduce_forward(&tp, x, N);
    mc_tp_all_reduce(&tp, x, N, MC_DT_F32, MC_OP_MAX);
    assert_ptr_equal(mc_tp_column_input(&tp, x, full, N), x);
    assert_ptr_equal(mc_tp_row_output(&tp, x, y, N), x);
    assert_ptr_equal(mc_tp_column_input_grad(&tp, x, y, N), x);
    mc_tp_sp_gather(&tp, x, y, N);
    mc_tp_gather_last(&tp, x, full, work, 3, 4);
    for (int i = 0; i < N; i++) {
        assert_true(x[i] == 1.0f + (float)i);
        assert_true(y[i] == x[i] && full[i] == x[i]);
    }
    assert_int_equal(started(&f), 0);
}

/* copy_to's backward and reduce_from's forward: a sum over the ranks in place. */
static void test_copy_and_reduce(void **state)
{
    fake_t f;
    fake_init(&f, 1);
    const mc_tp_t tp = tp_over(&f, 2, false);
    float x[N];
    fill(x, N, 1);
    mc_tp_copy_backward(&tp, x, N);
    for (int i = 0; i < N; i++) assert_true(x[i] == 1.0f + (float)i + peer_value(i));
    fill(x, N, 1);
    assert_ptr_equal(mc_tp_row_output(&tp, x, NULL, N), x); /* reduce_from_tensor_model_parallel */
    for (int i = 0; i < N; i++) assert_true(x[i] == 1.0f + (float)i + peer_value(i));
    fill(x, N, 500);
    mc_tp_all_reduce(&tp, x, N, MC_DT_F32, MC_OP_MAX);
    for (int i = 0; i < N; i++) assert_true(x[i] == 500.0f + (float)i);
    assert_int_equal(f.started[MC_COLL_ALL_REDUCE], 3);
    assert_int_equal(started(&f), 3);
}

/* The sequence-parallel regions: gather (and its reduce-scatter backward), reduce-scatter, and
 * the scatter that keeps this rank's block, each over blocks of the first dimension. */
static void test_sequence_parallel(void **state)
{
    for (int rank = 0; rank < 2; rank++) {
        fake_t f;
        fake_init(&f, rank);
        const mc_tp_t tp = tp_over(&f, 2, true);
        float local[N], full[2 * N], out[N];
        fill(local, N, 1);
        assert_ptr_equal(mc_tp_column_input(&tp, local, full, N), full);
        for (int i = 0; i < N; i++) {
            assert_true(full[rank * N + i] == local[i]);
            assert_true(full[(1 - rank) * N + i] == peer_value(i));
        }
        assert_ptr_equal(mc_tp_row_output_grad(&tp, local, full, N), full);
        fill(full, 2 * N, 7);
        assert_ptr_equal(mc_tp_row_output(&tp, full, out, N), out);
        for (int i = 0; i < N; i++)
            assert_true(out[i] == full[rank * N + i] + peer_value(rank * N + i));
        assert_ptr_equal(mc_tp_column_input_grad(&tp, full, out, N), out);
        assert_int_equal(f.started[MC_COLL_ALL_GATHER], 2);
        assert_int_equal(f.started[MC_COLL_REDUCE_SCATTER], 2);
        assert_int_equal(f.last_count, N); /* counts are per rank's block */
        mc_tp_sp_scatter(&tp, full, out, N);
        assert_memory_equal(out, full + rank * N, sizeof(out));
        assert_int_equal(started(&f), 4);
    }
}

/* The tensor-parallel gather and scatter of the last dimension: [rows, cols] blocks side by
 * side, rank r's at columns [r * cols, (r + 1) * cols). */
static void test_last_dimension(void **state)
{
    enum { ROWS = 3, COLS = 4 };
    for (int rank = 0; rank < 2; rank++) {
        fake_t f;
        fake_init(&f, rank);
        const mc_tp_t tp = tp_over(&f, 2, false);
        float local[ROWS * COLS], full[ROWS * 2 * COLS], work[ROWS * 2 * COLS], back[ROWS * COLS];
        fill(local, ROWS * COLS, 1);
        mc_tp_gather_last(&tp, local, full, work, ROWS, COLS);
        for (int i = 0; i < ROWS; i++)
            for (int j = 0; j < COLS; j++) {
                assert_true(full[i * 2 * COLS + rank * COLS + j] == local[i * COLS + j]);
                assert_true(full[i * 2 * COLS + (1 - rank) * COLS + j] == peer_value(i * COLS + j));
            }
        mc_tp_scatter_last(&tp, full, back, ROWS, COLS);
        assert_memory_equal(back, local, sizeof(local));
        assert_int_equal(started(&f), 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rank),
        cmocka_unit_test(test_copy_and_reduce),
        cmocka_unit_test(test_sequence_parallel),
        cmocka_unit_test(test_last_dimension),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
