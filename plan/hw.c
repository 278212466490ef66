/* The GPUs `megatron-c plan` knows, and why its shared fractions (plan/plan.h) are what they are.
 *
 * Peaks, memory, HBM bandwidth, SM counts and NVLink bandwidth are the vendor's datasheet
 * figures (NVIDIA A100 80 GB SXM4, H100 SXM5 and H200 SXM datasheets). The network is one
 * InfiniBand adapter per GPU as in the DGX nodes: 200 Gb/s HDR on DGX A100 (the paper's
 * cluster: 8 x 200 Gb/s per node), 400 Gb/s NDR on DGX H100/H200.
 *
 * gemm_ceiling is the fraction of peak cuBLAS reaches on large fp16/bf16 GEMMs: about 0.8 on
 * A100 (NVIDIA's "Matrix Multiplication Background" guide shows large fp16 GEMMs near 250 of
 * 312 TFLOP/s) and about 0.7 on H100/H200 (cuBLAS's large bf16 GEMMs near 700 of 989 TFLOP/s,
 * as NVIDIA's and third-party GEMM sweeps report). These are not measured here; with a GPU,
 * bench/bench-kernels.sh measures the GEMMs megatron-c runs (docs/PERF.md).
 *
 * The shared fractions: memory-bound kernels (norms, activations, dropout, softmax, Adam) move
 * about 80% of HBM bandwidth (STREAM-like copies reach 85-90%); NCCL rings reach about 80% of
 * the link (nccl-tests' bus bandwidth on NVSwitch and on InfiniBand); a ring step or p2p
 * transfer costs about 10 microseconds of latency; 3 GB of each GPU go to the CUDA context,
 * NCCL and cuBLAS.
 *
 * Causal attention, per implementation (issue 29), in TFLOP/s of the causal half of the scores
 * (forward 2 matmuls, backward 5, as cuDNN's benchmark counts them):
 *  - cuDNN's fused flash attention on H100/H200: 480 forward, 350 backward. Measured by NVIDIA
 *    (cudnn-frontend, benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn: an H200,
 *    cuDNN 9.19.1, bf16, causal, sequence 2048): the Llama 3.1 shapes (64 query heads over 8,
 *    head dim 128) 484 forward and 370 backward; the DeepSeek-V3 shapes with the deterministic
 *    backward megatron-c asks for 522 and 352. H100 and H200 have the same SMs and clocks; at
 *    these intensities HBM does not limit. On A100: 170 forward, 130 backward, an estimate (the
 *    FlashAttention-2 paper's causal head-dim-128 curves on A100, about 55% of peak forward and
 *    40% backward at 2k, the class cuDNN's kernels are in; not measured here).
 *  - The project's kernels (kernels/cuda/attention.cu) on H100/H200: 45 forward, 65 backward,
 *    the static review ../shared/reviews/cuda-speed-2026-11-29.md (forward 35-65 TFLOP/s: 8 warps
 *    per SM, scalar K/V loads, a serial softmax; the backward's dK/dV at 60-100 and dQ at 80-140
 *    over its 7 recomputing matmul passes, 65 over the nominal 5); not measured yet. On A100
 *    scaled by SMs x clock (108 x 1.41 GHz against 132 x 1.83 GHz): 28 and 41. */
#include "plan/plan.h"

#include <string.h>

static const mc_gpu_t GPUS[] = {
    {.name = "a100",
     .long_name = "A100 SXM4 80 GB",
     .peak_tflops = 312,
     .memory_gb = 80,
     .hbm_gbps = 2039,
     .sms = 108,
     .intra_gbps = 300,
     .inter_gbps = 25,
     .gemm_ceiling = 0.80,
     .source = "A100 datasheet; DGX A100 (NVSwitch 600 GB/s bidirectional, 8 x 200 Gb/s HDR)",
     .cc_major = 8,
     .cudnn_fwd_tflops = 170,
     .cudnn_bwd_tflops = 130,
     .kernels_fwd_tflops = 28,
     .kernels_bwd_tflops = 41,
     .cudnn_source = "an estimate from FlashAttention-2's A100 curves, not measured",
     .kernels_source = "the CUDA speed review's H100 estimate scaled by SMs x clock, not measured"},
    {.name = "h100",
     .long_name = "H100 SXM5 80 GB",
     .peak_tflops = 989,
     .memory_gb = 80,
     .hbm_gbps = 3350,
     .sms = 132,
     .intra_gbps = 450,
     .inter_gbps = 50,
     .gemm_ceiling = 0.70,
     .source = "H100 datasheet; DGX H100 (NVSwitch 900 GB/s bidirectional, 8 x 400 Gb/s NDR)",
     .cc_major = 9,
     .cudnn_fwd_tflops = 480,
     .cudnn_bwd_tflops = 350,
     .kernels_fwd_tflops = 45,
     .kernels_bwd_tflops = 65,
     .cudnn_source = "cudnn-frontend's H200 benchmark, cuDNN 9.19.1, bf16 causal, seq 2048",
     .kernels_source = "the CUDA speed review's static estimate, not measured"},
    {.name = "h200",
     .long_name = "H200 SXM 141 GB",
     .peak_tflops = 989,
     .memory_gb = 141,
     .hbm_gbps = 4800,
     .sms = 132,
     .intra_gbps = 450,
     .inter_gbps = 50,
     .gemm_ceiling = 0.70,
     .source = "H200 datasheet; DGX H200 (NVSwitch 900 GB/s bidirectional, 8 x 400 Gb/s NDR)",
     .cc_major = 9,
     .cudnn_fwd_tflops = 480,
     .cudnn_bwd_tflops = 350,
     .kernels_fwd_tflops = 45,
     .kernels_bwd_tflops = 65,
     .cudnn_source = "cudnn-frontend's H200 benchmark, cuDNN 9.19.1, bf16 causal, seq 2048",
     .kernels_source = "the CUDA speed review's static estimate, not measured"},
};

const mc_gpu_t *mc_gpu_find(const char *name)
{
    for (size_t i = 0; i < sizeof(GPUS) / sizeof(GPUS[0]); i++)
        if (strcmp(GPUS[i].name, name) == 0) return &GPUS[i];
    return NULL;
}

const char *mc_gpu_names(void) { return "a100, h100, h200"; }
