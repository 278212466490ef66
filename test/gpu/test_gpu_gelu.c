/* The CUDA MLP activation forward/backward (GeLU's tanh approximation and exact erf, squared
 * ReLU) against the CPU backend, fp32/bf16/fp16, in place, tails after the 16-byte vectors,
 * unaligned buffers, n = 0.
 *
 * Tolerance. Both compute the same formula in fp32, but with different tanh/erf/exp: the CPU's
 * vector tanh (absolute error ~1e-7) or libm's erff/expf, CUDA's tanhf/erff/expf (2 ulp). For
 * |x| <= 5:
 *  - forward 0.5 x (1 + t): a difference dt in t moves y by 0.5 |x| dt <= 2.5 * 3.5e-7 ~ 9e-7,
 *    plus a few fp32 roundings of y: atol 2e-6 + rtol 2e-6.
 *  - backward: 0.5 x (1 - t^2)(k0 + k2 x^2) amplifies dt by |x| |t| (k0 + k2 x^2) <= 5 * 3.5
 *    at |x| = 5, i.e. ~6e-6 for |dout| <= 1: atol 1e-5 + rtol 2e-6.
 * 16-bit outputs add one unit of their last place. A wrong formula (erf for tanh, a missing
 * factor) gives errors >= 1e-3. Squared ReLU is products only: bit for bit the CPU's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/gpu/gpu_test.h"

/* got against want: exact for squared ReLU, else within atol + rtol (above) */
static void act_check(const char *what, mc_act_t act, mc_dtype_t dt, const void *got, const void *want, long n,
                      double atol, double rtol)
{
    if (act == MC_ACT_SQUARED_RELU) check_exact(what, dt, got, want, n);
    else check_close(what, dt, got, want, n, atol, rtol);
}

static void gelu_case(const mc_backend_t *be, mc_dtype_t dt, long n, int off, mc_act_t act)
{
    const size_t es = mc_dtype_size(dt);
    void *x = host_rand(dt, n + 1, -5, 5), *g = host_rand(dt, n + 1, -1, 1), *o = host_rand(dt, n + 1, -9, 9);
    void *d_x = dev_put(be, x, dt, n + 1), *d_g = dev_put(be, g, dt, n + 1), *d_o = dev_put(be, o, dt, n + 1);
    char *px = (char *)x + off * es, *pg = (char *)g + off * es, *po = (char *)o + off * es;
    char *qx = (char *)d_x + off * es, *qg = (char *)d_g + off * es, *qo = (char *)d_o + off * es;
    char what[96];
    static const char *names[] = {"erf", "tanh", "squared relu"};
    snprintf(what, sizeof(what), "gelu %s n %ld offset %d", names[act], n, off);
    cpu->gelu_forward(cpu, dt, po, px, n, act);
    be->gelu_forward(be, dt, qo, qx, n, act);
    void *got = dev_get(be, d_o, dt, n + 1);
    act_check(what, act, dt, got, o, n + 1, 2e-6, 2e-6);
    free(got);
    /* backward in place (dx = dout) */
    cpu->gelu_backward(cpu, dt, pg, pg, px, n, act);
    be->gelu_backward(be, dt, qg, qg, qx, n, act);
    got = dev_get(be, d_g, dt, n + 1);
    act_check(what, act, dt, got, g, n + 1, 1e-5, 2e-6);
    free(got);
    /* forward in place (out = x) */
    cpu->gelu_forward(cpu, dt, px, px, n, act);
    be->gelu_forward(be, dt, qx, qx, n, act);
    got = dev_get(be, d_x, dt, n + 1);
    act_check(what, act, dt, got, x, n + 1, 2e-6, 2e-6);
    free(got);
    be->free(be, d_x), be->free(be, d_g), be->free(be, d_o);
    free(x), free(g), free(o);
}

static void test_gelu(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    static const long lens[] = {0, 1, 7, 8, 9, 1000, 100003};
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
            for (int off = 0; off <= 1; off++)
                for (int a = MC_ACT_GELU_ERF; a <= MC_ACT_SQUARED_RELU; a++)
                    gelu_case(be, GPU_TYPES[t], lens[i], off, (mc_act_t)a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_gelu)};
    return cmocka_run_group_tests(tests, gpu_setup, NULL);
}
