/* Megatron's TensorBoard scalars over base/tfevents.c. */
#include "train/tensorboard.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/tfevents.h"

struct mc_tensorboard {
    mc_tfevents_t w;
};

mc_tensorboard_t *mc_tensorboard_open(const mc_args_t *a, bool last_rank)
{
    if (!a->tensorboard_dir[0] || !last_rank) return NULL;
    printf("> setting tensorboard ...\n");
    fflush(stdout);
    mc_tensorboard_t *tb = calloc(1, sizeof(*tb));
    if (!tb) mc_fatal("out of host memory");
    char err[4608];
    if (mc_tfevents_open(&tb->w, a->tensorboard_dir, a->tensorboard_queue_size, err, sizeof(err)) !=
        0)
        mc_user_error("--tensorboard-dir: %s", err);
    return tb;
}

/* A write that fails (a full disk) ends the run, as an exception in Megatron's writer would. */
static void check(int rc, const char *err)
{
    if (rc != 0) mc_fatal("TensorBoard event file: %s", err);
}

void mc_tensorboard_flush(mc_tensorboard_t *tb)
{
    if (!tb) return;
    char err[4608];
    check(mc_tfevents_flush(&tb->w, err, sizeof(err)), err);
}

void mc_tensorboard_close(mc_tensorboard_t *tb)
{
    if (!tb) return;
    char err[4608];
    check(mc_tfevents_close(&tb->w, err, sizeof(err)), err);
    free(tb);
}

typedef struct {
    mc_tensorboard_t *tb;
    int64_t step;
} args_ctx_t;

static void arg_text(void *ctx, const char *name, const char *value)
{
    const args_ctx_t *c = ctx;
    char err[4608];
    check(mc_tfevents_text(&c->tb->w, name, value, c->step, err, sizeof(err)), err);
}

void mc_tensorboard_args(mc_tensorboard_t *tb, const mc_args_t *a, int64_t iteration)
{
    if (!tb) return;
    args_ctx_t c = {tb, iteration};
    mc_args_each(a, arg_text, &c);
    mc_tensorboard_flush(tb);
}

bool mc_tensorboard_due(const mc_args_t *a, int64_t iteration)
{
    return a->tensorboard_dir[0] && a->tensorboard_log_interval > 0 &&
           iteration % a->tensorboard_log_interval == 0;
}

static void scalar(mc_tensorboard_t *tb, const char *tag, double value, int64_t step)
{
    char err[4608];
    check(mc_tfevents_scalar(&tb->w, tag, value, step, err, sizeof(err)), err);
}

/* writer.add_scalar(tag, v, iteration) and add_scalar(tag + ' vs samples', v, consumed) */
static void scalar_vs(mc_tensorboard_t *tb, const char *tag, double value,
                      const mc_tb_iteration_t *v)
{
    char vs[128];
    snprintf(vs, sizeof(vs), "%s vs samples", tag);
    scalar(tb, tag, value, v->iteration);
    scalar(tb, vs, value, v->consumed_samples);
}

/* In training_log's order. */
void mc_tensorboard_iteration(mc_tensorboard_t *tb, const mc_args_t *a, const mc_tb_iteration_t *v)
{
    if (!tb || !mc_tensorboard_due(a, v->iteration)) return;
    scalar_vs(tb, "learning-rate", v->lr, v);
    if (v->has_decoupled_lr) /* against the iteration only, as Megatron */
        scalar(tb, "decoupled-learning-rate", v->decoupled_lr, v->iteration);
    /* 'skipped-train-samples' is written only when args.skipped_train_samples > 0, which takes
     * --iterations-to-skip (not implemented): always 0 here */
    scalar_vs(tb, "batch-size", v->batch_size, v);
    scalar_vs(tb, "lm loss", v->loss, v);
    if (a->log_loss_scale_to_tensorboard) scalar_vs(tb, "loss-scale", v->loss_scale, v);
    if (a->log_world_size_to_tensorboard) scalar_vs(tb, "world-size", v->world_size, v);
    if (v->has_grad_norm) scalar_vs(tb, "grad-norm", v->grad_norm, v);
    if (v->has_num_zeros) scalar_vs(tb, "num-zeros", v->num_zeros, v);
    if (v->has_params_norm) scalar_vs(tb, "params-norm", v->params_norm, v);
    if (v->has_memory) {
        scalar(tb, "mem-reserved-bytes", v->mem_reserved, v->iteration);
        scalar(tb, "mem-allocated-bytes", v->mem_allocated, v->iteration);
        scalar(tb, "mem-max-allocated-bytes", v->mem_max_allocated, v->iteration);
        scalar(tb, "mem-allocated-count", v->mem_count, v->iteration);
    }
}

void mc_tensorboard_timers(mc_tensorboard_t *tb, const mc_args_t *a, int64_t iteration,
                           double iteration_time_s, bool has_throughput, double throughput,
                           const double timer_max_s[MC_TIMERS])
{
    if (!tb || !a->log_timers_to_tensorboard) return;
    scalar(tb, "iteration-time", iteration_time_s, iteration);
    if (has_throughput) scalar(tb, "throughput", throughput, iteration);
    for (int id = 0; id < MC_TIMERS; id++) {
        if (!(timer_max_s[id] > 0)) continue; /* _get_global_min_max_time drops unused timers */
        char tag[96];
        snprintf(tag, sizeof(tag), "%s-time", mc_timer_name((mc_timer_id_t)id));
        scalar(tb, tag, timer_max_s[id], iteration);
    }
}

void mc_tensorboard_moe(mc_tensorboard_t *tb, int64_t iteration, int n, const char *const *names,
                        const float *values, const float *layers, int num_layers)
{
    if (!tb) return;
    for (int k = 0; k < n; k++) {
        scalar(tb, names[k], values[k], iteration);
        for (int i = 0; layers && i < num_layers; i++) {
            char tag[160];
            snprintf(tag, sizeof(tag), "moe/%s_layer_%d", names[k], i);
            scalar(tb, tag, layers[(long)k * num_layers + i], iteration);
        }
    }
}

void mc_tensorboard_validation(mc_tensorboard_t *tb, const mc_args_t *a, int64_t iteration,
                               int64_t consumed_samples, const char *key, double loss)
{
    if (!tb) return;
    char tag[160];
    snprintf(tag, sizeof(tag), "%s validation", key);
    scalar(tb, tag, loss, iteration);
    snprintf(tag, sizeof(tag), "%s validation vs samples", key);
    scalar(tb, tag, loss, consumed_samples);
    if (a->log_validation_ppl_to_tensorboard) {
        const double ppl = exp(fmin(20.0, loss));
        snprintf(tag, sizeof(tag), "%s validation ppl", key);
        scalar(tb, tag, ppl, iteration);
        snprintf(tag, sizeof(tag), "%s validation ppl vs samples", key);
        scalar(tb, tag, ppl, consumed_samples);
    }
    mc_tensorboard_flush(tb);
}
