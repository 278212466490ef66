/* The rank's training state: set-up and release (trainer/trainer.h). */
#include "trainer/trainer.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/flops.h"
#include "optim/distopt.h"
#include "trainer/internal.h"

void mc_trainer_optimizer_segments(const mc_gpt_t *m, const mc_ddp_t *d, mc_opt_seg_t **segs,
                                   int *n, long *state_len)
{
    if (d->dist_opt) mc_distopt_segments_ddp(m, d, segs, n, state_len);
    else mc_opt_segments_full(m, segs, n, state_len);
}

void mc_trainer_embedding_all_reduce(mc_trainer_t *t, void *buf, mc_dtype_t dt)
{
    mc_group_t *g = t->par.embedding;
    if (!g || g->size < 2) return;
    for (int i = 0; i < t->model.n_params; i++) {
        const mc_param_t *p = &t->model.params[i];
        if (p->shared_embedding)
            mc_all_reduce(t->comm, g, mc_elem(buf, dt, p->offset), (size_t)p->numel, dt, MC_OP_SUM);
    }
}

void mc_trainer_stage_config(mc_gpt_config_t *cfg, const mc_run_config_t *rc, int pp_rank)
{
    char err[256];
    *cfg = rc->model;
    if (mc_pipeline_configure(cfg, &rc->pipeline, pp_rank, err, sizeof(err)) != 0)
        mc_fatal("%s", err);
}

int mc_trainer_init(mc_trainer_t *t, const mc_args_t *args, const mc_run_config_t *rc,
                    const mc_backend_t *be, mc_comm_t *comm)
{
    memset(t, 0, sizeof(*t));
    t->args = args;
    t->cfg = *rc;
    t->be = be;
    t->comm = comm;
    if (rc->optim.muon.on && be->gpu >= 0) /* optim/muon.c steps host memory */
        mc_user_error("--optimizer muon on the %s device is not implemented yet (use --device cpu)",
                      be->name);
    char err[256];
    if (mc_parallel_init(&t->par, comm, &rc->parallel, err, sizeof(err)) != 0) mc_fatal("%s", err);
    mc_gpt_config_t cfg;
    mc_trainer_stage_config(&cfg, rc, t->par.me.pp);
    cfg.tp_rank = t->par.me.tp;
    cfg.cp_rank = t->par.me.cp;
    /* expert parallelism: this rank's experts (the run config's model holds every expert) */
    cfg.moe.ep = rc->parallel.num_experts ? rc->parallel.ep : 1;
    cfg.moe.ep_rank = t->par.expert_me.ep;
    cfg.moe.etp = rc->parallel.num_experts ? t->par.layout.etp : 1;
    cfg.moe.etp_rank = t->par.expert_me.etp;
    mc_gpt_build_params(&t->model, &cfg);
    /* gradients are reduced, and the distributed optimizer sharded, over dp x cp (over an
     * instance's part of it with several distributed optimizer instances) */
    mc_group_t *shard_group = t->par.intra_dp_cp ? t->par.intra_dp_cp : t->par.dp_cp;
    mc_ddp_plan(&t->ddp, &t->model, &rc->ddp, shard_group->size, shard_group->rank);
    if (mc_gpt_alloc(&t->model, be) != 0) return -1;
    t->model.comm = comm;
    t->model.tp_group = t->par.tp;
    t->model.cp_group = t->par.cp;
    t->model.tp_dp_cp_group = t->par.tp_dp_cp; /* global_aux_loss's counts */
    t->model.cp_a2a_group = t->par.hcp[0];
    t->model.cp_p2p_group = t->par.hcp[1];
    t->model.ep_group = cfg.moe.ep > 1 ? t->par.ep : NULL;
    t->model.etp_group = cfg.moe.etp > 1 ? t->par.etp : NULL;
    t->model.tp_ep_group = mc_moe_dispatched(&cfg.moe) ? t->par.tp_ep : NULL;
    mc_ddp_bind(&t->ddp, comm, shard_group, t->par.inter_dist_opt);
    mc_ddp_bind_experts(&t->ddp, t->par.intra_edp ? t->par.intra_edp : t->par.edp,
                        t->par.inter_edp);
    mc_gpt_init_params(&t->model);
    /* tied embeddings over pipeline stages: the last stage's zero-filled output copy becomes the
     * first stage's word embeddings (Megatron's embedding-group all-reduce at set-up) */
    mc_trainer_embedding_all_reduce(t, t->model.param_buf, cfg.dt);
    mc_opt_seg_t *segs;
    int n;
    long state_len;
    mc_trainer_optimizer_segments(&t->model, &t->ddp, &segs, &n, &state_len);
    if (mc_adam_init(&t->opt, &t->model, &rc->optim, segs, n, state_len) != 0) return -1;
    mc_opt_master_from_model(&t->opt); /* Megatron's main params: fp32 copies of the 16-bit ones */
    mc_scaler_init(&t->scaler, &rc->optim);
    mc_lr_sched_init(&t->sched, &rc->sched);
    mc_timers_init(&t->timers, args->timing_log_level, mc_timing_option(args->timing_log_option),
                   args->barrier_with_l1_time, comm);
    mc_pipeline_init(&t->pipe, &t->model, comm, t->par.pp, &rc->pipeline, t->par.me.pp, &t->timers);
    return 0;
}

void mc_trainer_free(mc_trainer_t *t)
{
    if (t->comm) mc_ddp_finish_param_gather(&t->ddp);
    mc_pipeline_free(&t->pipe);
    mc_adam_free(&t->opt);
    mc_ddp_free(&t->ddp);
    mc_gpt_free(&t->model);
    if (t->comm) mc_parallel_free(&t->par);
    memset(t, 0, sizeof(*t));
}

int mc_trainer_init_state(mc_trainer_t *t, const mc_args_t *args, const mc_backend_t *be,
                          int tp_rank, int pp_rank, char *err, size_t n)
{
    return mc_trainer_init_state_ep(t, args, be, tp_rank, pp_rank, -1, err, n);
}

int mc_trainer_init_state_ep(mc_trainer_t *t, const mc_args_t *args, const mc_backend_t *be,
                             int tp_rank, int pp_rank, int ep_rank, char *err, size_t n)
{
    memset(t, 0, sizeof(*t));
    t->args = args;
    mc_run_config(&t->cfg, args);
    t->be = be;
    t->par.me.tp = tp_rank;
    t->par.me.pp = pp_rank;
    mc_gpt_config_t cfg = t->cfg.model;
    if (mc_pipeline_chunks(&cfg, &t->cfg.pipeline, pp_rank, err, n) != 0) return -1;
    cfg.tp_rank = tp_rank;
    if (args->num_experts) {
        /* expert tensor parallelism (tp or 1): the etp rank is tp_rank's */
        const int etp =
            args->expert_tensor_parallel_size > 0 ? args->expert_tensor_parallel_size : cfg.tp;
        cfg.moe.etp = etp;
        cfg.moe.etp_rank = etp > 1 ? tp_rank : 0;
    }
    if (ep_rank >= 0 && args->num_experts) { /* else the run config's: every expert */
        cfg.moe.ep = args->expert_model_parallel_size > 0 ? args->expert_model_parallel_size : 1;
        cfg.moe.ep_rank = ep_rank;
    }
    /* the state is held in fp32 whatever the run's precision: the parameters are the fp32
     * masters, written as a 16-bit model's weights when the args say so */
    cfg.dt = cfg.gdt = MC_DT_F32;
    mc_gpt_build_params(&t->model, &cfg);
    mc_ddp_plan(&t->ddp, &t->model, &t->cfg.ddp, 1, 0);
    t->model.be = be;
    if (!(t->model.param_buf = be->alloc(be, (size_t)t->model.n_elems * sizeof(float))))
        return mc_errf(err, n, "out of %s memory for the parameters of rank (tp %d, pp %d)",
                       be->name, tp_rank, pp_rank);
    mc_opt_seg_t *segs;
    int count;
    long state_len;
    mc_trainer_optimizer_segments(&t->model, &t->ddp, &segs, &count, &state_len);
    if (mc_adam_init(&t->opt, &t->model, &t->cfg.optim, segs, count, state_len) != 0)
        return mc_errf(err, n, "out of %s memory for the optimizer state of rank (tp %d, pp %d)",
                       be->name, tp_rank, pp_rank);
    mc_lr_sched_init(&t->sched, &t->cfg.sched);
    return 0;
}

double mc_trainer_flops_so_far(const mc_trainer_t *t)
{
    const mc_args_t *a = t->args;
    if (a->rampup_start || a->n_batch_schedule)
        return mc_gpt_flops(&t->model.cfg, t->consumed_train_samples);
    return (double)t->iteration * mc_gpt_flops(&t->model.cfg, a->global_batch_size);
}
