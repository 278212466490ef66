/* The CUDA LayerNorm forward (alone and fused with the residual add) and backward_acc against
 * the CPU backend, fp32/bf16/fp16, with
 * and without bias, "+=" into dx/dw/db, NULL outputs, row lengths that are and are not
 * multiples of the vector width, enough rows for the multi-chunk column reduction.
 *
 * Tolerances. Both backends sum the row statistics and the column reductions in double and do
 * the elementwise math in fp32 operation by operation (the CUDA kernels use non-contracting
 * intrinsics), so only the order of double additions differs: a double sum is then rounded to
 * fp32, and two doubles a few double ulps apart may round to neighbouring floats:
 *  - mean, rstd, dw, db: one fp32 ulp (rtol 2^-23, plus 1e-9 absolute for sums near zero).
 *  - out, dx: an fp32 ulp of mean, rstd or of the row means a, c moves (x - mean) * rstd * w by
 *    at most |w| (rstd ulp(mean) + |xhat| ulp(rstd)) ~ 1e-6 for the inputs here (|x| <= 4,
 *    |w| <= 1.5, rstd ~ 1); we allow atol 1e-5 + rtol 1e-5 (errors of a wrong formula are
 *    O(0.1)). 16-bit outputs add one unit of their last place (gpu_test.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/gpu/gpu_test.h"

static void ln_case(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, int N, int C, int with_bias, int with_dx,
                    int with_dw, int with_db)
{
    if (!gpu_case_sampled()) return;
    const long n = (long)N * C;
    void *x = host_rand(dt, n, -2, 4), *w = host_rand(dt, C, 0.5, 1.5), *b = host_rand(dt, C, -1, 1);
    void *out = host_rand(dt, n, -9, 9);
    float *mean = host_rand(MC_DT_F32, N, 0, 0), *rstd = host_rand(MC_DT_F32, N, 0, 0);
    void *d_x = dev_put(be, x, dt, n), *d_w = dev_put(be, w, dt, C), *d_b = dev_put(be, b, dt, C),
         *d_out = dev_put(be, out, dt, n);
    float *d_mean = dev_put(be, mean, MC_DT_F32, N), *d_rstd = dev_put(be, rstd, MC_DT_F32, N);
    char what[160];
    snprintf(what, sizeof(what), "layernorm N %d C %d%s gdt %s%s%s%s", N, C, with_bias ? " + bias" : "",
             mc_dtype_name(gdt), with_dx ? "" : " (no dx)", with_dw ? "" : " (no dw)", with_db ? "" : " (no db)");

    cpu->layernorm_forward(cpu, dt, out, mean, rstd, x, w, with_bias ? b : NULL, N, C, 1e-5f);
    be->layernorm_forward(be, dt, d_out, d_mean, d_rstd, d_x, d_w, with_bias ? d_b : NULL, N, C, 1e-5f);
    void *got = dev_get(be, d_out, dt, n);
    float *got_m = dev_get(be, d_mean, MC_DT_F32, N), *got_r = dev_get(be, d_rstd, MC_DT_F32, N);
    check_close(what, MC_DT_F32, got_m, mean, N, 1e-9, F32_EPS);
    check_close(what, MC_DT_F32, got_r, rstd, N, 1e-9, F32_EPS);
    check_close(what, dt, got, out, n, 1e-5, 1e-5);

    /* backward from the CPU's statistics (so only the backward is measured), onto non-zero
     * gradients */
    be->memcpy_h2d(be, d_mean, mean, (size_t)N * sizeof(float));
    be->memcpy_h2d(be, d_rstd, rstd, (size_t)N * sizeof(float));
    void *g = host_rand(dt, n, -1, 1), *dx = host_rand(dt, n, -1, 1);
    void *dw = host_rand(gdt, C, -1, 1), *db = host_rand(gdt, C, -1, 1);
    void *dx0 = host_copy(dx, dt, n), *dw0 = host_copy(dw, gdt, C), *db0 = host_copy(db, gdt, C);
    void *d_g = dev_put(be, g, dt, n), *d_dx = dev_put(be, dx, dt, n), *d_dw = dev_put(be, dw, gdt, C),
         *d_db = dev_put(be, db, gdt, C);
    cpu->layernorm_backward_acc(cpu, dt, gdt, with_dx ? dx : NULL, with_dw ? dw : NULL, with_db ? db : NULL, g, x, w,
                                mean, rstd, N, C);
    be->layernorm_backward_acc(be, dt, gdt, with_dx ? d_dx : NULL, with_dw ? d_dw : NULL, with_db ? d_db : NULL, d_g,
                               d_x, d_w, d_mean, d_rstd, N, C);
    void *got_dx = dev_get(be, d_dx, dt, n), *got_dw = dev_get(be, d_dw, gdt, C), *got_db = dev_get(be, d_db, gdt, C);
    if (with_dx) check_close(what, dt, got_dx, dx, n, 1e-5, 1e-5);
    else check_exact(what, dt, got_dx, dx0, n);
    if (with_dw) check_close(what, gdt, got_dw, dw, C, 1e-9, F32_EPS);
    else check_exact(what, gdt, got_dw, dw0, C);
    if (with_db) check_close(what, gdt, got_db, db, C, 1e-9, F32_EPS);
    else check_exact(what, gdt, got_db, db0, C);

    be->free(be, d_x), be->free(be, d_w), be->free(be, d_b), be->free(be, d_out), be->free(be, d_mean),
        be->free(be, d_rstd), be->free(be, d_g), be->free(be, d_dx), be->free(be, d_dw), be->free(be, d_db);
    free(x), free(w), free(b), free(out), free(mean), free(rstd), free(got), free(got_m), free(got_r), free(g),
        free(dx), free(dw), free(db), free(dx0), free(dw0), free(db0), free(got_dx), free(got_dw), free(got_db);
}

static void test_layernorm(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    /* N x C: odd C (scalar path), C a multiple of 8 (vector path), C larger than a block's
     * 256 threads x 8, N large enough for several row chunks of the column reduction (at least
     * 64 rows each: 300 and 260 rows give 5; one block per row, so more rows only cost time) */
    static const int sizes[][2] = {{21, 11}, {64, 768}, {5, 2049}, {300, 24}, {3, 1}, {260, 96}};
    for (int t = 0; t < 3; t++) {
        const mc_dtype_t dt = GPU_TYPES[t];
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
            for (int g = 0; g < (dt == MC_DT_F32 ? 1 : 2); g++) {
                const mc_dtype_t gdt = g ? MC_DT_F32 : dt;
                ln_case(be, dt, gdt, sizes[s][0], sizes[s][1], 1, 1, 1, 1);
                ln_case(be, dt, gdt, sizes[s][0], sizes[s][1], 0, 0, 1, 0);
                ln_case(be, dt, gdt, sizes[s][0], sizes[s][1], 1, 1, 0, 1);
            }
    }
}

/* add_layernorm_forward: the sum is the add op's (exact: one fp32 add rounded once, as the CPU),
 * the LayerNorm of it as above; with sum aliasing a (an in-place residual add) and not. */
static void add_ln_case(const mc_backend_t *be, mc_dtype_t dt, int N, int C, int with_bias, int in_place)
{
    if (!gpu_case_sampled()) return;
    const long n = (long)N * C;
    void *a = host_rand(dt, n, -2, 4), *r = host_rand(dt, n, -1, 1), *w = host_rand(dt, C, 0.5, 1.5),
         *b = host_rand(dt, C, -1, 1), *sum = host_rand(dt, n, -9, 9), *out = host_rand(dt, n, -9, 9);
    float *mean = host_rand(MC_DT_F32, N, 0, 0), *rstd = host_rand(MC_DT_F32, N, 0, 0);
    void *d_a = dev_put(be, a, dt, n), *d_r = dev_put(be, r, dt, n), *d_w = dev_put(be, w, dt, C),
         *d_b = dev_put(be, b, dt, C), *d_sum = dev_put(be, sum, dt, n), *d_out = dev_put(be, out, dt, n);
    float *d_mean = dev_put(be, mean, MC_DT_F32, N), *d_rstd = dev_put(be, rstd, MC_DT_F32, N);
    char what[128];
    snprintf(what, sizeof(what), "add_layernorm N %d C %d%s%s", N, C, with_bias ? " + bias" : "",
             in_place ? " (sum in place of a)" : "");
    cpu->add_layernorm_forward(cpu, dt, in_place ? a : sum, out, mean, rstd, a, r, w, with_bias ? b : NULL, N, C,
                               1e-5f);
    be->add_layernorm_forward(be, dt, in_place ? d_a : d_sum, d_out, d_mean, d_rstd, d_a, d_r, d_w,
                              with_bias ? d_b : NULL, N, C, 1e-5f);
    void *got_sum = dev_get(be, in_place ? d_a : d_sum, dt, n), *got = dev_get(be, d_out, dt, n);
    float *got_m = dev_get(be, d_mean, MC_DT_F32, N), *got_r = dev_get(be, d_rstd, MC_DT_F32, N);
    check_exact(what, dt, got_sum, in_place ? a : sum, n);
    check_close(what, MC_DT_F32, got_m, mean, N, 1e-9, F32_EPS);
    check_close(what, MC_DT_F32, got_r, rstd, N, 1e-9, F32_EPS);
    check_close(what, dt, got, out, n, 1e-5, 1e-5);
    be->free(be, d_a), be->free(be, d_r), be->free(be, d_w), be->free(be, d_b), be->free(be, d_sum),
        be->free(be, d_out), be->free(be, d_mean), be->free(be, d_rstd);
    free(a), free(r), free(w), free(b), free(sum), free(out), free(mean), free(rstd), free(got_sum), free(got),
        free(got_m), free(got_r);
}

static void test_add_layernorm(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    static const int sizes[][2] = {{21, 11}, {64, 768}, {5, 2049}, {3, 1}, {260, 96}, {0, 8}};
    for (int t = 0; t < 3; t++)
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            add_ln_case(be, GPU_TYPES[t], sizes[s][0], sizes[s][1], 1, 0);
            add_ln_case(be, GPU_TYPES[t], sizes[s][0], sizes[s][1], 0, 1);
        }
}

/* N = 0 or C = 0 write nothing (backward); the CPU's C = 0 forward statistics (mean 0,
 * rstd 1/sqrt(eps)) are matched. */
static void test_layernorm_empty(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    for (int t = 0; t < 3; t++) {
        const mc_dtype_t dt = GPU_TYPES[t];
        void *h = host_rand(dt, 64, -1, 1);
        void *d = dev_put(be, h, dt, 64);
        float st[4] = {5, 5, 5, 5}, want_st[4] = {5, 5, 5, 5};
        float *d_m = dev_put(be, st, MC_DT_F32, 4), *d_r = dev_put(be, st, MC_DT_F32, 4);
        be->layernorm_forward(be, dt, d, d_m, d_r, d, d, d, 0, 8, 1e-5f);
        be->layernorm_backward_acc(be, dt, dt, d, d, d, d, d, d, d_m, d_r, 0, 8);
        be->layernorm_backward_acc(be, dt, dt, d, d, d, d, d, d, d_m, d_r, 4, 0);
        void *got = dev_get(be, d, dt, 64);
        check_exact("layernorm with an empty size", dt, got, h, 64);
        float *m = dev_get(be, d_m, MC_DT_F32, 4);
        check_exact("layernorm N = 0 statistics", MC_DT_F32, m, want_st, 4);
        /* C = 0: statistics of an empty row */
        float cm[4], cr[4];
        cpu->layernorm_forward(cpu, dt, h, cm, cr, h, h, h, 4, 0, 1e-5f);
        be->layernorm_forward(be, dt, d, d_m, d_r, d, d, d, 4, 0, 1e-5f);
        float *gm = dev_get(be, d_m, MC_DT_F32, 4), *gr = dev_get(be, d_r, MC_DT_F32, 4);
        check_exact("layernorm C = 0 mean", MC_DT_F32, gm, cm, 4);
        check_exact("layernorm C = 0 rstd", MC_DT_F32, gr, cr, 4);
        be->free(be, d), be->free(be, d_m), be->free(be, d_r);
        free(h), free(got), free(m), free(gm), free(gr);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_layernorm_empty),
        cmocka_unit_test(test_add_layernorm),
    };
    return cmocka_run_group_tests(tests, gpu_setup, NULL);
}
