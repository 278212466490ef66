/* Throughput of the CUDA fused attention (kernels/cuda/attention.cu) at the GPT benchmark
 * sizes: forward and backward time and TFLOP/s, and the fraction of the tensor-core peak.
 *
 *   bench_attention [--dtype bf16|fp16|fp32] [--dropout P] [--iters N] [--quick]
 *
 * FLOPs are the causal ones, as FlashAttention counts them: forward 2 products of 2 S^2 HD
 * multiply-adds halved by the mask = 2 B NH S^2 HD; backward 2.5 times that (5 products; these
 * kernels recompute Q K^T and dO V^T in both backward passes, so they do 7). Without a CUDA
 * build or a GPU it says so on one line and exits with status 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/backend.h"
#include "kernels/device.h"
#ifdef MC_WITH_CUDA
#include "kernels/cuda/attention.h"
#endif

#define PEAK_BF16_TFLOPS 989.0 /* H100 SXM dense bf16/fp16 tensor peak */

typedef struct {
    const char *model;
    int NH, HD;
} shape_t;

/* Megatron GPT configurations: hidden / heads. */
static const shape_t SHAPES[] = {
    {"gpt-124m", 12, 64},
    {"gpt-350m", 16, 64},
    {"gpt-1.3b", 16, 128},
    {"gpt-2.7b", 32, 80},
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int usage(const char *why)
{
    fprintf(stderr, "bench_attention: %s (usage: bench_attention [--dtype bf16|fp16|fp32] [--dropout P] [--groups NG] [--iters N] [--quick])\n",
            why);
    return 2;
}

int main(int argc, char **argv)
{
    mc_dtype_t dt = MC_DT_BF16;
    float p = 0.0f;
    int iters = 20, quick = 0, groups = 0; /* groups: query groups (GQA), 0 = one per head */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *s = argv[++i];
            if (!strcmp(s, "bf16")) dt = MC_DT_BF16;
            else if (!strcmp(s, "fp16")) dt = MC_DT_F16;
            else if (!strcmp(s, "fp32")) dt = MC_DT_F32;
            else return usage("--dtype takes bf16, fp16 or fp32");
        } else if (!strcmp(argv[i], "--dropout") && i + 1 < argc) {
            p = strtof(argv[++i], NULL);
            if (!(p >= 0.0f && p < 1.0f)) return usage("--dropout takes a probability in [0, 1)");
        } else if (!strcmp(argv[i], "--groups") && i + 1 < argc) {
            groups = atoi(argv[++i]);
            if (groups < 1) return usage("--groups takes a positive count of query groups");
        } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = atoi(argv[++i]);
            if (iters < 1) return usage("--iters takes a positive count");
        } else
            return usage("unknown argument");
    }
#ifndef MC_WITH_CUDA
    (void)dt, (void)p, (void)iters, (void)quick, (void)groups, (void)now, (void)SHAPES;
    fprintf(stderr, "bench_attention: this build has no CUDA (nvcc not found or CUDA=0); build with CUDA on a machine with a GPU\n");
    return 1;
#else
    if (mc_cuda_device_count() == 0) {
        fprintf(stderr, "bench_attention: no CUDA device visible; run it on a machine with a GPU\n");
        return 1;
    }
    char err[256];
    const mc_backend_t *be = mc_backend_cuda(0, err, sizeof(err));
    if (!be) {
        fprintf(stderr, "bench_attention: %s\n", err);
        return 1;
    }
    static const int SB[][2] = {{1024, 8}, {2048, 4}};
    const int nshape = quick ? 1 : (int)(sizeof(SHAPES) / sizeof(SHAPES[0])), nsb = quick ? 1 : 2;
    if (quick) iters = 2;
    const mc_dropout_t d = {.seed = 1234, .iteration = 1, .layer = 1, .site = MC_DROPOUT_SITE_ATTN_PROBS, .p = p};
    printf("# %s, dropout %.2f, %d iterations; TFLOP/s counts causal FLOPs (fwd 2 B NH S^2 HD, bwd 2.5x); "
           "peak %.0f TFLOP/s\n",
           mc_dtype_name(dt), (double)p, iters, PEAK_BF16_TFLOPS);
    printf("%-9s %5s %3s %3s %3s %4s %9s %9s %6s %9s %9s %6s\n", "model", "S", "B", "NH", "NG", "HD", "fwd_ms", "fwd_TF/s",
           "fwd_%", "bwd_ms", "bwd_TF/s", "bwd_%");
    for (int si = 0; si < nshape; si++)
        for (int k = 0; k < nsb; k++) {
            const shape_t *sh = &SHAPES[si];
            const int S = quick ? 128 : SB[k][0], B = quick ? 1 : SB[k][1], NH = sh->NH, HD = sh->HD;
            const int NG = groups ? groups : NH;
            if (NH % NG) {
                printf("# %s: %d query groups do not divide %d heads, skipped\n", sh->model, NG, NH);
                continue;
            }
            const long nq = (long)S * B * (NH + 2 * NG) * HD, no = (long)S * B * NH * HD;
            const size_t es = mc_dtype_size(dt);
            float *h = malloc(sizeof(float) * (size_t)nq);
            void *h16 = malloc(es * (size_t)nq);
            if (!h || !h16) {
                fprintf(stderr, "bench_attention: out of host memory\n");
                return 1;
            }
            unsigned x = 12345u;
            for (long i = 0; i < nq; i++) {
                x = x * 1664525u + 1013904223u;
                h[i] = (float)(x >> 8) / 16777216.0f * 2.0f - 1.0f;
            }
            mc_convert(h16, dt, h, MC_DT_F32, nq);
            size_t state_bytes, scratch_bytes;
            mc_cuda_attention_sizes(be, dt, S, B, NH, HD, &state_bytes, &scratch_bytes);
            void *qkv = be->alloc(be, es * (size_t)nq), *dqkv = be->alloc(be, es * (size_t)nq);
            void *out = be->alloc(be, es * (size_t)no), *dout = be->alloc(be, es * (size_t)no);
            void *state = be->alloc(be, state_bytes), *scratch = be->alloc(be, scratch_bytes);
            if (!qkv || !dqkv || !out || !dout || !state || !scratch) {
                fprintf(stderr, "bench_attention: out of GPU memory at S=%d B=%d NH=%d HD=%d\n", S, B, NH, HD);
                return 1;
            }
            be->memcpy_h2d(be, qkv, h16, es * (size_t)nq);
            be->memcpy_h2d(be, dout, h16, es * (size_t)no);
            const float scale = 1.0f / sqrtf((float)HD);
            double tf = 0.0, tb = 0.0;
            for (int it = -1; it < iters; it++) { /* iteration -1 warms up */
                const double t0 = now();
                mc_cuda_attention_forward(be, dt, out, state, scratch, qkv, S, B, NH, NG, HD, NULL, scale, &d, 0, NH);
                be->synchronize(be);
                const double t1 = now();
                mc_cuda_attention_backward(be, dt, dqkv, scratch, dout, qkv, out, state, S, B, NH, NG, HD, NULL, scale,
                                           &d, 0, NH);
                be->synchronize(be);
                const double t2 = now();
                if (it >= 0) {
                    tf += t1 - t0;
                    tb += t2 - t1;
                }
            }
            tf /= iters;
            tb /= iters;
            const double flops = 2.0 * B * NH * (double)S * S * HD;
            const double ftf = flops / tf * 1e-12, btf = 2.5 * flops / tb * 1e-12;
            printf("%-9s %5d %3d %3d %3d %4d %9.3f %9.1f %5.1f%% %9.3f %9.1f %5.1f%%\n", sh->model, S, B, NH, NG, HD, tf * 1e3,
                   ftf, 100.0 * ftf / PEAK_BF16_TFLOPS, tb * 1e3, btf, 100.0 * btf / PEAK_BF16_TFLOPS);
            fflush(stdout);
            be->free(be, qkv);
            be->free(be, dqkv);
            be->free(be, out);
            be->free(be, dout);
            be->free(be, state);
            be->free(be, scratch);
            free(h);
            free(h16);
        }
    return 0;
#endif
}
