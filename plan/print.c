/* What `megatron-c plan` prints: the memory plan (the start-up's own lines), the time per
 * iteration by part, throughput, and the GEMMs of one layer with the fraction of peak the model
 * gives them (the efficiency table, by GPU and shape). */
#include "plan/plan.h"

#include <math.h>

#include "kernels/device.h"
#include <string.h>

static void line_s(FILE *out, const char *name, double s, const char *note)
{
    fprintf(out, "    %-40s %10.4f s%s%s\n", name, s, note[0] ? "  " : "", note);
}

void mc_plan_layout_flags(const mc_args_t *a, char *buf, size_t n)
{
    int k = snprintf(buf, n,
                     "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d "
                     "--micro-batch-size %d",
                     a->tensor_model_parallel_size, a->pipeline_model_parallel_size,
                     a->micro_batch_size);
    if (a->context_parallel_size > 1 && k < (int)n)
        k += snprintf(buf + k, n - (size_t)k, " --context-parallel-size %d",
                      a->context_parallel_size);
    if (a->virtual_pipeline_model_parallel_size > 1 && k < (int)n)
        k += snprintf(buf + k, n - (size_t)k, " --num-virtual-stages-per-pipeline-rank %d",
                      a->virtual_pipeline_model_parallel_size);
    if (strcmp(a->recompute_granularity, "full") == 0 && k < (int)n)
        k += snprintf(buf + k, n - (size_t)k,
                      " --recompute-granularity full --recompute-method %s "
                      "--recompute-num-layers %d",
                      a->recompute_method, a->recompute_num_layers);
    else if (strcmp(a->recompute_granularity, "selective") == 0 && k < (int)n)
        k += snprintf(buf + k, n - (size_t)k, " --recompute-granularity selective");
    if (a->expert_model_parallel_size > 1 && k < (int)n)
        k += snprintf(buf + k, n - (size_t)k,
                      " --expert-model-parallel-size %d --moe-token-dispatcher-type %s",
                      a->expert_model_parallel_size, a->moe_token_dispatcher_type);
    if (a->sequence_parallel && k < (int)n)
        k += snprintf(buf + k, n - (size_t)k, " --sequence-parallel");
    if (a->use_distributed_optimizer && k < (int)n)
        snprintf(buf + k, n - (size_t)k, " --use-distributed-optimizer");
}

/* The layer's four GEMMs on this GPU, with what the model predicts for each. */
static void print_gemms(FILE *out, const mc_args_t *a, const mc_cluster_t *cl)
{
    double shapes[MC_PLAN_LAYER_GEMMS][3];
    mc_plan_layer_gemms(a, shapes);
    const double e = (a->fp16 || a->bf16) ? 2 : 4;
    fprintf(out,
            "> GEMMs of one layer's forward on one GPU (M x N x K; fraction of the %s's "
            "%.0f TFLOP/s the model gives them):\n",
            cl->gpu.long_name, cl->gpu.peak_tflops);
    for (int i = 0; i < MC_PLAN_LAYER_GEMMS; i++) {
        double eff;
        mc_plan_gemm_seconds(&cl->gpu, 1, shapes[i][0], shapes[i][1], shapes[i][2], e, &eff);
        fprintf(out, "    %-12s %7.0f x %6.0f x %6.0f   %5.1f%%\n", mc_plan_layer_gemm_names[i],
                shapes[i][0], shapes[i][1], shapes[i][2], 100 * eff);
    }
}

/* An MoE model's parameters: all, the experts', a token's; a rank's experts (the memory plan's
 * stage) and the group their gradients reduce over. */
static void print_experts(FILE *out, const mc_args_t *a, const mc_memory_plan_t *mem)
{
    mc_plan_params_t p;
    mc_plan_params(a, &p);
    fprintf(out,
            "> experts: %d per MoE layer in %d of %d layers, top-%d; parameters: %.0f, of which "
            "experts %.0f; active per token %.0f\n",
            a->num_experts, p.moe_layers, a->num_layers, a->moe_router_topk, p.total, p.experts,
            p.active);
    int n;
    const double x = mc_plan_rank_expert_params(a, mem->stage, &n);
    const int etp = a->expert_tensor_parallel_size > 1 ? a->expert_tensor_parallel_size : 1;
    fprintf(out,
            "> experts per rank (pipeline stage %d): %d of each of its %d MoE layers (ep %d), "
            "1/%d of each (etp %d): %.0f parameters; their gradients reduce over edp %d\n",
            mem->stage, a->num_experts / a->expert_model_parallel_size, n,
            a->expert_model_parallel_size, etp, etp, x, mc_plan_edp(a));
}

void mc_plan_print(FILE *out, const mc_args_t *a, const mc_cluster_t *cl, const char *device,
                   const mc_memory_plan_t *mem, const mc_plan_time_t *t)
{
    const mc_gpu_t *g = &cl->gpu;
    fprintf(out, "> plan: %d x %s (%d per node): tp %d, pp %d", cl->num_gpus, g->long_name,
            cl->gpus_per_node, a->tensor_model_parallel_size, a->pipeline_model_parallel_size);
    if (a->virtual_pipeline_model_parallel_size > 1)
        fprintf(out, " (vpp %d)", a->virtual_pipeline_model_parallel_size);
    if (a->context_parallel_size > 1) fprintf(out, ", cp %d", a->context_parallel_size);
    fprintf(out, ", dp %d, micro batch %d, %d microbatches per iteration\n", a->data_parallel_size,
            a->micro_batch_size, t->microbatches);
    fprintf(out, "> attention: %s\n", mc_backend_attention_line(mc_backend_sizing(device)));
    if (a->num_experts) print_experts(out, a, mem);
    const double total = mc_memory_plan_print(out, a, mem, device);
    const double usable = (g->memory_gb - MC_PLAN_RESERVED_GB) * 1e9;
    fprintf(out,
            "    %-40s %9.2f GB of %.2f GB usable (%.0f GB less %.0f GB for CUDA, NCCL, "
            "cuBLAS): %s\n",
            "fits", total / 1e9, usable / 1e9, g->memory_gb, MC_PLAN_RESERVED_GB,
            total <= usable ? "yes" : "NO");
    fprintf(out, "> time per iteration (the slowest stage; constants in plan/hw.c):\n");
    char note[160];
    line_s(out, "compute (GEMMs, attention, memory-bound)", t->compute, "");
    line_s(out, "  of which core attention", t->attention, t->attn.what);
    snprintf(note, sizeof(note), "%d calls, %.0f bytes per GPU", t->tp_calls, t->tp_bytes);
    line_s(out, "tensor-parallel collectives", t->tp_comm, t->tp_calls ? note : "");
    if (a->num_experts) {
        snprintf(note, sizeof(note), "%d calls, %.0f bytes per GPU", t->ep_calls, t->ep_bytes);
        line_s(out, "MoE all-to-all (ep) and etp collectives", t->ep_comm, t->ep_calls ? note : "");
    }
    snprintf(note, sizeof(note), "%.0f bytes per GPU", t->pp_bytes);
    line_s(out, "pipeline p2p", t->pp_comm, t->pp_bytes > 0 ? note : "");
    if (a->context_parallel_size > 1) {
        snprintf(note, sizeof(note), "of %.4f s, %d calls, %.0f bytes per GPU", t->cp_comm,
                 t->cp_calls, t->cp_bytes);
        line_s(out, "context-parallel attention (exposed)", t->cp_exposed, note);
    }
    snprintf(note, sizeof(note), "(p-1)/(v*m) = %.4f", t->bubble_fraction);
    line_s(out, "pipeline bubble", t->bubble, note);
    snprintf(note, sizeof(note), "of %.4f s, %.0f bytes per GPU", t->dp_comm, t->dp_bytes);
    line_s(out, "data-parallel reduction (exposed)", t->dp_exposed, t->dp_comm > 0 ? note : "");
    if (a->num_experts) {
        snprintf(note, sizeof(note), "edp %d, %.0f bytes per GPU", mc_plan_edp(a), t->edp_bytes);
        line_s(out, "  of which the experts' (over edp)", t->edp_comm, t->edp_comm > 0 ? note : "");
    }
    line_s(out, "optimizer step", t->optimizer, "");
    line_s(out, "iteration", t->iteration, "");
    fprintf(out,
            "> throughput: %.0f tokens/s; %.1f TFLOP/s per GPU (Megatron's count, as the log "
            "line), %.1f with recomputation (the paper's count); MFU %.1f%%\n",
            t->tokens_per_s, t->model_tflops_per_gpu, t->hw_tflops_per_gpu, 100 * t->mfu);
    print_gemms(out, a, cl);
}
