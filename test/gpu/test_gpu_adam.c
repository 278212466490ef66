/* The CUDA Adam step against the CPU backend's: the same formula with the same operation order,
 * every operation an IEEE fp32 operation on both sides (the kernel's are explicit
 * non-contracting intrinsics), and the same bias corrections (double on the host, rounded to
 * fp32). So p, m and v must agree to the last bit on an x86-64 CPU build (no FMA); we allow
 * 2 fp32 ulps (rtol 2.4e-7, atol 1e-30) so a CPU build that contracts a*b+c into an FMA (arm64)
 * still passes, while a wrong formula or order (lr applied twice, bias correction missing,
 * weight decay coupled) moves results by far more. The model's copy (bf16, fp16) is the rounded
 * master, which agrees exactly whenever the master does.
 * One multi-tensor step takes a list: lengths with tails and across chunk boundaries, empty
 * tensors, unaligned buffers, weight decay on and off per tensor, with and without the model's
 * copy, and more tensors than one launch holds (several launches). Several steps (the bias
 * correction changes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/gpu/gpu_test.h"

enum { NT = 45 }; /* more than the 32 tensors of one launch */

static long len_of(int i)
{
    static const long lens[] = {0, 1, 3, 4, 5, 1000, 16384, 16385, 100003};
    return lens[i % (int)(sizeof(lens) / sizeof(lens[0]))];
}

static void adam_list_case(const mc_backend_t *be, mc_dtype_t model_dt)
{
    float *p[NT], *m[NT], *v[NT], *d_p[NT], *d_m[NT], *d_v[NT];
    void *model[NT], *d_model[NT];
    mc_adam_tensor_t hl[NT], dl[NT];
    for (int i = 0; i < NT; i++) {
        const long n = len_of(i) + 1;
        const int off = i % 2; /* every other tensor starts unaligned */
        p[i] = host_rand(MC_DT_F32, n, -1, 1), m[i] = host_rand(MC_DT_F32, n, -0.01, 0.01);
        v[i] = host_rand(MC_DT_F32, n, 0, 1e-4);
        model[i] = host_rand(model_dt, n, -1, 1);
        d_p[i] = dev_put(be, p[i], MC_DT_F32, n), d_m[i] = dev_put(be, m[i], MC_DT_F32, n);
        d_v[i] = dev_put(be, v[i], MC_DT_F32, n);
        d_model[i] = dev_put(be, model[i], model_dt, n);
        const int copy = i % 3 != 2;
        hl[i] = (mc_adam_tensor_t){.p = p[i] + off, .m = m[i] + off, .v = v[i] + off, .n = len_of(i),
                                   .model = copy ? mc_elem(model[i], model_dt, off) : NULL,
                                   .wd = i % 4 == 1 ? 0.0f : 0.1f};
        dl[i] = (mc_adam_tensor_t){.p = d_p[i] + off, .m = d_m[i] + off, .v = d_v[i] + off, .n = len_of(i),
                                   .model = copy ? mc_elem(d_model[i], model_dt, off) : NULL, .wd = hl[i].wd};
    }
    for (int step = 1; step <= 3; step++) {
        float *g[NT], *d_g[NT];
        for (int i = 0; i < NT; i++) {
            g[i] = host_rand(MC_DT_F32, len_of(i) + 1, -0.1, 0.1);
            d_g[i] = dev_put(be, g[i], MC_DT_F32, len_of(i) + 1);
            hl[i].g = g[i] + i % 2, dl[i].g = d_g[i] + i % 2;
        }
        cpu->adam_step(cpu, hl, NT, model_dt, 3e-4f, 0.9f, 0.95f, 1e-8f, step);
        be->adam_step(be, dl, NT, model_dt, 3e-4f, 0.9f, 0.95f, 1e-8f, step);
        for (int i = 0; i < NT; i++) be->free(be, d_g[i]), free(g[i]);
    }
    for (int i = 0; i < NT; i++) {
        const long n = len_of(i) + 1;
        char what[96];
        snprintf(what, sizeof(what), "adam tensor %d of %d (n %ld, model %s)", i, NT, len_of(i), mc_dtype_name(model_dt));
        float *gp = dev_get(be, d_p[i], MC_DT_F32, n), *gm = dev_get(be, d_m[i], MC_DT_F32, n),
              *gv = dev_get(be, d_v[i], MC_DT_F32, n);
        void *gmodel = dev_get(be, d_model[i], model_dt, n);
        check_close(what, MC_DT_F32, gp, p[i], n, 1e-30, 2 * F32_EPS);
        check_close(what, MC_DT_F32, gm, m[i], n, 1e-30, 2 * F32_EPS);
        check_close(what, MC_DT_F32, gv, v[i], n, 1e-30, 2 * F32_EPS);
        check_close(what, model_dt, gmodel, model[i], n, 1e-30, 2 * F32_EPS);
        be->free(be, d_p[i]), be->free(be, d_m[i]), be->free(be, d_v[i]), be->free(be, d_model[i]);
        free(p[i]), free(m[i]), free(v[i]), free(model[i]), free(gp), free(gm), free(gv), free(gmodel);
    }
}

static void test_adam(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    adam_list_case(be, MC_DT_BF16);
    adam_list_case(be, MC_DT_F16);
    adam_list_case(be, MC_DT_F32);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_adam)};
    return cmocka_run_group_tests(tests, gpu_setup, NULL);
}
