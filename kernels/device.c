#include <cblas.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "config/env.h"
#include "kernels/device.h"
#include "kernels/cpu/cpu.h"
#include <stdbool.h>

#ifdef MC_WITH_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>
/* kernels/cuda/device.cu */
int mc_cuda_probe_device_count(void);
int mc_cuda_runtime_version(void);
#endif

void mc_cpu_set_threads(int n) { openblas_set_num_threads(n); }

int mc_cuda_device_count(void)
{
#ifdef MC_WITH_CUDA
    return mc_cuda_probe_device_count();
#else
    return 0;
#endif
}

const char *mc_build_description(void)
{
    static char buf[128];
#if defined(MC_CUDA_EMU)
    int v = mc_cuda_runtime_version();
    snprintf(
        buf, sizeof(buf),
        "CUDA %d.%d on the emulated device of the tests (test/emu: the CPU), NCCL not emulated",
        v / 1000, (v % 1000) / 10);
#elif defined(MC_WITH_CUDA)
    int v = mc_cuda_runtime_version(), nv = 0;
    if (ncclGetVersion(&nv) != ncclSuccess) nv = 0;
    snprintf(buf, sizeof(buf), "CUDA %d.%d (sm_90a, sm_80, compute_90 PTX), NCCL %d.%d.%d",
             v / 1000, (v % 1000) / 10, nv / 10000, nv / 100 % 100, nv % 100);
#else
    snprintf(buf, sizeof(buf), "CPU only (built without CUDA)");
#endif
    return buf;
}

/* ---- the op table ---- */

#define OP(f)                                                                                      \
    {                                                                                              \
#f, offsetof(mc_backend_t, f)                                                              \
    }
static const struct {
    const char *name;
    size_t offset;
} OPS[] = {
    OP(alloc),
    OP(free),
    OP(memcpy_h2d),
    OP(memcpy_d2h),
    OP(memcpy_d2d),
    OP(memset0),
    OP(synchronize),
    OP(alloc_host),
    OP(free_host),
    OP(memcpy_h2d_async),
    OP(memcpy_d2h_async),
    OP(convert),
    OP(gemm),
    OP(linear_forward),
    OP(linear_backward),
    OP(linear_gelu_forward),
    OP(linear_backward_gelu),
    OP(embedding_forward),
    OP(embedding_backward),
    OP(layernorm_forward),
    OP(add_layernorm_forward),
    OP(layernorm_backward_acc),
    OP(rmsnorm_forward),
    OP(add_rmsnorm_forward),
    OP(rmsnorm_backward_acc),
    OP(rope),
    OP(qk_norm_forward),
    OP(qk_norm_backward),
    OP(gelu_forward),
    OP(gelu_backward),
    OP(swiglu_forward),
    OP(swiglu_backward),
    OP(dropout_forward),
    OP(dropout_backward),
    OP(attention_forward),
    OP(attention_backward),
    OP(attention_sizes),
    OP(attention_block_forward),
    OP(attention_lse_merge),
    OP(attention_block_backward),
    OP(attention_block_sizes),
    OP(copy_2d),
    OP(ce_max),
    OP(ce_sums),
    OP(ce_loss),
    OP(ce_backward),
    OP(ce_fused),
    OP(add),
    OP(add_inplace),
    OP(scale),
    OP(sumsq),
    OP(sumsq_multi),
    OP(count_zeros),
    OP(has_nonfinite),
    OP(adam_step),
    OP(moe),
};
#undef OP

int mc_backend_op_count(void) { return (int)(sizeof(OPS) / sizeof(OPS[0])); }

const char *mc_backend_op_name(int i, size_t *offset)
{
    if (i < 0 || i >= mc_backend_op_count()) return NULL;
    if (offset) *offset = OPS[i].offset;
    return OPS[i].name;
}

const char *mc_backend_missing_op(const mc_backend_t *be)
{
    for (int i = 0; i < mc_backend_op_count(); i++) {
        void (*fn)(void);
        memcpy(&fn, (const char *)be + OPS[i].offset, sizeof(fn));
        if (!fn) return OPS[i].name;
    }
    return NULL;
}

/* ---- GPUs per rank ---- */

int mc_gpu_for_rank(int local_rank, int gpus)
{
    return gpus > 0 && local_rank >= 0 ? local_rank % gpus : 0;
}

int mc_ranks_per_gpu(int local_rank, int local_size, int gpus)
{
    if (gpus <= 0 || local_size <= 0) return 1;
    int d = mc_gpu_for_rank(local_rank, gpus), n = 0;
    for (int r = 0; r < local_size; r++) n += r % gpus == d;
    return n > 0 ? n : 1;
}

int mc_backend_memory(const mc_backend_t *be, double *free_bytes, double *total_bytes)
{
#ifdef MC_WITH_CUDA
    if (be->gpu >= 0) {
        size_t f = 0, t = 0;
        if (cudaSetDevice(be->gpu) != cudaSuccess || cudaMemGetInfo(&f, &t) != cudaSuccess) {
            (void)cudaGetLastError();
            return -1;
        }
        *free_bytes = (double)f, *total_bytes = (double)t;
        return 0;
    }
#endif
    double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (!(phys > 0)) return -1;
    *free_bytes = *total_bytes = phys;
    return 0;
}

/* ---- selection ---- */

#ifdef MC_WITH_CUDA
/* The CUDA backend on this rank's GPU, or NULL with the reason in why_not. */
static const mc_backend_t *start_cuda(int local_rank, int gpus, const char *asked, char *why,
                                      size_t n, char *why_not, size_t wn)
{
    int dev = mc_gpu_for_rank(local_rank, gpus);
    char err[256];
    const mc_backend_t *be = mc_backend_cuda(dev, err, sizeof(err));
    if (!be) {
        snprintf(why_not, wn, "%s", err);
        return NULL;
    }
    const char *op = mc_backend_missing_op(be);
    if (op) {
        snprintf(why_not, wn, "the CUDA backend's %s is not implemented yet", op);
        return NULL;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(prop.name, sizeof(prop.name), "?");
        prop.totalGlobalMem = 0;
    }
    snprintf(
        why, n,
        "cuda (%s; this rank drives GPU %d of %d visible, local rank %d modulo %d: %s, %.1f GiB)",
        asked, dev, gpus, local_rank, gpus, prop.name,
        (double)prop.totalGlobalMem / (1024.0 * 1024 * 1024));
    return be;
}
#endif

const mc_backend_t *mc_backend_select(const char *device, int cpu_threads, int local_rank,
                                      char *why, size_t n)
{
    int gpus = mc_cuda_device_count();
    char reason[320] = "no CUDA device available";
    if (strcmp(device, "cuda") == 0) {
#ifdef MC_WITH_CUDA
        if (gpus == 0)
            mc_user_error(
                "--device cuda: no CUDA device is visible to this process (check the driver and "
                "CUDA_VISIBLE_DEVICES, or use --device cpu)");
        const mc_backend_t *be = start_cuda(local_rank, gpus, "requested by --device cuda", why, n,
                                            reason, sizeof(reason));
        if (!be) mc_user_error("--device cuda: %s (use --device cpu)", reason);
        return be;
#else
        mc_user_error(
            "--device cuda: this megatron-c was built without CUDA (build it where nvcc is found, "
            "or use --device cpu)");
#endif
    }
    if (strcmp(device, "cpu") == 0) {
        snprintf(reason, sizeof(reason), "requested by --device cpu");
    } else if (gpus > 0) {
#ifdef MC_WITH_CUDA
        char asked[64], why_not[256];
        snprintf(asked, sizeof(asked), "--device auto: %d GPU(s) visible", gpus);
        const mc_backend_t *be =
            start_cuda(local_rank, gpus, asked, why, n, why_not, sizeof(why_not));
        if (be) return be;
        snprintf(reason, sizeof(reason), "%d GPU(s) visible, but %s", gpus, why_not);
#endif
    }
    if (cpu_threads > 0) mc_cpu_set_threads(cpu_threads);
    const char *strict = mc_env_text(MC_ENV_TEST_STRICT_DEVICE);
    if (strict && strcmp(strict, "1") == 0) {
        snprintf(
            why, n,
            "strict (MC_TEST_STRICT_DEVICE=1: the cpu backend on memory the host cannot access; %s)",
            reason);
        return mc_backend_strict();
    }
    snprintf(why, n, "cpu (%s; OpenBLAS with %d thread(s))", reason, openblas_get_num_threads());
    return mc_backend_cpu();
}

void mc_flash_attention_sizes(const mc_backend_t *be, mc_dtype_t dt, int S, int B, int NH, int HD,
                              size_t *state_bytes, size_t *scratch_bytes)
{
    (void)be, (void)dt, (void)HD;
    const size_t rows = (S > 0 && B > 0 && NH > 0) ? (size_t)S * (size_t)B * (size_t)NH : 0;
    *state_bytes = 2 * rows * sizeof(float);
    *scratch_bytes = rows * sizeof(float);
}

/* The CUDA block kernels (kernels/cuda/attention_cp.cu): the forward keeps its statistics in
 * registers; the backward's scratch holds D = rowsum(dout * out) of each query row and head. */
void mc_cuda_attention_block_sizes(const mc_backend_t *be, mc_dtype_t dt, int Sq, int Sk, int B,
                                   int NH, int HD, size_t *fwd_scratch, size_t *bwd_scratch)
{
    (void)be, (void)dt, (void)Sk, (void)HD;
    *fwd_scratch = 0;
    *bwd_scratch =
        (Sq > 0 && B > 0 && NH > 0 ? (size_t)Sq * (size_t)B * (size_t)NH : 0) * sizeof(float);
}

/* ---- attention: which implementation (kernels/attention_choice.h) ---- */

static struct {
    char line[1024];
    bool cudnn;               /* the sizing backend assumes cuDNN */
    mc_attention_spec_t spec; /* of the sizing backend's last setup */
} g_attention;

/* The cuda sizing backend's attention_sizes: the project's kernels', or with cuDNN the scratch
 * its plans would need with mc_attention_cudnn_workspace_model's workspace. */
static void sizing_cuda_attention_sizes(const mc_backend_t *be, mc_dtype_t dt, int S, int B, int NH,
                                        int HD, size_t *state_bytes, size_t *scratch_bytes)
{
    mc_flash_attention_sizes(be, dt, S, B, NH, HD, state_bytes, scratch_bytes);
    const mc_attention_spec_t *s = &g_attention.spec;
    if (!g_attention.cudnn || dt != s->dt || S != s->S || NH != s->NH || HD != s->HD) return;
    mc_attention_scratch_t sc;
    mc_attention_cudnn_scratch(s, B, mc_attention_cudnn_workspace_model(s, B), &sc);
    if (sc.bytes > *scratch_bytes) *scratch_bytes = sc.bytes;
}

void mc_backend_attention_setup(const mc_backend_t *be, const mc_attention_spec_t *s, char *line,
                                size_t n)
{
    char why[512];
    const char *choice = mc_attention_backend_name(s->backend);
    g_attention.cudnn = false;
    g_attention.spec = *s;
    if (be->attention_library && be->attention_forward) {
#ifdef MC_WITH_CUDA
        mc_cuda_attention_setup(be, s, g_attention.line, sizeof(g_attention.line));
#endif
    } else if (be->attention_library) { /* `megatron-c plan`'s cuda sizing backend */
        const char *no = mc_attention_cudnn_refusal(s, 9, why, sizeof(why));
        g_attention.cudnn = no == NULL;
        if (no)
            snprintf(g_attention.line, sizeof(g_attention.line),
                     "the project's kernels: %s (--attention-backend %s)", no, choice);
        else
            snprintf(g_attention.line, sizeof(g_attention.line),
                     "cuDNN fused flash attention, assumed (plan loads no cuDNN; its workspace "
                     "taken as an fp32 dQ; --attention-backend %s)",
                     choice);
    } else {
        snprintf(g_attention.line, sizeof(g_attention.line),
                 "the CPU reference op (fp32 math, Megatron's -10000 masks, layout-invariant "
                 "dropout)%s%s",
                 s->backend == MC_ATTENTION_FLASH || s->backend == MC_ATTENTION_FUSED
                     ? ": the cpu backend has no fused attention library; --attention-backend "
                     : "",
                 s->backend == MC_ATTENTION_FLASH || s->backend == MC_ATTENTION_FUSED ? choice
                                                                                      : "");
    }
    if (line) snprintf(line, n, "%s", g_attention.line);
}

const char *mc_backend_attention_line(const mc_backend_t *be)
{
    (void)be;
    return g_attention.line;
}

const mc_backend_t *mc_backend_sizing(const char *device)
{
    static const mc_backend_t cuda = {.name = "cuda",
                                      .device_memory = true,
                                      .has_nccl = true,
                                      .gpu = -1, /* drives none */
                                      .attention_library = true,
                                      .attention_sizes = sizing_cuda_attention_sizes,
                                      .attention_block_sizes = mc_cuda_attention_block_sizes};
    static const mc_backend_t cpu = {.name = "cpu",
                                     .gpu = -1,
                                     .attention_sizes = mc_cpu_attention_sizes,
                                     .attention_block_sizes = mc_cpu_attention_block_sizes};
    if (strcmp(device, "cuda") == 0) return &cuda;
    if (strcmp(device, "cpu") == 0) return &cpu;
    return NULL;
}
