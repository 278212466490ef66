/* The blocks of a layer alone at tp = 2 against tp = 1 (model/attention.c, model/mlp.c over the
 * mappings of model/tp.c): each block's forward output, input gradient and parameter gradients on
 * two tensor-parallel ranks, with and without sequence parallelism, equal the one-rank block's
 * (their tp slices; a norm's partial gradients summed over tp), so a broken tp seam fails here
 * under the block's name instead of as a loss a few digits off in test_tp.sh. The two ranks are
 * two threads of this process on the CPU backend (fp32), joined by a test communicator; with
 * --tp-comm-overlap's chunks and bulk overlaps too. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/block.h"
#include "model/layer_spec.h"

/* ---- a communicator of two threads ---- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int waiting, generation;
    const float *send[2];
} shared_t;

/* A barrier of the two ranks that ends the test instead of hanging when a rank never comes (a
 * collective one rank starts and the other does not). */
static void barrier(shared_t *sh)
{
    pthread_mutex_lock(&sh->mu);
    const int gen = sh->generation;
    if (++sh->waiting == 2) {
        sh->waiting = 0;
        sh->generation++;
        pthread_cond_broadcast(&sh->cv);
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    while (gen == sh->generation)
        if (pthread_cond_timedwait(&sh->cv, &sh->mu, &until) != 0) {
            fprintf(stderr, "test_blocks: a tp rank waited 60 s for the other in a collective\n");
            abort();
        }
    pthread_mutex_unlock(&sh->mu);
}

typedef struct {
    mc_comm_t c;
    mc_group_t g;
    shared_t *sh;
} thread_comm_t;

/* --tp-comm-overlap's exchange of two ranks: one send to the other rank and one receive from it,
 * blocking as the collectives. */
static mc_req_t p2p_start(thread_comm_t *t, const mc_coll_t *op)
{
    shared_t *sh = t->sh;
    const int r = t->g.rank;
    const mc_p2p_t *snd = NULL, *rcv = NULL;
    for (int i = 0; i < op->n_p2p; i++) {
        if (op->p2p[i].peer != 1 - r || op->p2p[i].dt != MC_DT_F32) abort();
        if (op->p2p[i].is_send) snd = &op->p2p[i];
        else rcv = &op->p2p[i];
    }
    if (op->n_p2p != 2 || !snd || !rcv || snd->count != rcv->count) abort();
    sh->send[r] = snd->buf;
    barrier(sh);
    memcpy(rcv->buf, sh->send[1 - r], rcv->count * sizeof(float));
    barrier(sh);
    return MC_REQ_DONE;
}

/* Every collective is blocking: both ranks post their buffers, each computes its result from
 * both into a private copy, and writes it once both have read. */
static mc_req_t tc_start(mc_comm_t *c, const mc_coll_t *op)
{
    thread_comm_t *t = (thread_comm_t *)c;
    shared_t *sh = t->sh;
    const int r = t->g.rank, n = (int)op->count;
    if (op->kind == MC_COLL_P2P_BATCH) return p2p_start(t, op);
    if (op->dt != MC_DT_F32) abort();
    sh->send[r] = op->kind == MC_COLL_ALL_REDUCE ? op->recv : op->send;
    barrier(sh);
    const long out_n = op->kind == MC_COLL_ALL_GATHER ? 2L * n : n;
    float *res = malloc((size_t)out_n * sizeof(float));
    for (long i = 0; i < out_n; i++) switch (op->kind) {
        case MC_COLL_ALL_REDUCE:
            res[i] = op->op == MC_OP_MAX ? fmaxf(sh->send[0][i], sh->send[1][i])
                                         : sh->send[0][i] + sh->send[1][i];
            break;
        case MC_COLL_ALL_GATHER: res[i] = sh->send[i / n][i % n]; break;
        case MC_COLL_REDUCE_SCATTER:
            res[i] = sh->send[0][r * n + i] + sh->send[1][r * n + i];
            break;
        default: abort();
        }
    barrier(sh);
    memcpy(op->recv, res, (size_t)out_n * sizeof(float));
    free(res);
    return MC_REQ_DONE;
}

static void tc_wait(mc_comm_t *c, mc_req_t req) {}

/* ---- models ---- */

typedef struct {
    const char *name;
    bool swiglu, sp, qk_norm, rope, gqa;
    bool overlap; /* --tp-comm-overlap, in 3 chunks of a rank's 8 rows (2, 3 and 3) */
} case_t;

static mc_gpt_config_t config(const case_t *k, int tp, int rank)
{
    mc_gpt_config_t c = {.num_layers = 2,
                         .hidden = 16,
                         .heads = 4,
                         .head_dim = 4,
                         .ffn = 24,
                         .seq = 8,
                         .max_batch = 2,
                         .vocab = 64,
                         .max_pos = 8,
                         .eps = 1e-5f,
                         .bias = true,
                         .tied = true,
                         .act = MC_ACT_GELU_TANH,
                         .init_std = 0.2f,
                         .embedding_init_std = 0.02f,
                         .seed = 99,
                         .attention_dropout = 0.25f,
                         .tp = tp,
                         .tp_rank = rank};
    c.groups = k->gqa ? 2 : 4;
    c.swiglu = k->swiglu;
    c.qk_norm = k->qk_norm;
    c.rms = k->swiglu; /* the Llama block with SwiGLU, GPT's otherwise */
    c.sequence_parallel = k->sp && tp > 1;
    if (k->overlap && c.sequence_parallel)
        c.tp_overlap = (mc_tp_overlap_t){
            .chunks = 3, .ag = true, .rs = true, .bulk_dgrad = true, .bulk_wgrad = true};
    if (k->rope) {
        c.pos = MC_POS_ROPE;
        c.rope = (mc_rope_cfg_t){.rot_dim = 4, .base = 10000};
    }
    return c;
}

static void model_init(mc_gpt_t *m, const case_t *k, int tp, int rank, thread_comm_t *tc)
{
    const mc_gpt_config_t c = config(k, tp, rank);
    mc_gpt_build_params(m, &c);
    if (tc) {
        m->comm = &tc->c;
        m->tp_group = &tc->g;
    }
    assert_int_equal(mc_gpt_alloc(m, mc_backend_cpu()), 0);
    mc_gpt_init_params(m);
    memset(m->grad_buf, 0, (size_t)m->n_elems * sizeof(float));
    m->cur = &m->slots[1][0];
    m->cur_chunk = 0;
    m->cur->batch = c.max_batch;
    m->cur->sample0 = 40;
    m->cur->segments = NULL;
}

/* A fixed pseudo-random tensor (the same on every rank). */
static void fill(float *x, long n, uint32_t seed)
{
    for (long i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

/* ---- one block at tp = 1 and tp = 2 ---- */

enum { LAYER = 1, ITER = 3 };

typedef struct {
    const case_t *k;
    const mc_block_ops_t *ops;
    mc_gpt_t m;
    thread_comm_t tc;
    const float *in_full, *dy_full; /* [S, B, H] */
    float *y, *din;                 /* this rank's rows of the output and input gradient */
} run_t;

static void *block_acts(mc_gpt_t *m, const mc_block_ops_t *ops)
{
    mc_layer_acts_t *a = &m->cur->acts[LAYER];
    return ops == &mc_mlp ? (void *)&a->mlp : (void *)&a->attn;
}

/* The block's forward and backward on this rank's rows of in_full and dy_full. */
static void *run_block(void *arg)
{
    run_t *r = arg;
    mc_gpt_t *m = &r->m;
    mc_layer_run_t lr = mc_gpt_layer_run(m, LAYER, ITER, true);
    const long rows_off = (long)lr.t.seq_start * lr.B * m->cfg.hidden;
    const size_t bytes = (size_t)lr.NL * sizeof(float);
    float *in = malloc(bytes);
    memcpy(in, r->in_full + rows_off, bytes);
    void *acts = block_acts(m, r->ops);
    memcpy(r->y, r->ops->forward(&lr, acts, in), bytes);
    memcpy(m->dtmp_h, r->dy_full + rows_off, bytes);
    r->ops->backward(&lr, acts, in, m->dtmp_h, m->dx);
    memcpy(r->din, m->dx, bytes);
    free(in);
    return NULL;
}

/* The element of the one-rank tensor that element (i, j) of p's slice on `rank` holds. */
static long full_index(const mc_param_t *p, int rank, long i, long j)
{
    const long cols = p->ndim > 1 ? (long)p->shape[1] : 1;
    if (p->split == MC_SPLIT_COLS) return i * cols + rank * (long)p->local[1] + j;
    return (long)mc_param_full_row(p, rank, i) * cols + j;
}

static double rel_err(double got, double want, double scale)
{
    return fabs(got - want) / (scale > 1e-30 ? scale : 1e-30);
}

/* Each parameter gradient of the layer on both ranks against the one-rank one: a slice, or the
 * whole tensor (a partial sum over the ranks' heads for the q/k norms). */
static void check_grads(const run_t *one, const run_t two[2])
{
    for (int i = 0; i < one->m.n_params; i++) {
        const mc_param_t *p = &one->m.params[i];
        if (p->layer != LAYER) continue;
        const mc_param_t *q[2] = {mc_gpt_find_param(&two[0].m, p->name),
                                  mc_gpt_find_param(&two[1].m, p->name)};
        const float *want = (const float *)one->m.grad_buf + p->offset;
        double scale = 0;
        for (long e = 0; e < p->numel; e++) scale = fmax(scale, fabs(want[e]));
        for (int r = 0; r < 2; r++) {
            const float *got = (const float *)two[r].m.grad_buf + q[r]->offset;
            const float *other = (const float *)two[1 - r].m.grad_buf + q[1 - r]->offset;
            const long cols = q[r]->ndim > 1 ? (long)q[r]->local[1] : 1;
            for (long e = 0; e < q[r]->numel; e++) {
                const double g = q[r]->seq_parallel ? (double)got[e] + other[e] : got[e];
                const long at = full_index(q[r], r, e / cols, e % cols);
                if (rel_err(g, want[at], scale) > 1e-5)
                    fail_msg("%s: gradient of %s, rank %d element %ld: %g, one rank's %g",
                             one->k->name, p->name, r, e, g, want[at]);
            }
        }
    }
}

static void check_rows(const char *what, const case_t *k, const float *one, const float *got,
                       long n, long off)
{
    double scale = 0;
    for (long e = 0; e < n; e++) scale = fmax(scale, fabs(one[off + e]));
    for (long e = 0; e < n; e++)
        if (rel_err(got[e], one[off + e], scale) > 1e-5)
            fail_msg("%s: %s element %ld: %g, one rank's %g", k->name, what, off + e, got[e],
                     one[off + e]);
}

static void check_block(const case_t *k, const mc_block_ops_t *ops)
{
    const mc_gpt_config_t c = config(k, 1, 0);
    const long n = (long)c.seq * c.max_batch * c.hidden;
    float *in = malloc((size_t)n * sizeof(float)), *dy = malloc((size_t)n * sizeof(float));
    fill(in, n, 1), fill(dy, n, 2);
    run_t one = {.k = k, .ops = ops, .in_full = in, .dy_full = dy};
    one.y = malloc((size_t)n * sizeof(float)), one.din = malloc((size_t)n * sizeof(float));
    model_init(&one.m, k, 1, 0, NULL);
    run_block(&one);

    shared_t sh = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    run_t two[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        two[r] = (run_t){.k = k, .ops = ops, .in_full = in, .dy_full = dy};
        two[r].y = malloc((size_t)n * sizeof(float)),
        two[r].din = malloc((size_t)n * sizeof(float));
        two[r].tc = (thread_comm_t){.c = {.start = tc_start, .wait = tc_wait},
                                    .g = {.rank = r, .size = 2, .name = "tp"},
                                    .sh = &sh};
        model_init(&two[r].m, k, 2, r, &two[r].tc);
    }
    for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, run_block, &two[r]);
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);

    for (int r = 0; r < 2; r++) {
        const mc_tp_dims_t t = mc_gpt_tp_dims(&two[r].m.cfg);
        const long rows = (long)t.seq * c.max_batch * c.hidden,
                   off = t.seq_start * c.max_batch * c.hidden;
        check_rows("forward output", k, one.y, two[r].y, rows, off);
        check_rows("input gradient", k, one.din, two[r].din, rows, off);
    }
    check_grads(&one, two);

    for (int r = 0; r < 2; r++) {
        mc_gpt_free(&two[r].m);
        free(two[r].y), free(two[r].din);
    }
    mc_gpt_free(&one.m);
    free(one.y), free(one.din), free(in), free(dy);
}

static const case_t k_gpt = {.name = "gpt"};
static const case_t k_gpt_sp = {.name = "gpt, sequence parallel", .sp = true};
static const case_t k_llama = {.name = "llama", .swiglu = true, .rope = true, .gqa = true};
static const case_t k_llama_sp = {.name = "llama, sequence parallel",
                                  .swiglu = true,
                                  .sp = true,
                                  .rope = true,
                                  .gqa = true,
                                  .qk_norm = true};

static const case_t k_gpt_overlap = {
    .name = "gpt, sequence parallel, tp comm overlap", .sp = true, .overlap = true};
static const case_t k_llama_overlap = {.name = "llama, sequence parallel, tp comm overlap",
                                       .swiglu = true,
                                       .sp = true,
                                       .rope = true,
                                       .gqa = true,
                                       .qk_norm = true,
                                       .overlap = true};

static void test_mlp_tp2(void **s) { check_block(&k_gpt, &mc_mlp); }
static void test_mlp_tp2_sp(void **s) { check_block(&k_gpt_sp, &mc_mlp); }
static void test_mlp_swiglu_tp2(void **s) { check_block(&k_llama, &mc_mlp); }
static void test_mlp_swiglu_tp2_sp(void **s) { check_block(&k_llama_sp, &mc_mlp); }
static void test_attention_tp2(void **s) { check_block(&k_gpt, &mc_self_attention); }
static void test_attention_tp2_sp(void **s) { check_block(&k_gpt_sp, &mc_self_attention); }
static void test_attention_gqa_rope_tp2(void **s) { check_block(&k_llama, &mc_self_attention); }
static void test_attention_qknorm_tp2_sp(void **s) { check_block(&k_llama_sp, &mc_self_attention); }
static void test_mlp_tp2_overlap(void **s) { check_block(&k_gpt_overlap, &mc_mlp); }
static void test_mlp_swiglu_tp2_overlap(void **s) { check_block(&k_llama_overlap, &mc_mlp); }
static void test_attention_tp2_overlap(void **s)
{
    check_block(&k_gpt_overlap, &mc_self_attention);
}
static void test_attention_qknorm_tp2_overlap(void **s)
{
    check_block(&k_llama_overlap, &mc_self_attention);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_tp2),
        cmocka_unit_test(test_mlp_tp2_sp),
        cmocka_unit_test(test_mlp_swiglu_tp2),
        cmocka_unit_test(test_mlp_swiglu_tp2_sp),
        cmocka_unit_test(test_attention_tp2),
        cmocka_unit_test(test_attention_tp2_sp),
        cmocka_unit_test(test_attention_gqa_rope_tp2),
        cmocka_unit_test(test_attention_qknorm_tp2_sp),
        cmocka_unit_test(test_mlp_tp2_overlap),
        cmocka_unit_test(test_mlp_swiglu_tp2_overlap),
        cmocka_unit_test(test_attention_tp2_overlap),
        cmocka_unit_test(test_attention_qknorm_tp2_overlap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
