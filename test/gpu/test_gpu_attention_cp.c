/* The CUDA context-parallel attention ops against the CPU backend's, fp32/bf16/fp16: block
 * forward (output and log-sum-exp) and backward (the query and key/value gradients, accumulated
 * onto what the accumulators held), for full and causal blocks with keys after, before and
 * around the queries (rows that see no key), grouped queries, head dims up to 256 and past a
 * warp's 32 keys, with and without dropout keyed by global positions at a head offset; the
 * log-sum-exp merge (with -inf on either side); copy_2d with and without a conversion; the blocks
 * on cuDNN's fused attention once the setup chose it for a cp run (test_cudnn_blocks, its own
 * tolerances).
 *
 * Tolerance: the CPU normalises after exp with a 2-ulp vector exp and sums in double, the CUDA
 * kernels use expf and an online softmax: outputs within 2e-5 relative (atol 2e-6 of the
 * values' scale, scores of a few units); gradients, longer sums of products, 1e-4 of the largest
 * with 5e-5 relative. copy_2d and the merge's arithmetic (double, as the CPU) are exact apart from
 * exp's last bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/attention_choice.h"
#include "kernels/device.h"
#include "test/gpu/gpu_test.h"
#ifdef MC_WITH_CUDA
#include "kernels/cuda/attention.h"
#endif

typedef struct {
    int Sq, Sk, B, NH, NG, HD, q_pos, k_pos, S_full, mask, head_offset, NH_full;
    float p;
} blk_t;

/* Tolerances of a block's outputs: atol as a fraction of the reference's largest, rtol. */
typedef struct {
    double out_a, out_r, lse_a, lse_r, grad_a, grad_r;
} tol_t;

/* The project's kernels (this file's header). */
static const tol_t KERNELS = {2e-6, 2e-5, 1e-6, 2e-6, 1e-4, 5e-5};

static double max_abs(const float *x, long n)
{
    double m = 0;
    for (long i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

static void block_case(const mc_backend_t *be, mc_dtype_t dt, const blk_t *c, const tol_t *t)
{
    const long nq = (long)c->Sq * c->B * (c->NH + 2 * c->NG) * c->HD;
    const long nkv = 2L * c->Sk * c->B * c->NG * c->HD, no = (long)c->Sq * c->B * c->NH * c->HD;
    const long nl = (long)c->Sq * c->B * c->NH;
    const float scale = 1.0f / sqrtf((float)c->HD);
    const mc_dropout_t d = {.seed = 9, .iteration = 4, .layer = 3, .site = 2, .sample0 = 11, .p = c->p};
    void *q = host_rand(dt, nq, -2, 2), *kv = host_rand(dt, nkv, -2, 2), *dout = host_rand(dt, no, -1, 1);
    float *o = host_rand(MC_DT_F32, no, 0, 0), *l = host_rand(MC_DT_F32, nl, 0, 0);
    float *dq = host_rand(MC_DT_F32, no, -1, 1), *dkv = host_rand(MC_DT_F32, nkv, -1, 1);
    size_t fs, bs, gfs, gbs;
    cpu->attention_block_sizes(cpu, dt, c->Sq, c->Sk, c->B, c->NH, c->HD, &fs, &bs);
    be->attention_block_sizes(be, dt, c->Sq, c->Sk, c->B, c->NH, c->HD, &gfs, &gbs);
    void *scr = malloc(fs > bs ? fs : bs), *gscr = be->alloc(be, gfs > gbs ? gfs : gbs);
    void *d_q = dev_put(be, q, dt, nq), *d_kv = dev_put(be, kv, dt, nkv), *d_dout = dev_put(be, dout, dt, no);
    float *d_o = dev_put(be, o, MC_DT_F32, no), *d_l = dev_put(be, l, MC_DT_F32, nl);
    float *d_dq = dev_put(be, dq, MC_DT_F32, no), *d_dkv = dev_put(be, dkv, MC_DT_F32, nkv);
    char what[200];
    snprintf(what, sizeof(what), "block Sq %d Sk %d B %d NH %d NG %d HD %d q %d k %d S %d %s h0 %d p %.2f",
             c->Sq, c->Sk, c->B, c->NH, c->NG, c->HD, c->q_pos, c->k_pos, c->S_full,
             c->mask ? "causal" : "full", c->head_offset, c->p);
    cpu->attention_block_forward(cpu, dt, o, l, scr, q, kv, c->Sq, c->Sk, c->B, c->NH, c->NG, c->HD, c->q_pos,
                                 c->k_pos, c->S_full, c->mask, scale, &d, c->head_offset, c->NH_full);
    be->attention_block_forward(be, dt, d_o, d_l, gscr, d_q, d_kv, c->Sq, c->Sk, c->B, c->NH, c->NG, c->HD,
                                c->q_pos, c->k_pos, c->S_full, c->mask, scale, &d, c->head_offset, c->NH_full);
    float *go = dev_get(be, d_o, MC_DT_F32, no), *gl = dev_get(be, d_l, MC_DT_F32, nl);
    char w2[240];
    snprintf(w2, sizeof(w2), "%s: out", what);
    check_close(w2, MC_DT_F32, go, o, no, t->out_a * max_abs(o, no), t->out_r);
    snprintf(w2, sizeof(w2), "%s: lse", what);
    check_close(w2, MC_DT_F32, gl, l, nl, t->lse_a, t->lse_r);
    /* the backward from the CPU's merged statistics and an output of type dt */
    void *out_dt = host_rand(dt, no, 0, 0);
    mc_convert(out_dt, dt, o, MC_DT_F32, no);
    void *d_out = dev_put(be, out_dt, dt, no);
    be->memcpy_h2d(be, d_l, l, (size_t)nl * sizeof(float));
    cpu->attention_block_backward(cpu, dt, dq, dkv, scr, dout, q, kv, out_dt, l, c->Sq, c->Sk, c->B, c->NH, c->NG,
                                  c->HD, c->q_pos, c->k_pos, c->S_full, c->mask, scale, &d, c->head_offset,
                                  c->NH_full);
    be->attention_block_backward(be, dt, d_dq, d_dkv, gscr, d_dout, d_q, d_kv, d_out, d_l, c->Sq, c->Sk, c->B,
                                 c->NH, c->NG, c->HD, c->q_pos, c->k_pos, c->S_full, c->mask, scale, &d,
                                 c->head_offset, c->NH_full);
    float *gdq = dev_get(be, d_dq, MC_DT_F32, no), *gdkv = dev_get(be, d_dkv, MC_DT_F32, nkv);
    snprintf(w2, sizeof(w2), "%s: dq", what);
    check_close(w2, MC_DT_F32, gdq, dq, no, t->grad_a * max_abs(dq, no), t->grad_r);
    snprintf(w2, sizeof(w2), "%s: dkv", what);
    check_close(w2, MC_DT_F32, gdkv, dkv, nkv, t->grad_a * max_abs(dkv, nkv), t->grad_r);
    be->free(be, d_q), be->free(be, d_kv), be->free(be, d_dout), be->free(be, d_o), be->free(be, d_l);
    be->free(be, d_dq), be->free(be, d_dkv), be->free(be, d_out), be->free(be, gscr);
    free(q), free(kv), free(dout), free(o), free(l), free(dq), free(dkv), free(scr), free(go), free(gl);
    free(out_dt), free(gdq), free(gdkv);
}

static void test_blocks(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    static const blk_t cases[] = {
        /* a ring's diagonal block and a whole earlier chunk; dropout at a tp head offset */
        {.Sq = 12, .Sk = 12, .B = 2, .NH = 4, .NG = 2, .HD = 16, .q_pos = 24, .k_pos = 24, .S_full = 48,
         .mask = MC_ATTN_BLOCK_CAUSAL, .head_offset = 4, .NH_full = 8, .p = 0.2f},
        {.Sq = 12, .Sk = 12, .B = 2, .NH = 4, .NG = 2, .HD = 16, .q_pos = 36, .k_pos = 0, .S_full = 48,
         .mask = MC_ATTN_BLOCK_FULL, .head_offset = 4, .NH_full = 8, .p = 0.2f},
        /* the all-gather's prefix: 70 keys (past two warps' tiles), MQA, head dim 200 */
        {.Sq = 10, .Sk = 70, .B = 1, .NH = 3, .NG = 1, .HD = 200, .q_pos = 60, .k_pos = 0, .S_full = 80,
         .mask = MC_ATTN_BLOCK_CAUSAL, .NH_full = 3, .p = 0.1f},
        /* keys after the first queries: rows that see none (out 0, lse -inf) */
        {.Sq = 9, .Sk = 7, .B = 2, .NH = 2, .NG = 2, .HD = 8, .q_pos = 0, .k_pos = 4, .S_full = 16,
         .mask = MC_ATTN_BLOCK_CAUSAL, .NH_full = 2},
        /* head dim 256, no dropout, one query */
        {.Sq = 1, .Sk = 33, .B = 1, .NH = 2, .NG = 1, .HD = 256, .q_pos = 40, .k_pos = 0, .S_full = 64,
         .mask = MC_ATTN_BLOCK_FULL, .NH_full = 2},
    };
    for (int t = 0; t < 3; t++)
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) block_case(be, GPU_TYPES[t], &cases[k], &KERNELS);
}

/* The blocks on cuDNN's fused flash attention (kernels/cuda/attention_cp_cudnn.cu) once the setup
 * chose it for a cp 2 run: the ring's causal diagonal and unmasked blocks, the all-gather's causal
 * blocks of a query chunk against its whole prefix (bottom-right alignment), multi-head and
 * grouped queries, bf16 and fp16, against the CPU's block ops. cuDNN's output and gradients pass
 * through 16 bits (the block's O, dQ, dK, dV; P and dS before their products), the CPU's are
 * fp32: outputs and gradients within 2e-2 of the largest with 2e-2 relative, the statistics (fp32
 * softmax sums of 16-bit inputs) within 1e-4. Dropout and a causal diagonal that does not end at
 * the last key stay on the project's kernels. a2a's whole-sequence calls (cp's share of the heads)
 * go to cuDNN once the model sized them (test_gpu_attention_cudnn checks that op's numbers). */
static void test_cudnn_blocks(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
#if !defined(MC_WITH_CUDA) || !defined(MC_WITH_CUDNN)
    fprintf(stderr, "# skipped: built without cuDNN\n");
    skip();
#else
    static const tol_t DNN = {2e-2, 2e-2, 1e-4, 1e-4, 2e-2, 2e-2};
    static const blk_t cases[] = {
        /* cp 2, sequence 48: chunks of 12; the diagonal, then a whole earlier chunk (MHA) */
        {.Sq = 12, .Sk = 12, .B = 2, .NH = 2, .NG = 2, .HD = 16, .q_pos = 36, .k_pos = 36, .S_full = 48,
         .mask = MC_ATTN_BLOCK_CAUSAL, .NH_full = 2},
        {.Sq = 12, .Sk = 12, .B = 2, .NH = 2, .NG = 2, .HD = 16, .q_pos = 36, .k_pos = 0, .S_full = 48,
         .mask = MC_ATTN_BLOCK_FULL, .NH_full = 2},
        /* grouped queries (4 heads over 2 groups) */
        {.Sq = 12, .Sk = 12, .B = 2, .NH = 4, .NG = 2, .HD = 16, .q_pos = 12, .k_pos = 12, .S_full = 48,
         .mask = MC_ATTN_BLOCK_CAUSAL, .NH_full = 4},
        {.Sq = 12, .Sk = 12, .B = 2, .NH = 4, .NG = 2, .HD = 16, .q_pos = 24, .k_pos = 12, .S_full = 48,
         .mask = MC_ATTN_BLOCK_FULL, .NH_full = 4},
        /* the all-gather's: rank 1's first chunk against keys [0, 24), rank 0's second against all */
        {.Sq = 12, .Sk = 24, .B = 2, .NH = 2, .NG = 2, .HD = 16, .q_pos = 12, .k_pos = 0, .S_full = 48,
         .mask = MC_ATTN_BLOCK_CAUSAL, .NH_full = 2},
        {.Sq = 12, .Sk = 48, .B = 2, .NH = 4, .NG = 2, .HD = 16, .q_pos = 36, .k_pos = 0, .S_full = 48,
         .mask = MC_ATTN_BLOCK_CAUSAL, .NH_full = 4},
    };
    for (int t = 1; t < 3; t++)
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
            const blk_t *c = &cases[k];
            const mc_attention_spec_t s = {.backend = MC_ATTENTION_FLASH, .dt = GPU_TYPES[t], .S = 48,
                                           .B = 2, .B_eval = 2, .NH = c->NH, .NG = c->NG, .HD = 16,
                                           .cp = 2};
            char line[1024];
            mc_backend_attention_setup(be, &s, line, sizeof(line));
            if (strncmp(line, "cuDNN ", 6) != 0) fail_msg("cuDNN was not chosen for cp 2: %s", line);
            size_t fs, bs; /* the model sizes its block scratch first: cuDNN runs what fits */
            be->attention_block_sizes(be, GPU_TYPES[t], c->Sq, c->Sk, c->B, c->NH, c->HD, &fs, &bs);
            assert_true(mc_cuda_attention_block_uses_cudnn(GPU_TYPES[t], c->Sq, c->Sk, c->B, c->NH, c->NG,
                                                           c->HD, c->q_pos, c->k_pos, c->mask, 0.0f));
            /* the project's kernels: dropout, a diagonal that ends before the last key */
            assert_false(mc_cuda_attention_block_uses_cudnn(GPU_TYPES[t], c->Sq, c->Sk, c->B, c->NH, c->NG,
                                                            c->HD, c->q_pos, c->k_pos, c->mask, 0.1f));
            assert_false(mc_cuda_attention_block_uses_cudnn(GPU_TYPES[t], 12, 48, 2, c->NH, c->NG, 16, 24,
                                                            0, MC_ATTN_BLOCK_CAUSAL, 0.0f));
            block_case(be, GPU_TYPES[t], c, &DNN);
            /* a2a: the whole sequence of cp's share of the heads, once sized; not with dropout,
             * nor the run's own heads (no whole-sequence call under cp has them) */
            size_t st, sc;
            be->attention_sizes(be, GPU_TYPES[t], 48, 2, c->NH / 2, 16, &st, &sc);
            assert_true(mc_cuda_attention_uses_cudnn(GPU_TYPES[t], 48, 2, c->NH / 2, c->NG / 2, 16, 0.0f));
            assert_false(mc_cuda_attention_uses_cudnn(GPU_TYPES[t], 48, 2, c->NH / 2, c->NG / 2, 16, 0.1f));
            assert_false(mc_cuda_attention_uses_cudnn(GPU_TYPES[t], 48, 2, c->NH, c->NG, 16, 0.0f));
        }
    const mc_attention_spec_t off = {.backend = MC_ATTENTION_LOCAL, .dt = MC_DT_BF16, .S = 48, .B = 2,
                                     .B_eval = 2, .NH = 2, .NG = 2, .HD = 16, .cp = 2};
    mc_backend_attention_setup(be, &off, NULL, 0);
    assert_false(mc_cuda_attention_block_uses_cudnn(MC_DT_BF16, 12, 12, 2, 2, 2, 16, 36, 36,
                                                    MC_ATTN_BLOCK_CAUSAL, 0.0f));
#endif
}

static void test_merge(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    const long rows = 37, NH = 3, HD = 40, n = rows * NH * HD, nl = rows * NH;
    float *o = host_rand(MC_DT_F32, n, -1, 1), *p = host_rand(MC_DT_F32, n, -1, 1);
    float *l = host_rand(MC_DT_F32, nl, -3, 3), *pl = host_rand(MC_DT_F32, nl, -3, 3);
    for (long r = 0; r < nl; r += 5) l[r] = -INFINITY;
    for (long r = 2; r < nl; r += 7) pl[r] = -INFINITY;
    float *d_o = dev_put(be, o, MC_DT_F32, n), *d_p = dev_put(be, p, MC_DT_F32, n);
    float *d_l = dev_put(be, l, MC_DT_F32, nl), *d_pl = dev_put(be, pl, MC_DT_F32, nl);
    cpu->attention_lse_merge(cpu, o, l, p, pl, rows, (int)NH, (int)HD);
    be->attention_lse_merge(be, d_o, d_l, d_p, d_pl, rows, (int)NH, (int)HD);
    float *go = dev_get(be, d_o, MC_DT_F32, n), *gl = dev_get(be, d_l, MC_DT_F32, nl);
    check_close("lse merge: out", MC_DT_F32, go, o, n, 1e-7, 1e-6);
    check_close("lse merge: lse", MC_DT_F32, gl, l, nl, 1e-7, 1e-6);
    be->free(be, d_o), be->free(be, d_p), be->free(be, d_l), be->free(be, d_pl);
    free(o), free(p), free(l), free(pl), free(go), free(gl);
}

static void test_copy_2d(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    const long rows = 23, cols = 13, ls = 29, ld = 17;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            const mc_dtype_t st = GPU_TYPES[a], dt = GPU_TYPES[b];
            void *src = host_rand(st, rows * ls, -3, 3), *dst = host_rand(dt, rows * ld, -1, 1);
            void *d_src = dev_put(be, src, st, rows * ls), *d_dst = dev_put(be, dst, dt, rows * ld);
            cpu->copy_2d(cpu, mc_elem(dst, dt, 2), dt, ld, mc_elem(src, st, 3), st, ls, rows, cols);
            be->copy_2d(be, mc_elem(d_dst, dt, 2), dt, ld, mc_elem(d_src, st, 3), st, ls, rows, cols);
            void *got = dev_get(be, d_dst, dt, rows * ld);
            check_exact("copy_2d", dt, got, dst, rows * ld);
            be->free(be, d_src), be->free(be, d_dst);
            free(src), free(dst), free(got);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_cudnn_blocks),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_copy_2d),
    };
    return cmocka_run_group_tests(tests, gpu_setup, NULL);
}
