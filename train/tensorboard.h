/* Megatron's TensorBoard scalars (--tensorboard-dir): the tags and x-axes of training.py's
 * training_log and evaluate_and_print_results (core_v0.15.0) and timers.write, written through
 * base/tfevents.h by the rank Megatron writes from, the last one (global_vars.py
 * _set_tensorboard_writer: args.rank == args.world_size - 1).
 *
 * The values the writer needs that take collectives (the params norm, the timers' maxima) are
 * computed by every rank at the iterations mc_tensorboard_due names, as Megatron's ranks all
 * compute them; only the writing rank holds a writer. */
#ifndef MC_TRAIN_TENSORBOARD_H
#define MC_TRAIN_TENSORBOARD_H

#include <stdbool.h>
#include <stdint.h>

#include "config/args.h"
#include "comm/timers.h"

typedef struct mc_tensorboard mc_tensorboard_t;

/* The writer of the last rank with --tensorboard-dir (prints "> setting tensorboard ..."), NULL
 * elsewhere. A directory that cannot be created is a user error. */
mc_tensorboard_t *mc_tensorboard_open(const mc_args_t *a, bool last_rank);
/* Megatron's write_args_to_tensorboard: add_text(name, value, global_step=args.iteration) for
 * each argument of the start-up block (config/report.c's names and values). */
void mc_tensorboard_args(mc_tensorboard_t *tb, const mc_args_t *a, int64_t iteration);
/* Flushes and closes; NULL is allowed. */
void mc_tensorboard_close(mc_tensorboard_t *tb);
/* Writes what is queued (each log interval and evaluation, so a killed run leaves its scalars
 * up to there). */
void mc_tensorboard_flush(mc_tensorboard_t *tb);

/* Whether training_log writes its per-iteration scalars at this iteration: --tensorboard-dir
 * given and iteration % --tensorboard-log-interval == 0. The same on every rank. */
bool mc_tensorboard_due(const mc_args_t *a, int64_t iteration);

/* One iteration's values, each written against iteration and, for "<tag> vs samples", against
 * consumed_samples (consumed_train_samples after the step). */
typedef struct {
    int64_t iteration, consumed_samples;
    double lr;
    bool has_decoupled_lr; /* --decoupled-lr */
    double decoupled_lr;
    int batch_size;    /* micro batch x data parallel x microbatches */
    double loss;       /* this iteration's lm loss (loss_dict), also on a skipped step */
    double loss_scale; /* 1.0 without a scaler */
    int world_size;
    bool has_grad_norm; /* None on a skipped step */
    double grad_norm;
    bool has_num_zeros; /* --log-num-zeros-in-grad, not on a skipped step */
    double num_zeros;
    bool has_params_norm; /* --log-params-norm */
    double params_norm;
    bool has_memory; /* --log-memory-to-tensorboard */
    double mem_reserved, mem_allocated, mem_max_allocated, mem_count;
} mc_tb_iteration_t;

/* training_log's scalars when mc_tensorboard_due (no-op with tb NULL). */
void mc_tensorboard_iteration(mc_tensorboard_t *tb, const mc_args_t *a, const mc_tb_iteration_t *v);

/* At a log line with --log-timers-to-tensorboard: "iteration-time" (seconds per iteration),
 * "throughput" (TFLOP/s/GPU, with --log-throughput) and "<timer>-time" for each timer some rank
 * used (timer_max_s from mc_timers_max, normalised by --log-interval). */
void mc_tensorboard_timers(mc_tensorboard_t *tb, const mc_args_t *a, int64_t iteration,
                           double iteration_time_s, bool has_throughput, double throughput,
                           const double timer_max_s[MC_TIMERS]);

/* track_moe_metrics' scalars, every training iteration (no-op with tb NULL): for each of the n
 * tracked losses add_scalar(name, value, iteration), and with per_layer (--moe-per-layer-logging)
 * "moe/<name>_layer_<i>" for each of the num_layers layers' values (layers [n][num_layers]). */
void mc_tensorboard_moe(mc_tensorboard_t *tb, int64_t iteration, int n, const char *const *names,
                        const float *values, const float *layers, int num_layers);

/* evaluate_and_print_results: "<key> validation" and "<key> validation vs samples", with
 * --log-validation-ppl-to-tensorboard also "<key> validation ppl" (exp(min(20, loss))) and its
 * "vs samples"; consumed_samples is consumed_train_samples. */
void mc_tensorboard_validation(mc_tensorboard_t *tb, const mc_args_t *a, int64_t iteration,
                               int64_t consumed_samples, const char *key, double loss);

#endif
