/* The CUDA Adam step against the CPU backend's: the same formula with the same operation order,
 * every operation an IEEE fp32 operation on both sides (the kernel's are explicit
 * non-contracting intrinsics), and the same bias corrections (double on the host, rounded to
 * fp32). So p, m and v must agree to the last bit on an x86-64 CPU build (no FMA); we allow
 * 2 fp32 ulps (rtol 2.4e-7, atol 1e-30) so a CPU build that contracts a*b+c into an FMA (arm64)
 * still passes, while a wrong formula or order (lr applied twice, bias correction missing,
 * weight decay coupled) moves results by far more. Several steps (bias correction changes),
 * lengths with tails, unaligned buffers, weight decay on and off, n = 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/gpu/gpu_test.h"

static void adam_case(const mc_backend_t *be, long n, int off, float wd)
{
    float *p = host_rand(MC_DT_F32, n + 1, -1, 1), *m = host_rand(MC_DT_F32, n + 1, -0.01, 0.01),
          *v = host_rand(MC_DT_F32, n + 1, 0, 1e-4);
    float *d_p = dev_put(be, p, MC_DT_F32, n + 1), *d_m = dev_put(be, m, MC_DT_F32, n + 1),
          *d_v = dev_put(be, v, MC_DT_F32, n + 1);
    char what[64];
    snprintf(what, sizeof(what), "adam n %ld offset %d wd %g", n, off, (double)wd);
    for (int step = 1; step <= 3; step++) {
        float *g = host_rand(MC_DT_F32, n + 1, -0.1, 0.1);
        float *d_g = dev_put(be, g, MC_DT_F32, n + 1);
        cpu->adam_step(cpu, p + off, g + off, m + off, v + off, n, 3e-4f, 0.9f, 0.95f, 1e-8f, wd, step);
        be->adam_step(be, d_p + off, d_g + off, d_m + off, d_v + off, n, 3e-4f, 0.9f, 0.95f, 1e-8f, wd, step);
        be->free(be, d_g);
        free(g);
    }
    float *gp = dev_get(be, d_p, MC_DT_F32, n + 1), *gm = dev_get(be, d_m, MC_DT_F32, n + 1),
          *gv = dev_get(be, d_v, MC_DT_F32, n + 1);
    check_close(what, MC_DT_F32, gp, p, n + 1, 1e-30, 2 * F32_EPS);
    check_close(what, MC_DT_F32, gm, m, n + 1, 1e-30, 2 * F32_EPS);
    check_close(what, MC_DT_F32, gv, v, n + 1, 1e-30, 2 * F32_EPS);
    be->free(be, d_p), be->free(be, d_m), be->free(be, d_v);
    free(p), free(m), free(v), free(gp), free(gm), free(gv);
}

static void test_adam(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    static const long lens[] = {0, 1, 3, 4, 5, 1000, 100003};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        for (int off = 0; off <= 1; off++) {
            adam_case(be, lens[i], off, 0.1f);
            adam_case(be, lens[i], off, 0.0f);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_adam)};
    return cmocka_run_group_tests(tests, gpu_setup, NULL);
}
