/* The memory plan (DESIGN decision 1): what mc_trainer_init allocates, sized by the same
 * routines that allocate it, on any backend (a sizing one for `megatron-c plan`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/internal.h"
#include "trainer/trainer.h"

void mc_trainer_memory(const mc_args_t *args, const mc_run_config_t *rc, const mc_backend_t *be,
                       mc_memory_plan_t *out)
{
    memset(out, 0, sizeof(*out));
    double best = -1;
    for (int r = 0; r < rc->pipeline.layers.pp_size; r++) {
        mc_gpt_config_t cfg;
        mc_gpt_t plan;
        mc_ddp_t ddp;
        mc_trainer_stage_config(&cfg, rc, r);
        /* E/ep experts, each 1/etp of it, as every expert rank holds */
        cfg.moe.ep = rc->parallel.num_experts ? rc->parallel.ep : 1;
        cfg.moe.etp = rc->parallel.num_experts && rc->parallel.etp ? rc->parallel.etp : cfg.tp;
        mc_gpt_build_params(&plan, &cfg);
        /* the shard sizes do not depend on which dp rank: rank 0 stands for all */
        const int n_inst = rc->ddp.num_instances > 1 ? rc->ddp.num_instances : 1;
        mc_ddp_plan(&ddp, &plan, &rc->ddp, rc->ddp.dp_cp_size / n_inst, 0);
        long pb, gb, ab, wb, state_len;
        mc_gpt_memory(&plan, be, &pb, &gb, &ab, &wb);
        mc_opt_seg_t *segs;
        int n;
        mc_trainer_optimizer_segments(&plan, &ddp, &segs, &n, &state_len);
        free(segs);
        mc_memory_plan_t m = {.params = (double)pb,
                              .grads = (double)gb,
                              .optimizer = (double)mc_adam_state_bytes(state_len, cfg.dt, cfg.gdt),
                              .activations = (double)ab,
                              .workspace = (double)wb,
                              .stage = r,
                              .dt = cfg.dt,
                              .gdt = cfg.gdt};
        for (int g = 0; g < MC_SLOT_GROUPS; g++) m.inflight += plan.cfg.slots[g];
        /* the files hold the parameters and, without the distributed optimizer (whose state
         * is gathered into copies), the Adam moments (ckpt/async.h) */
        if (args->async_save && args->save[0])
            m.snapshot = m.params + (ddp.dist_opt || args->no_save_optim ? 0 : m.optimizer);
        const double total = m.params + m.grads + m.optimizer + m.activations + m.workspace;
        if (total > best) {
            best = total;
            *out = m;
        }
        mc_ddp_free(&ddp);
        mc_gpt_free(&plan);
    }
}

void mc_memory_format_bytes(char *buf, size_t n, double bytes)
{
    if (bytes >= 1024.0 * 1024 * 1024) snprintf(buf, n, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
    else snprintf(buf, n, "%.2f MiB", bytes / (1024.0 * 1024));
}

/* DESIGN decision 1: every buffer is planned before training, and the plan is logged.
 * Returns the total bytes. */
double mc_memory_plan_print(FILE *out, const mc_args_t *a, const mc_memory_plan_t *plan,
                            const char *device)
{
    const mc_memory_plan_t p = *plan;
    char opt_name[64];
    /* the distributed optimizer shards over dp x cp, or an instance's part of it */
    const int shards =
        a->data_parallel_size * (a->context_parallel_size > 1 ? a->context_parallel_size : 1) /
        (a->num_distributed_optimizer_instances > 1 ? a->num_distributed_optimizer_instances : 1);
    if (a->use_distributed_optimizer && shards > 1)
        snprintf(opt_name, sizeof(opt_name), "optimizer state (Adam m, v; 1/%d shard)", shards);
    else snprintf(opt_name, sizeof(opt_name), "optimizer state (Adam m, v)");
    /* one slot is one microbatch through one model chunk */
    char act_name[64];
    snprintf(act_name, sizeof(act_name), "activations (%d microbatch%s in flight)", p.inflight,
             p.inflight == 1 ? "" : "es");
    char par_name[64], grad_name[64];
    snprintf(par_name, sizeof(par_name), "parameters (%s)", mc_dtype_name(p.dt));
    snprintf(grad_name, sizeof(grad_name), "gradients (%s)", mc_dtype_name(p.gdt));
    if (p.dt != MC_DT_F32 || p.gdt != MC_DT_F32) /* + fp32 master params and/or main grads */
        snprintf(opt_name + strlen(opt_name) - 1, sizeof(opt_name) - strlen(opt_name) + 1, "%s%s)",
                 p.dt != MC_DT_F32 ? ", fp32 params" : "",
                 p.gdt != MC_DT_F32 ? ", fp32 grads" : "");
    const char *names[] = {par_name, grad_name,   opt_name,
                           act_name, "workspace", "async checkpoint snapshot (host)"};
    double bytes[] = {p.params, p.grads, p.optimizer, p.activations, p.workspace, p.snapshot};
    const int rows = p.snapshot > 0 ? 6 : 5;
    double total = 0;
    if (a->pipeline_model_parallel_size > 1)
        fprintf(out, "> memory plan (per rank, %s; pipeline stage %d, the largest):\n", device,
                p.stage);
    else fprintf(out, "> memory plan (per rank, %s):\n", device);
    for (int i = 0; i < rows; i++) {
        char b[32];
        mc_memory_format_bytes(b, sizeof(b), bytes[i]);
        fprintf(out, "    %-40s %12s\n", names[i], b);
        total += bytes[i];
    }
    char b[32];
    mc_memory_format_bytes(b, sizeof(b), total);
    fprintf(out, "    %-40s %12s\n", "total", b);
    return total;
}
