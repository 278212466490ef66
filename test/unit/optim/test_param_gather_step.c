/* --overlap-param-gather-with-optimizer-step (Megatron's ChainedOptimizer._step: the first model
 * chunk's optimizer steps, model_chunks[0].start_param_sync(force_dispatch=True), then the
 * others): a bucket per model chunk (parallel/grads.c), and the order of the step's Adam updates
 * and parameter all-gathers as the communicator and the backend see them: the first chunk's
 * gather starts between its Adam update and the other chunks', instead of after every update.
 * The updates are the same. Two model chunks on the CPU backend, the distributed optimizer over a
 * recording communicator of dp 2. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/adam.h"
#include "optim/distopt.h"
#include "parallel/grads.h"

/* ---- the trace: "A<first param>" per Adam call, "G<bucket>" per all-gather started ---- */

static char g_trace[512];
static mc_backend_t g_be;
static const mc_gpt_t *g_model;
static mc_ddp_t *g_ddp;

static void trace(const char *fmt, int v)
{
    size_t len = strlen(g_trace);
    snprintf(g_trace + len, sizeof(g_trace) - len, fmt, v);
}

static void rec_adam(const mc_backend_t *be, const mc_adam_tensor_t *t, int count, mc_dtype_t dt,
                     float lr, float b1, float b2, float eps, int step)
{
    /* the chunk of the first tensor's parameter (its bf16 copy in the model): 0 or 1 */
    int first, n, chunk = -1;
    mc_gpt_chunk_params(g_model, 1, &first, &n);
    const long off = (long)((const char *)t[0].model - (const char *)g_model->param_buf) / 2;
    for (int i = 0; i < g_model->n_params; i++)
        if (off >= g_model->params[i].offset &&
            off < g_model->params[i].offset + g_model->params[i].numel)
            chunk = i >= first ? 1 : 0;
    trace("A%d ", chunk);
    mc_backend_cpu()->adam_step(be, t, count, dt, lr, b1, b2, eps, step);
}

static void gather_of(void *ctx, int first, int n) { mc_ddp_start_param_gather_of(ctx, first, n); }

static mc_req_t rec_start(mc_comm_t *c, const mc_coll_t *op)
{
    (void)c;
    assert_int_equal(op->kind, MC_COLL_ALL_GATHER);
    /* the bucket whose shard is sent */
    for (int k = 0; k < g_ddp->layout.n_buckets; k++) {
        long lo, hi;
        mc_ddp_bucket_shard(g_ddp, k, &lo, &hi);
        if (op->send == mc_gpt_param_at(g_model, lo)) trace("G%d ", k);
    }
    return MC_REQ_DONE;
}

static void rec_wait(mc_comm_t *c, mc_req_t r) { (void)c, (void)r; }

/* One step of a two-chunk model (bf16: the Adam step writes the model's copies, which name the
 * chunk) with the flag or without; returns the trace and the number of buckets in *buckets. */
static const char *one_step(bool with_step, int *buckets)
{
    static mc_gpt_t m;
    static mc_ddp_t d;
    mc_gpt_config_t c = {.num_layers = 2,
                         .hidden = 16,
                         .heads = 2,
                         .groups = 2,
                         .head_dim = 8,
                         .ffn = 32,
                         .seq = 4,
                         .max_batch = 1,
                         .vocab = 64,
                         .max_pos = 4,
                         .eps = 1e-5f,
                         .bias = true,
                         .act = MC_ACT_GELU_TANH,
                         .init_std = 0.2f,
                         .embedding_init_std = 0.2f,
                         .seed = 3,
                         .tp = 1,
                         .dt = MC_DT_BF16,
                         .gdt = MC_DT_F32,
                         .n_chunks = 2};
    c.chunk[0] = (mc_chunk_cfg_t){.first_layer = 0, .n_layers = 1, .pre = true};
    c.chunk[1] = (mc_chunk_cfg_t){.first_layer = 1, .n_layers = 1, .post = true};
    c.slots[0] = c.slots[1] = 1;
    g_be = *mc_backend_cpu();
    g_be.adam_step = rec_adam;
    memset(&m, 0, sizeof(m));
    mc_gpt_build_params(&m, &c);
    const mc_ddp_config_t dc = {.use_distributed_optimizer = true,
                                .overlap_grad_reduce = true,
                                .overlap_param_gather = true,
                                .overlap_param_gather_with_optimizer_step = with_step,
                                .bucket_size = 1000000,
                                .dp_cp_size = 2};
    mc_ddp_plan(&d, &m, &dc, 2, 0);
    assert_int_equal(mc_gpt_alloc(&m, &g_be), 0);
    mc_gpt_init_params(&m);
    for (long i = 0; i < m.n_elems; i++) ((float *)m.grad_buf)[i] = (float)(i % 7) * 0.01f;
    static mc_comm_t comm;
    static mc_group_t group;
    comm = (mc_comm_t){.name = "rec", .size = 2, .start = rec_start, .wait = rec_wait};
    group = (mc_group_t){.rank = 0, .size = 2, .name = "dp"};
    mc_ddp_bind(&d, &comm, &group, NULL); /* one instance */
    g_model = &m, g_ddp = &d;
    mc_opt_seg_t *segs;
    int n;
    long len;
    mc_distopt_segments_ddp(&m, &d, &segs, &n, &len);
    mc_adam_t opt;
    const mc_optim_config_t oc = {
        .adam_beta1 = 0.9, .adam_beta2 = 0.95, .adam_eps = 1e-8, .bf16 = true};
    assert_int_equal(mc_adam_init(&opt, &m, &oc, segs, n, len), 0);
    mc_opt_master_from_model(&opt);
    g_trace[0] = '\0';
    if (with_step) {
        int first, count;
        mc_gpt_chunk_params(&m, 0, &first, &count);
        mc_adam_step_first(&opt, 1e-2, -1, 0.1, first, count, gather_of, &d);
    } else {
        mc_adam_step(&opt, 1e-2, -1, 0.1);
    }
    mc_ddp_start_param_gather(&d);
    mc_ddp_finish_param_gather(&d);
    *buckets = d.layout.n_buckets;
    mc_adam_free(&opt);
    mc_ddp_free(&d);
    mc_gpt_free(&m);
    return g_trace;
}

static void test_order(void **state)
{
    (void)state;
    int nb;
    char without[512];
    snprintf(without, sizeof(without), "%s", one_step(false, &nb));
    /* one bucket (--ddp-bucket-size over the model); one Adam call over both chunks (the buffer
     * runs backwards: chunk 1's parameters first), then the gather */
    assert_int_equal(nb, 1);
    assert_string_equal(without, "A1 G0 ");
    const char *with = one_step(true, &nb);
    /* a bucket per chunk, chunk 1's first; chunk 0's update, its gather, then chunk 1's update
     * and gather */
    assert_int_equal(nb, 2);
    assert_string_equal(with, "A0 G1 A1 G0 ");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_order)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
