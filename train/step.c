/* One training step (Megatron's train_step for one rank), and forward-only evaluation. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "config/env.h"
#include "train/log.h"
#include "train/rerun.h"
#include "train/train.h"

/* The loss pairs of this rank's microbatches over the global batch: the last pipeline stage has
 * them; broadcast over the pipeline, then summed over dp-cp (Megatron's finalize_model_grads does
 * the same with the token count for per-token loss). v: (sum, tokens) in double, for training and
 * the loss checks, then Megatron's float32 report pair (train_step's all_reduce over dp_cp), in one
 * collective: a sum of two float32 values in double is exact, so rounding it gives float32's sum. */
static void reduce_loss_pairs(mc_trainer_t *t, double v[4])
{
    if (t->par.pp && t->par.pp->size > 1)
        mc_broadcast(t->comm, t->par.pp, v, 4, MC_DT_F64, t->par.pp->size - 1);
    mc_all_reduce(t->comm, t->par.dp_cp, v, 4, MC_DT_F64, MC_OP_SUM);
}

/* What a non-finite value is: 0 finite, 1 NaN, 2 Inf. */
static int non_finite(double x) { return isnan(x) ? 1 : isinf(x) ? 2 : 0; }

/* --check-for-nan-in-loss-and-grad found a NaN or Inf in a value every rank has after the
 * reductions (the loss over the global batch, the gradient norm), so every rank is here at
 * once: the lowest rank whose own part (mine, non_finite's code) was not finite names itself
 * and the iteration in the one error line and ends the job (Megatron's rerun state machine
 * raises on that rank); rank 0 speaks when the reduction alone overflowed. */
static void stop_non_finite(mc_trainer_t *t, int mine, double value, const char *what)
{
    const int size = t->comm->size, rank = t->comm->rank;
    /* one all-reduce: MAX picks the lowest such rank, then its kind */
    int64_t v = mine ? (int64_t)(size - rank) * 4 + mine : 0;
    mc_all_reduce(t->comm, t->comm->world, &v, 1, MC_DT_I64, MC_OP_MAX);
    const int who = v ? size - (int)(v / 4) : 0, kind = v ? (int)(v % 4) : non_finite(value);
    mc_fatal_by(who,
                "found %s in %s at iteration %lld (lower --lr, or check the data; "
                "--no-check-for-nan-in-loss-and-grad trains on)",
                kind == 1 ? "NaN" : "Inf", what, (long long)(t->iteration + 1));
}

typedef struct {
    mc_trainer_t *t;
    mc_rerun_t *rerun; /* the run's rerun state machine, which validates the losses (or NULL) */
    int M;
    uint32_t it;
    double sum, tokens;
    double *mb_sum, *mb_tokens; /* each microbatch's, for Megatron's float32 report */
    int bad_loss;               /* the first non-finite local loss (non_finite's code) */
    bool have_loss;             /* this rank computes the loss (the last pipeline stage) */
    /* microbatches whose losses the forward left in their losses_out (read after a synchronize),
     * in the order of their forwards */
    const mc_microbatch_t *mbs;
    int *pending, n_pending;
} step_ctx_t;

/* A loss sum from the forward: now, or later from losses_out (pending). */
static void add_loss(step_ctx_t *s, int mb, double sum, double cnt)
{
    s->tokens += cnt;
    s->mb_tokens[mb] = cnt;
    s->have_loss = true;
    if (s->mbs[mb].losses_out) {
        s->pending[s->n_pending++] = mb;
        return;
    }
    if (!s->bad_loss) s->bad_loss = non_finite(sum); /* reported once every rank knows */
    s->sum += sum;
    s->mb_sum[mb] = sum;
}

/* The step's one wait for the device: the host staging is free for the next step, and the
 * pending losses are read and summed as the forward would have, in the same order. */
static void settle_losses(step_ctx_t *s)
{
    s->t->be->synchronize(s->t->be);
    for (int i = 0; i < s->n_pending; i++) {
        const mc_microbatch_t *mb = &s->mbs[s->pending[i]];
        const double sum = mc_gpt_loss_sum(mb, mb->losses_out);
        if (!s->bad_loss) s->bad_loss = non_finite(sum);
        s->sum += sum;
        s->mb_sum[s->pending[i]] = sum;
    }
    free(s->pending);
    s->pending = NULL, s->n_pending = 0;
}

/* After settle_losses: the step's loss over the global batch on every rank, in double (s->sum,
 * s->tokens) and as Megatron's float32 report pair. */
static void reduce_losses(step_ctx_t *s, float report[2])
{
    mc_log_loss_report(s->mb_sum, s->mb_tokens, s->M, report);
    double v[4] = {s->sum, s->tokens, report[0], report[1]};
    reduce_loss_pairs(s->t, v);
    s->sum = v[0], s->tokens = v[1];
    report[0] = (float)v[2], report[1] = (float)v[3];
    free(s->mb_sum);
    s->mb_sum = s->mb_tokens = NULL;
}

static void ctx_for(step_ctx_t *s, const mc_microbatch_t *mbs, int M)
{
    s->mbs = mbs;
    const size_t n = (size_t)(M > 0 ? M : 1);
    s->pending = malloc(n * sizeof(int));
    s->mb_sum = calloc(2 * n, sizeof(double)); /* a stage without the loss reports zeros */
    if (!s->pending || !s->mb_sum) mc_fatal("out of host memory");
    s->mb_tokens = s->mb_sum + n;
}

/* Section 5.3: the objective per microbatch is sum / max(tokens, 1) / M, or the plain sum with
 * --calculate-per-token-loss (scaled by the global token count after the step). */
static float objective_weight(const mc_args_t *a, double tokens, int M)
{
    return a->calculate_per_token_loss ? 1.0f : (float)(1.0 / (fmax(tokens, 1.0) * M));
}

static float on_loss(void *ctx, int mb, double sum, double cnt)
{
    step_ctx_t *s = ctx;
    add_loss(s, mb, sum, cnt);
    return objective_weight(s->t->args, cnt, s->M);
}

/* The step's microbatches with their loss weights, known before the forward (the token counts
 * are the host's): the forward forms the loss gradient with the loss. Free with free(). */
static mc_microbatch_t *weighted_microbatches(const mc_args_t *a, const mc_microbatch_t *mbs, int M)
{
    mc_microbatch_t *w = malloc((size_t)(M > 0 ? M : 1) * sizeof(*w));
    if (!w) mc_fatal("out of host memory");
    for (int i = 0; i < M; i++) {
        w[i] = mbs[i];
        w[i].loss_weight = objective_weight(a, mc_gpt_mb_tokens(&mbs[i]), M);
    }
    return w;
}

/* Megatron enables grad sync for each model chunk's last microbatch only: its buckets may
 * start during that backward. */
static void before_backward(void *ctx, int mb, int chunk)
{
    step_ctx_t *s = ctx;
    if (mb != s->M - 1) return;
    int first, n;
    mc_gpt_chunk_params(&s->t->model, chunk, &first, &n);
    mc_ddp_arm_grad_sync_params(&s->t->ddp, first, n);
}

/* Megatron's loss_func checks, per microbatch of this rank in order, through the rerun state
 * machine: the float32 masked loss sum, NaN and Inf (fatal, tolerance 0: the forward is
 * deterministic), then the spiky loss (not fatal). In disabled mode the NaN and Inf checks are
 * the step's own (one line for the job, stop_non_finite). */
static void validate_losses(const step_ctx_t *s)
{
    const mc_args_t *a = s->t->args;
    if (!s->have_loss) return;
    for (int i = 0; i < s->M; i++) {
        const double loss = (float)s->mb_sum[i];
        if (a->check_for_nan_in_loss_and_grad && s->rerun->mode != MC_RERUN_DISABLED) {
            mc_rerun_validate(s->rerun, loss, mc_rerun_is_nan, MC_RERUN_MSG_NAN, 0.0, true);
            mc_rerun_validate(s->rerun, loss, mc_rerun_is_inf, MC_RERUN_MSG_INF, 0.0, true);
        }
        if (a->check_for_spiky_loss)
            mc_rerun_validate(s->rerun, loss, mc_rerun_is_spiky_loss, MC_RERUN_MSG_SPIKY, 0.0,
                              false);
    }
}

static void forward_backward(mc_trainer_t *t, mc_rerun_t *rerun, const mc_microbatch_t *mbs, int M,
                             mc_step_result_t *r)
{
    const mc_args_t *a = t->args;
    mc_gpt_t *m = &t->model;
    /* it: the dropout key, the same for a re-run */
    step_ctx_t ctx = {.t = t, .rerun = rerun, .M = M, .it = (uint32_t)(t->iteration + 1)};

    memset(r, 0, sizeof(*r));
    mc_timer_start(&t->timers, MC_T_FORWARD_BACKWARD);
    m->be->memset0(m->be, m->grad_buf, (size_t)m->n_elems * mc_dtype_size(m->cfg.gdt));
    m->loss_scale = (float)mc_scaler_value(&t->scaler);
    /* MoEAuxLossAutoScaler.set_loss_scale(loss_scale / num_microbatches), or loss_scale with
     * --calculate-per-token-loss (schedules.py) */
    m->moe_aux_grad = a->calculate_per_token_loss ? m->loss_scale : m->loss_scale / (float)M;
    mc_ddp_begin_grad_sync(&t->ddp);
    mc_microbatch_t *wmbs = weighted_microbatches(a, mbs, M);
    ctx_for(&ctx, wmbs, M);
    mc_pipeline_step_t st = {.mbs = wmbs,
                             .M = M,
                             .iteration = ctx.it,
                             .ctx = &ctx,
                             .on_loss = on_loss,
                             .before_backward = before_backward};
    mc_pipeline_run(&t->pipe, &st);
    mc_timer_stop(&t->timers, MC_T_FORWARD_BACKWARD);
    mc_gpt_moe_update_expert_bias(m); /* finalize_model_grads' _update_router_expert_bias */
    mc_gpt_moe_step_end(m);           /* and its reset_model_temporary_tensors */

    /* finalize_model_grads */
    mc_timer_start(&t->timers, MC_T_ALL_GRADS_SYNC);
    mc_ddp_finish_grad_sync(&t->ddp);
    mc_timer_stop(&t->timers, MC_T_ALL_GRADS_SYNC);
    mc_timer_start(&t->timers, MC_T_LAYERNORM_GRADS_ALL_REDUCE);
    mc_gpt_reduce_sequence_parallel_grads(m);
    mc_timer_stop(&t->timers, MC_T_LAYERNORM_GRADS_ALL_REDUCE);
    mc_timer_start(&t->timers, MC_T_EMBEDDING_GRADS_ALL_REDUCE);
    mc_trainer_embedding_all_reduce(t, m->grad_buf, m->cfg.gdt);
    mc_timer_stop(&t->timers, MC_T_EMBEDDING_GRADS_ALL_REDUCE);
    /* the token-weighted loss over the global batch */
    settle_losses(&ctx);
    free(wmbs);
    if (ctx.rerun) validate_losses(&ctx);
    float report[2];
    reduce_losses(&ctx, report);
    r->lm_loss = mc_log_loss_ratio(report);
    /* the rerun state machine's disabled mode: Megatron's RuntimeError, as one line */
    if ((!rerun || rerun->mode == MC_RERUN_DISABLED) && a->check_for_nan_in_loss_and_grad &&
        non_finite(ctx.sum))
        stop_non_finite(t, ctx.bad_loss, ctx.sum, "local forward loss calculation");
    r->loss_sum = ctx.sum;
    r->num_tokens = ctx.tokens;
    if (a->calculate_per_token_loss && r->num_tokens > 0)
        mc_opt_scale_model_grads(&t->opt, (float)(1.0 / r->num_tokens));
}

void mc_forward_backward(mc_trainer_t *t, const mc_microbatch_t *mbs, int M, mc_step_result_t *r)
{
    forward_backward(t, NULL, mbs, M, r);
}

static float on_eval_loss(void *ctx, int mb, double sum, double cnt)
{
    add_loss(ctx, mb, sum, cnt);
    return 0.0f;
}

void mc_forward_only(mc_trainer_t *t, const mc_microbatch_t *mbs, int M, float report[2])
{
    step_ctx_t ctx = {.t = t, .M = M};
    ctx_for(&ctx, mbs, M);
    mc_pipeline_step_t st = {.mbs = mbs,
                             .M = M,
                             .iteration = 0,
                             .forward_only = true,
                             .ctx = &ctx,
                             .on_loss = on_eval_loss};
    mc_pipeline_run(&t->pipe, &st);
    settle_losses(&ctx);
    reduce_losses(&ctx, report);
}

/* Megatron's grad_stats_parallel_group: the model-parallel group, or with the distributed
 * optimizer, where each rank holds only its shard (section 7), every rank; with several
 * distributed optimizer instances the ranks of this rank's instance, which hold one copy of the
 * gradients between them. */
static mc_group_t *grad_stats_group(const mc_trainer_t *t)
{
    if (!t->ddp.dist_opt) return t->par.mp;
    return t->par.intra_dist_opt ? t->par.intra_dist_opt : t->comm->world;
}

static double reduce_grad_stat(mc_trainer_t *t, double local)
{
    mc_group_t *g = grad_stats_group(t);
    mc_all_reduce(t->comm, g, &local, 1, MC_DT_F64, MC_OP_SUM);
    return local;
}

/* The square of the grad norm, and (*local) this rank's part of it. With expert parallelism,
 * Megatron's chained optimizers: the dense parameters' sum over the model-parallel group plus
 * the experts' over the expert model-parallel group (tp-ep-pp), each parameter counted once
 * (with the distributed optimizer both over the world). */
static double grad_sumsq(mc_trainer_t *t, double *local)
{
    /* the distributed optimizer's shards (dense over dp, experts over edp) are disjoint over the
     * world, which its reduction spans */
    if (!mc_moe_folded(&t->model.cfg) || t->ddp.dist_opt) {
        *local = mc_opt_grad_sumsq(&t->opt);
        return reduce_grad_stat(t, *local);
    }
    double dense = mc_opt_grad_sumsq_of(&t->opt, false),
           experts = mc_opt_grad_sumsq_of(&t->opt, true);
    *local = dense + experts;
    mc_all_reduce(t->comm, t->par.mp, &dense, 1, MC_DT_F64, MC_OP_SUM);
    mc_all_reduce(t->comm, t->par.tp_ep_pp, &experts, 1, MC_DT_F64, MC_OP_SUM);
    return dense + experts;
}

/* Zeros in this step's gradients over the whole model (--log-num-zeros-in-grad). */
static double grad_zeros(mc_trainer_t *t)
{
    return reduce_grad_stat(t, mc_opt_grad_zeros(&t->opt));
}

/* The loss scaler's part of Megatron's MixedPrecisionOptimizer.step: unscale the main grads and
 * look for inf/nan on every rank (found_inf reduced over the grad-stats group), then update the
 * scale. Returns whether the step must be skipped. */
static bool unscale_and_check(mc_trainer_t *t)
{
    if (!t->scaler.enabled) return false;
    int64_t found = mc_opt_unscale_and_check(&t->opt, (float)(1.0 / t->scaler.scale));
    mc_all_reduce(t->comm, grad_stats_group(t), &found, 1, MC_DT_I64, MC_OP_MAX);
    mc_scaler_update(&t->scaler, found != 0);
    return found != 0;
}

/* MC_TEST_GRAD_POISON="ITERATION:nan|inf[:RANK]": tests turn the gradients of every rank (or of
 * RANK) into NaN, or the non-zero ones into Inf, at that iteration, after their reduction, to
 * reach the gradient-norm check (real inputs make the loss non-finite first). With RANK, only
 * for layouts without data parallelism, whose ranks would otherwise disagree on the norm. */
static void poison_grads(mc_trainer_t *t)
{
    const char *env = mc_env_text(MC_ENV_TEST_GRAD_POISON);
    long long it;
    char kind[4];
    int rank = -1;
    if (!env || sscanf(env, "%lld:%3[a-z]:%d", &it, kind, &rank) < 2 || it != t->iteration + 1 ||
        (rank >= 0 && rank != t->par.rank))
        return;
    if (strcmp(kind, "inf") == 0) {
        mc_opt_scale_grads(&t->opt, FLT_MAX); /* twice: every non-zero float overflows */
        mc_opt_scale_grads(&t->opt, FLT_MAX);
    } else {
        mc_opt_scale_grads(&t->opt, NAN);
    }
}

/* --profile: a named range on the backend's profiler timeline (NVTX on CUDA; none on the CPU) */
static void range_push(const mc_trainer_t *t, const char *name)
{
    if (t->args->profile && t->be->range_push) t->be->range_push(t->be, name);
}

static void range_pop(const mc_trainer_t *t)
{
    if (t->args->profile && t->be->range_pop) t->be->range_pop(t->be);
}

/* ChainedOptimizer._step: model_chunks[0].start_param_sync(force_dispatch=True) */
static void gather_first_chunk(void *ctx, int first, int n)
{
    mc_ddp_start_param_gather_of(ctx, first, n);
}

/* Megatron's optimizer.step() and the scheduler's: unscale and overflow check, clip, Adam, the
 * parameter gather. */
static void optimizer_step(mc_trainer_t *t, int M, mc_step_result_t *r)
{
    const mc_args_t *a = t->args;
    mc_timer_start(&t->timers, MC_T_OPTIMIZER);
    mc_opt_prepare_grads(&t->opt);
    poison_grads(t);
    r->skipped = unscale_and_check(t);
    if (r->skipped) { /* no norm, no update, no parameter gather, no scheduler step */
        r->grad_norm = NAN;
        r->lr = mc_lr_at(&t->sched, t->sched.num_steps);
        mc_timer_stop(&t->timers, MC_T_OPTIMIZER);
        return;
    }
    mc_timer_start(&t->timers, MC_T_OPT_CLIP);
    double local;
    r->grad_norm = sqrt(grad_sumsq(t, &local));
    if (a->check_for_nan_in_loss_and_grad && non_finite(r->grad_norm))
        stop_non_finite(t, non_finite(local), r->grad_norm, "the gradient norm");
    mc_clip_grads(&t->opt, r->grad_norm, a->clip_grad);
    mc_timer_stop(&t->timers, MC_T_OPT_CLIP);
    if (a->log_num_zeros_in_grad) {
        mc_timer_start(&t->timers, MC_T_OPT_COUNT_ZEROS);
        r->num_zeros = grad_zeros(t);
        mc_timer_stop(&t->timers, MC_T_OPT_COUNT_ZEROS);
    }

    r->lr = mc_lr_at(&t->sched, t->sched.num_steps);
    mc_timer_start(&t->timers, MC_T_OPT_INNER_STEP);
    const double dlr = mc_decoupled_lr_at(&t->sched, t->sched.num_steps),
                 wd = mc_wd_at(&t->sched, t->sched.num_steps);
    t->opt.mup_lr = mc_mup_lr_at(&t->sched, t->sched.num_steps); /* MuP's hidden group */
    if (t->cfg.ddp.overlap_param_gather_with_optimizer_step) {
        /* the first model chunk's parameters, then their gather, then the rest */
        int first, n;
        mc_gpt_chunk_params(&t->model, 0, &first, &n);
        mc_adam_step_first(&t->opt, r->lr, dlr, wd, first, n, gather_first_chunk, &t->ddp);
    } else {
        mc_adam_step(&t->opt, r->lr, dlr, wd);
    }
    mc_timer_stop(&t->timers, MC_T_OPT_INNER_STEP);
    mc_timer_start(&t->timers, MC_T_PARAMS_ALL_GATHER);
    mc_ddp_start_param_gather(&t->ddp);
    mc_timer_stop(&t->timers, MC_T_PARAMS_ALL_GATHER);
    mc_timer_stop(&t->timers, MC_T_OPTIMIZER);
    mc_lr_sched_step(&t->sched, (int64_t)a->micro_batch_size * a->data_parallel_size * M);
}

void mc_train_step(mc_trainer_t *t, const mc_microbatch_t *mbs, int M, mc_step_result_t *r)
{
    bool checkpoint;
    mc_train_step_rerun(t, NULL, mbs, M, r, &checkpoint);
}

/* the rerun state machine's _reduce_any and stats gathering: over the world */
static void rerun_reduce(void *ctx, double *v, int n, bool max)
{
    mc_trainer_t *t = ctx;
    mc_all_reduce(t->comm, t->comm->world, v, n, MC_DT_F64, max ? MC_OP_MAX : MC_OP_SUM);
}

void mc_rerun_start(mc_rerun_t *rerun, mc_trainer_t *t)
{
    mc_rerun_init(rerun, t->args, t->comm->rank, t->be->gpu >= 0 ? t->be->gpu : 0, t->be->gpu >= 0,
                  stderr);
    rerun->reduce = rerun_reduce;
    rerun->reduce_ctx = t;
}

int mc_train_step_rerun(mc_trainer_t *t, mc_rerun_t *rerun, const mc_microbatch_t *mbs, int M,
                        mc_step_result_t *r, bool *checkpoint)
{
    *checkpoint = false;
    range_push(t, "forward-backward");
    if (!rerun) {
        forward_backward(t, NULL, mbs, M, r);
    } else { /* train_step's while loop: the same microbatches again when asked */
        while (mc_rerun_should_run(rerun)) forward_backward(t, rerun, mbs, M, r);
    }
    range_pop(t);
    const int exit_code = rerun ? mc_rerun_checkpoint_and_exit(rerun, checkpoint) : 0;
    if (exit_code) return exit_code; /* no optimizer step */
    range_push(t, "optimizer");
    optimizer_step(t, M, r);
    range_pop(t);
    return 0;
}
