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
 * the link (nccl-tests' bus bandwidth on NVSwitch and on InfiniBand); a fused attention kernel
 * reaches about half the GEMM ceiling (FlashAttention-2's forward and backward on A100 and
 * H100 run at 50-70% of peak, its backward lower); a ring step or p2p transfer costs about 10
 * microseconds of latency; 3 GB of each GPU go to the CUDA context, NCCL and cuBLAS. */
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
     .source = "A100 datasheet; DGX A100 (NVSwitch 600 GB/s bidirectional, 8 x 200 Gb/s HDR)"},
    {.name = "h100",
     .long_name = "H100 SXM5 80 GB",
     .peak_tflops = 989,
     .memory_gb = 80,
     .hbm_gbps = 3350,
     .sms = 132,
     .intra_gbps = 450,
     .inter_gbps = 50,
     .gemm_ceiling = 0.70,
     .source = "H100 datasheet; DGX H100 (NVSwitch 900 GB/s bidirectional, 8 x 400 Gb/s NDR)"},
    {.name = "h200",
     .long_name = "H200 SXM 141 GB",
     .peak_tflops = 989,
     .memory_gb = 141,
     .hbm_gbps = 4800,
     .sms = 132,
     .intra_gbps = 450,
     .inter_gbps = 50,
     .gemm_ceiling = 0.70,
     .source = "H200 datasheet; DGX H200 (NVSwitch 900 GB/s bidirectional, 8 x 400 Gb/s NDR)"},
};

const mc_gpu_t *mc_gpu_find(const char *name)
{
    for (size_t i = 0; i < sizeof(GPUS) / sizeof(GPUS[0]); i++)
        if (strcmp(GPUS[i].name, name) == 0) return &GPUS[i];
    return NULL;
}

const char *mc_gpu_names(void) { return "a100, h100, h200"; }
