/* Megatron's gradient-buffer layout, buckets and distributed-optimizer shards
 * (parallel/grads.h, optim/distopt.h; MEGATRON.md section 7, param_and_grad_buffer.py). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/distopt.h"
#include "parallel/grads.h"

/* A model with only a parameter table: numels in model.parameters() order. */
static void fake_model(mc_gpt_t *m, const long *numel, int n)
{
    memset(m, 0, sizeof(*m));
    m->params = calloc((size_t)n, sizeof(mc_param_t));
    m->n_params = n;
    for (int i = 0; i < n; i++) {
        snprintf(m->params[i].name, sizeof(m->params[i].name), "p%d", i);
        m->params[i].numel = numel[i];
        m->params[i].ndim = 1;
        m->params[i].shape[0] = numel[i];
    }
}

static void check_bucket(const mc_grad_layout_t *l, int k, long start, long end, long unpadded,
                         int lo, int hi)
{
    const mc_bucket_t *b = &l->buckets[k];
    assert_int_equal(b->start, start);
    assert_int_equal(b->end, end);
    assert_int_equal(b->numel_unpadded, unpadded);
    assert_int_equal(b->param_lo, lo);
    assert_int_equal(b->param_hi, hi);
}

/* Worked by hand from Megatron's algorithm: reverse order, 64-element starts, bucket ends padded
 * to lcm(dp, 128). */
static void test_distopt_one_bucket(void **state)
{
    (void)state;
    const long numel[] = {10, 20, 30};
    mc_gpt_t m;
    mc_grad_layout_t l;
    fake_model(&m, numel, 3);
    mc_grad_layout(&m, 0, 2, true, false, &l);
    assert_int_equal(m.params[2].offset, 0);
    assert_int_equal(m.params[1].offset, 64);
    assert_int_equal(m.params[0].offset, 128);
    assert_int_equal(l.n_buckets, 1);
    check_bucket(&l, 0, 0, 256, 138, 0, 3);
    assert_int_equal(m.n_elems, 256);
    for (int i = 0; i < 3; i++) assert_int_equal(l.param_bucket[i], 0);

    long lo, hi;
    mc_bucket_shard(&l.buckets[0], 2, 1, &lo, &hi);
    assert_int_equal(lo, 128);
    assert_int_equal(hi, 256);
    mc_grad_layout_free(&l);
    free(m.params);
}

static void test_distopt_buckets(void **state)
{
    (void)state;
    const long numel[] = {10, 20, 30};
    mc_gpt_t m;
    mc_grad_layout_t l;
    fake_model(&m, numel, 3);
    /* bucket closes once it holds >= 50 elements: after p1 (ends at 84) */
    mc_grad_layout(&m, 50, 2, true, false, &l);
    assert_int_equal(l.n_buckets, 2);
    check_bucket(&l, 0, 0, 128, 84, 1, 3);
    check_bucket(&l, 1, 128, 256, 10, 0, 1);
    assert_int_equal(l.param_bucket[0], 1);
    assert_int_equal(l.param_bucket[1], 0);
    assert_int_equal(l.param_bucket[2], 0);
    mc_grad_layout_free(&l);

    /* tied embedding across stages: the word embedding (p0) gets its own bucket, which closes
     * the previous one at the embedding's padded start */
    m.params[0].shared_embedding = true;
    mc_grad_layout(&m, 0, 2, true, false, &l);
    assert_int_equal(l.n_buckets, 2);
    check_bucket(&l, 0, 0, 128, 128, 1, 3);
    check_bucket(&l, 1, 128, 256, 10, 0, 1);
    mc_grad_layout_free(&l);
    m.params[0].shared_embedding = false;

    /* the last stage's output copy (the last parameter) gets its own bucket too */
    m.params[2].shared_embedding = true;
    mc_grad_layout(&m, 0, 2, true, false, &l);
    assert_int_equal(l.n_buckets, 2);
    check_bucket(&l, 0, 0, 128, 30, 2, 3);
    check_bucket(&l, 1, 128, 256, 74, 0, 2);
    mc_grad_layout_free(&l);
    m.params[2].shared_embedding = false;

    /* dp 3: lcm(3, 128) = 384; with the NCCL padding lcm(3, 128, 65536) = 196608 */
    mc_grad_layout(&m, 0, 3, true, false, &l);
    check_bucket(&l, 0, 0, 384, 138, 0, 3);
    mc_grad_layout_free(&l);
    mc_grad_layout(&m, 0, 3, true, true, &l);
    check_bucket(&l, 0, 0, 196608, 138, 0, 3);
    mc_grad_layout_free(&l);
    free(m.params);
}

/* Without the distributed optimizer nothing is padded for dp; starts keep 16-alignment. */
static void test_plain_layout(void **state)
{
    (void)state;
    const long numel[] = {10, 20, 30, 7};
    mc_gpt_t m;
    mc_grad_layout_t l;
    fake_model(&m, numel, 4);
    mc_grad_layout(&m, 0, 4, false, false, &l);
    assert_int_equal(l.n_buckets, 1);
    assert_int_equal(m.params[3].offset, 0);
    assert_int_equal(m.params[2].offset, 16);
    assert_int_equal(m.params[1].offset, 48);
    assert_int_equal(m.params[0].offset, 80);
    check_bucket(&l, 0, 0, 90, 90, 0, 4);
    assert_int_equal(m.n_elems, 96);
    mc_grad_layout_free(&l);
    /* bucket_size 20: p3 [0,7) < 20; p2 [16,46) closes; p1 [48,68) closes; p0 [80,90) last */
    mc_grad_layout(&m, 20, 4, false, false, &l);
    assert_int_equal(l.n_buckets, 3);
    check_bucket(&l, 0, 0, 46, 46, 2, 4);
    check_bucket(&l, 1, 46, 68, 22, 1, 2);
    check_bucket(&l, 2, 68, 90, 22, 0, 1);
    mc_grad_layout_free(&l);
    free(m.params);
}

/* Expert parallelism (the model's moe.ep > 1): expert and dense parameters never share a bucket
 * (Megatron's separate expert_parallel_buffers), the expert buckets are flagged for the
 * expert-data-parallel group, and their scale is Megatron's expert_gradient_scaling_factor. */
static void test_expert_buckets(void **state)
{
    (void)state;
    const long numel[] = {10, 20, 30, 7};
    mc_gpt_t m;
    mc_grad_layout_t l;
    fake_model(&m, numel, 4);
    const int expert[] = {-1, 0, 1, -1};
    for (int i = 0; i < 4; i++) m.params[i].expert = expert[i];
    m.cfg.moe.num_experts = 4;
    m.cfg.moe.ep = 2;
    mc_grad_layout(&m, 0, 4, false, false, &l);
    /* reverse order: p3 [0,7) dense; p2 [16,46) and p1 [48,68) experts; p0 [80,90) dense */
    assert_int_equal(l.n_buckets, 3);
    check_bucket(&l, 0, 0, 16, 16, 3, 4);
    check_bucket(&l, 1, 16, 80, 64, 1, 3);
    check_bucket(&l, 2, 80, 90, 10, 0, 1);
    assert_false(l.buckets[0].expert);
    assert_true(l.buckets[1].expert);
    assert_false(l.buckets[2].expert);
    mc_grad_layout_free(&l);
    /* at ep 1 the same table is one bucket, as before expert parallelism */
    m.cfg.moe.ep = 1;
    mc_grad_layout(&m, 0, 4, false, false, &l);
    assert_int_equal(l.n_buckets, 1);
    assert_false(l.buckets[0].expert);
    mc_grad_layout_free(&l);
    /* the scales at dp 4, edp 2: 1/dp for both, or (averaging in the collective) 1 and edp/dp */
    m.cfg.moe.ep = 2;
    mc_group_t edp = {.rank = 0, .size = 2, .name = "edp"};
    for (int avg = 0; avg < 2; avg++) {
        mc_ddp_config_t c = {.average_in_collective = avg};
        mc_ddp_t d;
        mc_ddp_plan(&d, &m, &c, 4, 0);
        mc_ddp_bind_experts(&d, &edp, NULL);
        assert_int_equal(d.edp, 2);
        assert_true(d.grad_scale == (avg ? 1.0f : 0.25f));
        assert_true(d.expert_grad_scale == (avg ? 0.5f : 0.25f));
        mc_ddp_free(&d);
    }
    /* parallel folding at ep 1: tp 2 with etp 1 gives the experts buckets of their own over
     * edp = dp * tp / etp (here 2 at dp 1), scaled by 1/dp (edp/dp averaging in the collective) */
    m.cfg.moe.ep = 1;
    m.cfg.tp = 2;
    m.cfg.moe.etp = 1;
    mc_grad_layout(&m, 0, 4, false, false, &l);
    assert_int_equal(l.n_buckets, 3);
    assert_true(l.buckets[1].expert);
    mc_grad_layout_free(&l);
    for (int avg = 0; avg < 2; avg++) {
        mc_ddp_config_t c = {.average_in_collective = avg};
        mc_ddp_t d;
        mc_ddp_plan(&d, &m, &c, 1, 0);
        mc_ddp_bind_experts(&d, &edp, NULL);
        assert_true(d.grad_scale == 1.0f);
        assert_true(d.expert_grad_scale == (avg ? 2.0f : 1.0f));
        mc_ddp_free(&d);
    }
    /* etp = tp: the experts' groups are the dense ones (one bucket) */
    m.cfg.moe.etp = 2;
    mc_grad_layout(&m, 0, 4, false, false, &l);
    assert_int_equal(l.n_buckets, 1);
    mc_grad_layout_free(&l);
    free(m.params);
}

static void test_bucket_size_rule(void **state)
{
    (void)state;
    mc_ddp_config_t c;
    memset(&c, 0, sizeof(c));
    c.dp_cp_size = 8;
    assert_int_equal(mc_ddp_bucket_size(&c, 1000), 0); /* no overlap: one bucket */
    c.bucket_size = 123;
    assert_int_equal(mc_ddp_bucket_size(&c, 1000), 0);
    c.overlap_grad_reduce = true;
    assert_int_equal(mc_ddp_bucket_size(&c, 1000), 123);
    c.bucket_size = 0;
    assert_int_equal(mc_ddp_bucket_size(&c, 1000), 40000000);
    c.dp_cp_size = 64;
    assert_int_equal(mc_ddp_bucket_size(&c, 1000), 64000000);
    c.num_buckets = 3;
    assert_int_equal(mc_ddp_bucket_size(&c, 1000), 333);
}

static long lcm_128(long dp)
{
    long l = 128;
    while (l % dp) l += 128;
    return l;
}

/* The shards of all dp ranks cover every parameter element exactly once, and each rank's state
 * is its shard size. */
static void test_shards_cover_params(void **state)
{
    (void)state;
    const long numel[] = {1000, 64, 3, 700, 129, 5000, 1};
    const int n = 7;
    for (int dp = 1; dp <= 8; dp++) {
        for (long bs = 0; bs <= 2000; bs += 1000) {
            mc_gpt_t m;
            mc_grad_layout_t l;
            fake_model(&m, numel, n);
            mc_grad_layout(&m, bs, dp, true, false, &l);
            int *hits = calloc((size_t)m.n_elems, sizeof(int));
            long total_state = 0;
            for (int r = 0; r < dp; r++) {
                mc_opt_seg_t *segs;
                int ns;
                long state_len;
                mc_distopt_segments(&m, &l, dp, r, &segs, &ns, &state_len);
                long sum_shards = 0;
                for (int b = 0; b < l.n_buckets; b++) sum_shards += (l.buckets[b].end - l.buckets[b].start) / dp;
                assert_int_equal(state_len, sum_shards);
                for (int s = 0; s < ns; s++) {
                    const mc_param_t *p = &m.params[segs[s].param];
                    assert_true(segs[s].off >= p->offset && segs[s].off + segs[s].len <= p->offset + p->numel);
                    assert_true(segs[s].state_off >= 0 && segs[s].state_off + segs[s].len <= state_len);
                    for (long e = segs[s].off; e < segs[s].off + segs[s].len; e++) hits[e]++;
                }
                total_state += state_len;
                free(segs);
            }
            for (int i = 0; i < n; i++)
                for (long e = m.params[i].offset; e < m.params[i].offset + m.params[i].numel; e++)
                    assert_int_equal(hits[e], 1);
            long covered = 0;
            for (long e = 0; e < m.n_elems; e++) covered += hits[e];
            long params = 0;
            for (int i = 0; i < n; i++) params += numel[i];
            assert_int_equal(covered, params);
            for (int b = 0; b < l.n_buckets; b++) {
                assert_int_equal((l.buckets[b].end - l.buckets[b].start) % lcm_128(dp), 0);
                assert_int_equal(l.buckets[b].start % 64, 0);
            }
            for (int i = 0; i < n; i++) assert_int_equal(m.params[i].offset % 64, 0);
            assert_int_equal(total_state, m.n_elems);
            free(hits);
            mc_grad_layout_free(&l);
            free(m.params);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distopt_one_bucket),
        cmocka_unit_test(test_distopt_buckets),
        cmocka_unit_test(test_plain_layout),
        cmocka_unit_test(test_expert_buckets),
        cmocka_unit_test(test_bucket_size_rule),
        cmocka_unit_test(test_shards_cover_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
