/* The CUDA q/k norms (Megatron's --qk-layernorm: qk_norm_forward and qk_norm_backward) against the
 * CPU backend, fp32/bf16/fp16, LayerNorm and RMSNorm, grouped-query (QPG > 1) and multi-head
 * (QPG = 1) layouts: value heads copied in the forward and left as they are in the backward, the
 * weight gradients "+=" onto non-zero starts (gdt the model's type or fp32), NULL weight gradients
 * and RMSNorm's bias gradients untouched; head sizes that are and are not multiples of the vector
 * width and larger than a warp's 32 lanes x VEC, and enough heads for the multi-chunk column
 * reduction.
 *
 * Tolerances: those of test_gpu_layernorm.c, for the same reason (both backends sum the head
 * statistics and the weight gradients in double and do the elementwise math in fp32 operation by
 * operation; only the order of the double additions differs): mean, rstd, dw, db within one fp32
 * ulp (rtol 2^-23, 1e-9 absolute), out and dqkv within atol 1e-5 + rtol 1e-5 (the inputs here:
 * |x| <= 4, |w| <= 1.5), 16-bit outputs one more unit of their last place. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/gpu/gpu_test.h"

typedef struct {
    int T, NG, QPG, HD;
} qkn_size_t;

/* Every value head of the [T*NG*(QPG+2), HD] rows of got equal to want's, bit for bit. */
static void check_value_heads(const char *what, mc_dtype_t dt, const void *got, const void *want, const qkn_size_t *s)
{
    const size_t es = mc_dtype_size(dt);
    for (long g = 0; g < (long)s->T * s->NG; g++) {
        const size_t off = (size_t)((g * (s->QPG + 2) + s->QPG + 1) * s->HD) * es;
        check_exact(what, dt, (const char *)got + off, (const char *)want + off, s->HD);
    }
}

/* nulls: dwq and dbk not asked for (NULL), so those buffers must stay as they are. */
static void qkn_case(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, const qkn_size_t *s, int rms, int nulls)
{
    const int HD = s->HD;
    const long n = (long)s->T * s->NG * (s->QPG + 2) * HD, ns = (long)s->T * s->NG * (s->QPG + 1);
    void *x = host_rand(dt, n, -2, 4), *out = host_rand(dt, n, -9, 9);
    void *wq = host_rand(dt, HD, 0.5, 1.5), *wk = host_rand(dt, HD, 0.5, 1.5);
    void *bq = host_rand(dt, HD, -1, 1), *bk = host_rand(dt, HD, -1, 1);
    float *mean = host_rand(MC_DT_F32, ns, 0, 0), *rstd = host_rand(MC_DT_F32, ns, 0, 0);
    void *d_x = dev_put(be, x, dt, n), *d_out = dev_put(be, out, dt, n), *d_wq = dev_put(be, wq, dt, HD),
         *d_wk = dev_put(be, wk, dt, HD), *d_bq = dev_put(be, bq, dt, HD), *d_bk = dev_put(be, bk, dt, HD);
    float *d_mean = dev_put(be, mean, MC_DT_F32, ns), *d_rstd = dev_put(be, rstd, MC_DT_F32, ns);
    char what[160];
    snprintf(what, sizeof(what), "qk_norm %s T %d NG %d QPG %d HD %d gdt %s%s", rms ? "RMSNorm" : "LayerNorm", s->T,
             s->NG, s->QPG, HD, mc_dtype_name(gdt), nulls ? " (no dwq, dbk)" : "");

    cpu->qk_norm_forward(cpu, dt, out, rms ? NULL : mean, rstd, x, wq, rms ? NULL : bq, wk, rms ? NULL : bk, s->T,
                         s->NG, s->QPG, HD, 1e-5f, rms);
    be->qk_norm_forward(be, dt, d_out, rms ? NULL : d_mean, d_rstd, d_x, d_wq, rms ? NULL : d_bq, d_wk,
                        rms ? NULL : d_bk, s->T, s->NG, s->QPG, HD, 1e-5f, rms);
    void *got = dev_get(be, d_out, dt, n);
    float *got_m = dev_get(be, d_mean, MC_DT_F32, ns), *got_r = dev_get(be, d_rstd, MC_DT_F32, ns);
    check_close(what, MC_DT_F32, got_r, rstd, ns, 1e-9, F32_EPS);
    check_close(what, MC_DT_F32, got_m, mean, ns, 1e-9, F32_EPS); /* RMSNorm: both left at 0 */
    check_close(what, dt, got, out, n, 1e-5, 1e-5);
    check_value_heads(what, dt, got, x, s);

    /* backward from the CPU's statistics (so only the backward is measured), onto non-zero
     * gradients; RMSNorm gets bias gradient buffers too, which it must leave alone */
    be->memcpy_h2d(be, d_mean, mean, (size_t)ns * sizeof(float));
    be->memcpy_h2d(be, d_rstd, rstd, (size_t)ns * sizeof(float));
    void *dq = host_rand(dt, n, -1, 1), *dq0 = host_copy(dq, dt, n);
    void *gw[4], *gw0[4], *d_gw[4], *got_gw[4];
    for (int k = 0; k < 4; k++) {
        gw[k] = host_rand(gdt, HD, -1, 1), gw0[k] = host_copy(gw[k], gdt, HD);
        d_gw[k] = dev_put(be, gw[k], gdt, HD);
    }
    void *d_dq = dev_put(be, dq, dt, n);
    const int ask[4] = {!nulls, 1, 1, !nulls}; /* dwq, dbq, dwk, dbk */
    cpu->qk_norm_backward(cpu, dt, gdt, dq, ask[0] ? gw[0] : NULL, ask[1] ? gw[1] : NULL, ask[2] ? gw[2] : NULL,
                          ask[3] ? gw[3] : NULL, x, wq, wk, rms ? NULL : mean, rstd, s->T, s->NG, s->QPG, HD, rms);
    be->qk_norm_backward(be, dt, gdt, d_dq, ask[0] ? d_gw[0] : NULL, ask[1] ? d_gw[1] : NULL,
                         ask[2] ? d_gw[2] : NULL, ask[3] ? d_gw[3] : NULL, d_x, d_wq, d_wk, rms ? NULL : d_mean,
                         d_rstd, s->T, s->NG, s->QPG, HD, rms);
    void *got_dq = dev_get(be, d_dq, dt, n);
    check_close(what, dt, got_dq, dq, n, 1e-5, 1e-5);
    check_value_heads(what, dt, got_dq, dq0, s);
    static const char *names[4] = {"dwq", "dbq", "dwk", "dbk"};
    for (int k = 0; k < 4; k++) {
        char wk_[200];
        snprintf(wk_, sizeof(wk_), "%s: %s", what, names[k]);
        got_gw[k] = dev_get(be, d_gw[k], gdt, HD);
        if (ask[k] && !(rms && (k == 1 || k == 3))) check_close(wk_, gdt, got_gw[k], gw[k], HD, 1e-9, F32_EPS);
        else check_exact(wk_, gdt, got_gw[k], gw0[k], HD);
    }

    for (int k = 0; k < 4; k++) be->free(be, d_gw[k]), free(gw[k]), free(gw0[k]), free(got_gw[k]);
    be->free(be, d_x), be->free(be, d_out), be->free(be, d_wq), be->free(be, d_wk), be->free(be, d_bq),
        be->free(be, d_bk), be->free(be, d_mean), be->free(be, d_rstd), be->free(be, d_dq);
    free(x), free(out), free(wq), free(wk), free(bq), free(bk), free(mean), free(rstd), free(got), free(got_m),
        free(got_r), free(dq), free(dq0), free(got_dq);
}

static void test_qk_norm(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    /* odd HD (scalar path), HD a multiple of 8 (vector path), HD past a warp's 32 x 8 elements,
     * MHA and GQA, enough heads for several row chunks of the weight gradients' reduction */
    static const qkn_size_t sizes[] = {{7, 2, 2, 13}, {9, 3, 1, 64}, {5, 1, 4, 128},
                                       {3, 2, 3, 320}, {600, 2, 2, 64}, {1, 1, 1, 1}};
    for (int t = 0; t < 3; t++) {
        const mc_dtype_t dt = GPU_TYPES[t];
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
            for (int g = 0; g < (dt == MC_DT_F32 ? 1 : 2); g++)
                for (int rms = 0; rms < 2; rms++) {
                    const mc_dtype_t gdt = g ? MC_DT_F32 : dt;
                    qkn_case(be, dt, gdt, &sizes[s], rms, 0);
                    if (s == 0) qkn_case(be, dt, gdt, &sizes[s], rms, 1);
                }
    }
}

/* T = 0 writes nothing, nor does the backward with HD = 0; the forward's HD = 0 statistics are the
 * CPU's (mean 0, rstd 1/sqrt(eps)). */
static void test_qk_norm_empty(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    for (int t = 0; t < 3; t++) {
        const mc_dtype_t dt = GPU_TYPES[t];
        void *h = host_rand(dt, 64, -1, 1);
        void *d = dev_put(be, h, dt, 64);
        float st[6] = {5, 5, 5, 5, 5, 5}, want_st[6] = {5, 5, 5, 5, 5, 5};
        float *d_m = dev_put(be, st, MC_DT_F32, 6), *d_r = dev_put(be, st, MC_DT_F32, 6);
        be->qk_norm_forward(be, dt, d, d_m, d_r, d, d, d, d, d, 0, 2, 2, 8, 1e-5f, 0);
        be->qk_norm_backward(be, dt, dt, d, d, d, d, d, d, d, d, d_m, d_r, 0, 2, 2, 8, 0);
        be->qk_norm_backward(be, dt, dt, d, d, d, d, d, d, d, d, d_m, d_r, 1, 2, 2, 0, 0);
        void *got = dev_get(be, d, dt, 64);
        check_exact("qk_norm with an empty size", dt, got, h, 64);
        float *m = dev_get(be, d_m, MC_DT_F32, 6);
        check_exact("qk_norm T = 0 statistics", MC_DT_F32, m, want_st, 6);
        /* HD = 0: statistics of empty heads, 1 x 2 groups x 3 heads */
        float cm[6], cr[6];
        cpu->qk_norm_forward(cpu, dt, got, cm, cr, h, h, h, h, h, 1, 2, 2, 0, 1e-5f, 0);
        be->qk_norm_forward(be, dt, d, d_m, d_r, d, d, d, d, d, 1, 2, 2, 0, 1e-5f, 0);
        float *gm = dev_get(be, d_m, MC_DT_F32, 6), *gr = dev_get(be, d_r, MC_DT_F32, 6);
        check_exact("qk_norm HD = 0 mean", MC_DT_F32, gm, cm, 6);
        check_exact("qk_norm HD = 0 rstd", MC_DT_F32, gr, cr, 6);
        be->free(be, d), be->free(be, d_m), be->free(be, d_r);
        free(h), free(got), free(m), free(gm), free(gr);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qk_norm),
        cmocka_unit_test(test_qk_norm_empty),
    };
    return cmocka_run_group_tests(tests, gpu_setup, NULL);
}
