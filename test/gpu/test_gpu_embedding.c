/* The CUDA embedding forward/backward against the CPU backend. Both are the CPU's arithmetic
 * exactly (forward: one fp32 add then one rounding; backward: each vocabulary row accumulates its
 * [s, b]-ordered dout rows in fp32 from its stored value, rounded once), so the results must be
 * bitwise equal: tokens inside and outside the shard, a shard not starting at 0, repeated
 * tokens (many rows into one vocabulary row, one token in every row), hidden sizes over one
 * block's columns, with and without position embeddings, fp32 and
 * 16-bit gradient buffers, odd hidden sizes, NULL gradients, empty sizes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/gpu/gpu_test.h"

typedef struct {
    int S, B, H, vocab_start, V, P; /* P: rows of wpe */
    int repeat;                     /* draw tokens from only this many values (0: anywhere) */
} emb_case_t;

static int32_t *make_ids(long n, long lo, long span)
{
    int32_t *t = calloc((size_t)n + 1, sizeof(int32_t));
    assert_non_null(t);
    for (long i = 0; i < n; i++) t[i] = (int32_t)(lo + (long)(gpu_urand() * (double)span));
    return t;
}

static void emb_case(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, emb_case_t c, int with_wpe)
{
    const long N = (long)c.S * c.B, no = N * c.H, nwte = (long)c.V * c.H, nwpe = (long)c.P * c.H;
    /* tokens: about a third outside [vocab_start, vocab_start + V) on either side */
    int32_t *tok = c.repeat ? make_ids(N, c.vocab_start, c.repeat) : make_ids(N, c.vocab_start - c.V / 3, c.V + c.V / 2);
    int32_t *pos = make_ids(N, 0, c.P);
    int32_t *d_tok = dev_put(be, tok, MC_DT_I32, N), *d_pos = dev_put(be, pos, MC_DT_I32, N);
    void *wte = host_rand(dt, nwte, -1, 1), *wpe = host_rand(dt, nwpe, -1, 1), *out = host_rand(dt, no, -9, 9);
    void *d_wte = dev_put(be, wte, dt, nwte), *d_wpe = dev_put(be, wpe, dt, nwpe), *d_out = dev_put(be, out, dt, no);
    char what[160];
    snprintf(what, sizeof(what), "embedding S %d B %d H %d shard [%d, +%d) %s", c.S, c.B, c.H, c.vocab_start, c.V,
             with_wpe ? "with positions" : "no positions");

    cpu->embedding_forward(cpu, dt, out, tok, pos, wte, with_wpe ? wpe : NULL, c.S, c.B, c.H, c.vocab_start, c.V);
    be->embedding_forward(be, dt, d_out, d_tok, d_pos, d_wte, with_wpe ? d_wpe : NULL, c.S, c.B, c.H, c.vocab_start,
                          c.V);
    void *got = dev_get(be, d_out, dt, no);
    check_exact(what, dt, got, out, no);
    free(got);

    /* backward onto non-zero gradients ("+=") */
    void *g = host_rand(dt, no, -1, 1), *gwte = host_rand(gdt, nwte, -1, 1), *gwpe = host_rand(gdt, nwpe, -1, 1);
    void *d_g = dev_put(be, g, dt, no), *d_gwte = dev_put(be, gwte, gdt, nwte), *d_gwpe = dev_put(be, gwpe, gdt, nwpe);
    cpu->embedding_backward(cpu, dt, gdt, gwte, with_wpe ? gwpe : NULL, g, tok, pos, c.S, c.B, c.H, c.vocab_start, c.V);
    be->embedding_backward(be, dt, gdt, d_gwte, with_wpe ? d_gwpe : NULL, d_g, d_tok, d_pos, c.S, c.B, c.H,
                           c.vocab_start, c.V);
    void *got_wte = dev_get(be, d_gwte, gdt, nwte), *got_wpe = dev_get(be, d_gwpe, gdt, nwpe);
    check_exact(what, gdt, got_wte, gwte, nwte);
    check_exact(what, gdt, got_wpe, gwpe, nwpe); /* untouched without positions */

    /* only the position gradient (dwte NULL) */
    if (with_wpe) {
        cpu->embedding_backward(cpu, dt, gdt, NULL, gwpe, g, tok, pos, c.S, c.B, c.H, c.vocab_start, c.V);
        be->embedding_backward(be, dt, gdt, NULL, d_gwpe, d_g, d_tok, d_pos, c.S, c.B, c.H, c.vocab_start, c.V);
        free(got_wpe);
        got_wpe = dev_get(be, d_gwpe, gdt, nwpe);
        check_exact(what, gdt, got_wpe, gwpe, nwpe);
    }
    be->free(be, d_tok), be->free(be, d_pos), be->free(be, d_wte), be->free(be, d_wpe), be->free(be, d_out);
    be->free(be, d_g), be->free(be, d_gwte), be->free(be, d_gwpe);
    free(tok), free(pos), free(wte), free(wpe), free(out), free(g), free(gwte), free(gwpe), free(got_wte),
        free(got_wpe);
}

static void test_embedding(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    static const emb_case_t cases[] = {
        {7, 3, 11, 0, 37, 7, 0},          /* odd sizes everywhere */
        {16, 4, 64, 100, 50, 16, 0},      /* shard [100, 150), vector path */
        {33, 5, 24, 0, 40, 64, 3},        /* three tokens only: long runs into few rows */
        {128, 8, 96, 7, 1000, 128, 0},    /* many rows */
        {1, 1, 1, 0, 1, 1, 0},            /* the smallest */
        {96, 6, 300, 0, 64, 96, 1},       /* one token everywhere (EOD): a 576-row run, 3 column slices */
    };
    for (int t = 0; t < 3; t++) {
        const mc_dtype_t dt = GPU_TYPES[t];
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
            for (int g = 0; g < (dt == MC_DT_F32 ? 1 : 2); g++) {
                const mc_dtype_t gdt = g ? MC_DT_F32 : dt;
                emb_case(be, dt, gdt, cases[i], 1);
                emb_case(be, dt, gdt, cases[i], 0);
            }
    }
}

/* S, B or H = 0: nothing is read or written. */
static void test_embedding_empty(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    for (int t = 0; t < 3; t++) {
        const mc_dtype_t dt = GPU_TYPES[t];
        void *h = host_rand(dt, 64, -1, 1);
        void *d = dev_put(be, h, dt, 64), *w = dev_put(be, h, dt, 64);
        int32_t ids[4] = {0, 1, 2, 3};
        int32_t *d_ids = dev_put(be, ids, MC_DT_I32, 4);
        be->embedding_forward(be, dt, d, d_ids, d_ids, w, w, 0, 2, 8, 0, 4);
        be->embedding_forward(be, dt, d, d_ids, d_ids, w, w, 2, 2, 0, 0, 4);
        be->embedding_backward(be, dt, dt, d, d, w, d_ids, d_ids, 2, 0, 8, 0, 4);
        void *got = dev_get(be, d, dt, 64);
        check_exact("embedding with an empty size", dt, got, h, 64);
        be->free(be, d), be->free(be, w), be->free(be, d_ids);
        free(h), free(got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_embedding_empty),
    };
    return cmocka_run_group_tests(tests, gpu_setup, NULL);
}
