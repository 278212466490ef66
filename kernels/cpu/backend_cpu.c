/* The CPU reference backend: the op table and the memory ops. Device memory is host memory. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/memstats.h"

#define MC_CPU_ALIGN 64

void *mc_cpu_alloc(const mc_backend_t *be, size_t bytes)
{
    (void)be;
    /* aligned_alloc needs a size that is a multiple of the alignment; never ask for 0 bytes, so
     * NULL always means failure. */
    if (bytes > SIZE_MAX - MC_CPU_ALIGN) return NULL;
    size_t n = (bytes + MC_CPU_ALIGN - 1) / MC_CPU_ALIGN * MC_CPU_ALIGN;
    if (n == 0) n = MC_CPU_ALIGN;
    void *p = aligned_alloc(MC_CPU_ALIGN, n);
    if (p) memset(p, 0, n);
    mc_memstats_alloc(p, n);
    return p;
}

void mc_cpu_free(const mc_backend_t *be, void *p)
{
    (void)be;
    mc_memstats_free(p);
    free(p);
}

void mc_cpu_memcpy(const mc_backend_t *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    if (bytes && dst != src) memmove(dst, src, bytes);
}

void mc_cpu_memset0(const mc_backend_t *be, void *p, size_t bytes)
{
    (void)be;
    if (bytes) memset(p, 0, bytes);
}

void mc_cpu_synchronize(const mc_backend_t *be) { (void)be; }

/* Host memory is the device's: the "asynchronous" copies are copies, done on return. */
static void *cpu_alloc_host(const mc_backend_t *be, size_t bytes)
{
    (void)be;
    return malloc(bytes ? bytes : 1);
}

static void cpu_free_host(const mc_backend_t *be, void *p)
{
    (void)be;
    free(p);
}

static const mc_moe_ops_t cpu_moe = {
    .route = mc_cpu_moe_route,
    .route_backward = mc_cpu_moe_route_backward,
    .capacity = mc_cpu_moe_capacity,
    .aux_stats = mc_cpu_moe_aux_stats,
    .aux_backward = mc_cpu_moe_aux_backward,
    .z_loss = mc_cpu_moe_z_loss,
    .z_loss_backward = mc_cpu_moe_z_loss_backward,
    .tokens_per_expert = mc_cpu_moe_tokens_per_expert,
    .expert_bias_update = mc_cpu_moe_expert_bias_update,
    .permute_map = mc_cpu_moe_permute_map,
    .permute = mc_cpu_moe_permute,
    .unpermute = mc_cpu_moe_unpermute,
    .unpermute_backward = mc_cpu_moe_unpermute_backward,
    .sort_chunks = mc_cpu_moe_sort_chunks,
    .scale_rows = mc_cpu_moe_scale_rows,
    .scale_rows_backward = mc_cpu_moe_scale_rows_backward,
    .grouped_linear_forward = mc_cpu_moe_grouped_linear_forward,
    .grouped_linear_backward = mc_cpu_moe_grouped_linear_backward,
};

static const mc_backend_t cpu_backend = {
    .name = "cpu",
    .gpu = -1,
    .alloc = mc_cpu_alloc,
    .free = mc_cpu_free,
    .memcpy_h2d = mc_cpu_memcpy,
    .memcpy_d2h = mc_cpu_memcpy,
    .memcpy_d2d = mc_cpu_memcpy,
    .memset0 = mc_cpu_memset0,
    .synchronize = mc_cpu_synchronize,
    .alloc_host = cpu_alloc_host,
    .free_host = cpu_free_host,
    .memcpy_h2d_async = mc_cpu_memcpy,
    .memcpy_d2h_async = mc_cpu_memcpy,
    .convert = mc_cpu_convert,
    .gemm = mc_cpu_gemm,
    .linear_forward = mc_cpu_linear_forward,
    .linear_backward = mc_cpu_linear_backward,
    .embedding_forward = mc_cpu_embedding_forward,
    .embedding_backward = mc_cpu_embedding_backward,
    .linear_gelu_forward = mc_cpu_linear_gelu_forward,
    .linear_backward_gelu = mc_cpu_linear_backward_gelu,
    .layernorm_forward = mc_cpu_layernorm_forward,
    .add_layernorm_forward = mc_cpu_add_layernorm_forward,
    .layernorm_backward_acc = mc_cpu_layernorm_backward_acc,
    .gelu_forward = mc_cpu_gelu_forward,
    .gelu_backward = mc_cpu_gelu_backward,
    /* the Llama block: RMSNorm and SwiGLU */
    .rmsnorm_forward = mc_cpu_rmsnorm_forward,
    .add_rmsnorm_forward = mc_cpu_add_rmsnorm_forward,
    .rmsnorm_backward_acc = mc_cpu_rmsnorm_backward_acc,
    .rope = mc_cpu_rope,
    .qk_norm_forward = mc_cpu_qk_norm_forward,
    .qk_norm_backward = mc_cpu_qk_norm_backward,
    .swiglu_forward = mc_cpu_swiglu_forward,
    .swiglu_backward = mc_cpu_swiglu_backward,
    .dropout_forward = mc_cpu_dropout_forward,
    .dropout_backward = mc_cpu_dropout_backward,
    .attention_forward = mc_cpu_attention_forward,
    .attention_backward = mc_cpu_attention_backward,
    .attention_sizes = mc_cpu_attention_sizes,
    .attention_block_forward = mc_cpu_attention_block_forward,
    .attention_lse_merge = mc_cpu_attention_lse_merge,
    .attention_block_backward = mc_cpu_attention_block_backward,
    .attention_block_sizes = mc_cpu_attention_block_sizes,
    .copy_2d = mc_cpu_copy_2d,
    .ce_max = mc_cpu_ce_max,
    .ce_sums = mc_cpu_ce_sums,
    .ce_loss = mc_cpu_ce_loss,
    .ce_backward = mc_cpu_ce_backward,
    .ce_fused = mc_cpu_ce_fused,
    .add = mc_cpu_add,
    .add_inplace = mc_cpu_add_inplace,
    .scale = mc_cpu_scale,
    .sumsq = mc_cpu_sumsq,
    .sumsq_multi = mc_cpu_sumsq_multi,
    .count_zeros = mc_cpu_count_zeros,
    .has_nonfinite = mc_cpu_has_nonfinite,
    .adam_step = mc_cpu_adam_step,
    .moe = &cpu_moe,
    .impl = NULL,
};

const mc_backend_t *mc_backend_cpu(void) { return &cpu_backend; }
