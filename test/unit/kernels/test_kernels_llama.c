/* The CPU reference backend's ops of the Llama block (RMSNorm, SwiGLU, RoPE) in fp32: against
 * double-precision loops written here, the backward ops against central finite differences of
 * the double forward, and add_rmsnorm_forward against the add op then rmsnorm_forward, bit for
 * bit; RoPE also in bf16 (its 16-bit wrapper). (The other 16-bit wrappers: test_kernels_16bit.c;
 * squared ReLU: test_kernels_cpu.c's GeLU test.) */
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
#include "kernels/dtype.h"

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

/* ---- q/k LayerNorm (Megatron's --qk-layernorm: qk_norm_forward, qk_norm_backward) ----
 * Against a double reference of its own: LayerNorm or RMSNorm over each query and key head's HD
 * channels (query heads with wq, bq; key heads with wk, bk), value heads copied; the backward
 * against the analytic gradient in double and, in fp32, central differences of the forward; the
 * weight gradients accumulated onto non-zero starts. GQA (two query heads a group) and MHA, fp32
 * and bf16 (the CPU backend's op is the 16-bit wrapper mc_cpu_qk_norm_*: fp32 in, rounded out). */

enum { QK_MAX = 520, QK_HD = 13 }; /* the largest case's elements; HD odd */
#define QK_BF16_TOL 4e-3            /* 2^-8: a bf16 output's rounding, relative to the tensor's scale */

typedef struct {
    int T, NG, QPG, HD, rms;
} qk_case_t;

static qk_case_t g_qc;
static double g_qx[QK_MAX], g_qw[2][QK_HD], g_qb[2][QK_HD], g_qR[QK_MAX]; /* [0]: query, [1]: key */

static long qk_len(const qk_case_t *c) { return (long)c->T * c->NG * (c->QPG + 2) * c->HD; }
static long qk_heads(const qk_case_t *c) { return (long)c->T * c->NG * (c->QPG + 1); }

/* Forward from g_qx: out, and per normalised head its mean (0 with RMSNorm) and rstd. */
static void qk_ref(double *out, double *mean, double *rstd)
{
    const qk_case_t *c = &g_qc;
    const int HD = c->HD;
    for (long g = 0; g < (long)c->T * c->NG; g++)
        for (int h = 0; h < c->QPG + 2; h++) {
            const long o = (g * (c->QPG + 2) + h) * HD, si = g * (c->QPG + 1) + h;
            if (h == c->QPG + 1) { /* the value head */
                for (int j = 0; j < HD; j++) out[o + j] = g_qx[o + j];
                continue;
            }
            const int k = h == c->QPG;
            double mu = 0, v = 0;
            for (int j = 0; j < HD && !c->rms; j++) mu += g_qx[o + j] / HD;
            for (int j = 0; j < HD; j++) v += (g_qx[o + j] - mu) * (g_qx[o + j] - mu) / HD;
            const double r = 1.0 / sqrt(v + EPS);
            for (int j = 0; j < HD; j++)
                out[o + j] = (g_qx[o + j] - mu) * r * g_qw[k][j] + (c->rms ? 0.0 : g_qb[k][j]);
            if (mean) mean[si] = mu;
            if (rstd) rstd[si] = r;
        }
}
static double qk_loss(void)
{
    static double out[QK_MAX];
    double s = 0;
    qk_ref(out, NULL, NULL);
    for (long i = 0; i < qk_len(&g_qc); i++) s += out[i] * g_qR[i];
    return s;
}

/* The analytic backward of qk_loss: dx (the value heads' gradient passes through), dw, db. */
static void qk_grad_ref(double *dx, double dw[2][QK_HD], double db[2][QK_HD])
{
    const qk_case_t *c = &g_qc;
    const int HD = c->HD;
    static double out[QK_MAX], mean[QK_MAX], rstd[QK_MAX];
    qk_ref(out, mean, rstd);
    memset(dw, 0, 2 * QK_HD * sizeof(double)), memset(db, 0, 2 * QK_HD * sizeof(double));
    for (long g = 0; g < (long)c->T * c->NG; g++)
        for (int h = 0; h < c->QPG + 2; h++) {
            const long o = (g * (c->QPG + 2) + h) * HD, si = g * (c->QPG + 1) + h;
            if (h == c->QPG + 1) {
                for (int j = 0; j < HD; j++) dx[o + j] = g_qR[o + j];
                continue;
            }
            const int k = h == c->QPG;
            const double r = rstd[si];
            double a = 0, b = 0; /* mean(dout * w), mean(dout * w * xhat) */
            for (int j = 0; j < HD; j++) {
                const double xh = (g_qx[o + j] - mean[si]) * r, dn = g_qR[o + j] * g_qw[k][j];
                a += dn / HD, b += dn * xh / HD;
                dw[k][j] += g_qR[o + j] * xh, db[k][j] += g_qR[o + j];
            }
            for (int j = 0; j < HD; j++) {
                const double xh = (g_qx[o + j] - mean[si]) * r;
                dx[o + j] = r * (g_qR[o + j] * g_qw[k][j] - (c->rms ? 0.0 : a) - xh * b);
            }
        }
}

/* x rounded to dt and back (the values a dt op sees). */
static void qk_round(float *x, long n, mc_dtype_t dt)
{
    char tmp[QK_MAX * 4];
    be->convert(be, tmp, dt, x, MC_DT_F32, n);
    be->convert(be, x, MC_DT_F32, tmp, dt, n);
}

/* One case in dt (gradients in gdt): the op on dt buffers, compared in fp32. */
static void qk_case(const qk_case_t *c, mc_dtype_t dt, mc_dtype_t gdt)
{
    g_qc = *c;
    const long n = qk_len(c), ns = qk_heads(c);
    const int HD = c->HD, f32 = dt == MC_DT_F32;
    const double tol = f32 ? RTOL : QK_BF16_TOL;
    char what[96];
    snprintf(what, sizeof(what), "qk_norm %s T %d NG %d QPG %d HD %d %s gdt %s", c->rms ? "RMSNorm" : "LayerNorm", c->T,
             c->NG, c->QPG, HD, mc_dtype_name(dt), mc_dtype_name(gdt));
    assert_true(n <= QK_MAX && HD <= QK_HD);
    float x[QK_MAX], w[2][QK_HD], b[2][QK_HD], R[QK_MAX];
    fill(x, n, -2, 3);
    for (int j = 0; j < HD; j++) x[HD + j] += 4.0f; /* the second head off-centre: RMS is not the variance */
    fill(w[0], 2 * QK_HD, 0.5, 1.5), fill(b[0], 2 * QK_HD, -1, 1), fill(R, n, -1, 1);
    qk_round(x, n, dt), qk_round(w[0], 2 * QK_HD, dt), qk_round(b[0], 2 * QK_HD, dt), qk_round(R, n, dt);
    to_d(g_qx, x, n), to_d(g_qw[0], w[0], 2 * QK_HD), to_d(g_qb[0], b[0], 2 * QK_HD), to_d(g_qR, R, n);

    /* forward, into garbage-filled outputs */
    char hx[QK_MAX * 4], hw[2][QK_HD * 4], hb[2][QK_HD * 4], hout[QK_MAX * 4];
    be->convert(be, hx, dt, x, MC_DT_F32, n);
    for (int k = 0; k < 2; k++)
        be->convert(be, hw[k], dt, w[k], MC_DT_F32, HD), be->convert(be, hb[k], dt, b[k], MC_DT_F32, HD);
    memset(hout, 0x7f, sizeof(hout));
    float mean[QK_MAX], rstd[QK_MAX], out[QK_MAX];
    memset(mean, 0x7f, sizeof(mean)), memset(rstd, 0x7f, sizeof(rstd));
    be->qk_norm_forward(be, dt, hout, c->rms ? NULL : mean, rstd, hx, hw[0], c->rms ? NULL : hb[0], hw[1],
                        c->rms ? NULL : hb[1], c->T, c->NG, c->QPG, HD, (float)EPS, c->rms);
    be->convert(be, out, MC_DT_F32, hout, dt, n);
    double want[QK_MAX], wm[QK_MAX], wr[QK_MAX];
    qk_ref(want, wm, wr);
    check_close(out, want, n, tol, what);
    check_close(rstd, wr, ns, RTOL, what);
    if (!c->rms) check_close(mean, wm, ns, RTOL, what);
    for (long i = 0; i < n; i++) /* value heads copied unchanged */
        if (i / HD % (c->QPG + 2) == c->QPG + 1 && memcmp(&out[i], &x[i], sizeof(float)) != 0)
            fail_msg("%s: value element %ld changed (%g, was %g)", what, i, (double)out[i], (double)x[i]);

    /* backward: dqkv starts as the output gradient R, the weight gradients at non-zero values */
    float base[4][QK_HD], got[4][QK_HD], dx[QK_MAX];
    fill(base[0], 4 * QK_HD, -1, 1);
    qk_round(base[0], 4 * QK_HD, gdt);
    char hd[QK_MAX * 4], hg[4][QK_HD * 4];
    be->convert(be, hd, dt, R, MC_DT_F32, n);
    for (int k = 0; k < 4; k++) be->convert(be, hg[k], gdt, base[k], MC_DT_F32, HD);
    be->qk_norm_backward(be, dt, gdt, hd, hg[0], c->rms ? NULL : hg[1], hg[2], c->rms ? NULL : hg[3], hx, hw[0], hw[1],
                         c->rms ? NULL : mean, rstd, c->T, c->NG, c->QPG, HD, c->rms);
    be->convert(be, dx, MC_DT_F32, hd, dt, n);
    for (int k = 0; k < 4; k++) be->convert(be, got[k], MC_DT_F32, hg[k], gdt, HD);
    for (long i = 0; i < n; i++) /* the value heads' gradient untouched */
        if (i / HD % (c->QPG + 2) == c->QPG + 1 && memcmp(&dx[i], &R[i], sizeof(float)) != 0)
            fail_msg("%s: value gradient %ld changed (%g, was %g)", what, i, (double)dx[i], (double)R[i]);
    double wdx[QK_MAX], wdw[2][QK_HD], wdb[2][QK_HD], acc[4][QK_HD];
    qk_grad_ref(wdx, wdw, wdb);
    for (int j = 0; j < HD; j++) /* "+=" onto the starts; RMSNorm has no bias gradient to add */
        acc[0][j] = base[0][j] + wdw[0][j], acc[1][j] = base[1][j] + (c->rms ? 0.0 : wdb[0][j]),
        acc[2][j] = base[2][j] + wdw[1][j], acc[3][j] = base[3][j] + (c->rms ? 0.0 : wdb[1][j]);
    const double gtol = gdt == MC_DT_F32 ? RTOL : QK_BF16_TOL;
    check_close(dx, wdx, n, tol, what);
    static const char *names[4] = {"dwq", "dbq", "dwk", "dbk"};
    for (int k = 0; k < 4; k++) {
        char wk[128];
        snprintf(wk, sizeof(wk), "%s %s (acc)", what, names[k]);
        check_close(got[k], acc[k], HD, gtol, wk);
    }
    if (!f32) return;
    /* fp32: the same gradients against central differences of the double forward */
    check_fd(qk_loss, g_qx, n, dx, NULL, "qk_norm dqkv (finite differences)");
    check_fd(qk_loss, g_qw[0], HD, got[0], base[0], "qk_norm dwq (finite differences, acc)");
    check_fd(qk_loss, g_qw[1], HD, got[2], base[2], "qk_norm dwk (finite differences, acc)");
    if (c->rms) return;
    check_fd(qk_loss, g_qb[0], HD, got[1], base[1], "qk_norm dbq (finite differences, acc)");
    check_fd(qk_loss, g_qb[1], HD, got[3], base[3], "qk_norm dbk (finite differences, acc)");
}

static void test_qk_norm(void **state)
{
    (void)state;
    static const qk_case_t cases[] = {
        {5, 2, 2, QK_HD, 0}, /* GQA: two query heads, a key and a value head per group */
        {4, 3, 1, QK_HD, 0}, /* MHA */
        {5, 2, 2, QK_HD, 1},
        {4, 3, 1, QK_HD, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        qk_case(&cases[i], MC_DT_F32, MC_DT_F32);
        qk_case(&cases[i], MC_DT_BF16, MC_DT_F32);
        qk_case(&cases[i], MC_DT_BF16, MC_DT_BF16);
    }
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

/* ---- RoPE ---- */

/* The sizes of one case: qkv [S, B, NG*(QPG+2)*HD], the first rot elements of each query and key
 * head rotated. */
typedef struct {
    int S, B, NG, QPG, HD, rot;
} rope_case_t;

static long rope_len(const rope_case_t *c) { return (long)c->S * c->B * c->NG * (c->QPG + 2) * c->HD; }

/* Megatron's angle tables, rot/2 frequencies base^(-2i/rot) per position, rounded to fp32 (the
 * op's input: the reference reads the same values). */
static void rope_tables(const rope_case_t *c, float *cos_t, float *sin_t)
{
    const int half = c->rot / 2;
    for (int s = 0; s < c->S; s++)
        for (int i = 0; i < half; i++) {
            const double a = s * pow(10000.0, -2.0 * i / c->rot);
            cos_t[s * half + i] = (float)cos(a), sin_t[s * half + i] = (float)sin(a);
        }
}

/* apply_rotary_pos_emb written as Megatron writes it, in double, on every query and key head:
 * t = x[:rot]; y = t * cos + rotate_half(t) * sin, with the frequency table repeated over a pair
 * (cat(f, f), or each f twice when interleaved) and rotate_half(t) = cat(-t2, t1) for the halves
 * t1, t2 (interleaved: the pairs (t[2i], t[2i+1]) become (-t[2i+1], t[2i])); x[rot:] and the value
 * heads pass through. inverse: the angle negated. */
static void rope_ref(const rope_case_t *c, double *x, const float *cos_t, const float *sin_t, int interleaved,
                     int inverse)
{
    const int half = c->rot / 2, row = c->NG * (c->QPG + 2) * c->HD;
    double emb_c[64], emb_s[64], rh[64];
    assert_true(c->rot <= 64);
    for (int s = 0; s < c->S; s++) {
        for (int j = 0; j < c->rot; j++) { /* the angle of element j */
            const int f = interleaved ? j / 2 : j % half;
            emb_c[j] = cos_t[s * half + f], emb_s[j] = (inverse ? -1.0 : 1.0) * sin_t[s * half + f];
        }
        for (int b = 0; b < c->B; b++)
            for (int g = 0; g < c->NG; g++)
                for (int h = 0; h < c->QPG + 1; h++) { /* the query heads, then the key head */
                    double *t = x + ((long)s * c->B + b) * row + (g * (c->QPG + 2) + h) * c->HD;
                    for (int j = 0; j < c->rot; j++)
                        rh[j] = interleaved ? (j % 2 ? t[j - 1] : -t[j + 1]) : (j < half ? -t[j + half] : t[j - half]);
                    for (int j = 0; j < c->rot; j++) t[j] = t[j] * emb_c[j] + rh[j] * emb_s[j];
                }
    }
}

/* True for an element the op must leave as it is: a value head, or past rot in a q/k head. */
static int rope_untouched(const rope_case_t *c, long e)
{
    const int in_group = (int)(e % ((long)(c->QPG + 2) * c->HD));
    return in_group / c->HD == c->QPG + 1 || in_group % c->HD >= c->rot;
}

/* The fp32 op against the reference, forward and inverse; the untouched elements bit for bit;
 * the inverse of the forward gives x back within 1e-6. */
static void rope_case_f32(const rope_case_t *c, int interleaved)
{
    const long n = rope_len(c);
    const size_t nt = (size_t)c->S * (c->rot / 2);
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    float *ct = malloc(nt * sizeof(float)), *st = malloc(nt * sizeof(float));
    double *want = malloc((size_t)n * sizeof(double));
    assert_true(x && y && ct && st && want);
    fill(x, n, -2, 2);
    rope_tables(c, ct, st);
    char what[128];
    for (int inverse = 0; inverse <= 1; inverse++) {
        snprintf(what, sizeof(what), "rope S %d B %d NG %d QPG %d HD %d rot %d%s%s", c->S, c->B, c->NG, c->QPG, c->HD,
                 c->rot, interleaved ? " interleaved" : "", inverse ? " inverse" : "");
        memcpy(y, x, (size_t)n * sizeof(float));
        to_d(want, x, n);
        be->rope(be, MC_DT_F32, y, ct, st, c->S, c->B, c->NG, c->QPG, c->HD, c->rot, interleaved, inverse);
        rope_ref(c, want, ct, st, interleaved, inverse);
        check_close(y, want, n, 1e-6, what);
        for (long e = 0; e < n; e++)
            if (rope_untouched(c, e) && memcmp(&y[e], &x[e], sizeof(float)) != 0)
                fail_msg("%s: element %ld (a value head or past rot) changed: %.9g -> %.9g", what, e, (double)x[e],
                         (double)y[e]);
    }
    /* back through the rotation: the transpose of a rotation is its inverse */
    memcpy(y, x, (size_t)n * sizeof(float));
    be->rope(be, MC_DT_F32, y, ct, st, c->S, c->B, c->NG, c->QPG, c->HD, c->rot, interleaved, 0);
    be->rope(be, MC_DT_F32, y, ct, st, c->S, c->B, c->NG, c->QPG, c->HD, c->rot, interleaved, 1);
    for (long e = 0; e < n; e++)
        if (!(fabs((double)y[e] - x[e]) <= 1e-6))
            fail_msg("rope inverse(forward(x)) (%s): element %ld: %.9g, x %.9g", what, e, (double)y[e], (double)x[e]);
    free(x), free(y), free(ct), free(st), free(want);
}

/* Multi-head (QPG 1), grouped-query (QPG 3, and NG 1 with QPG 4: multi-query), rotary percent 0.5
 * (rot < HD), each non-interleaved and interleaved. */
static const rope_case_t ROPE_CASES[] = {
    {.S = 5, .B = 2, .NG = 3, .QPG = 1, .HD = 16, .rot = 16}, {.S = 4, .B = 3, .NG = 2, .QPG = 3, .HD = 12, .rot = 12},
    {.S = 6, .B = 1, .NG = 1, .QPG = 4, .HD = 8, .rot = 8},   {.S = 5, .B = 2, .NG = 2, .QPG = 2, .HD = 16, .rot = 8},
};
enum { ROPE_NCASES = sizeof(ROPE_CASES) / sizeof(ROPE_CASES[0]) };

static void test_rope(void **state)
{
    (void)state;
    for (int k = 0; k < ROPE_NCASES; k++)
        for (int il = 0; il <= 1; il++) rope_case_f32(&ROPE_CASES[k], il);
}

/* bf16 through the 16-bit wrapper: the fp32 op on the widened values, each result rounded once
 * to bf16 (so within one bf16 unit of the double reference), the untouched elements as they were. */
static void test_rope_bf16(void **state)
{
    (void)state;
    for (int k = 0; k < ROPE_NCASES; k++)
        for (int il = 0; il <= 1; il++)
            for (int inverse = 0; inverse <= 1; inverse++) {
                const rope_case_t *c = &ROPE_CASES[k];
                const long n = rope_len(c);
                float *x = malloc((size_t)n * sizeof(float)), *y32 = malloc((size_t)n * sizeof(float));
                uint16_t *h = malloc((size_t)n * 2), *h0 = malloc((size_t)n * 2);
                float ct[16 * 32], st[16 * 32];
                double *want = malloc((size_t)n * sizeof(double));
                assert_true(x && y32 && h && h0 && want && c->S * c->rot / 2 <= 16 * 32);
                fill(x, n, -2, 2);
                be->convert(be, h0, MC_DT_BF16, x, MC_DT_F32, n);
                be->convert(be, x, MC_DT_F32, h0, MC_DT_BF16, n); /* the bf16 values, widened */
                memcpy(h, h0, (size_t)n * 2), memcpy(y32, x, (size_t)n * sizeof(float));
                rope_tables(c, ct, st);
                be->rope(be, MC_DT_BF16, h, ct, st, c->S, c->B, c->NG, c->QPG, c->HD, c->rot, il, inverse);
                be->rope(be, MC_DT_F32, y32, ct, st, c->S, c->B, c->NG, c->QPG, c->HD, c->rot, il, inverse);
                to_d(want, x, n);
                rope_ref(c, want, ct, st, il, inverse);
                for (long e = 0; e < n; e++) {
                    const double got = mc_f32_from_bf16(h[e]);
                    if (h[e] != mc_bf16_from_f32(y32[e]))
                        fail_msg("rope bf16 case %d%s%s: element %ld is %.9g, not the fp32 op's %.9g rounded", k,
                                 il ? " interleaved" : "", inverse ? " inverse" : "", e, got, (double)y32[e]);
                    if (!(fabs(got - want[e]) <= ldexp(fmax(fabs(got), fabs(want[e])), -8) + 1e-6))
                        fail_msg("rope bf16 case %d: element %ld: got %.9g, want %.9g", k, e, got, want[e]);
                    if (rope_untouched(c, e) && h[e] != h0[e])
                        fail_msg("rope bf16 case %d: untouched element %ld changed", k, e);
                }
                free(x), free(y32), free(h), free(h0), free(want);
            }
}

int main(void)
{
    be = mc_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_add_rmsnorm),
        cmocka_unit_test(test_rmsnorm_empty),
        cmocka_unit_test(test_qk_norm),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_rope_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
