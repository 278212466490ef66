/* The CUDA SwiGLU forward/backward against the CPU backend, fp32/bf16/fp16: rows [gate | up]
 * whose width F is and is not a multiple of the 16-byte vector (8 for 16-bit types, 4 for fp32),
 * unaligned buffers (the scalar path), N = 0 and F = 0, dx overwritten (it starts non-zero).
 *
 * Tolerance. Both compute the same fp32 operations in the same order without FMA contraction
 * (swiglu.cu's __f*_rn); only exp differs: the CPU's vector exp and CUDA's expf are each within
 * 2 ulp, so exp(-g) differs by at most 4 ulp, 4.8e-7 relative. s = 1 / (1 + e) then differs by
 * (1 - s) 4.8e-7 relative, and each later rounding may fall on the other side (one ulp each):
 *  - out = (g s) u and dup = dout (g s) are products: rtol 2e-6 (about 1e-6 expected), atol 1e-7
 *    for values near zero.
 *  - dgate = (dout s)(1 + g (1 - s)) u: 1 + g (1 - s) cancels near g = -1.28, so its error is
 *    absolute: |g| (s (1 - s) 4.8e-7 + ulp(s)) <= 6 (1.2e-7 + 6e-8) ~ 1.1e-6 for |g| <= 6,
 *    times |dout| s |u| <= 2: atol 4e-6 + rtol 2e-6.
 * 16-bit outputs add one unit of their last place. A wrong formula (a missing factor, s for
 * 1 - s, gate and up swapped) gives errors >= 1e-2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/gpu/gpu_test.h"

static void swiglu_case(const mc_backend_t *be, mc_dtype_t dt, int N, int F, int off)
{
    const size_t es = mc_dtype_size(dt);
    const long n = (long)N * F, n2 = 2 * n;
    /* x: gate in [-6, 6), up in [-2, 2), row by row */
    void *x = host_rand(dt, n2 + 1, -2, 2);
    for (long r = 0; r < N; r++)
        for (int j = 0; j < F; j++) mc_store_f32(x, dt, off + 2 * r * F + j, (float)(-6 + 12 * gpu_urand()));
    void *g = host_rand(dt, n + 1, -1, 1), *o = host_rand(dt, n + 1, -9, 9), *dx = host_rand(dt, n2 + 1, -9, 9);
    void *d_x = dev_put(be, x, dt, n2 + 1), *d_g = dev_put(be, g, dt, n + 1), *d_o = dev_put(be, o, dt, n + 1),
         *d_dx = dev_put(be, dx, dt, n2 + 1);
    char *px = (char *)x + off * es, *pg = (char *)g + off * es, *po = (char *)o + off * es,
         *pdx = (char *)dx + off * es;
    char *qx = (char *)d_x + off * es, *qg = (char *)d_g + off * es, *qo = (char *)d_o + off * es,
         *qdx = (char *)d_dx + off * es;
    char what[96];
    snprintf(what, sizeof(what), "swiglu N %d F %d offset %d", N, F, off);
    cpu->swiglu_forward(cpu, dt, po, px, N, F);
    be->swiglu_forward(be, dt, qo, qx, N, F);
    void *got = dev_get(be, d_o, dt, n + 1);
    check_close(what, dt, got, o, n + 1, 1e-7, 2e-6);
    free(got);
    cpu->swiglu_backward(cpu, dt, pdx, pg, px, N, F);
    be->swiglu_backward(be, dt, qdx, qg, qx, N, F);
    got = dev_get(be, d_dx, dt, n2 + 1);
    /* the gate halves (then the element past the last row) with dgate's bound, the up halves
     * with dup's */
    for (long r = 0; r < N; r++) {
        const size_t row = (size_t)(off + 2 * r * F) * es, half = (size_t)F * es;
        check_close(what, dt, (char *)got + row, (char *)dx + row, F, 4e-6, 2e-6);
        check_close(what, dt, (char *)got + row + half, (char *)dx + row + half, F, 1e-7, 2e-6);
    }
    check_exact(what, dt, got, dx, off);
    check_exact(what, dt, (char *)got + (off + n2) * es, (char *)dx + (off + n2) * es, 1 - off);
    free(got);
    be->free(be, d_x), be->free(be, d_g), be->free(be, d_o), be->free(be, d_dx);
    free(x), free(g), free(o), free(dx);
}

static void test_swiglu(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    /* N x F: F odd, F a multiple of 4 but not 8 (fp32's vector path, 16-bit's scalar one), F a
     * multiple of 8, many rows, and empty ones */
    static const int sizes[][2] = {{1, 1}, {7, 13}, {5, 12}, {9, 64}, {300, 136}, {0, 8}, {4, 0}};
    for (int t = 0; t < 3; t++)
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
            for (int off = 0; off <= 1; off++) swiglu_case(be, GPU_TYPES[t], sizes[s][0], sizes[s][1], off);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_swiglu)};
    return cmocka_run_group_tests(tests, gpu_setup, NULL);
}
