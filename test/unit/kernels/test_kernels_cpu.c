/* The CPU reference backend: every op of kernels/backend.h against naive double-precision loops
 * written here, every backward op against central finite differences of the double reference
 * forward, and the layout invariance of the dropout masks (DESIGN decision 6). */
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
#include "kernels/cpu/cpu.h"
#include "kernels/philox.h"

/* Small odd sizes so no dimension lines up with a vector width or a Philox block. */
enum { S = 7, B = 3, NH = 2, HD = 5, V = 37, H = 11, N = S * B };

#define RTOL 1e-5   /* float op vs double reference, relative to the tensor's largest value */
#define FDTOL 2e-5  /* float backward vs finite differences of the double reference */

static const mc_backend_t *be;

/* ---- helpers ---- */

static uint64_t rng_s = 88172645463325252ull;
static void rng_seed(uint64_t s) { rng_s = s * 2654435761ull + 1; }
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
static float *fnew(long n)
{
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    assert_non_null(p);
    return p;
}
static double *dnew(long n)
{
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    assert_non_null(p);
    return p;
}
static double *dup_d(const float *x, long n)
{
    double *d = dnew(n);
    for (long i = 0; i < n; i++) d[i] = x[i];
    return d;
}
static float *dup_f(const float *x, long n)
{
    float *f = fnew(n);
    memcpy(f, x, (size_t)n * sizeof(float));
    return f;
}

/* |got - want| <= rtol * (|want| + max|want|) elementwise. */
static void check_close(const float *got, const double *want, long n, double rtol, const char *what)
{
    double scale = 0.0;
    for (long i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    if (scale == 0.0) scale = 1e-30;
    for (long i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        if (!(err <= rtol * (fabs(want[i]) + scale)))
            fail_msg("%s[%ld]: got %.9g, want %.9g (err %.3g, scale %.3g)", what, i, (double)got[i],
                     want[i], err, scale);
    }
}
/* Central differences of a double loss L(ctx) with respect to x[0..n), compared with grad.
 * want_base (may be NULL) is added to the finite differences (for "_acc" outputs). */
typedef double (*loss_fn)(void *ctx);
static void check_fd_strided(loss_fn f, void *ctx, double *x, long n, const float *grad,
                             const float *want_base, double rtol, const char *what, long stride);
static void check_fd(loss_fn f, void *ctx, double *x, long n, const float *grad,
                     const float *want_base, double rtol, const char *what)
{
    check_fd_strided(f, ctx, x, n, grad, want_base, rtol, what, 1);
}
/* Only elements 0, stride, 2*stride, ... (for the larger cases); the others are compared with
 * themselves. */
static void check_fd_strided(loss_fn f, void *ctx, double *x, long n, const float *grad,
                             const float *want_base, double rtol, const char *what, long stride)
{
    double *fd = dnew(n);
    for (long i = 0; i < n; i++) {
        if (i % stride) {
            fd[i] = grad[i];
            continue;
        }
        double s = x[i], h = 1e-5;
        x[i] = s + h;
        double lp = f(ctx);
        x[i] = s - h;
        double lm = f(ctx);
        x[i] = s;
        fd[i] = (lp - lm) / (2 * h) + (want_base ? want_base[i] : 0.0);
    }
    check_close(grad, fd, n, rtol, what);
    free(fd);
}

static double dot_d(const double *a, const double *b, long n)
{
    double s = 0;
    for (long i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ---- memory ---- */

static void test_memory(void **state)
{
    (void)state;
    assert_string_equal(be->name, "cpu");
    assert_true(be == mc_backend_cpu());
    float *a = be->alloc(be, 1001 * sizeof(float));
    assert_non_null(a);
    assert_int_equal((uintptr_t)a % 64, 0);
    for (int i = 0; i < 1001; i++) assert_true(a[i] == 0.0f);
    void *z = be->alloc(be, 0);
    assert_non_null(z);
    be->free(be, z);
    float h[1001], back[1001];
    fill(h, 1001, -1, 1);
    be->memcpy_h2d(be, a, h, sizeof(h));
    float *c = be->alloc(be, sizeof(h));
    be->memcpy_d2d(be, c, a, sizeof(h));
    be->memcpy_d2h(be, back, c, sizeof(h));
    assert_memory_equal(back, h, sizeof(h));
    be->memset0(be, c + 10, 100 * sizeof(float));
    for (int i = 0; i < 1001; i++) assert_true(c[i] == (i >= 10 && i < 110 ? 0.0f : h[i]));
    be->synchronize(be);
    be->free(be, a);
    be->free(be, c);
    be->free(be, NULL);
}

/* ---- GEMM ---- */

static void test_gemm(void **state)
{
    (void)state;
    enum { M = 7, NN = 5, K = 9, PAD = 3 };
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int ar = ta ? K : M, ac = ta ? M : K, br = tb ? NN : K, bc = tb ? K : NN;
            int lda = ac + PAD, ldb = bc + PAD, ldc = NN + PAD;
            float *A = fnew((long)ar * lda), *Bm = fnew((long)br * ldb), *C = fnew((long)M * ldc);
            fill(A, (long)ar * lda, -1, 1);
            fill(Bm, (long)br * ldb, -1, 1);
            fill(C, (long)M * ldc, -1, 1);
            float *C0 = dup_f(C, (long)M * ldc);
            const float alpha = 1.5f, beta = 0.5f;
            be->gemm(be, ta, tb, M, NN, K, alpha, A, lda, Bm, ldb, beta, C, ldc);
            double *want = dnew((long)M * ldc);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < ldc; j++) {
                    if (j >= NN) { want[i * ldc + j] = C0[i * ldc + j]; continue; }
                    double s = 0;
                    for (int k = 0; k < K; k++) {
                        double a = ta ? A[k * lda + i] : A[i * lda + k];
                        double b = tb ? Bm[j * ldb + k] : Bm[k * ldb + j];
                        s += a * b;
                    }
                    want[i * ldc + j] = alpha * s + beta * (double)C0[i * ldc + j];
                }
            check_close(C, want, (long)M * ldc, RTOL, "gemm");
            for (int i = 0; i < M; i++) /* padding untouched */
                for (int j = NN; j < ldc; j++) assert_true(C[i * ldc + j] == C0[i * ldc + j]);
            free(A); free(Bm); free(C); free(C0); free(want);
        }
}

/* ---- linear ---- */

enum { IN = 11, OUT = 13 };
typedef struct { double *in, *W, *b, *R; } lin_ctx;

static void lin_ref(double *out, const double *in, const double *W, const double *b)
{
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OUT; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < IN; i++) s += in[n * IN + i] * W[o * IN + i];
            out[n * OUT + o] = s;
        }
}
static double lin_loss(void *p)
{
    lin_ctx *c = p;
    double out[N * OUT];
    lin_ref(out, c->in, c->W, c->b);
    return dot_d(out, c->R, N * OUT);
}

static void test_linear(void **state)
{
    (void)state;
    float in[N * IN], W[OUT * IN], b[OUT], R[N * OUT], out[N * OUT];
    fill(in, N * IN, -1, 1);
    fill(W, OUT * IN, -1, 1);
    fill(b, OUT, -1, 1);
    fill(R, N * OUT, -1, 1);
    lin_ctx c = {dup_d(in, N * IN), dup_d(W, OUT * IN), dup_d(b, OUT), dup_d(R, N * OUT)};
    double want[N * OUT];

    be->linear_forward(be, MC_DT_F32, out, in, W, b, N, IN, OUT);
    lin_ref(want, c.in, c.W, c.b);
    check_close(out, want, N * OUT, RTOL, "linear out");
    be->linear_forward(be, MC_DT_F32, out, in, W, NULL, N, IN, OUT);
    lin_ref(want, c.in, c.W, NULL);
    check_close(out, want, N * OUT, RTOL, "linear out (no bias)");

    /* backward: dout = R, so the gradients are those of L = sum R * out */
    float din[N * IN], dW[OUT * IN], db[OUT], dW0[OUT * IN], db0[OUT];
    fill(din, N * IN, 5, 6); /* overwritten */
    fill(dW0, OUT * IN, -1, 1);
    fill(db0, OUT, -1, 1);
    memcpy(dW, dW0, sizeof(dW));
    memcpy(db, db0, sizeof(db));
    be->linear_backward(be, MC_DT_F32, MC_DT_F32, din, dW, db, R, in, W, N, IN, OUT);
    check_fd(lin_loss, &c, c.in, N * IN, din, NULL, FDTOL, "linear din");
    check_fd(lin_loss, &c, c.W, OUT * IN, dW, dW0, FDTOL, "linear dW (acc)");
    check_fd(lin_loss, &c, c.b, OUT, db, db0, FDTOL, "linear dbias (acc)");

    /* din and dbias may be NULL; dW is the same */
    float dW2[OUT * IN];
    memcpy(dW2, dW0, sizeof(dW2));
    be->linear_backward(be, MC_DT_F32, MC_DT_F32, NULL, dW2, NULL, R, in, W, N, IN, OUT);
    assert_memory_equal(dW2, dW, sizeof(dW));
    free(c.in); free(c.W); free(c.b); free(c.R);
}

/* Column sums over many rows stay accurate (the bias gradient is summed in double). */
static void test_linear_dbias_many_rows(void **state)
{
    (void)state;
    enum { NR = 20000, O = 3, I = 1 };
    float *dout = fnew((long)NR * O), *in = fnew(NR), W[O] = {0}, dW[O] = {0}, db[O] = {0};
    for (long n = 0; n < NR; n++)
        for (int o = 0; o < O; o++) dout[n * O + o] = 0.1f + (float)o;
    be->linear_backward(be, MC_DT_F32, MC_DT_F32, NULL, dW, db, dout, in, W, NR, I, O);
    for (int o = 0; o < O; o++) {
        double want = (double)NR * (double)(0.1f + (float)o);
        assert_true(fabs(db[o] - want) <= 1e-6 * want);
    }
    free(dout); free(in);
}

/* ---- embedding ---- */

enum { VOC = 37, POS = 9 };
typedef struct { double *wte, *wpe, *R; const int32_t *tok, *pos; } emb_ctx;

static void emb_ref(double *out, const emb_ctx *c)
{
    for (int s = 0; s < S; s++)
        for (int b = 0; b < B; b++)
            for (int i = 0; i < H; i++)
                out[(s * B + b) * H + i] = c->wte[c->tok[b * S + s] * H + i] +
                                           (c->wpe ? c->wpe[c->pos[b * S + s] * H + i] : 0.0);
}
static double emb_loss(void *p)
{
    double out[N * H];
    emb_ref(out, p);
    return dot_d(out, ((emb_ctx *)p)->R, N * H);
}

static void test_embedding(void **state)
{
    (void)state;
    int32_t tok[B * S], pos[B * S];
    for (int i = 0; i < B * S; i++) {
        tok[i] = (int32_t)(urand() * 6); /* many repeats */
        pos[i] = (int32_t)((i % S + 2) % POS);
    }
    tok[0] = VOC - 1;
    float wte[VOC * H], wpe[POS * H], R[N * H], out[N * H];
    fill(wte, VOC * H, -1, 1);
    fill(wpe, POS * H, -1, 1);
    fill(R, N * H, -1, 1);
    emb_ctx c = {dup_d(wte, VOC * H), dup_d(wpe, POS * H), dup_d(R, N * H), tok, pos};
    double want[N * H];
    be->embedding_forward(be, MC_DT_F32, out, tok, pos, wte, wpe, S, B, H, 0, VOC);
    emb_ref(want, &c);
    check_close(out, want, N * H, RTOL, "embedding out");

    float dwte[VOC * H], dwpe[POS * H], dwte0[VOC * H], dwpe0[POS * H];
    fill(dwte0, VOC * H, -1, 1);
    fill(dwpe0, POS * H, -1, 1);
    memcpy(dwte, dwte0, sizeof(dwte));
    memcpy(dwpe, dwpe0, sizeof(dwpe));
    be->embedding_backward(be, MC_DT_F32, MC_DT_F32, dwte, dwpe, R, tok, pos, S, B, H, 0, VOC);
    check_fd(emb_loss, &c, c.wte, VOC * H, dwte, dwte0, FDTOL, "embedding dwte (acc)");
    check_fd(emb_loss, &c, c.wpe, POS * H, dwpe, dwpe0, FDTOL, "embedding dwpe (acc)");

    /* without position embeddings */
    emb_ctx c2 = c;
    c2.wpe = NULL;
    be->embedding_forward(be, MC_DT_F32, out, tok, NULL, wte, NULL, S, B, H, 0, VOC);
    emb_ref(want, &c2);
    check_close(out, want, N * H, RTOL, "embedding out (no wpe)");
    memcpy(dwte, dwte0, sizeof(dwte));
    be->embedding_backward(be, MC_DT_F32, MC_DT_F32, dwte, NULL, R, tok, NULL, S, B, H, 0, VOC);
    check_fd(emb_loss, &c2, c2.wte, VOC * H, dwte, dwte0, FDTOL, "embedding dwte (no wpe)");

    /* vocab shards: the sum of the shards' outputs is the whole lookup, and each shard's
     * gradient is its rows of the whole gradient */
    const int V0 = VOC / 3;
    float part[N * H], sum[N * H], dsh[VOC * H];
    memset(sum, 0, sizeof(sum));
    be->embedding_forward(be, MC_DT_F32, part, tok, pos, wte, wpe, S, B, H, 0, V0);
    for (int i = 0; i < N * H; i++) sum[i] += part[i];
    be->embedding_forward(be, MC_DT_F32, part, tok, NULL, wte + (long)V0 * H, NULL, S, B, H, V0, VOC - V0);
    for (int i = 0; i < N * H; i++) sum[i] += part[i];
    emb_ref(want, &c);
    check_close(sum, want, N * H, RTOL, "embedding out (two vocab shards)");
    memset(dwte, 0, sizeof(dwte));
    be->embedding_backward(be, MC_DT_F32, MC_DT_F32, dwte, NULL, R, tok, NULL, S, B, H, 0, VOC);
    memset(dsh, 0, sizeof(dsh));
    be->embedding_backward(be, MC_DT_F32, MC_DT_F32, dsh, NULL, R, tok, NULL, S, B, H, 0, V0);
    be->embedding_backward(be, MC_DT_F32, MC_DT_F32, dsh + (long)V0 * H, NULL, R, tok, NULL, S, B, H, V0, VOC - V0);
    assert_memory_equal(dsh, dwte, sizeof(dsh));
    free(c.wte); free(c.wpe); free(c.R);
}

/* ---- LayerNorm ---- */

typedef struct { double *x, *w, *b, *R; double eps; } ln_ctx;

static void ln_ref(double *out, double *mean, double *rstd, const ln_ctx *c)
{
    for (int n = 0; n < N; n++) {
        const double *x = c->x + n * H;
        double mu = 0, var = 0;
        for (int i = 0; i < H; i++) mu += x[i];
        mu /= H;
        for (int i = 0; i < H; i++) var += (x[i] - mu) * (x[i] - mu);
        var /= H;
        double r = 1.0 / sqrt(var + c->eps);
        if (mean) mean[n] = mu;
        if (rstd) rstd[n] = r;
        for (int i = 0; i < H; i++) out[n * H + i] = (x[i] - mu) * r * c->w[i] + c->b[i];
    }
}
static double ln_loss(void *p)
{
    double out[N * H];
    ln_ref(out, NULL, NULL, p);
    return dot_d(out, ((ln_ctx *)p)->R, N * H);
}

static void test_layernorm(void **state)
{
    (void)state;
    float x[N * H], w[H], b[H], R[N * H], out[N * H], mean[N], rstd[N];
    fill(x, N * H, 2, 4); /* a nonzero mean */
    fill(w, H, 0.5, 1.5);
    fill(b, H, -1, 1);
    fill(R, N * H, -1, 1);
    const float eps = 1e-5f;
    ln_ctx c = {dup_d(x, N * H), dup_d(w, H), dup_d(b, H), dup_d(R, N * H), eps};
    double want[N * H], wm[N], wr[N];
    be->layernorm_forward(be, MC_DT_F32, out, mean, rstd, x, w, b, N, H, eps);
    ln_ref(want, wm, wr, &c);
    check_close(out, want, N * H, RTOL, "layernorm out");
    check_close(mean, wm, N, RTOL, "layernorm mean");
    check_close(rstd, wr, N, RTOL, "layernorm rstd");

    float dx[N * H], dw[H], db[H], dx0[N * H], dw0[H], db0[H];
    fill(dx0, N * H, -1, 1);
    fill(dw0, H, -1, 1);
    fill(db0, H, -1, 1);
    memcpy(dx, dx0, sizeof(dx));
    memcpy(dw, dw0, sizeof(dw));
    memcpy(db, db0, sizeof(db));
    be->layernorm_backward_acc(be, MC_DT_F32, MC_DT_F32, dx, dw, db, R, x, w, mean, rstd, N, H);
    check_fd(ln_loss, &c, c.x, N * H, dx, dx0, FDTOL, "layernorm dx (acc)");
    check_fd(ln_loss, &c, c.w, H, dw, dw0, FDTOL, "layernorm dw (acc)");
    check_fd(ln_loss, &c, c.b, H, db, db0, FDTOL, "layernorm db (acc)");
    free(c.x); free(c.w); free(c.b); free(c.R);
}

/* Rows with a large offset relative to their spread keep their accuracy. */
static void test_layernorm_offset(void **state)
{
    (void)state;
    enum { C = 1000 };
    float x[C], w[C], b[C], out[C], mean, rstd;
    for (int i = 0; i < C; i++) {
        x[i] = 1000.0f + (float)((i % 7) - 3) * 0.01f;
        w[i] = 1.0f;
        b[i] = 0.0f;
    }
    be->layernorm_forward(be, MC_DT_F32, out, &mean, &rstd, x, w, b, 1, C, 1e-5f);
    double mu = 0, var = 0;
    for (int i = 0; i < C; i++) mu += x[i];
    mu /= C;
    for (int i = 0; i < C; i++) var += ((double)x[i] - mu) * ((double)x[i] - mu);
    var /= C;
    double r = 1.0 / sqrt(var + 1e-5);
    /* out is (x - mean) with x - mean exact only to fp32 of mean: allow 1e-3 of a unit */
    for (int i = 0; i < C; i++) assert_true(fabs(out[i] - ((double)x[i] - mu) * r) < 2e-3);
    assert_true(fabs(rstd - r) <= 1e-5 * r);
}

/* linear_gelu_forward and linear_backward_gelu are their parts in sequence, bit for bit (the
 * CUDA backend's epilogue versions are tested against these), in fp32 and bf16, every activation. */
static void test_linear_gelu(void **state)
{
    (void)state;
    enum { R = 6, H = 10, F = 24 };
    float in[R * H], W1[F * H], b1[F], W2[H * F], go[R * H];
    fill(in, R * H, -1, 1);
    fill(W1, F * H, -0.5, 0.5);
    fill(b1, F, -1, 1);
    fill(W2, H * F, -0.5, 0.5);
    fill(go, R * H, -1, 1);
    for (int t = 0; t < 6; t++) {
        const mc_dtype_t dt = t / 3 ? MC_DT_BF16 : MC_DT_F32;
        const mc_act_t tanh_approx = (mc_act_t)(t % 3); /* erf, tanh, squared ReLU */
        const size_t es = mc_dtype_size(dt);
        char hin[R * H * 4], hW1[F * H * 4], hb1[F * 4], hW2[H * F * 4], hgo[R * H * 4];
        be->convert(be, hin, dt, in, MC_DT_F32, R * H);
        be->convert(be, hW1, dt, W1, MC_DT_F32, F * H);
        be->convert(be, hb1, dt, b1, MC_DT_F32, F);
        be->convert(be, hW2, dt, W2, MC_DT_F32, H * F);
        be->convert(be, hgo, dt, go, MC_DT_F32, R * H);
        char act[2][R * F * 4], pre[2][R * F * 4];
        be->linear_gelu_forward(be, dt, act[0], pre[0], hin, hW1, hb1, R, H, F, tanh_approx);
        be->linear_forward(be, dt, pre[1], hin, hW1, hb1, R, H, F);
        be->gelu_forward(be, dt, act[1], pre[1], R * F, tanh_approx);
        assert_memory_equal(pre[0], pre[1], R * F * es);
        assert_memory_equal(act[0], act[1], R * F * es);
        float gW[2][H * F], gb[2][H];
        char din[2][R * F * 4];
        for (int k = 0; k < 2; k++) {
            fill(gW[k], H * F, 0, 0);
            fill(gb[k], H, 0, 0);
            gW[k][3] = gb[k][1] = 0.5f; /* accumulated onto */
        }
        be->linear_backward_gelu(be, dt, MC_DT_F32, din[0], gW[0], gb[0], hgo, act[0], hW2, pre[0], R, F, H, tanh_approx);
        be->linear_backward(be, dt, MC_DT_F32, din[1], gW[1], gb[1], hgo, act[0], hW2, R, F, H);
        be->gelu_backward(be, dt, din[1], din[1], pre[0], R * F, tanh_approx);
        assert_memory_equal(din[0], din[1], R * F * es);
        assert_memory_equal(gW[0], gW[1], sizeof(gW[0]));
        assert_memory_equal(gb[0], gb[1], sizeof(gb[0]));
    }
}

/* add_layernorm_forward is the add op then layernorm_forward, bit for bit, in fp32 and bf16,
 * with the sum in its own buffer or in place of either addend. */
static void test_add_layernorm(void **state)
{
    (void)state;
    enum { R = 5, C = 37, NE = R * C };
    float a[NE], r[NE], w[C], b[C];
    fill(a, NE, -2, 4);
    fill(r, NE, -1, 1);
    fill(w, C, 0.5, 1.5);
    fill(b, C, -1, 1);
    for (int t = 0; t < 2; t++) {
        const mc_dtype_t dt = t ? MC_DT_BF16 : MC_DT_F32;
        const size_t es = mc_dtype_size(dt);
        char ha[NE * 4], hr[NE * 4], hw[C * 4], hb[C * 4];
        be->convert(be, ha, dt, a, MC_DT_F32, NE);
        be->convert(be, hr, dt, r, MC_DT_F32, NE);
        be->convert(be, hw, dt, w, MC_DT_F32, C);
        be->convert(be, hb, dt, b, MC_DT_F32, C);
        char sum0[NE * 4], out0[NE * 4];
        float m0[R], r0[R];
        be->add(be, dt, sum0, ha, hr, NE);
        be->layernorm_forward(be, dt, out0, m0, r0, sum0, hw, hb, R, C, 1e-5f);
        for (int place = 0; place < 3; place++) {
            char x[NE * 4], y[NE * 4], sum[NE * 4], out[NE * 4];
            float m1[R], r1[R];
            memcpy(x, ha, NE * es);
            memcpy(y, hr, NE * es);
            char *dst = place == 0 ? sum : place == 1 ? x : y;
            be->add_layernorm_forward(be, dt, dst, out, m1, r1, x, y, hw, hb, R, C, 1e-5f);
            assert_memory_equal(dst, sum0, NE * es);
            assert_memory_equal(out, out0, NE * es);
            assert_memory_equal(m1, m0, sizeof(m0));
            assert_memory_equal(r1, r0, sizeof(r0));
        }
    }
}

/* ---- GeLU ---- */

enum { NG = 1001 };
typedef struct { double *x, *R; int tanh_approx; } gelu_ctx;

static double gelu_d(double x, int t)
{
    if (t == MC_ACT_SQUARED_RELU) return x > 0 ? x * x : 0.0;
    if (t == MC_ACT_GELU_TANH) return 0.5 * x * (1.0 + tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x)));
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}
static double gelu_loss(void *p)
{
    gelu_ctx *c = p;
    double s = 0;
    for (int i = 0; i < NG; i++) s += gelu_d(c->x[i], c->tanh_approx) * c->R[i];
    return s;
}

static void test_gelu(void **state)
{
    (void)state;
    float *x = fnew(NG), *R = fnew(NG), *out = fnew(NG), *dx = fnew(NG), *tmp = fnew(NG);
    fill(x, NG, -6, 6);
    x[0] = 0.0f;
    fill(R, NG, -1, 1);
    double *want = dnew(NG);
    static const char *names[] = {"gelu erf", "gelu tanh", "squared relu"};
    for (mc_act_t t = MC_ACT_GELU_ERF; t <= MC_ACT_SQUARED_RELU; t++) {
        gelu_ctx c = {dup_d(x, NG), dup_d(R, NG), t};
        be->gelu_forward(be, MC_DT_F32, out, x, NG, t);
        for (int i = 0; i < NG; i++) want[i] = gelu_d(x[i], t);
        check_close(out, want, NG, RTOL, names[t]);
        memcpy(tmp, x, NG * sizeof(float)); /* in place */
        be->gelu_forward(be, MC_DT_F32, tmp, tmp, NG, t);
        assert_memory_equal(tmp, out, NG * sizeof(float));

        be->gelu_backward(be, MC_DT_F32, dx, R, x, NG, t);
        check_fd(gelu_loss, &c, c.x, NG, dx, NULL, FDTOL, names[t]);
        memcpy(tmp, R, NG * sizeof(float)); /* dx may equal dout */
        be->gelu_backward(be, MC_DT_F32, tmp, tmp, x, NG, t);
        assert_memory_equal(tmp, dx, NG * sizeof(float));
        free(c.x); free(c.R);
    }
    free(x); free(R); free(out); free(dx); free(tmp); free(want);
}

/* ---- dropout ---- */

enum { D0 = 7, DB = 3, IN_D = 37 };
static const mc_dropout_t drop_cfg = {.seed = 0x5eed1234abcdull, .iteration = 11, .layer = 3,
                                      .site = MC_DROPOUT_SITE_MLP_OUT, .sample0 = 1000, .p = 0.3f};

/* out[i,b,j] per the mc_dropout_t contract, element by element with mc_dropout_keep. */
static void dropout_ref(float *out, const float *x, const mc_dropout_t *d, int d0, int nb,
                        int inner, int d0_off, int inner_full, int inner_off)
{
    float sc = 1.0f / (1.0f - d->p);
    for (int i = 0; i < d0; i++)
        for (int b = 0; b < nb; b++)
            for (int j = 0; j < inner; j++) {
                long k = ((long)i * nb + b) * inner + j;
                uint64_t e = (uint64_t)(i + d0_off) * (uint64_t)inner_full + (uint64_t)(inner_off + j);
                int keep = mc_dropout_keep(d->seed, d->iteration, d->layer, d->site, d->sample0 + (uint64_t)b, e, d->p);
                out[k] = keep ? x[k] * sc : 0.0f;
            }
}

static void test_dropout_matches_rule(void **state)
{
    (void)state;
    const long n = (long)D0 * DB * IN_D;
    float *x = fnew(n), *out = fnew(n), *want = fnew(n);
    fill(x, n, -1, 1);
    be->dropout_forward(be, MC_DT_F32, out, x, &drop_cfg, D0, DB, IN_D, 0, IN_D, 0);
    dropout_ref(want, x, &drop_cfg, D0, DB, IN_D, 0, IN_D, 0);
    assert_memory_equal(out, want, (size_t)n * sizeof(float));
    /* a shard placed at odd offsets (not multiples of the Philox block of 4) */
    be->dropout_forward(be, MC_DT_F32, out, x, &drop_cfg, D0, DB, IN_D, 5, 101, 13);
    dropout_ref(want, x, &drop_cfg, D0, DB, IN_D, 5, 101, 13);
    assert_memory_equal(out, want, (size_t)n * sizeof(float));
    /* backward applies the same mask and scale */
    be->dropout_backward(be, MC_DT_F32, out, x, &drop_cfg, D0, DB, IN_D, 5, 101, 13);
    assert_memory_equal(out, want, (size_t)n * sizeof(float));
    /* in place */
    memcpy(out, x, (size_t)n * sizeof(float));
    be->dropout_forward(be, MC_DT_F32, out, out, &drop_cfg, D0, DB, IN_D, 5, 101, 13);
    assert_memory_equal(out, want, (size_t)n * sizeof(float));
    memcpy(out, x, (size_t)n * sizeof(float));
    be->dropout_backward(be, MC_DT_F32, out, out, &drop_cfg, D0, DB, IN_D, 5, 101, 13);
    assert_memory_equal(out, want, (size_t)n * sizeof(float));
    free(x); free(out); free(want);
}

/* The whole tensor equals its shards: split along d0 (sequence parallel), along inner
 * (tensor parallel) and along the batch (sample0 shifted). */
static void test_dropout_layout_invariance(void **state)
{
    (void)state;
    const long n = (long)D0 * DB * IN_D;
    float *x = fnew(n), *whole = fnew(n);
    fill(x, n, 0.5, 1.5);
    be->dropout_forward(be, MC_DT_F32, whole, x, &drop_cfg, D0, DB, IN_D, 0, IN_D, 0);

    /* d0 split: rows [0, 3) and [3, 7) */
    {
        const int s1 = 3;
        float *a = fnew(n);
        be->dropout_forward(be, MC_DT_F32, a, x, &drop_cfg, s1, DB, IN_D, 0, IN_D, 0);
        be->dropout_forward(be, MC_DT_F32, a + (long)s1 * DB * IN_D, x + (long)s1 * DB * IN_D, &drop_cfg,
                            D0 - s1, DB, IN_D, s1, IN_D, 0);
        assert_memory_equal(a, whole, (size_t)n * sizeof(float));
        free(a);
    }
    /* inner split: columns [0, 13) and [13, 37) as separate [d0, b, inner_shard] tensors */
    {
        const int c1 = 13, c2 = IN_D - c1;
        float *xa = fnew((long)D0 * DB * c1), *xb = fnew((long)D0 * DB * c2);
        for (long r = 0; r < (long)D0 * DB; r++) {
            memcpy(xa + r * c1, x + r * IN_D, (size_t)c1 * sizeof(float));
            memcpy(xb + r * c2, x + r * IN_D + c1, (size_t)c2 * sizeof(float));
        }
        be->dropout_forward(be, MC_DT_F32, xa, xa, &drop_cfg, D0, DB, c1, 0, IN_D, 0);
        be->dropout_forward(be, MC_DT_F32, xb, xb, &drop_cfg, D0, DB, c2, 0, IN_D, c1);
        for (long r = 0; r < (long)D0 * DB; r++) {
            assert_memory_equal(xa + r * c1, whole + r * IN_D, (size_t)c1 * sizeof(float));
            assert_memory_equal(xb + r * c2, whole + r * IN_D + c1, (size_t)c2 * sizeof(float));
        }
        free(xa); free(xb);
    }
    /* batch split: batch rows [0, 1) and [1, 3), the second with sample0 + 1 */
    {
        const int b1 = 1, b2 = DB - b1;
        float *xa = fnew((long)D0 * b1 * IN_D), *xb = fnew((long)D0 * b2 * IN_D);
        for (int i = 0; i < D0; i++) {
            memcpy(xa + (long)i * b1 * IN_D, x + ((long)i * DB) * IN_D, (size_t)b1 * IN_D * sizeof(float));
            memcpy(xb + (long)i * b2 * IN_D, x + ((long)i * DB + b1) * IN_D, (size_t)b2 * IN_D * sizeof(float));
        }
        mc_dropout_t d2 = drop_cfg;
        be->dropout_forward(be, MC_DT_F32, xa, xa, &d2, D0, b1, IN_D, 0, IN_D, 0);
        d2.sample0 += b1;
        be->dropout_forward(be, MC_DT_F32, xb, xb, &d2, D0, b2, IN_D, 0, IN_D, 0);
        for (int i = 0; i < D0; i++) {
            assert_memory_equal(xa + (long)i * b1 * IN_D, whole + ((long)i * DB) * IN_D, (size_t)b1 * IN_D * sizeof(float));
            assert_memory_equal(xb + (long)i * b2 * IN_D, whole + ((long)i * DB + b1) * IN_D, (size_t)b2 * IN_D * sizeof(float));
        }
        free(xa); free(xb);
    }
    /* another iteration, layer, site or seed gives another mask */
    for (int which = 0; which < 4; which++) {
        mc_dropout_t d2 = drop_cfg;
        if (which == 0) d2.iteration++;
        if (which == 1) d2.layer++;
        if (which == 2) d2.site = MC_DROPOUT_SITE_ATTN_OUT;
        if (which == 3) d2.seed++;
        float *o = fnew(n);
        be->dropout_forward(be, MC_DT_F32, o, x, &d2, D0, DB, IN_D, 0, IN_D, 0);
        assert_true(memcmp(o, whole, (size_t)n * sizeof(float)) != 0);
        free(o);
    }
    free(x); free(whole);
}

static void test_dropout_rate_and_p0(void **state)
{
    (void)state;
    enum { D0L = 50, BL = 4, IL = 1000 };
    const long n = (long)D0L * BL * IL;
    float *x = fnew(n), *out = fnew(n);
    for (long i = 0; i < n; i++) x[i] = 1.0f;
    const float ps[] = {0.1f, 0.5f};
    for (int k = 0; k < 2; k++) {
        mc_dropout_t d = drop_cfg;
        d.p = ps[k];
        be->dropout_forward(be, MC_DT_F32, out, x, &d, D0L, BL, IL, 0, IL, 0);
        long kept = 0;
        double sum = 0;
        const float sc = 1.0f / (1.0f - d.p);
        for (long i = 0; i < n; i++) {
            assert_true(out[i] == 0.0f || out[i] == sc);
            kept += out[i] != 0.0f;
            sum += out[i];
        }
        double rate = (double)kept / n, sd = sqrt(d.p * (1 - d.p) / n);
        assert_true(fabs(rate - (1.0 - d.p)) < 6 * sd);
        assert_true(fabs(sum / n - 1.0) < 6 * sd / (1.0 - d.p)); /* expectation preserved */
    }
    /* p = 0: an exact copy, in and out of place */
    mc_dropout_t d0 = drop_cfg;
    d0.p = 0.0f;
    fill(x, n, -1, 1);
    be->dropout_forward(be, MC_DT_F32, out, x, &d0, D0L, BL, IL, 0, IL, 0);
    assert_memory_equal(out, x, (size_t)n * sizeof(float));
    be->dropout_backward(be, MC_DT_F32, out, x, &d0, D0L, BL, IL, 3, IL * 2, 7);
    assert_memory_equal(out, x, (size_t)n * sizeof(float));
    be->dropout_forward(be, MC_DT_F32, out, out, &d0, D0L, BL, IL, 0, IL, 0);
    assert_memory_equal(out, x, (size_t)n * sizeof(float));
    free(x); free(out);
}

/* ---- attention ---- */

typedef struct {
    int S_, B_, NH_, HD_, head_offset;
    float scale;
    const mc_dropout_t *d; /* NULL or p == 0: no dropout */
    double *qkv, *R;
    unsigned char *keep;   /* [b, NH, s, s] mask from mc_dropout_keep, made on first use */
    const int32_t *seg;    /* NULL or [b, s] document numbers (--reset-attention-mask) */
    int NG_;               /* query groups (0: NH_, multi-head attention) */
} att_ctx;

/* Naive causal attention in double; probs (may be NULL) before dropout, [b, NH, s, s].
 * With segments, key j is visible to query i iff j <= i and both are in the same document. */
static void att_ref(double *out, double *probs, const att_ctx *c)
{
    const int Sx = c->S_, Bx = c->B_, NHx = c->NH_, HDx = c->HD_, NGx = c->NG_ ? c->NG_ : NHx;
    const int QPG = NHx / NGx; /* Megatron's layout: per group QPG q heads, then k, then v */
    const long lq = (long)Bx * (NHx + 2 * NGx) * HDx, lo = (long)Bx * NHx * HDx;
    const int drop = c->d && c->d->p > 0.0f;
    const double dsc = drop ? 1.0 / (1.0 - (double)c->d->p) : 1.0;
    double *sc = dnew(Sx), *pd = dnew(Sx);
    for (int b = 0; b < Bx; b++)
        for (int h = 0; h < NHx; h++) {
            const double *grp = c->qkv + (long)b * (NHx + 2 * NGx) * HDx + (long)(h / QPG) * (QPG + 2) * HDx;
            const double *q = grp + (long)(h % QPG) * HDx; /* k and v repeated per query head */
            const double *k = grp + (long)QPG * HDx, *v = k + HDx;
            for (int i = 0; i < Sx; i++) {
                double mx = -INFINITY;
                for (int j = 0; j < Sx; j++) {
                    double s = -10000.0;
                    if (j <= i && (!c->seg || c->seg[(long)b * Sx + j] == c->seg[(long)b * Sx + i])) {
                        s = 0;
                        for (int e = 0; e < HDx; e++) s += q[i * lq + e] * k[j * lq + e];
                        s *= (double)c->scale;
                    }
                    sc[j] = s;
                    mx = fmax(mx, s);
                }
                double sum = 0;
                for (int j = 0; j < Sx; j++) sum += (sc[j] = sc[j] - mx < -800.0 ? 0.0 : exp(sc[j] - mx));
                for (int j = 0; j < Sx; j++) sc[j] /= sum;
                if (probs)
                    for (int j = 0; j < Sx; j++) probs[(((long)b * NHx + h) * Sx + i) * Sx + j] = sc[j];
                for (int j = 0; j < Sx; j++) {
                    pd[j] = sc[j];
                    if (drop) {
                        long mi = (((long)b * NHx + h) * Sx + i) * Sx + j;
                        if (!c->keep[mi]) {
                            uint64_t el = ((uint64_t)(c->head_offset + h) * Sx + i) * Sx + j;
                            c->keep[mi] = 2 + mc_dropout_keep(c->d->seed, c->d->iteration, c->d->layer, c->d->site,
                                                              c->d->sample0 + (uint64_t)b, el, c->d->p);
                        }
                        pd[j] = c->keep[mi] == 3 ? pd[j] * dsc : 0.0;
                    }
                }
                for (int e = 0; e < HDx; e++) {
                    double o = 0;
                    for (int j = 0; j < Sx; j++) o += pd[j] * v[j * lq + e];
                    out[i * lo + (long)b * NHx * HDx + (long)h * HDx + e] = o;
                }
            }
        }
    free(sc);
    free(pd);
}
static double att_loss(void *p)
{
    att_ctx *c = p;
    long no = (long)c->S_ * c->B_ * c->NH_ * c->HD_;
    double *out = dnew(no);
    att_ref(out, NULL, c);
    double l = dot_d(out, c->R, no);
    free(out);
    return l;
}

static const mc_dropout_t attn_drop = {.seed = 77, .iteration = 5, .layer = 2,
                                       .site = MC_DROPOUT_SITE_ATTN_PROBS, .sample0 = 40, .p = 0.25f};

/* Forward against the reference, backward against finite differences; NGx query groups. */
static void run_attention_case_ng(int Sx, int Bx, int NHx, int NGx, int HDx, const mc_dropout_t *d,
                                  double qlo, double qhi, int fd_stride, const int32_t *seg)
{
    const long nqkv = (long)Sx * Bx * (NHx + 2 * NGx) * HDx, no = (long)Sx * Bx * NHx * HDx;
    const long np = (long)Bx * NHx * Sx * Sx;
    float *qkv = fnew(nqkv), *out = fnew(no), *probs = fnew(np), *R = fnew(no);
    float *dqkv = fnew(nqkv), *scratch = fnew(np);
    fill(qkv, nqkv, qlo, qhi);
    fill(R, no, -1, 1);
    fill(dqkv, nqkv, 7, 8); /* overwritten */
    fill(scratch, np, 7, 8);
    const float scale = 1.0f / sqrtf((float)HDx);
    att_ctx c = {Sx, Bx, NHx, HDx, 0, scale, d, dup_d(qkv, nqkv), dup_d(R, no), calloc((size_t)np, 1), seg, NGx};
    double *wo = dnew(no), *wp = dnew(np);
    be->attention_forward(be, MC_DT_F32, out, probs, NULL, qkv, Sx, Bx, NHx, NGx, HDx, seg, scale, d, 0, NHx);
    att_ref(wo, wp, &c);
    check_close(probs, wp, np, RTOL, "attention probs");
    check_close(out, wo, no, RTOL, "attention out");
    if (fd_stride) {
        be->attention_backward(be, MC_DT_F32, dqkv, scratch, R, qkv, NULL, probs, Sx, Bx, NHx, NGx, HDx, seg, scale, d, 0, NHx);
        check_fd_strided(att_loss, &c, c.qkv, nqkv, dqkv, NULL, FDTOL, "attention dqkv", fd_stride);
    }
    free(qkv); free(out); free(probs); free(R); free(dqkv); free(scratch);
    free(c.qkv); free(c.R); free(c.keep); free(wo); free(wp);
}
static void run_attention_case_seg(int Sx, int Bx, int NHx, int HDx, const mc_dropout_t *d,
                                   double qlo, double qhi, int fd_stride, const int32_t *seg)
{
    run_attention_case_ng(Sx, Bx, NHx, NHx, HDx, d, qlo, qhi, fd_stride, seg);
}
static void run_attention_case(int Sx, int Bx, int NHx, int HDx, const mc_dropout_t *d,
                               double qlo, double qhi, int fd_stride)
{
    run_attention_case_seg(Sx, Bx, NHx, HDx, d, qlo, qhi, fd_stride, NULL);
}

static void test_attention(void **state)
{
    (void)state;
    run_attention_case(S, B, NH, HD, NULL, -1.5, 1.5, 1);
    mc_dropout_t d0 = attn_drop;
    d0.p = 0.0f;
    run_attention_case(S, B, NH, HD, &d0, -1.5, 1.5, 1);
    run_attention_case(S, B, NH, HD, &attn_drop, -1.5, 1.5, 1);
}

/* Grouped-query attention: NG in {1 (MQA), 2, NH}, against the double loop with k and v repeated
 * per query head and finite differences (dk/dv sum over a group's heads), with dropout, segments
 * and more rows than one block (64). */
static void test_attention_gqa(void **state)
{
    (void)state;
    static const int NGs[] = {1, 2, 4};
    int32_t seg[2 * 70];
    for (int i = 0; i < 2 * 70; i++) seg[i] = (i % 70) / 23 + (i >= 70 ? 5 : 0);
    for (int u = 0; u < 3; u++) {
        run_attention_case_ng(7, 2, 4, NGs[u], 3, NULL, -1.5, 1.5, 1, NULL);
        run_attention_case_ng(7, 2, 4, NGs[u], 3, &attn_drop, -1.5, 1.5, 1, NULL);
        run_attention_case_ng(70, 2, 4, NGs[u], 2, &attn_drop, -1, 1, 7, seg);
    }
}

/* More rows than one block of the implementation (64) and more keys than its dropout tile
 * (256), so block and tile edges are crossed. */
static void test_attention_long(void **state)
{
    (void)state;
    run_attention_case(131, 2, 1, 3, NULL, -1, 1, 5);
    run_attention_case(131, 2, 1, 3, &attn_drop, -1, 1, 5);
    run_attention_case(300, 1, 1, 4, &attn_drop, -1, 1, 0);
}

/* Every visible score far below -10000: the masked keys then carry the probability, and the
 * op must not skip them. */
static void test_attention_masked_dominant(void **state)
{
    (void)state;
    enum { SX = 70, BX = 1, NHX = 1, HDX = 4 };
    const long nqkv = (long)SX * BX * NHX * 3 * HDX, no = (long)SX * BX * NHX * HDX;
    const long np = (long)BX * NHX * SX * SX;
    int32_t segs[SX]; /* documents of 20, 1, 30 and 19 tokens */
    for (int s = 0; s < SX; s++) segs[s] = s < 20 ? 0 : s < 21 ? 1 : s < 51 ? 2 : 3;
    for (int pass = 0; pass < 4; pass++) {
        const mc_dropout_t *d = (pass & 1) ? &attn_drop : NULL;
        const int32_t *seg = (pass & 2) ? segs : NULL;
        float *qkv = fnew(nqkv), *out = fnew(no), *probs = fnew(np), *R = fnew(no);
        float *dqkv = fnew(nqkv), *scratch = fnew(np);
        fill(qkv, nqkv, -1, 1);
        fill(R, no, -1, 1);
        /* Integer q and k, so the scores (about -20000) are exact in fp32 and the last row's
         * softmax is not dominated by the rounding of scores that large. */
        for (int s = 0; s < SX; s++)
            for (int e = 0; e < HDX; e++) {
                qkv[(long)s * 3 * HDX + e] = 100.0f + (float)((s + e) % 3);       /* q */
                qkv[(long)s * 3 * HDX + HDX + e] = -100.0f - (float)((s * e) % 4); /* k */
            }
        const float scale = 0.5f;
        att_ctx c = {SX, BX, NHX, HDX, 0, scale, d, dup_d(qkv, nqkv), dup_d(R, no), calloc((size_t)np, 1), seg, NHX};
        double *wo = dnew(no), *wp = dnew(np);
        be->attention_forward(be, MC_DT_F32, out, probs, NULL, qkv, SX, BX, NHX, NHX, HDX, seg, scale, d, 0, NHX);
        att_ref(wo, wp, &c);
        assert_true(probs[SX - 1] > 0.0f); /* row 0: the masked keys share the probability */
        if (seg) /* row 25 (document 2): keys of documents 0 and 1 are masked and carry it too */
            assert_true(probs[25L * SX + 3] > 0.0f && probs[25L * SX + 3] == probs[25L * SX + SX - 1]);
        check_close(probs, wp, np, RTOL, "attention probs (masked dominant)");
        check_close(out, wo, no, RTOL, "attention out (masked dominant)");
        be->attention_backward(be, MC_DT_F32, dqkv, scratch, R, qkv, NULL, probs, SX, BX, NHX, NHX, HDX, seg, scale, d, 0, NHX);
        /* only v has a gradient of any size here; compare every element anyway */
        check_fd(att_loss, &c, c.qkv, nqkv, dqkv, NULL, FDTOL, "attention dqkv (masked dominant)");
        free(qkv); free(out); free(probs); free(R); free(dqkv); free(scratch);
        free(c.qkv); free(c.R); free(c.keep); free(wo); free(wp);
    }
}

/* Segments for Sx positions of row b: 0 = several random documents, 1 = one document starting
 * at position 0 only, 2 = many short documents (1 to 3 tokens); numbers need not be ordered. */
static void make_segments(int32_t *seg, int Sx, int Bx)
{
    for (int b = 0; b < Bx; b++) {
        int32_t *r = seg + (long)b * Sx;
        const int kind = b % 3;
        int doc = 5 * b + 1, left = 0;
        for (int s = 0; s < Sx; s++) {
            if (kind == 1) { r[s] = 42; continue; }
            if (left == 0) {
                doc = kind == 0 ? (int)(urand() * 1000) : doc + 1;
                left = kind == 0 ? 1 + (int)(urand() * (Sx / 3 + 1)) : 1 + (int)(urand() * 3);
            }
            r[s] = doc;
            left--;
        }
    }
}

/* --reset-attention-mask: forward and backward against the reference with per-document masks. */
static void test_attention_segments(void **state)
{
    (void)state;
    int32_t seg[3 * 300];
    make_segments(seg, S, B);
    run_attention_case_seg(S, B, NH, HD, NULL, -1.5, 1.5, 1, seg);
    run_attention_case_seg(S, B, NH, HD, &attn_drop, -1.5, 1.5, 1, seg);
    make_segments(seg, 13, 3);
    run_attention_case_seg(13, 3, 2, 4, NULL, -1.5, 1.5, 1, seg);
    run_attention_case_seg(13, 3, 2, 4, &attn_drop, -1.5, 1.5, 1, seg);
    /* across the implementation's row blocks and dropout tiles */
    make_segments(seg, 131, 3);
    run_attention_case_seg(131, 3, 1, 3, NULL, -1, 1, 7, seg);
    run_attention_case_seg(131, 3, 1, 3, &attn_drop, -1, 1, 7, seg);
    make_segments(seg, 300, 2);
    run_attention_case_seg(300, 2, 1, 4, &attn_drop, -1, 1, 0, seg);
}

/* All-equal segments give bitwise the results of NULL (plain causal attention). */
static void test_attention_segments_equal_is_causal(void **state)
{
    (void)state;
    const int Sx = 131, Bx = 2, NHx = 2, HDx = 4;
    const long nqkv = (long)Sx * Bx * NHx * 3 * HDx, no = (long)Sx * Bx * NHx * HDx;
    const long np = (long)Bx * NHx * Sx * Sx;
    int32_t seg[2 * 131];
    for (int i = 0; i < Bx * Sx; i++) seg[i] = i < Sx ? 3 : -7;
    const float scale = 1.0f / sqrtf((float)HDx);
    for (int pass = 0; pass < 2; pass++) {
        const mc_dropout_t *d = pass ? &attn_drop : NULL;
        float *qkv = fnew(nqkv), *dout = fnew(no);
        float *o0 = fnew(no), *p0 = fnew(np), *g0 = fnew(nqkv), *t0 = fnew(np);
        float *o1 = fnew(no), *p1 = fnew(np), *g1 = fnew(nqkv), *t1 = fnew(np);
        fill(qkv, nqkv, -1.5, 1.5);
        fill(dout, no, -1, 1);
        be->attention_forward(be, MC_DT_F32, o0, p0, NULL, qkv, Sx, Bx, NHx, NHx, HDx, NULL, scale, d, 0, NHx);
        be->attention_backward(be, MC_DT_F32, g0, t0, dout, qkv, NULL, p0, Sx, Bx, NHx, NHx, HDx, NULL, scale, d, 0, NHx);
        be->attention_forward(be, MC_DT_F32, o1, p1, NULL, qkv, Sx, Bx, NHx, NHx, HDx, seg, scale, d, 0, NHx);
        be->attention_backward(be, MC_DT_F32, g1, t1, dout, qkv, NULL, p1, Sx, Bx, NHx, NHx, HDx, seg, scale, d, 0, NHx);
        assert_memory_equal(o0, o1, (size_t)no * sizeof(float));
        assert_memory_equal(p0, p1, (size_t)np * sizeof(float));
        assert_memory_equal(g0, g1, (size_t)nqkv * sizeof(float));
        free(qkv); free(dout); free(o0); free(p0); free(g0); free(t0);
        free(o1); free(p1); free(g1); free(t1);
    }
}

/* Splitting the heads across ranks (head_offset) or the batch (sample0) changes nothing. */
static void test_attention_split_invariance(void **state)
{
    (void)state;
    const long nqkv = (long)S * B * NH * 3 * HD, no = (long)S * B * NH * HD, np = (long)B * NH * S * S;
    float *qkv = fnew(nqkv), *out = fnew(no), *probs = fnew(np), *dout = fnew(no);
    float *dqkv = fnew(nqkv), *scratch = fnew(np);
    fill(qkv, nqkv, -1.5, 1.5);
    fill(dout, no, -1, 1);
    const float scale = 1.0f / sqrtf((float)HD);
    mc_dropout_t d = attn_drop;
    d.p = 0.5f;
    be->attention_forward(be, MC_DT_F32, out, probs, NULL, qkv, S, B, NH, NH, HD, NULL, scale, &d, 0, NH);
    be->attention_backward(be, MC_DT_F32, dqkv, scratch, dout, qkv, NULL, probs, S, B, NH, NH, HD, NULL, scale, &d, 0, NH);

    /* by heads: one head per "rank" */
    for (int h = 0; h < NH; h++) {
        const long mq = (long)S * B * 3 * HD, mo = (long)S * B * HD, mp = (long)B * S * S;
        float *q1 = fnew(mq), *o1 = fnew(mo), *p1 = fnew(mp), *do1 = fnew(mo), *dq1 = fnew(mq), *s1 = fnew(mp);
        for (long r = 0; r < (long)S * B; r++) {
            memcpy(q1 + r * 3 * HD, qkv + r * NH * 3 * HD + (long)h * 3 * HD, 3 * HD * sizeof(float));
            memcpy(do1 + r * HD, dout + r * NH * HD + (long)h * HD, HD * sizeof(float));
        }
        be->attention_forward(be, MC_DT_F32, o1, p1, NULL, q1, S, B, 1, 1, HD, NULL, scale, &d, h, NH);
        be->attention_backward(be, MC_DT_F32, dq1, s1, do1, q1, NULL, p1, S, B, 1, 1, HD, NULL, scale, &d, h, NH);
        for (long r = 0; r < (long)S * B; r++) {
            assert_memory_equal(o1 + r * HD, out + r * NH * HD + (long)h * HD, HD * sizeof(float));
            assert_memory_equal(dq1 + r * 3 * HD, dqkv + r * NH * 3 * HD + (long)h * 3 * HD, 3 * HD * sizeof(float));
        }
        for (int b = 0; b < B; b++)
            assert_memory_equal(p1 + (long)b * S * S, probs + ((long)b * NH + h) * S * S, (size_t)S * S * sizeof(float));
        free(q1); free(o1); free(p1); free(do1); free(dq1); free(s1);
    }
    /* by batch: rows [0, 1) and [1, 3) with sample0 shifted */
    for (int part = 0; part < 2; part++) {
        const int b0 = part ? 1 : 0, nb = part ? B - 1 : 1;
        const long mq = (long)S * nb * NH * 3 * HD, mo = (long)S * nb * NH * HD, mp = (long)nb * NH * S * S;
        float *q1 = fnew(mq), *o1 = fnew(mo), *p1 = fnew(mp), *do1 = fnew(mo), *dq1 = fnew(mq), *s1 = fnew(mp);
        const long wq = (long)NH * 3 * HD, wo = (long)NH * HD;
        for (int s = 0; s < S; s++) {
            memcpy(q1 + (long)s * nb * wq, qkv + ((long)s * B + b0) * wq, (size_t)(nb * wq) * sizeof(float));
            memcpy(do1 + (long)s * nb * wo, dout + ((long)s * B + b0) * wo, (size_t)(nb * wo) * sizeof(float));
        }
        mc_dropout_t d2 = d;
        d2.sample0 += (uint64_t)b0;
        be->attention_forward(be, MC_DT_F32, o1, p1, NULL, q1, S, nb, NH, NH, HD, NULL, scale, &d2, 0, NH);
        be->attention_backward(be, MC_DT_F32, dq1, s1, do1, q1, NULL, p1, S, nb, NH, NH, HD, NULL, scale, &d2, 0, NH);
        for (int s = 0; s < S; s++) {
            assert_memory_equal(o1 + (long)s * nb * wo, out + ((long)s * B + b0) * wo, (size_t)(nb * wo) * sizeof(float));
            assert_memory_equal(dq1 + (long)s * nb * wq, dqkv + ((long)s * B + b0) * wq, (size_t)(nb * wq) * sizeof(float));
        }
        assert_memory_equal(p1, probs + (long)b0 * NH * S * S, (size_t)mp * sizeof(float));
        free(q1); free(o1); free(p1); free(do1); free(dq1); free(s1);
    }
    free(qkv); free(out); free(probs); free(dout); free(dqkv); free(scratch);
}

/* ---- cross-entropy ---- */

typedef struct { double *logits, *dloss; const int32_t *tg; } ce_ctx;

static void ce_ref(double *losses, const ce_ctx *c)
{
    for (int s = 0; s < S; s++)
        for (int b = 0; b < B; b++) {
            const double *x = c->logits + ((long)s * B + b) * V;
            double mx = x[0];
            for (int j = 1; j < V; j++) mx = fmax(mx, x[j]);
            double sum = 0;
            for (int j = 0; j < V; j++) sum += exp(x[j] - mx);
            int t = c->tg[b * S + s];
            losses[b * S + s] = mx + log(sum) - (t >= 0 && t < V ? x[t] : 0.0);
        }
}
static double ce_loss(void *p)
{
    double l[N];
    ce_ref(l, p);
    return dot_d(l, ((ce_ctx *)p)->dloss, N);
}

/* The three forward steps with the reductions done here over `shards` vocab slices, as the tp
 * all-reduces do; dl gets the backward of every slice. */
static void ce_sharded(float *losses, float *dl, const float *logits, const int32_t *tg,
                       const float *dloss, int shards)
{
    float mx[N], sm[N], tl[N], part_m[N], part_s[N], part_t[N];
    float sl[N * V];
    const int per = V / shards;
    for (int i = 0; i < N; i++) mx[i] = -INFINITY, sm[i] = 0, tl[i] = 0;
    for (int r = 0; r < shards; r++) {
        const int v0 = r * per, vl = r + 1 < shards ? per : V - v0;
        for (int n = 0; n < N; n++) memcpy(sl + (long)n * vl, logits + (long)n * V + v0, (size_t)vl * sizeof(float));
        be->ce_max(be, MC_DT_F32, part_m, sl, N, vl);
        for (int n = 0; n < N; n++) mx[n] = fmaxf(mx[n], part_m[n]);
    }
    for (int r = 0; r < shards; r++) {
        const int v0 = r * per, vl = r + 1 < shards ? per : V - v0;
        for (int n = 0; n < N; n++) memcpy(sl + (long)n * vl, logits + (long)n * V + v0, (size_t)vl * sizeof(float));
        be->ce_sums(be, MC_DT_F32, part_s, part_t, sl, mx, tg, S, B, vl, v0);
        for (int n = 0; n < N; n++) sm[n] += part_s[n], tl[n] += part_t[n];
    }
    be->ce_loss(be, losses, mx, sm, tl, S, B);
    for (int r = 0; r < shards; r++) {
        const int v0 = r * per, vl = r + 1 < shards ? per : V - v0;
        for (int n = 0; n < N; n++) memcpy(sl + (long)n * vl, logits + (long)n * V + v0, (size_t)vl * sizeof(float));
        be->ce_backward(be, MC_DT_F32, sl, sl, mx, sm, tg, dloss, S, B, vl, v0); /* in place */
        for (int n = 0; n < N; n++) memcpy(dl + (long)n * V + v0, sl + (long)n * vl, (size_t)vl * sizeof(float));
    }
}

static void test_cross_entropy(void **state)
{
    (void)state;
    float logits[N * V], dloss[N], losses[N], dl[N * V], dl1[N * V], losses1[N];
    int32_t tg[N];
    fill(logits, N * V, -3, 3);
    for (int j = 0; j < V; j++) logits[4 * V + j] += 1000.0f; /* one row far from 0 */
    fill(dloss, N, 0.1, 1);
    for (int i = 0; i < N; i++) tg[i] = (int32_t)(urand() * V);
    tg[5] = V - 1;
    tg[6] = 0;
    ce_ctx c = {dup_d(logits, N * V), dup_d(dloss, N), tg};
    double want[N];
    ce_sharded(losses1, dl1, logits, tg, dloss, 1);
    ce_ref(want, &c);
    check_close(losses1, want, N, RTOL, "cross-entropy losses");
    check_fd(ce_loss, &c, c.logits, N * V, dl1, NULL, FDTOL, "cross-entropy dlogits");
    /* vocab-parallel: 2 and 3 slices (uneven) give the whole-vocabulary results */
    for (int shards = 2; shards <= 3; shards++) {
        ce_sharded(losses, dl, logits, tg, dloss, shards);
        check_close(losses, want, N, RTOL, "cross-entropy losses (vocab slices)");
        check_fd(ce_loss, &c, c.logits, N * V, dl, NULL, FDTOL, "cross-entropy dlogits (vocab slices)");
    }
    free(c.logits); free(c.dloss);
}

/* ---- elementwise and reductions ---- */

static void test_elementwise(void **state)
{
    (void)state;
    enum { NE = 1003 };
    float a[NE], b[NE], out[NE], acc[NE];
    fill(a, NE, -1, 1);
    fill(b, NE, -1, 1);
    be->add(be, MC_DT_F32, out, a, b, NE);
    for (int i = 0; i < NE; i++) assert_true(out[i] == a[i] + b[i]);
    memcpy(acc, a, sizeof(acc));
    be->add_inplace(be, MC_DT_F32, acc, b, NE);
    assert_memory_equal(acc, out, sizeof(acc));
    be->add(be, MC_DT_F32, acc, acc, b, NE); /* out may alias */
    for (int i = 0; i < NE; i++) assert_true(acc[i] == out[i] + b[i]);
    memcpy(acc, a, sizeof(acc));
    be->scale(be, MC_DT_F32, acc, 0.37f, NE);
    for (int i = 0; i < NE; i++) assert_true(acc[i] == a[i] * 0.37f);

    double want = 0;
    for (int i = 0; i < NE; i++) want += (double)a[i] * a[i];
    assert_true(fabs(be->sumsq(be, MC_DT_F32, a, NE) - want) <= 1e-12 * want);
    assert_true(be->sumsq(be, MC_DT_F32, a, 0) == 0.0);
    assert_true(be->sumsq(be, MC_DT_F32, a, 5) > 0.0);

    memcpy(acc, a, sizeof(acc));
    acc[0] = 0.0f;
    acc[17] = -0.0f;
    acc[NE - 1] = 0.0f;
    assert_int_equal(be->count_zeros(be, MC_DT_F32, acc, NE), 3);
    assert_int_equal(be->count_zeros(be, MC_DT_F32, a, NE), 0);

    assert_int_equal(be->has_nonfinite(be, MC_DT_F32, a, NE), 0);
    const float bad[] = {INFINITY, -INFINITY, NAN, -NAN};
    const int where[] = {0, 500, NE - 1};
    for (int k = 0; k < 4; k++)
        for (int w = 0; w < 3; w++) {
            memcpy(acc, a, sizeof(acc));
            acc[where[w]] = bad[k];
            assert_int_equal(be->has_nonfinite(be, MC_DT_F32, acc, NE), 1);
            assert_int_equal(be->has_nonfinite(be, MC_DT_F32, acc, where[w]), 0);
        }
    acc[0] = 3.4e38f;
    acc[1] = -3.4e38f;
    acc[2] = 1e-45f;
    assert_int_equal(be->has_nonfinite(be, MC_DT_F32, acc, 3), 0);
}

/* Sum of squares of many values: double accumulation. */
static void test_sumsq_large(void **state)
{
    (void)state;
    const long n = 3000001;
    float *x = fnew(n);
    for (long i = 0; i < n; i++) x[i] = 0.1f;
    double want = (double)n * (double)0.1f * (double)0.1f;
    /* fp32 accumulation would be off by percents here */
    assert_true(fabs(be->sumsq(be, MC_DT_F32, x, n) - want) <= 1e-9 * want);
    free(x);
}

/* ---- Adam ---- */

static void test_adam(void **state)
{
    (void)state;
    enum { NA = 101 };
    float p[NA], m[NA], v[NA], g[NA];
    double pd[NA], md[NA], vd[NA];
    fill(p, NA, -1, 1);
    for (int i = 0; i < NA; i++) { pd[i] = p[i]; m[i] = v[i] = 0.0f; md[i] = vd[i] = 0.0; }
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    for (int step = 1; step <= 5; step++) {
        fill(g, NA, -1, 1);
        g[3] = 0.0f;
        const mc_adam_tensor_t t = {.p = p, .g = g, .m = m, .v = v, .n = NA, .wd = wd};
        be->adam_step(be, &t, 1, MC_DT_F32, lr, b1, b2, eps, step);
        double bc1 = 1.0 - pow(b1, step), bc2 = 1.0 - pow(b2, step);
        for (int i = 0; i < NA; i++) {
            md[i] = (double)b1 * md[i] + (1.0 - (double)b1) * g[i];
            vd[i] = (double)b2 * vd[i] + (1.0 - (double)b2) * (double)g[i] * g[i];
            double upd = (md[i] / bc1) / (sqrt(vd[i] / bc2) + (double)eps) + (double)wd * pd[i];
            pd[i] -= (double)lr * upd;
        }
        check_close(m, md, NA, RTOL, "adam m");
        check_close(v, vd, NA, RTOL, "adam v");
        check_close(p, pd, NA, RTOL, "adam p");
    }
    /* n = 0 touches nothing */
    const mc_adam_tensor_t none = {.p = p, .g = g, .m = m, .v = v, .n = 0, .wd = wd};
    be->adam_step(be, &none, 1, MC_DT_F32, lr, b1, b2, eps, 6);
}

/* A list of tensors is each tensor's own step with its own weight decay, and the model's copy
 * is the updated master rounded to the model's type. */
static void test_adam_list(void **state)
{
    (void)state;
    enum { NT = 5 };
    static const long lens[NT] = {7, 0, 33, 1, 64};
    static const float wds[NT] = {0.1f, 0.1f, 0.0f, 0.05f, 0.1f};
    float *p[2][NT], *g[NT], *m[2][NT], *v[2][NT];
    uint16_t *model[NT];
    mc_adam_tensor_t list[NT];
    for (int i = 0; i < NT; i++) {
        const long n = lens[i] ? lens[i] : 1;
        g[i] = fnew(n);
        fill(g[i], n, -1, 1);
        model[i] = calloc((size_t)n, sizeof(uint16_t));
        for (int c = 0; c < 2; c++) p[c][i] = fnew(n), m[c][i] = fnew(n), v[c][i] = fnew(n);
        fill(p[0][i], n, -1, 1 + i);
        memcpy(p[1][i], p[0][i], (size_t)n * sizeof(float));
        list[i] = (mc_adam_tensor_t){.p = p[0][i], .g = g[i], .m = m[0][i], .v = v[0][i],
                                     .model = i == 3 ? NULL : model[i], .n = lens[i], .wd = wds[i]};
    }
    for (int step = 1; step <= 3; step++) {
        be->adam_step(be, list, NT, MC_DT_BF16, 1e-2f, 0.9f, 0.95f, 1e-8f, step);
        for (int i = 0; i < NT; i++) {
            const mc_adam_tensor_t one = {.p = p[1][i], .g = g[i], .m = m[1][i], .v = v[1][i], .n = lens[i], .wd = wds[i]};
            be->adam_step(be, &one, 1, MC_DT_BF16, 1e-2f, 0.9f, 0.95f, 1e-8f, step);
        }
    }
    for (int i = 0; i < NT; i++) {
        for (long k = 0; k < lens[i]; k++) {
            assert_memory_equal(&p[0][i][k], &p[1][i][k], sizeof(float));
            assert_memory_equal(&m[0][i][k], &m[1][i][k], sizeof(float));
            assert_memory_equal(&v[0][i][k], &v[1][i][k], sizeof(float));
            /* tensor 3 has no model copy: untouched */
            assert_int_equal(model[i][k], i == 3 ? 0 : mc_bf16_from_f32(p[0][i][k]));
        }
        if (lens[i] == 0) assert_int_equal(model[i][0], 0);
        free(g[i]), free(model[i]);
        for (int c = 0; c < 2; c++) free(p[c][i]), free(m[c][i]), free(v[c][i]);
    }
}

/* ---- the vector math of kernels/cpu/cpu.h ---- */

static void test_fast_math(void **state)
{
    (void)state;
    double worst = 0, worst_t = 0;
    for (float x = -87.3f; x < 88.3f; x += 0.00137f) {
        mc_v4f e = mc_v4_exp((mc_v4f){x, x * 0.5f, -x * 0.25f, x * 0.125f});
        const float xs[4] = {x, x * 0.5f, -x * 0.25f, x * 0.125f};
        for (int k = 0; k < 4; k++) worst = fmax(worst, fabs(e[k] - exp((double)xs[k])) / exp((double)xs[k]));
        if (x > -20.0f && x < 20.0f) {
            mc_v4f t = mc_v4_tanh(mc_v4_splat(x));
            worst_t = fmax(worst_t, fabs(t[0] - tanh((double)x)));
        }
    }
    assert_true(worst < 1.5e-7); /* about 1.4 ulp */
    assert_true(worst_t < 2e-7);
    mc_v4f e = mc_v4_exp((mc_v4f){0.0f, -88.0f, -10000.0f, -INFINITY});
    assert_true(e[0] == 1.0f && e[1] == 0.0f && e[2] == 0.0f && e[3] == 0.0f);
    mc_v4f t = mc_v4_tanh((mc_v4f){0.0f, -0.0f, 30.0f, -30.0f});
    assert_true(t[0] == 0.0f && !signbit(t[0]) && t[1] == 0.0f && signbit(t[1]));
    assert_true(t[2] == 1.0f && t[3] == -1.0f);
    for (float x = 0.0f; x < 1000.0f; x += 0.37f) {
        mc_v4f r = mc_v4_sqrt(mc_v4_splat(x));
        assert_true(r[0] == sqrtf(x));
    }
    /* row helpers, every tail length */
    float x[13], out[13];
    fill(x, 13, -5, 5);
    for (int n = 1; n <= 13; n++) {
        float mx = x[0];
        for (int j = 1; j < n; j++) mx = fmaxf(mx, x[j]);
        assert_true(mc_cpu_row_max(x, n) == mx);
        double want = 0;
        for (int j = 0; j < n; j++) want += exp((double)(x[j] - mx)); /* the op subtracts in fp32 */
        memset(out, 0, sizeof(out));
        double got = mc_cpu_exp_shift_sum(out, x, n, mx);
        assert_true(fabs(got - want) <= 2e-7 * want);
        assert_true(fabs(mc_cpu_exp_shift_sum(NULL, x, n, mx) - got) == 0.0);
        for (int j = 0; j < 13; j++)
            if (j < n) assert_true(fabs(out[j] - exp((double)(x[j] - mx))) <= 2e-7 * exp((double)(x[j] - mx)));
            else assert_true(out[j] == 0.0f);
    }
}

int main(void)
{
    be = mc_backend_cpu();
    rng_seed(12345);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_linear_dbias_many_rows),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_layernorm_offset),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_dropout_matches_rule),
        cmocka_unit_test(test_dropout_layout_invariance),
        cmocka_unit_test(test_dropout_rate_and_p0),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_long),
        cmocka_unit_test(test_attention_gqa),
        cmocka_unit_test(test_attention_masked_dominant),
        cmocka_unit_test(test_attention_split_invariance),
        cmocka_unit_test(test_attention_segments),
        cmocka_unit_test(test_attention_segments_equal_is_causal),
        cmocka_unit_test(test_cross_entropy),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_sumsq_large),
        cmocka_unit_test(test_add_layernorm),
        cmocka_unit_test(test_linear_gelu),
        cmocka_unit_test(test_adam),
        cmocka_unit_test(test_adam_list),
        cmocka_unit_test(test_fast_math),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
