/* The CPU reference backend's ops of the Llama block (RMSNorm, SwiGLU) in fp32: against
 * double-precision loops written here, the backward ops against central finite differences of
 * the double forward, and add_rmsnorm_forward against the add op then rmsnorm_forward, bit for
 * bit. (The 16-bit wrappers: test_kernels_16bit.c; squared ReLU: test_kernels_cpu.c's GeLU test.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"

/* Odd sizes: no row lines up with the CPU's 4-float vectors. */
enum { N = 13, C = 37, F = 19 };

#define RTOL 1e-5  /* float op vs double reference, relative to the tensor's largest value */
#define FDTOL 2e-5 /* float backward vs finite differences of the double reference */

static const mc_backend_t *be;

static uint64_t rng_s = 0x2545F4914F6CDD1Dull;
static double urand(void) /* [0, 1) */
{
    rng_s ^= rng_s << 13;
    rng_s ^= rng_s >> 7;
    rng_s ^= rng_s << 17;
    return (double)(rng_s >> 11) * (1.0 / 9007199254740992.0);
}
static void fill(float *x, long n, double lo, double hi)
{
    for (long i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * urand());
}
static void to_d(double *d, const float *x, long n)
{
    for (long i = 0; i < n; i++) d[i] = x[i];
}

/* |got - want| <= rtol * (|want| + max|want|) elementwise. */
static void check_close(const float *got, const double *want, long n, double rtol, const char *what)
{
    double scale = 0.0;
    for (long i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    if (scale == 0.0) scale = 1e-30;
    for (long i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - want[i]);
        if (!(err <= rtol * (fabs(want[i]) + scale)))
            fail_msg("%s[%ld]: got %.9g, want %.9g (err %.3g, scale %.3g)", what, i, (double)got[i], want[i], err,
                     scale);
    }
}

/* Central differences of loss() with respect to x[0..n), plus base (the "_acc" start, may be
 * NULL), against grad. */
static void check_fd(double (*loss)(void), double *x, long n, const float *grad, const float *base, const char *what)
{
    double *fd = calloc((size_t)n, sizeof(double));
    assert_non_null(fd);
    for (long i = 0; i < n; i++) {
        const double s = x[i], h = 1e-5;
        x[i] = s + h;
        const double lp = loss();
        x[i] = s - h;
        const double lm = loss();
        x[i] = s;
        fd[i] = (lp - lm) / (2 * h) + (base ? base[i] : 0.0);
    }
    check_close(grad, fd, n, FDTOL, what);
    free(fd);
}

/* ---- RMSNorm ---- */

static double g_x[N * C], g_w[C], g_R[N * 2 * F];
static const double EPS = 1e-5;

static void rms_ref(double *out, double *rstd)
{
    for (int n = 0; n < N; n++) {
        const double *x = g_x + n * C;
        double q = 0;
        for (int i = 0; i < C; i++) q += x[i] * x[i];
        const double r = 1.0 / sqrt(q / C + EPS);
        if (rstd) rstd[n] = r;
        for (int i = 0; i < C; i++) out[n * C + i] = x[i] * r * g_w[i];
    }
}
static double rms_loss(void)
{
    double out[N * C], s = 0;
    rms_ref(out, NULL);
    for (int i = 0; i < N * C; i++) s += out[i] * g_R[i];
    return s;
}

static void test_rmsnorm(void **state)
{
    (void)state;
    float x[N * C], w[C], R[N * C], out[N * C], rstd[N];
    fill(x, N * C, -2, 3);
    for (int i = 0; i < C; i++) x[3 * C + i] += 5.0f; /* a row with a large mean: RMS, not variance */
    fill(w, C, 0.5, 1.5);
    fill(R, N * C, -1, 1);
    to_d(g_x, x, N * C), to_d(g_w, w, C), to_d(g_R, R, N * C);
    double want[N * C], wr[N];
    be->rmsnorm_forward(be, MC_DT_F32, out, rstd, x, w, N, C, (float)EPS);
    rms_ref(want, wr);
    check_close(out, want, N * C, RTOL, "rmsnorm out");
    check_close(rstd, wr, N, RTOL, "rmsnorm rstd");
    float in_place[N * C]; /* out may equal x */
    memcpy(in_place, x, sizeof(x));
    be->rmsnorm_forward(be, MC_DT_F32, in_place, rstd, in_place, w, N, C, (float)EPS);
    assert_memory_equal(in_place, out, sizeof(out));

    float dx[N * C], dw[C], dx0[N * C], dw0[C];
    fill(dx0, N * C, -1, 1);
    fill(dw0, C, -1, 1);
    memcpy(dx, dx0, sizeof(dx)), memcpy(dw, dw0, sizeof(dw));
    be->rmsnorm_backward_acc(be, MC_DT_F32, MC_DT_F32, dx, dw, R, x, w, rstd, N, C);
    check_fd(rms_loss, g_x, N * C, dx, dx0, "rmsnorm dx (acc)");
    check_fd(rms_loss, g_w, C, dw, dw0, "rmsnorm dw (acc)");
    /* NULL outputs are skipped: dx alone, dw alone give the same values */
    float dx1[N * C], dw1[C];
    memcpy(dx1, dx0, sizeof(dx1)), memcpy(dw1, dw0, sizeof(dw1));
    be->rmsnorm_backward_acc(be, MC_DT_F32, MC_DT_F32, dx1, NULL, R, x, w, rstd, N, C);
    be->rmsnorm_backward_acc(be, MC_DT_F32, MC_DT_F32, NULL, dw1, R, x, w, rstd, N, C);
    assert_memory_equal(dx1, dx, sizeof(dx));
    assert_memory_equal(dw1, dw, sizeof(dw));
}

/* add_rmsnorm_forward is the add op then rmsnorm_forward, bit for bit, in fp32, bf16 and fp16,
 * with the sum in its own buffer or in place of either addend. */
static void test_add_rmsnorm(void **state)
{
    (void)state;
    enum { NE = N * C };
    float a[NE], r[NE], w[C];
    fill(a, NE, -2, 4);
    fill(r, NE, -1, 1);
    fill(w, C, 0.5, 1.5);
    static const mc_dtype_t types[] = {MC_DT_F32, MC_DT_BF16, MC_DT_F16};
    for (int t = 0; t < 3; t++) {
        const mc_dtype_t dt = types[t];
        const size_t es = mc_dtype_size(dt);
        char ha[NE * 4], hr[NE * 4], hw[C * 4], sum0[NE * 4], out0[NE * 4];
        be->convert(be, ha, dt, a, MC_DT_F32, NE);
        be->convert(be, hr, dt, r, MC_DT_F32, NE);
        be->convert(be, hw, dt, w, MC_DT_F32, C);
        float r0[N];
        be->add(be, dt, sum0, ha, hr, NE);
        be->rmsnorm_forward(be, dt, out0, r0, sum0, hw, N, C, 1e-5f);
        for (int place = 0; place < 3; place++) {
            char x[NE * 4], y[NE * 4], sum[NE * 4], out[NE * 4];
            float r1[N];
            memcpy(x, ha, NE * es), memcpy(y, hr, NE * es);
            char *dst = place == 0 ? sum : place == 1 ? x : y;
            be->add_rmsnorm_forward(be, dt, dst, out, r1, x, y, hw, N, C, 1e-5f);
            assert_memory_equal(dst, sum0, NE * es);
            assert_memory_equal(out, out0, NE * es);
            assert_memory_equal(r1, r0, sizeof(r0));
        }
    }
}

/* An empty row (C = 0): rstd = 1/sqrt(eps), nothing written; N = 0 touches nothing. */
static void test_rmsnorm_empty(void **state)
{
    (void)state;
    float rstd[2] = {7, 7}, x[1] = {3}, dw[1] = {5};
    be->rmsnorm_forward(be, MC_DT_F32, x, rstd, x, x, 2, 0, 0.25f);
    assert_true(rstd[0] == 2.0f && rstd[1] == 2.0f && x[0] == 3.0f);
    be->rmsnorm_backward_acc(be, MC_DT_F32, MC_DT_F32, x, dw, x, x, x, rstd, 0, 1);
    assert_true(x[0] == 3.0f && dw[0] == 5.0f);
}

/* ---- SwiGLU ---- */

static double g_xs[N * 2 * F];

static double silu_d(double g) { return g / (1.0 + exp(-g)); }
static double swiglu_loss(void)
{
    double s = 0;
    for (int n = 0; n < N; n++)
        for (int j = 0; j < F; j++) s += silu_d(g_xs[n * 2 * F + j]) * g_xs[n * 2 * F + F + j] * g_R[n * F + j];
    return s;
}

static void test_swiglu(void **state)
{
    (void)state;
    float x[N * 2 * F], R[N * F], out[N * F], dx[N * 2 * F];
    fill(x, N * 2 * F, -6, 6);
    x[0] = 0.0f, x[1] = -100.0f, x[2] = 100.0f; /* silu at 0 and saturated on both sides */
    fill(R, N * F, -1, 1);
    to_d(g_xs, x, N * 2 * F), to_d(g_R, R, N * F);
    double want[N * F];
    for (int n = 0; n < N; n++)
        for (int j = 0; j < F; j++) want[n * F + j] = silu_d(g_xs[n * 2 * F + j]) * g_xs[n * 2 * F + F + j];
    be->swiglu_forward(be, MC_DT_F32, out, x, N, F);
    check_close(out, want, N * F, RTOL, "swiglu out");
    memset(dx, 0x7f, sizeof(dx)); /* overwritten, not accumulated */
    be->swiglu_backward(be, MC_DT_F32, dx, R, x, N, F);
    check_fd(swiglu_loss, g_xs, N * 2 * F, dx, NULL, "swiglu dx");
    /* the gate's derivative at the saturated inputs: silu'(-100) ~ 0, silu'(100) = 1 */
    assert_true(fabs(dx[1]) < 1e-30);
    assert_true(fabs(dx[2] - R[2] * x[F + 2]) <= 1e-6 * fabs(R[2] * x[F + 2]));
}

int main(void)
{
    be = mc_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_add_rmsnorm),
        cmocka_unit_test(test_rmsnorm_empty),
        cmocka_unit_test(test_swiglu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
