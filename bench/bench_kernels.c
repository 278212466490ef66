/* Kernel benchmark of the CUDA backend: times every op of the table except
 * attention on one GPU and prints each against its roofline: bandwidth-bound ops in GB/s of
 * the bytes they must move at least once (inputs read, outputs written; an accumulated output
 * counts twice) against the device's copy bandwidth, GEMMs in TFLOP/s against the dense peak.
 * Driven by bench/bench-kernels.sh; without a CUDA build or a GPU it says so and exits 2.
 *
 *   bench_kernels [--quick] [--device N] [--peak-gbs X] [--peak-tflops-16 X] [--peak-tflops-32 X]
 *
 * Defaults by device name: H100 3350 GB/s, H200 4300 GB/s (copy bandwidth), 989 TFLOP/s dense
 * bf16/fp16 and 67 TFLOP/s fp32 (no TF32: the backend computes fp32 GEMMs in fp32). Sizes: a
 * GPT-2 350M-like micro-batch (s 1024, b 8, h 1024, vocab 50304); --quick uses small ones.
 * Each op runs until 50 ms have passed after one warm-up call, timed on the host around a
 * synchronize (launch overhead included, negligible at these sizes). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/backend.h"
#include "kernels/device.h"
#ifdef MC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#ifdef MC_WITH_CUDA
typedef struct {
    int quick;
    double peak_gbs, peak16, peak32;
} opts_t;

static const mc_backend_t *be;

/* Everything an op may touch, allocated once at the largest size. */
typedef struct {
    long S, B, H, V, N, n;
    void *x, *y, *z, *w;             /* n elements each (fp32-sized) */
    void *logits, *dlogits;          /* N x V */
    void *W, *dW, *wte, *dwte, *wpe; /* weights */
    float *stats[4];                 /* N each */
    int32_t *tokens, *positions;
    int32_t *eod; /* N copies of one token: a packed batch's EOD, the worst case of the backward */
    float *rope_cos, *rope_sin; /* [S, rope_hd / 2] angle tables */
} bufs_t;

static void *dalloc(size_t bytes)
{
    void *p = be->alloc(be, bytes);
    if (!p) {
        fprintf(stderr, "bench_kernels: cannot allocate %zu bytes on the GPU\n", bytes);
        exit(1);
    }
    return p;
}

/* Fills a device buffer with small values of type dt (through a host buffer). */
static void dfill(void *d, mc_dtype_t dt, long n, float lo, float hi)
{
    float *h = malloc((size_t)n * sizeof(float));
    if (!h) exit(1);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (long i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        h[i] = lo + (hi - lo) * (float)((s >> 11) * (1.0 / 9007199254740992.0));
    }
    if (dt != MC_DT_F32) mc_convert(h, dt, h, MC_DT_F32, n); /* narrowing in place is allowed */
    be->memcpy_h2d(be, d, h, (size_t)n * mc_dtype_size(dt));
    free(h);
}

typedef void (*op_fn)(const bufs_t *b, mc_dtype_t dt);

/* Seconds per call of fn. */
static double time_op(op_fn fn, const bufs_t *b, mc_dtype_t dt)
{
    fn(b, dt); /* warm-up: plans, caches */
    be->synchronize(be);
    long reps = 0;
    const double t0 = now();
    double t;
    do {
        fn(b, dt);
        reps++;
        if (reps % 4 == 0) be->synchronize(be);
    } while ((t = now() - t0) < 0.05 || reps % 4 != 0);
    be->synchronize(be);
    return (now() - t0) / (double)reps;
}

static const opts_t *g_opts;

static void report_bw(const char *op, mc_dtype_t dt, const char *size, double sec, double bytes)
{
    const double gbs = bytes / sec / 1e9;
    printf("%-26s %-5s %-22s %10.1f us %9.1f GB/s %6.1f%% of %.0f GB/s\n", op, mc_dtype_name(dt), size, sec * 1e6, gbs,
           100.0 * gbs / g_opts->peak_gbs, g_opts->peak_gbs);
}

static void report_flops(const char *op, mc_dtype_t dt, const char *size, double sec, double flops)
{
    const double peak = dt == MC_DT_F32 ? g_opts->peak32 : g_opts->peak16;
    const double tf = flops / sec / 1e12;
    printf("%-26s %-5s %-22s %10.1f us %9.1f TFLOP/s %5.1f%% of %.0f TFLOP/s\n", op, mc_dtype_name(dt), size, sec * 1e6,
           tf, 100.0 * tf / peak, peak);
}

/* ---- the ops, as closures over the buffers ---- */
static void op_convert(const bufs_t *b, mc_dtype_t dt) { be->convert(be, b->y, dt, b->x, MC_DT_F32, b->n); }
static void op_add(const bufs_t *b, mc_dtype_t dt) { be->add(be, dt, b->z, b->x, b->y, b->n); }
static void op_add_inplace(const bufs_t *b, mc_dtype_t dt) { be->add_inplace(be, dt, b->z, b->x, b->n); }
static void op_scale(const bufs_t *b, mc_dtype_t dt) { be->scale(be, dt, b->z, 1.0f, b->n); }
static void op_gelu_f(const bufs_t *b, mc_dtype_t dt) { be->gelu_forward(be, dt, b->y, b->x, b->n, 1); }
static void op_gelu_b(const bufs_t *b, mc_dtype_t dt) { be->gelu_backward(be, dt, b->z, b->y, b->x, b->n, 1); }
static const mc_dropout_t g_drop = {.seed = 1, .iteration = 1, .layer = 1, .site = MC_DROPOUT_SITE_MLP_OUT, .p = 0.1f};
static void op_dropout(const bufs_t *b, mc_dtype_t dt)
{
    be->dropout_forward(be, dt, b->y, b->x, &g_drop, (int)b->S, (int)b->B, (int)(b->n / (b->S * b->B)), 0,
                        (int)(b->n / (b->S * b->B)), 0);
}
static void op_ln_f(const bufs_t *b, mc_dtype_t dt)
{
    be->layernorm_forward(be, dt, b->y, b->stats[0], b->stats[1], b->x, b->w, b->w, (int)b->N, (int)b->H, 1e-5f);
}
static void op_add_ln_f(const bufs_t *b, mc_dtype_t dt)
{
    be->add_layernorm_forward(be, dt, b->z, b->y, b->stats[0], b->stats[1], b->x, b->z, b->w, b->w, (int)b->N,
                              (int)b->H, 1e-5f);
}
static void op_ln_b(const bufs_t *b, mc_dtype_t dt)
{
    be->layernorm_backward_acc(be, dt, MC_DT_F32, b->z, b->dW, (char *)b->dW + b->H * 4, b->y, b->x, b->w, b->stats[0],
                               b->stats[1], (int)b->N, (int)b->H);
}
static void op_rms_f(const bufs_t *b, mc_dtype_t dt)
{
    be->rmsnorm_forward(be, dt, b->y, b->stats[1], b->x, b->w, (int)b->N, (int)b->H, 1e-5f);
}
static void op_add_rms_f(const bufs_t *b, mc_dtype_t dt)
{
    be->add_rmsnorm_forward(be, dt, b->z, b->y, b->stats[1], b->x, b->z, b->w, (int)b->N, (int)b->H, 1e-5f);
}
static void op_rms_b(const bufs_t *b, mc_dtype_t dt)
{
    be->rmsnorm_backward_acc(be, dt, MC_DT_F32, b->z, b->dW, b->y, b->x, b->w, b->stats[1], (int)b->N, (int)b->H);
}
/* SwiGLU over the MLP's activations: x [N, 4h] = [gate | up] of F = 2h each, out [N, 2h] */
static void op_swiglu_f(const bufs_t *b, mc_dtype_t dt)
{
    be->swiglu_forward(be, dt, b->y, b->x, (int)b->N, (int)(2 * b->H));
}
static void op_swiglu_b(const bufs_t *b, mc_dtype_t dt)
{
    be->swiglu_backward(be, dt, b->z, b->y, b->x, (int)b->N, (int)(2 * b->H));
}
static void op_emb_f(const bufs_t *b, mc_dtype_t dt)
{
    be->embedding_forward(be, dt, b->y, b->tokens, b->positions, b->wte, b->wpe, (int)b->S, (int)b->B, (int)b->H, 0,
                          (int)b->V);
}
static void op_emb_b(const bufs_t *b, mc_dtype_t dt)
{
    be->embedding_backward(be, dt, MC_DT_F32, b->dwte, NULL, b->y, b->tokens, b->positions, (int)b->S, (int)b->B,
                           (int)b->H, 0, (int)b->V);
}
static void op_emb_b_eod(const bufs_t *b, mc_dtype_t dt)
{
    be->embedding_backward(be, dt, MC_DT_F32, b->dwte, NULL, b->y, b->eod, b->positions, (int)b->S, (int)b->B,
                           (int)b->H, 0, (int)b->V);
}
static void op_ce_max(const bufs_t *b, mc_dtype_t dt) { be->ce_max(be, dt, b->stats[0], b->logits, (int)b->N, (int)b->V); }
static void op_ce_sums(const bufs_t *b, mc_dtype_t dt)
{
    be->ce_sums(be, dt, b->stats[1], b->stats[2], b->logits, b->stats[0], b->tokens, (int)b->S, (int)b->B, (int)b->V, 0);
}
static void op_ce_b(const bufs_t *b, mc_dtype_t dt)
{
    be->ce_backward(be, dt, b->dlogits, b->logits, b->stats[0], b->stats[1], b->tokens, b->stats[3], (int)b->S,
                    (int)b->B, (int)b->V, 0);
}
static void op_sumsq(const bufs_t *b, mc_dtype_t dt) { (void)be->sumsq(be, dt, b->x, b->n); }
static void op_nonfinite(const bufs_t *b, mc_dtype_t dt) { (void)be->has_nonfinite(be, dt, b->x, b->n); }
static void op_zeros(const bufs_t *b, mc_dtype_t dt) { (void)be->count_zeros(be, dt, b->x, b->n); }
static void op_adam(const bufs_t *b, mc_dtype_t dt)
{
    (void)dt;
    const mc_adam_tensor_t t = {.p = b->x, .g = b->y, .m = b->z, .v = b->w, .n = b->n, .wd = 0.1f};
    be->adam_step(be, &t, 1, MC_DT_F32, 1e-4f, 0.9f, 0.95f, 1e-8f, 10);
}
/* The same elements as a model's many parameters (ADAM_TENSORS of them, as a 24-layer GPT has
 * about 300), each also written to a bf16 model copy: the multi-tensor launch. */
enum { ADAM_TENSORS = 300 };
static long adam_per(const bufs_t *b) { return b->n / ADAM_TENSORS / 8 * 8; } /* 16-byte aligned starts */
static void op_adam_list(const bufs_t *b, mc_dtype_t dt)
{
    (void)dt;
    static mc_adam_tensor_t t[ADAM_TENSORS];
    const long per = adam_per(b);
    for (int i = 0; i < ADAM_TENSORS; i++)
        t[i] = (mc_adam_tensor_t){.p = (float *)b->x + i * per, .g = (float *)b->y + i * per,
                                  .m = (float *)b->z + i * per, .v = (float *)b->w + i * per, .model = (char *)b->logits + i * per * 2, .n = per,
                                  .wd = i % 2 ? 0.1f : 0.0f};
    be->adam_step(be, t, ADAM_TENSORS, MC_DT_BF16, 1e-4f, 0.9f, 0.95f, 1e-8f, 10);
}
static void op_lin_f(const bufs_t *b, mc_dtype_t dt)
{
    be->linear_forward(be, dt, b->y, b->x, b->W, b->w, (int)b->N, (int)b->H, (int)(4 * b->H));
}
static void op_lin_b(const bufs_t *b, mc_dtype_t dt)
{
    be->linear_backward(be, dt, MC_DT_F32, b->z, b->dW, NULL, b->y, b->x, b->W, (int)b->N, (int)b->H, (int)(4 * b->H));
}
/* the MLP's fused pair: fc1 [h -> 4h] with its GeLU (pre kept in z), and fc2's backward through
 * the GeLU (dout [N, h] in x, din [N, 4h] into w) */
static void op_lin_gelu_f(const bufs_t *b, mc_dtype_t dt)
{
    be->linear_gelu_forward(be, dt, b->y, b->z, b->x, b->W, b->w, (int)b->N, (int)b->H, (int)(4 * b->H), 1);
}
static void op_lin_gelu_b(const bufs_t *b, mc_dtype_t dt)
{
    be->linear_backward_gelu(be, dt, MC_DT_F32, b->w, b->dW, NULL, b->x, b->y, b->W, b->z, (int)b->N,
                             (int)(4 * b->H), (int)b->H, 1);
}
/* RoPE on a Llama-like linear_qkv output: ROPE_HEADS query heads of H/ROPE_HEADS in ROPE_GROUPS
 * query groups (grouped-query attention), fully rotated; rows [NG*(QPG+2)*HD] in x */
enum { ROPE_HEADS = 8, ROPE_GROUPS = 2 };
static int rope_hd(const bufs_t *b) { return (int)(b->H / ROPE_HEADS); }
static void op_rope(const bufs_t *b, mc_dtype_t dt)
{
    const int hd = rope_hd(b);
    be->rope(be, dt, b->x, b->rope_cos, b->rope_sin, (int)b->S, (int)b->B, ROPE_GROUPS, ROPE_HEADS / ROPE_GROUPS,
             hd, hd, 0, 0);
}
/* true rotations (cos^2 + sin^2 = 1), so the repeated calls in place keep x's magnitude */
static void rope_tables(bufs_t *b)
{
    const long half = rope_hd(b) / 2, nt = b->S * half;
    float *h = malloc((size_t)nt * 2 * sizeof(float));
    if (!h) exit(1);
    for (long k = 0; k < nt; k++) {
        const double a = (double)(k / half) * pow(10000.0, -(double)(k % half) / (double)half);
        h[k] = (float)cos(a), h[nt + k] = (float)sin(a);
    }
    b->rope_cos = dalloc((size_t)nt * 4), b->rope_sin = dalloc((size_t)nt * 4);
    be->memcpy_h2d(be, b->rope_cos, h, (size_t)nt * 4);
    be->memcpy_h2d(be, b->rope_sin, h + nt, (size_t)nt * 4);
    free(h);
}
/* the square fp32 GEMM: 4h, or 2h where x cannot hold (4h)^2 */
static int gemm_size(const bufs_t *b) { return 16 * b->H * b->H <= b->n ? (int)(4 * b->H) : (int)(2 * b->H); }
static void op_gemm(const bufs_t *b, mc_dtype_t dt)
{
    (void)dt;
    const int m = gemm_size(b);
    be->gemm(be, 0, 1, m, m, m, 1.0f, b->x, m, b->y, m, 0.0f, b->z, m);
}
/* --qk-layernorm (LayerNorm) on a Llama-like linear_qkv output: QKN_HEADS query heads of
 * H/QKN_HEADS in QKN_GROUPS query groups; rows [NG*(QPG+2)*HD] in x, out in y, the backward in
 * place on y; the statistics (QKN_HEADS + QKN_GROUPS per token) in z, the weight gradients in dW */
enum { QKN_HEADS = 8, QKN_GROUPS = 2 };
static int qkn_hd(const bufs_t *b) { return (int)(b->H / QKN_HEADS); }
static long qkn_stats(const bufs_t *b) { return b->N * (QKN_HEADS + QKN_GROUPS); }
static void op_qkn_f(const bufs_t *b, mc_dtype_t dt)
{
    float *st = b->z;
    be->qk_norm_forward(be, dt, b->y, st, st + qkn_stats(b), b->x, b->w, b->w, b->w, b->w, (int)b->N, QKN_GROUPS,
                        QKN_HEADS / QKN_GROUPS, qkn_hd(b), 1e-5f, 0);
}
static void op_qkn_b(const bufs_t *b, mc_dtype_t dt)
{
    float *st = b->z, *dw = b->dW;
    const int hd = qkn_hd(b);
    be->qk_norm_backward(be, dt, MC_DT_F32, b->y, dw, dw + hd, dw + 2 * hd, dw + 3 * hd, b->x, b->w, b->w, st,
                         st + qkn_stats(b), (int)b->N, QKN_GROUPS, QKN_HEADS / QKN_GROUPS, hd, 0);
}

static void run(const opts_t *o)
{
    g_opts = o;
    bufs_t b;
    memset(&b, 0, sizeof(b));
    b.S = o->quick ? 128 : 1024, b.B = o->quick ? 4 : 8, b.H = o->quick ? 256 : 1024, b.V = o->quick ? 4096 : 50304;
    b.N = b.S * b.B, b.n = b.N * 4 * b.H; /* the MLP's activations */
    const size_t nb = (size_t)b.n * 4;
    b.x = dalloc(nb), b.y = dalloc(nb), b.z = dalloc(nb), b.w = dalloc(nb);
    b.logits = dalloc((size_t)b.N * b.V * 4), b.dlogits = dalloc((size_t)b.N * b.V * 4);
    b.W = dalloc((size_t)4 * b.H * b.H * 4), b.dW = dalloc((size_t)4 * b.H * b.H * 4);
    b.wte = dalloc((size_t)b.V * b.H * 4), b.dwte = dalloc((size_t)b.V * b.H * 4), b.wpe = dalloc((size_t)b.S * b.H * 4);
    for (int i = 0; i < 4; i++) b.stats[i] = dalloc((size_t)b.N * 4);
    int32_t *tok = malloc((size_t)b.N * 4), *pos = malloc((size_t)b.N * 4);
    if (!tok || !pos) exit(1);
    for (long i = 0; i < b.N; i++) tok[i] = (int32_t)((i * 2654435761u) % (unsigned long)b.V), pos[i] = (int32_t)(i % b.S);
    b.tokens = dalloc((size_t)b.N * 4), b.positions = dalloc((size_t)b.N * 4);
    be->memcpy_h2d(be, b.tokens, tok, (size_t)b.N * 4);
    be->memcpy_h2d(be, b.positions, pos, (size_t)b.N * 4);
    for (long i = 0; i < b.N; i++) tok[i] = 0;
    b.eod = dalloc((size_t)b.N * 4);
    be->memcpy_h2d(be, b.eod, tok, (size_t)b.N * 4);
    free(tok), free(pos);
    rope_tables(&b);

    printf("%-26s %-5s %-22s %13s %14s %s\n", "op", "type", "size", "time", "achieved", "roofline");
    const mc_dtype_t types[2] = {MC_DT_BF16, MC_DT_F32};
    char sz[64], szr[64], szv[64], szs[64];
    snprintf(sz, sizeof(sz), "n %ld", b.n);
    snprintf(szs, sizeof(szs), "%ld x %ld -> %ld", b.N, 4 * b.H, 2 * b.H);
    snprintf(szr, sizeof(szr), "%ld x %ld", b.N, b.H);
    snprintf(szv, sizeof(szv), "%ld x %ld", b.N, b.V);
    for (int t = 0; t < 2; t++) {
        const mc_dtype_t dt = types[t];
        const double es = (double)mc_dtype_size(dt), n = (double)b.n, NH = (double)(b.N * b.H), NV = (double)(b.N * b.V);
        char szq[64];
        dfill(b.x, dt, b.n, -2, 2), dfill(b.y, dt, b.n, -2, 2), dfill(b.z, dt, b.n, -2, 2), dfill(b.w, dt, b.H, 0.5f, 1.5f);
        dfill(b.logits, dt, b.N * b.V, -4, 4), dfill(b.wte, dt, b.V * b.H, -1, 1), dfill(b.wpe, dt, b.S * b.H, -1, 1);
        dfill(b.W, dt, 4 * b.H * b.H, -0.05f, 0.05f), dfill(b.stats[3], MC_DT_F32, b.N, 0, 1e-3f);
        be->memset0(be, b.dW, (size_t)4 * b.H * b.H * 4), be->memset0(be, b.dwte, (size_t)b.V * b.H * 4);
        if (dt != MC_DT_F32) report_bw("convert fp32->bf16", dt, sz, time_op(op_convert, &b, dt), n * (4 + es));
        report_bw("add", dt, sz, time_op(op_add, &b, dt), 3 * n * es);
        report_bw("add_inplace", dt, sz, time_op(op_add_inplace, &b, dt), 3 * n * es);
        report_bw("scale", dt, sz, time_op(op_scale, &b, dt), 2 * n * es);
        report_bw("gelu_forward (tanh)", dt, sz, time_op(op_gelu_f, &b, dt), 2 * n * es);
        report_bw("gelu_backward (tanh)", dt, sz, time_op(op_gelu_b, &b, dt), 3 * n * es);
        /* x read, out (half of x) written; backward: dout and x read, dx written */
        report_bw("swiglu_forward", dt, szs, time_op(op_swiglu_f, &b, dt), 1.5 * n * es);
        report_bw("swiglu_backward", dt, szs, time_op(op_swiglu_b, &b, dt), 2.5 * n * es);
        report_bw("dropout_forward p 0.1", dt, sz, time_op(op_dropout, &b, dt), 2 * n * es);
        report_bw("layernorm_forward", dt, szr, time_op(op_ln_f, &b, dt), 2 * NH * es + 8.0 * (double)b.N);
        /* two addends read, the sum and the normalised row written */
        report_bw("add_layernorm_forward", dt, szr, time_op(op_add_ln_f, &b, dt), 4 * NH * es + 8.0 * (double)b.N);
        /* dout, x read, dx read and written; dw, db fp32 */
        report_bw("layernorm_backward_acc", dt, szr, time_op(op_ln_b, &b, dt), 4 * NH * es + 8.0 * (double)b.N);
        /* as LayerNorm's, without the mean and the bias */
        report_bw("rmsnorm_forward", dt, szr, time_op(op_rms_f, &b, dt), 2 * NH * es + 4.0 * (double)b.N);
        report_bw("add_rmsnorm_forward", dt, szr, time_op(op_add_rms_f, &b, dt), 4 * NH * es + 4.0 * (double)b.N);
        report_bw("rmsnorm_backward_acc", dt, szr, time_op(op_rms_b, &b, dt), 4 * NH * es + 4.0 * (double)b.N);
        /* the query and key heads read and written (the value heads untouched), the tables read */
        snprintf(szq, sizeof(szq), "%ld x %d (%d/%d heads)", b.N, ROPE_GROUPS * (ROPE_HEADS / ROPE_GROUPS + 2) * rope_hd(&b),
                 ROPE_HEADS, ROPE_GROUPS);
        report_bw("rope (GQA)", dt, szq, time_op(op_rope, &b, dt),
                  2 * (double)b.N * (ROPE_HEADS + ROPE_GROUPS) * rope_hd(&b) * es + 4.0 * (double)(b.S * rope_hd(&b)));
        /* the whole qkv read and written (the value heads copied), the statistics written; the
         * backward: the query and key heads' dout and x read, dx written, the statistics read */
        char szk[64];
        const double qk = (double)b.N * (QKN_HEADS + QKN_GROUPS) * qkn_hd(&b), qs = 8.0 * (double)qkn_stats(&b);
        snprintf(szk, sizeof(szk), "%ld x %d (%d/%d heads)", b.N,
                 QKN_GROUPS * (QKN_HEADS / QKN_GROUPS + 2) * qkn_hd(&b), QKN_HEADS, QKN_GROUPS);
        report_bw("qk_norm_forward (GQA)", dt, szk, time_op(op_qkn_f, &b, dt),
                  2 * (qk + (double)b.N * QKN_GROUPS * qkn_hd(&b)) * es + qs);
        report_bw("qk_norm_backward (GQA)", dt, szk, time_op(op_qkn_b, &b, dt), 3 * qk * es + qs);
        report_bw("embedding_forward", dt, szr, time_op(op_emb_f, &b, dt), 3 * NH * es);
        /* dout read, the touched fp32 rows read and written (at most one per token) */
        report_bw("embedding_backward", dt, szr, time_op(op_emb_b, &b, dt), NH * es + 2 * NH * 4);
        /* every token the same: dout read, one fp32 row read and written */
        report_bw("embedding_backward 1 token", dt, szr, time_op(op_emb_b_eod, &b, dt), NH * es + 8.0 * (double)b.H);
        report_bw("ce_max", dt, szv, time_op(op_ce_max, &b, dt), NV * es);
        report_bw("ce_sums", dt, szv, time_op(op_ce_sums, &b, dt), NV * es);
        report_bw("ce_backward", dt, szv, time_op(op_ce_b, &b, dt), 2 * NV * es);
        report_bw("sumsq", dt, sz, time_op(op_sumsq, &b, dt), n * es);
        report_bw("count_zeros", dt, sz, time_op(op_zeros, &b, dt), n * es);
        report_bw("has_nonfinite", dt, sz, time_op(op_nonfinite, &b, dt), n * es);
        char szl[64];
        snprintf(szl, sizeof(szl), "%ld x %ld -> %ld", b.N, b.H, 4 * b.H);
        const double lf = 2.0 * (double)b.N * (double)b.H * 4.0 * (double)b.H;
        report_flops("linear_forward + bias", dt, szl, time_op(op_lin_f, &b, dt), lf);
        report_flops("linear_backward (din, dW)", dt, szl, time_op(op_lin_b, &b, dt), 2 * lf);
        report_flops("linear_gelu_forward (tanh)", dt, szl, time_op(op_lin_gelu_f, &b, dt), lf);
        snprintf(szl, sizeof(szl), "%ld x %ld -> %ld", b.N, 4 * b.H, b.H);
        report_flops("linear_backward_gelu (din, dW)", dt, szl, time_op(op_lin_gelu_b, &b, dt), 2 * lf);
    }
    dfill(b.x, MC_DT_F32, b.n, -1, 1), dfill(b.y, MC_DT_F32, b.n, 0, 1), dfill(b.z, MC_DT_F32, b.n, -1, 1),
        dfill(b.w, MC_DT_F32, b.n, 0, 1e-4f);
    report_bw("adam_step", MC_DT_F32, sz, time_op(op_adam, &b, MC_DT_F32), 7.0 * (double)b.n * 4);
    char sza[64];
    snprintf(sza, sizeof(sza), "%d x %ld", ADAM_TENSORS, adam_per(&b));
    report_bw("adam_step + bf16 copy, multi-tensor", MC_DT_F32, sza, time_op(op_adam_list, &b, MC_DT_F32),
              (7.0 * 4 + 2) * (double)(adam_per(&b) * ADAM_TENSORS));
    const double m = (double)gemm_size(&b);
    char szg[64];
    snprintf(szg, sizeof(szg), "%.0f^3 (NT)", m);
    report_flops("gemm", MC_DT_F32, szg, time_op(op_gemm, &b, MC_DT_F32), 2 * m * m * m);
}
#endif

int main(int argc, char **argv)
{
#ifndef MC_WITH_CUDA
    (void)argc, (void)argv, (void)now;
    fprintf(stderr, "bench_kernels: this build has no CUDA backend (built without nvcc, CUDA=0 or SANITIZE=1): "
                    "nothing to time\n");
    return 2;
#else
    opts_t o = {0, 0.0, 989.0, 67.0};
    int device = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) o.quick = 1;
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = atoi(argv[++i]);
        else if (strcmp(argv[i], "--peak-gbs") == 0 && i + 1 < argc) o.peak_gbs = atof(argv[++i]);
        else if (strcmp(argv[i], "--peak-tflops-16") == 0 && i + 1 < argc) o.peak16 = atof(argv[++i]);
        else if (strcmp(argv[i], "--peak-tflops-32") == 0 && i + 1 < argc) o.peak32 = atof(argv[++i]);
        else {
            fprintf(stderr, "bench_kernels: unknown argument '%s' (usage: bench_kernels [--quick] [--device N] "
                            "[--peak-gbs X] [--peak-tflops-16 X] [--peak-tflops-32 X])\n", argv[i]);
            return 2;
        }
    }
    const int gpus = mc_cuda_device_count();
    if (gpus == 0) {
        fprintf(stderr, "bench_kernels: no CUDA device visible: nothing to time (run on a machine with a GPU)\n");
        return 2;
    }
    char err[256];
    be = mc_backend_cuda(device, err, sizeof(err));
    if (!be) {
        fprintf(stderr, "bench_kernels: %s\n", err);
        return 1;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) prop.name[0] = 0;
    if (o.peak_gbs <= 0) {
        if (strstr(prop.name, "H200")) o.peak_gbs = 4300;
        else if (strstr(prop.name, "H100")) o.peak_gbs = 3350;
        else {
            fprintf(stderr, "bench_kernels: no bandwidth peak known for '%s' (give --peak-gbs)\n", prop.name);
            return 2;
        }
    }
    printf("device %d: %s; %s\n", device, prop.name, mc_build_description());
    run(&o);
    return 0;
#endif
}
