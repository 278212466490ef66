/* pretrain(): start-up report, the training loop, periodic and final evaluation, exits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "config/context_parallel.h"
#include "config/microbatches.h"
#include "data/sampler.h"
#include "data/source.h"
#include "kernels/device.h"
#include "kernels/memstats.h"
#include "ckpt/checkpoint.h"
#include "model/flops.h"
#include "train/log.h"
#include "train/progress.h"
#include "train/setup.h"
#include "train/realtime_test.h"
#include "train/rerun.h"
#include "train/weight_hash.h"
#include "train/signals.h"
#include "train/moe_metrics.h"
#include "train/tensorboard.h"
#include "train/train.h"

/* Megatron prints start-up lines and datetimes from rank 0 (print_rank_0) and the training log
 * from the last rank (print_rank_last). megatron-c prints both from the last rank: with a single
 * writer, launchers that merge the ranks' stdout (mpirun, srun) can never interleave or split
 * lines, so the log stays parseable. */
static bool g_printer = true;

/* This rank's run: its training state and what the loop keeps around it. */
typedef struct {
    mc_trainer_t t;
    mc_data_source_t data; /* this rank's samples (data/source.h) */
    /* host staging: the microbatches of one training or evaluation step ([max_batch, s] each),
     * the backend's alloc_host memory (copied without waiting), their per-token losses as the
     * forward leaves them, and the sample indices of one */
    int32_t *tokens, *labels, *positions, *segments;
    float *loss_mask, *losses;
    int64_t *sample_idx;
    /* the global batch of this iteration (--rampup-batch-size), updated at its start */
    mc_microbatches_t microbatches;
    struct mc_tensorboard *tb; /* the last rank's --tensorboard-dir writer, or NULL */
    mc_ckpt_async_t *async;    /* --async-save's writer (ckpt/async.h), or NULL */
    /* --log-progress: when the process started (epoch seconds, Megatron's _TRAIN_START_TIME)
     * and the floating-point operations of the loaded checkpoint */
    double job_start_wall, flops_at_start;
    mc_rerun_t rerun; /* Megatron's rerun state machine (--rerun-mode) */
    int exit_code;    /* the machine's, when it ended the run (16, 17) */
} run_t;

static void print_datetime(const char *what)
{
    if (!g_printer) return;
    time_t t = time(NULL);
    char buf[64];
    strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", localtime(&t));
    printf("[%s] datetime: %s \n", what, buf);
    fflush(stdout);
}

/* Fills host staging slot `slot` with samples first .. first+b-1 of a split (Megatron's
 * contiguous per-rank block, section 2.9) as the dataset yields them. */
static void load_microbatch(run_t *run, int slot, int split, int64_t first, int b,
                            mc_microbatch_t *mb)
{
    mc_trainer_t *t = &run->t;
    const int s = t->args->seq_length;
    const size_t base = (size_t)slot * t->model.cfg.max_batch * s;
    char err[512];
    mc_timer_start(&t->timers, MC_T_BATCH_GENERATOR);
    int64_t len = mc_data_source_len(&run->data, split);
    for (int r = 0; r < b; r++) run->sample_idx[r] = first + r;
    /* Megatron main sizes the train split for train_iters x its args.global_batch_size (mbs x
     * dp with a schedule) samples; a schedule's larger batches can run past them, where
     * Megatron's sampler stops (StopIteration) */
    if (first + b > len && split == MC_SPLIT_TRAIN && t->args->n_batch_schedule &&
        !t->args->train_samples)
        mc_user_error("the train dataset has %lld samples but --step-batch-size-schedule needs "
                      "sample %lld: with --train-iters the dataset is built for --train-iters x "
                      "micro batch x dp samples, as Megatron main builds it (give --train-samples)",
                      (long long)len, (long long)(first + b - 1));
    if (first + b > len)
        mc_fatal("the %s dataset has %lld samples but sample %lld was asked for (the dataset is "
                 "built for the requested iterations; this is a bug)",
                 split == MC_SPLIT_TRAIN   ? "train"
                 : split == MC_SPLIT_VALID ? "validation"
                                           : "test",
                 (long long)len, (long long)(first + b - 1));
    int32_t *segments = t->args->reset_attention_mask ? run->segments + base : NULL;
    int rc = mc_data_source_batch(&run->data, split, run->sample_idx, b, run->tokens + base,
                                  run->labels + base, run->loss_mask + base, run->positions + base,
                                  segments, err, sizeof(err));
    if (rc == MC_DATA_BAD_TOKENS) mc_user_error("%s", err); /* the data's fault: this rank's */
    if (rc != 0) mc_fatal("%s", err);
    const int cp = t->args->context_parallel_size;
    mc_cp_batch_on_this_rank(run->tokens + base, run->labels + base, run->loss_mask + base,
                             run->positions + base, b, s, cp, t->par.me.cp);
    mc_microbatch_t out = {.b = b,
                           .s = cp > 1 ? s / cp : s,
                           .tokens = run->tokens + base,
                           .labels = run->labels + base,
                           .positions = run->positions + base,
                           .loss_mask = run->loss_mask + base,
                           .segments = segments,
                           .sample0 = (uint64_t)first,
                           .pinned = true,
                           .losses_out = run->losses + base};
    *mb = out;
    mc_timer_stop(&t->timers, MC_T_BATCH_GENERATOR);
}

/* Token-weighted validation loss over eval_iters iterations of the split, consuming
 * eval_global_batch_size samples per iteration from *consumed: Megatron's evaluate() adds each
 * iteration's reduced [sum, tokens] to a float32 pair and divides in float32 (0/0 is NaN). */
static float evaluate(run_t *run, int split, int64_t *consumed)
{
    mc_trainer_t *t = &run->t;
    const mc_args_t *a = t->args;
    const int mbs = a->eval_micro_batch_size;
    const int M = mc_args_eval_microbatches(a);
    float total[2] = {0.0f, 0.0f};
    mc_microbatch_t *mbl = calloc((size_t)(M > 0 ? M : 1), sizeof(*mbl));
    if (!mbl) mc_fatal("out of host memory");
    mc_ddp_finish_param_gather(&t->ddp);
    if (a->eval_iters > 0) mc_realtime_tests(t);
    for (int it = 0; it < a->eval_iters; it++) {
        for (int i = 0; i < M; i++)
            load_microbatch(
                run, i, split,
                mc_sampler_index(*consumed, mbs, a->data_parallel_size, t->par.me.dp, i, 0), mbs,
                &mbl[i]);
        float pair[2];
        mc_forward_only(t, mbl, M, pair); /* over the global batch already */
        total[0] += pair[0];
        total[1] += pair[1];
        *consumed += (int64_t)mbs * a->data_parallel_size * M;
    }
    free(mbl);
    return mc_log_loss_ratio(total);
}

/* Megatron's print_rank_last: the last rank prints the training log and evaluations. */
static bool is_last_rank(const mc_trainer_t *t) { return t->par.rank == t->par.last_rank; }

/* evaluate_and_print_results: the block, and the validation scalars unless write_tb is false
 * (the end-of-run evaluations with --skip-train) */
static void print_eval(const run_t *run, const char *label, float loss, bool write_tb)
{
    const mc_trainer_t *t = &run->t;
    if (!is_last_rank(t)) return;
    if (write_tb)
        mc_tensorboard_validation(run->tb, t->args, t->iteration, t->consumed_train_samples,
                                  "lm loss", loss);
    char buf[1024];
    const char *names[] = {"lm loss"};
    mc_format_eval_block(buf, sizeof(buf), label, names, &loss, 1);
    fputs(buf, stdout);
    fflush(stdout);
}

/* Megatron's num_microbatches_calculator logs with logger.info; training.py's
 * logging.basicConfig prints its records to stdout in Python's default format. */
#define MC_CALC_LOG "INFO:megatron.core.num_microbatches_calculator:"

/* update_num_microbatches(consumed_train_samples, consistency_check=True, verbose=True): the
 * batch of the coming iteration (or, after --load, of the checkpoint's next one). */
static void update_microbatches(run_t *run)
{
    mc_microbatches_t *c = &run->microbatches;
    const int old = c->current_global_batch_size;
    /* the step schedule's update logs nothing (its verbose argument is unused) */
    if (mc_microbatches_update(c, run->t.consumed_train_samples) && g_printer && c->start) {
        printf(MC_CALC_LOG "ramping up batch size from %d to %d\n", old,
               c->current_global_batch_size);
        fflush(stdout);
    }
    char err[512];
    if (mc_microbatches_check(c, run->t.args, err, sizeof(err)) != 0) mc_user_error("%s", err);
}

/* Python's f"{n:,}" of a non-negative n. */
static void thousands(char *out, size_t n, int64_t v)
{
    char digits[24];
    const int len = snprintf(digits, sizeof(digits), "%lld", (long long)v);
    size_t o = 0;
    for (int i = 0; i < len && o + 2 < n; i++) {
        if (i > 0 && (len - i) % 3 == 0) out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = 0;
}

/* set_global_variables' print and StepBatchsizeNumMicroBatchesCalculator's constructor logs. */
static void print_step_schedule(const mc_args_t *a)
{
    if (!a->n_batch_schedule) return;
    const int per = a->micro_batch_size * a->data_parallel_size;
    printf("> using step batch size schedule: %s\n", a->step_batch_size_schedule);
    printf(MC_CALC_LOG "> initializing step batch size schedule\n");
    printf(MC_CALC_LOG "  raw schedule string: \"%s\"\n", a->step_batch_size_schedule);
    printf(MC_CALC_LOG "  seq_length: %d (thresholds interpreted as %s)\n", a->seq_length,
           a->seq_length ? "tokens" : "samples");
    printf(MC_CALC_LOG "  micro_batch_size: %d\n", a->micro_batch_size);
    printf(MC_CALC_LOG "  data_parallel_size: %d\n", a->data_parallel_size);
    printf(MC_CALC_LOG "step batch size schedule (%d steps):\n", a->n_batch_schedule);
    for (int i = 0; i < a->n_batch_schedule; i++) {
        char tokens[32], samples[32];
        const int64_t s = a->batch_schedule_samples[i];
        thousands(tokens, sizeof(tokens), s * a->seq_length);
        thousands(samples, sizeof(samples), s);
        if (a->seq_length)
            printf(MC_CALC_LOG
                   "  >= %s tokens (%s samples) -> batch_size=%d, num_microbatches=%d\n",
                   tokens, samples, a->batch_schedule_size[i], a->batch_schedule_size[i] / per);
        else
            printf(MC_CALC_LOG "  >= %s samples -> batch_size=%d, num_microbatches=%d\n", samples,
                   a->batch_schedule_size[i], a->batch_schedule_size[i] / per);
    }
}

static void print_startup(const run_t *run, const mc_memory_plan_t *plan, const char *why)
{
    const mc_trainer_t *t = &run->t;
    const mc_args_t *a = t->args;
    printf("using world size: %d, data-parallel size: %d, context-parallel size: %d, "
           "tensor-model-parallel size: %d, pipeline-model-parallel size: %d\n",
           a->world_size, a->data_parallel_size, a->context_parallel_size,
           a->tensor_model_parallel_size, a->pipeline_model_parallel_size);
    mc_args_print(stdout, a);
    if (a->rampup_start) { /* the calculator's constructor, logged through Python's logging */
        printf(MC_CALC_LOG "will use batch size rampup starting from global batch size %d to "
                           "global batch size %d with batchsize increments %d over %lld samples.\n",
               a->rampup_start, a->global_batch_size, a->rampup_increment,
               (long long)a->rampup_samples);
        printf(MC_CALC_LOG "setting initial batch size to %d\n",
               run->microbatches.current_global_batch_size);
    }
    print_step_schedule(a);
    printf("> device: %s\n", why);
    printf("> attention: %s\n", mc_backend_attention_line(t->be));
    if (t->comm->size > 1)
        printf("> collectives: %s over %d ranks (%s)\n", t->comm->name, t->comm->size,
               mc_setup_comm_note(a, t->be));
    printf("> building %s tokenizer ...\n", a->tokenizer_type);
    int v = (int)run->data.vocab_size;
    printf(" > padded vocab (size: %d) with %d dummy tokens (new size: %d)\n", v,
           a->padded_vocab_size - v, a->padded_vocab_size);
    long n = 0;
    for (int i = 0; i < t->model.n_params; i++) n += t->model.params[i].numel;
    printf(" > number of parameters on (tensor, pipeline) model parallel rank (0, 0): %ld\n", n);
    mc_memory_plan_print(stdout, a, plan, t->be->name);
    if (run->data.is_mock) /* Megatron's MockGPTDataset: 100000 documents split 1,1,1 */
        printf("> mock data: %d documents, split %s\n", MC_MOCK_NUM_DOCS, MC_MOCK_SPLIT);
    printf("> datasets: train %lld, validation %lld, test %lld samples of %d tokens\n",
           (long long)mc_data_source_len(&run->data, MC_SPLIT_TRAIN),
           (long long)mc_data_source_len(&run->data, MC_SPLIT_VALID),
           (long long)mc_data_source_len(&run->data, MC_SPLIT_TEST), a->seq_length);
    fflush(stdout);
}

enum { VOLUME_GROUPS = 10 };

/* Accumulated over one log interval, as Megatron's total_loss_dict. */
typedef struct {
    /* float32 tensors, as Megatron's: the lm loss of the advanced iterations, and the MoE
     * losses by kind (MoE models: the metrics tracker adds them every iteration) */
    float loss_sum, moe_sum[MC_MOE_LOSSES];
    int advanced, skipped, nan;
    /* total_loss_dict holds 'lm loss' from the first advanced iteration of this train() on
     * (kept across intervals): before it, the line has no loss at all */
    bool have_loss;
    /* the first iteration of this train(): Megatron main logs it and resets nothing
     * (should_reset = not is_first_iteration), so the next line covers it again */
    bool first;
    double t0;
    double params_norm; /* of this iteration, with --log-params-norm when it is logged */
    /* collective volume on the groups of volume_group at the interval's start */
    uint64_t calls[VOLUME_GROUPS][MC_COLL_KINDS], bytes[VOLUME_GROUPS][MC_COLL_KINDS];
    double seconds[VOLUME_GROUPS][MC_COLL_KINDS];
} interval_t;

/* The groups whose collectives the timers block counts (NULL where none, name set): tp, dp-cp,
 * cp with its hierarchical levels, with several distributed optimizer instances the groups the
 * gradients are reduced over (within an instance, across instances), and MoE's expert groups
 * (the dispatcher's all-to-alls over ep, its gathers over etp, the experts' reduction over edp). */
static const mc_group_t *volume_group(const mc_trainer_t *t, int k, const char **name)
{
    static const char *const names[VOLUME_GROUPS] = {
        "tp",          "dp-cp",          "cp", "cp-a2a", "cp-p2p",
        "intra-dp-cp", "inter-dist-opt", "ep", "etp",    "edp"};
    const mc_group_t *g[VOLUME_GROUPS] = {
        t->par.tp,          t->par.dp_cp,          t->par.cp, t->par.hcp[0], t->par.hcp[1],
        t->par.intra_dp_cp, t->par.inter_dist_opt, t->par.ep, t->par.etp,    t->par.edp};
    *name = names[k];
    /* an expert group (from ep on) of another group's partition is that group: counted once,
     * there */
    for (int i = 0; k >= 7 && i < k && g[k]; i++)
        if (g[i] == g[k]) return NULL;
    return g[k];
}

static void snapshot_volume(const mc_trainer_t *t, interval_t *iv)
{
    for (int k = 0; k < VOLUME_GROUPS; k++) {
        const char *name;
        const mc_group_t *g = volume_group(t, k, &name);
        if (!g) continue;
        memcpy(iv->calls[k], g->calls, sizeof(iv->calls[k]));
        memcpy(iv->bytes[k], g->bytes, sizeof(iv->bytes[k]));
        memcpy(iv->seconds[k], g->seconds, sizeof(iv->seconds[k]));
    }
}

/* megatron-c's addition to the timers block (--timing-log-level >= 1): this rank's collectives
 * per iteration on the groups of volume_group, as counted by the comm layer, in the timers'
 * style; with `times` (level 2) the blocking ones' milliseconds too (each group's wait for its
 * slowest member included). */
static size_t format_volume(const mc_trainer_t *t, const interval_t *iv, int iters, bool times,
                            char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "communication per iteration on this rank (calls, MB%s):",
                                  times ? ", ms blocking" : "");
    for (int r = 0; r < VOLUME_GROUPS; r++) {
        const char *group;
        const mc_group_t *g = volume_group(t, r, &group);
        for (int k = 0; k < MC_COLL_KINDS && g; k++) {
            uint64_t calls = g->calls[k] - iv->calls[r][k];
            if (!calls || len >= n) continue;
            char label[64], kind[32];
            snprintf(kind, sizeof(kind), " %s", mc_coll_name(k));
            mc_timer_label(label, sizeof(label), group, kind);
            len += (size_t)snprintf(buf + len, n - len, "\n    %s: (%.1f, %.4f", label,
                                    (double)calls / iters,
                                    (double)(g->bytes[k] - iv->bytes[r][k]) / iters / 1e6);
            if (times && len < n)
                len += (size_t)snprintf(buf + len, n - len, ", %.2f",
                                        (g->seconds[k] - iv->seconds[r][k]) / iters * 1e3);
            if (len < n) len += (size_t)snprintf(buf + len, n - len, ")");
        }
    }
    return len;
}

/* Megatron's calc_params_l2_norm, a collective over the model-parallel group (the world with the
 * distributed optimizer): it reads a bf16 model's fp32 main params (this rank's shards with the
 * distributed optimizer), other models' own params. With N distributed optimizer instances
 * Megatron still sums the sharded main params over the whole dp x cp group, which holds N copies
 * of each: a bf16 model's params norm is sqrt(N) times the one-instance norm, here as there. */
static double params_norm(mc_trainer_t *t)
{
    mc_ddp_finish_param_gather(&t->ddp);
    /* each rank's float32 norm_2, summed over the ranks and rounded to float32 (two ranks' sum is
     * exact in double) */
    const bool master = t->opt.master && t->model.cfg.dt == MC_DT_BF16;
    if (mc_moe_folded(&t->model.cfg) && !(master && t->ddp.dist_opt)) {
        /* calc_params_l2_norm with MoE: the dense params' over the model-parallel group plus the
         * experts' over the expert model-parallel group (tp-ep-pp) */
        double d = mc_log_norm_2(master ? mc_opt_master_sumsq_of(&t->opt, false)
                                        : mc_params_sumsq_of(&t->model, false));
        double e = mc_log_norm_2(master ? mc_opt_master_sumsq_of(&t->opt, true)
                                        : mc_params_sumsq_of(&t->model, true));
        mc_all_reduce(t->comm, t->par.mp, &d, 1, MC_DT_F64, MC_OP_SUM);
        mc_all_reduce(t->comm, t->par.tp_ep_pp, &e, 1, MC_DT_F64, MC_OP_SUM);
        return mc_log_params_norm((float)(d + e));
    }
    double sq = mc_log_norm_2(master ? mc_opt_master_sumsq(&t->opt) : mc_params_sumsq(&t->model));
    mc_group_t *g = master && t->ddp.dist_opt ? t->comm->world : t->par.mp;
    mc_all_reduce(t->comm, g, &sq, 1, MC_DT_F64, MC_OP_SUM);
    return mc_log_params_norm((float)sq);
}

static void log_iteration(run_t *run, interval_t *iv, const mc_step_result_t *r)
{
    mc_trainer_t *t = &run->t;
    const mc_args_t *a = t->args;
    /* the batch of this iteration: mbs x dp x get_num_microbatches() */
    const int gbs = run->microbatches.current_global_batch_size;
    int iters = iv->advanced + iv->skipped;
    double elapsed = (mc_now_s() - iv->t0) / (iters > 0 ? iters : 1);
    mc_log_line_t l;
    memset(&l, 0, sizeof(l));
    l.iteration = t->iteration;
    l.train_iters = a->train_iters;
    l.consumed_samples = t->consumed_train_samples;
    l.elapsed_ms_per_iter = elapsed * 1000.0;
    if (a->log_throughput) {
        l.has_throughput = 1;
        /* num_floating_point_operations(args, batch_size): this iteration's batch */
        l.tflops_per_gpu = mc_gpt_flops(&t->model.cfg, gbs) / (elapsed * 1e12 * a->world_size);
    }
    l.has_lr = 1;
    l.lr = (float)mc_lr_at(&t->sched, t->sched.num_steps); /* read after the scheduler step */
    l.has_decoupled_lr = a->decoupled_lr >= 0;
    l.decoupled_lr = mc_decoupled_lr_at(&t->sched, t->sched.num_steps);
    l.global_batch_size = gbs;
    /* avg = total / max(1, advanced): 0 in an interval that skipped every step, which main
     * prints (`if avg >= 0.0`; core_v0.15's `> 0.0` left it out) */
    l.n_losses = iv->have_loss ? 1 : 0;
    l.loss_names[0] = "lm loss";
    l.loss_values[0] = mc_log_average(iv->loss_sum, iv->advanced);
    mc_moe_loss_t kinds[MC_MOE_LOSSES];
    const int n_moe = iv->have_loss ? mc_moe_tracked(&t->model.cfg, kinds) : 0;
    for (int k = 0; k < n_moe; k++) {
        l.loss_names[l.n_losses] = mc_moe_loss_name(kinds[k]);
        l.loss_values[l.n_losses++] = mc_log_average(iv->moe_sum[kinds[k]], iv->advanced);
    }
    l.loss_scale = (float)mc_scaler_value(&t->scaler);
    /* a skipped step has no grad norm (Megatron's optimizer returns None) */
    l.has_grad_norm = !r->skipped;
    l.grad_norm = (float)r->grad_norm;
    /* collectives first, on every rank; only the last rank prints */
    if (a->log_num_zeros_in_grad && !r->skipped) {
        l.has_num_zeros = 1;
        l.num_zeros = (float)r->num_zeros;
    }
    if (a->log_params_norm) {
        l.has_params_norm = 1;
        l.params_norm = iv->params_norm;
    }
    l.skipped_iters = iv->skipped;
    l.nan_iters = iv->nan;
    char buf[1024];
    struct timespec when;
    clock_gettime(CLOCK_REALTIME, &when);
    mc_format_log_line(buf, sizeof(buf), &l, &when);
    if (a->tensorboard_dir[0] && a->log_timers_to_tensorboard) {
        /* timers.write(..., reset=False) before timers.log, a collective on every rank */
        double max_s[MC_TIMERS];
        mc_timers_max(&t->timers, a->log_interval, max_s);
        mc_tensorboard_timers(run->tb, a, t->iteration, elapsed, l.has_throughput, l.tflops_per_gpu,
                              max_s);
    }
    mc_tensorboard_flush(run->tb);
    char timers[1 << 16], volume[2048] = ""; /* --timing-log-option all lists every rank */
    mc_timers_report(&t->timers, a->log_interval, !iv->first, timers, sizeof(timers));
    if (a->timing_log_level >= 1)
        format_volume(t, iv, iters > 0 ? iters : 1, a->timing_log_level >= 2, volume,
                      sizeof(volume));
    char dropped[256];
    const bool drops = mc_moe_dropped_line(t, dropped, sizeof(dropped));
    if (is_last_rank(t)) {
        puts(buf);
        if (drops) puts(dropped);
        if (timers[0]) puts(timers);
        if (volume[0]) puts(volume);
        fflush(stdout);
    }
    if (iv->first) {
        iv->first = false;
        return;
    }
    iv->loss_sum = 0.0f;
    for (int k = 0; k < MC_MOE_LOSSES; k++) iv->moe_sum[k] = 0.0f;
    iv->advanced = iv->skipped = iv->nan = 0;
    iv->t0 = mc_now_s();
    snapshot_volume(t, iv);
}

/* training_log's TensorBoard part, at --tensorboard-log-interval (the writer is the last rank's;
 * the values every rank has) */
static void write_tensorboard(run_t *run, const interval_t *iv, const mc_step_result_t *r,
                              float loss)
{
    const mc_trainer_t *t = &run->t;
    const mc_args_t *a = t->args;
    mc_tb_iteration_t v = {
        .iteration = t->iteration,
        .consumed_samples = t->consumed_train_samples,
        .lr = mc_lr_at(&t->sched, t->sched.num_steps), /* as the log line: after the step */
        .has_decoupled_lr = a->decoupled_lr >= 0,
        .decoupled_lr = mc_decoupled_lr_at(&t->sched, t->sched.num_steps),
        .batch_size = run->microbatches.current_global_batch_size, /* this iteration's */
        .loss = loss,
        .loss_scale = mc_scaler_value(&t->scaler),
        .world_size = a->world_size,
        .has_grad_norm = !r->skipped,
        .grad_norm = r->grad_norm,
        .has_num_zeros = a->log_num_zeros_in_grad && !r->skipped,
        .num_zeros = r->num_zeros,
        .has_params_norm = a->log_params_norm,
        .params_norm = iv->params_norm,
    };
    if (a->log_memory_to_tensorboard) { /* torch.cuda.memory_stats() of this rank's device */
        mc_memstats_t m;
        mc_memstats_get(&m);
        v.has_memory = true;
        v.mem_reserved = v.mem_allocated = (double)m.allocated_bytes;
        v.mem_max_allocated = (double)m.peak_allocated_bytes;
        v.mem_count = (double)m.allocations;
    }
    mc_tensorboard_iteration(run->tb, a, &v);
}

/* Every rank must leave the loop at the same iteration: the clock decision is the maximum over
 * the world, as Megatron all-reduces its done flag. */
static bool duration_exceeded(mc_trainer_t *t, double start)
{
    int64_t done = (mc_now_s() - start) / 60.0 > t->args->exit_duration_in_mins;
    mc_all_reduce(t->comm, t->comm->world, &done, 1, MC_DT_I64, MC_OP_MAX);
    return done != 0;
}

/* Megatron's timers.log([name]) after a save or load: every rank's time, printed once. */
static void log_timer(mc_trainer_t *t, mc_timer_id_t id)
{
    char buf[4096];
    mc_timers_log(&t->timers, id, buf, sizeof(buf));
    if (g_printer && buf[0]) {
        puts(buf);
        fflush(stdout);
    }
}

/* Megatron's save_checkpoint_and_time: the save, then its time on every rank (with
 * --async-save, the time the loop waited: the snapshot, not the write). */
static void save_and_time(run_t *run)
{
    mc_trainer_t *t = &run->t;
    mc_timer_start(&t->timers, MC_T_SAVE_CHECKPOINT);
    mc_ckpt_save(t, run->async);
    mc_timer_stop(&t->timers, MC_T_SAVE_CHECKPOINT);
    log_timer(t, MC_T_SAVE_CHECKPOINT);
    if (t->args->log_progress) mc_progress_saved(t, run->job_start_wall, run->flops_at_start);
}

/* --load, timed between barriers as Megatron's setup_model_and_optimizer does. */
static void load_and_time(mc_trainer_t *t)
{
    if (!t->args->load[0]) return;
    mc_barrier(t->comm, t->comm->world);
    mc_timer_start(&t->timers, MC_T_LOAD_CHECKPOINT);
    mc_ckpt_load(t);
    mc_barrier(t->comm, t->comm->world);
    mc_timer_stop(&t->timers, MC_T_LOAD_CHECKPOINT);
    log_timer(t, MC_T_LOAD_CHECKPOINT);
}

/* Megatron's checkpoint_and_decide_exit, after each iteration: the exit signal (any rank's),
 * the periodic save, then the exit conditions, each saving first unless this iteration was just
 * saved. Returns whether to leave the loop. */
static bool checkpoint_and_decide_exit(run_t *run, double start)
{
    mc_trainer_t *t = &run->t;
    const mc_args_t *a = t->args;
    const bool save = a->save[0] != 0;
    char what[96];
    if (a->exit_signal_handler && mc_signals_received(t->comm)) {
        if (save) save_and_time(run);
        /* Megatron's words, except that it names SIGTERM whatever --exit-signal is */
        snprintf(what, sizeof(what), "exiting program after receiving %s.", a->exit_signal);
        print_datetime(what);
        return true;
    }
    bool saved = false;
    if (save && t->iteration % a->save_interval == 0) {
        save_and_time(run);
        saved = true;
    }
    if (a->exit_duration_in_mins > 0 && duration_exceeded(t, start)) {
        if (save && !saved) save_and_time(run);
        snprintf(what, sizeof(what), "exiting program after %.2f minutes",
                 (mc_now_s() - start) / 60.0);
        print_datetime(what);
        return true;
    }
    if (a->exit_interval > 0 && t->iteration % a->exit_interval == 0) {
        if (save && !saved) save_and_time(run);
        snprintf(what, sizeof(what), "exiting program at iteration %lld", (long long)t->iteration);
        print_datetime(what);
        return true;
    }
    return false;
}

/* The staging slots a step needs: the larger of a training and an evaluation step. */
static int staging_slots(const mc_args_t *a)
{
    const int e = mc_args_eval_microbatches(a);
    return a->num_microbatches > e ? a->num_microbatches : e;
}

/* Host staging: one slot of max_batch rows per microbatch of a step, of the whole sequence
 * (context parallelism keeps its chunks after loading), in the backend's pinned memory (the
 * token copies and the loss reads do not wait). */
static void alloc_staging(run_t *run)
{
    const mc_backend_t *be = run->t.be;
    const mc_gpt_config_t *cfg = &run->t.model.cfg;
    const size_t n =
        (size_t)cfg->max_batch * (size_t)staging_slots(run->t.args) * (size_t)cfg->seq_full;
    run->sample_idx = malloc((size_t)cfg->max_batch * sizeof(int64_t));
    run->tokens = be->alloc_host(be, n * sizeof(int32_t));
    run->labels = be->alloc_host(be, n * sizeof(int32_t));
    run->positions = be->alloc_host(be, n * sizeof(int32_t));
    run->segments = be->alloc_host(be, n * sizeof(int32_t));
    run->loss_mask = be->alloc_host(be, n * sizeof(float));
    run->losses = be->alloc_host(be, n * sizeof(float));
    if (!run->sample_idx || !run->tokens || !run->labels || !run->positions || !run->segments ||
        !run->loss_mask || !run->losses)
        mc_fatal("out of host memory for the staging of a step's microbatches");
}

static void free_run(run_t *run)
{
    const mc_backend_t *be = run->t.be;
    void *bufs[] = {run->tokens,   run->labels,    run->positions,
                    run->segments, run->loss_mask, run->losses};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        if (bufs[i]) be->free_host(be, bufs[i]);
    mc_trainer_free(&run->t);
    mc_rerun_free(&run->rerun);
    mc_data_source_free(&run->data);
    free(run->sample_idx);
    free(run);
}

/* The data came first (cli/, mc_args_open_data): bad files are reported before any memory is
 * planned, and the tokenizer fixed the vocabulary. Then the backend, the memory plan checked
 * against what this rank may use, the communicator and the trainer, with --load applied. */
static run_t *start_run(const mc_args_t *args, mc_data_source_t *data)
{
    char why[256], err[512];
    mc_signals_init(args->exit_signal_handler ? mc_signal_number(args->exit_signal) : 0);
    const mc_backend_t *be = mc_setup_backend(args, why, sizeof(why));
    mc_run_config_t cfg; /* the components' configs, made once */
    mc_run_config(&cfg, args);
    mc_memory_plan_t plan; /* sized once: checked, and logged at start-up */
    mc_trainer_memory(args, &cfg, be, &plan);
    mc_setup_check_memory(args, &plan, be);
    mc_comm_t *comm = mc_setup_comm(args, be);
    run_t *run = calloc(1, sizeof(*run));
    if (!run) mc_fatal("out of host memory");
    mc_trainer_t *t = &run->t;
    if (mc_trainer_init(t, args, &cfg, be, comm) != 0) {
        mc_memory_plan_print(stderr, args, &plan, be->name);
        mc_fatal("not enough %s memory for the plan above (reduce --micro-batch-size, "
                 "--seq-length or the model size)",
                 be->name);
    }
    alloc_staging(run);
    run->data = *data;
    memset(data, 0, sizeof(*data)); /* the run's now */
    g_printer = t->par.rank == t->par.last_rank;
    mc_error_set_rank_local(true);
    if (mc_microbatches_init(&run->microbatches, args, err, sizeof(err)) != 0)
        mc_user_error("%s", err); /* validation refused it already */
    if (g_printer) print_startup(run, &plan, why);
    run->tb = mc_tensorboard_open(args, t->par.rank == t->par.last_rank);
    load_and_time(t);                                 /* --load */
    if (args->load[0]) update_microbatches(run);      /* load_checkpoint's update */
    mc_tensorboard_args(run->tb, args, t->iteration); /* after the load, as pretrain() */
    run->async = mc_ckpt_init(t);                     /* --async-save's snapshot buffer */
    mc_rerun_start(&run->rerun, t);
    return run;
}

/* --profile on this rank: Megatron's --profile-ranks, [0] unless given. */
static bool profiling_here(const mc_trainer_t *t)
{
    const mc_args_t *a = t->args;
    if (!a->profile) return false;
    if (a->n_profile_ranks == 0) return t->par.rank == 0;
    for (int i = 0; i < a->n_profile_ranks; i++)
        if (atoi(a->profile_ranks[i]) == t->par.rank) return true;
    return false;
}

/* Megatron's cudaProfilerStart before iteration --profile-step-start + 1 runs (train()'s loop
 * head) and cudaProfilerStop after iteration --profile-step-end (post_training_step_callbacks). */
static void profiler_at(const mc_trainer_t *t, int64_t step, int start)
{
    if (t->iteration == step && profiling_here(t) && t->be->profiler) t->be->profiler(t->be, start);
}

/* training_log's track_moe_metrics: every iteration, on every rank (collectives); the losses
 * join the interval's totals (float32) and, on the writing rank, TensorBoard. */
static void moe_metrics(run_t *run, interval_t *iv, int M)
{
    mc_trainer_t *t = &run->t;
    const mc_gpt_config_t *c = &t->model.cfg;
    mc_moe_loss_t kinds[MC_MOE_LOSSES];
    const int n = mc_moe_tracked(c, kinds);
    if (!n) return;
    const bool per_layer = t->args->moe_per_layer_logging && run->tb;
    float value[MC_MOE_LOSSES], *layers = NULL;
    if (per_layer && !(layers = malloc((size_t)MC_MOE_LOSSES * c->num_layers * sizeof(float))))
        mc_fatal("out of host memory for the MoE losses");
    mc_moe_metrics(t, M, value, layers);
    const char *names[MC_MOE_LOSSES];
    float tracked[MC_MOE_LOSSES], *tracked_layers = layers;
    for (int k = 0; k < n; k++) {
        iv->moe_sum[kinds[k]] += value[kinds[k]];
        names[k] = mc_moe_loss_name(kinds[k]);
        tracked[k] = value[kinds[k]];
        if (layers) /* the tracked kinds' rows, in their order */
            memmove(layers + (long)k * c->num_layers, layers + (long)kinds[k] * c->num_layers,
                    (size_t)c->num_layers * sizeof(float));
    }
    mc_tensorboard_moe(run->tb, t->iteration, n, names, tracked, tracked_layers, c->num_layers);
    free(layers);
}

/* One iteration of Megatron's train(): the step, the log line, evaluation and saving at their
 * intervals. Returns true when the run must stop early (exit conditions, signals). */
static bool train_iteration(run_t *run, mc_microbatch_t *mbl, interval_t *iv, double start)
{
    mc_trainer_t *t = &run->t;
    const mc_args_t *args = t->args;
    const int mbs = args->micro_batch_size;
    profiler_at(t, args->profile_step_start, 1);
    mc_ckpt_finalize(t, run->async, false); /* publishes an asynchronous save once written */
    /* Megatron's train(): a ramp-up step saves a checkpoint before the first iteration with
     * more microbatches (not at iteration 0) */
    const int before = run->microbatches.num_microbatches;
    update_microbatches(run);
    const int M = run->microbatches.num_microbatches;
    if (M != before && t->iteration != 0 && args->save[0]) save_and_time(run);
    for (int i = 0; i < M; i++)
        load_microbatch(run, i, MC_SPLIT_TRAIN,
                        mc_sampler_index(t->consumed_train_samples, mbs, args->data_parallel_size,
                                         t->par.me.dp, i, 0),
                        mbs, &mbl[i]);
    mc_step_result_t r;
    mc_realtime_tests(t); /* --test-mode: every attention forward's check */
    bool checkpoint;
    const int code = mc_train_step_rerun(t, &run->rerun, mbl, M, &r, &checkpoint);
    if (code) { /* the rerun state machine ends the run before the optimizer step */
        if (checkpoint && args->save[0]) save_and_time(run);
        run->exit_code = code;
        return true;
    }
    t->iteration++;
    t->consumed_train_samples += (int64_t)mbs * args->data_parallel_size * M;
    const float loss = r.lm_loss; /* loss_dict['lm loss'] */
    /* Megatron's training_log: a skipped iteration's loss is not averaged; it is a nan iteration
     * when that loss is inf or nan */
    if (r.skipped) {
        iv->skipped++;
        iv->nan += isnan(loss) || isinf(loss);
    } else {
        iv->loss_sum += loss;
        iv->advanced++;
        iv->have_loss = true;
    }

    const bool log_due = t->iteration % args->log_interval == 0 || iv->first;
    const bool tb_due = mc_tensorboard_due(args, t->iteration);
    if (args->log_params_norm && (log_due || tb_due)) iv->params_norm = params_norm(t);
    if (tb_due) write_tensorboard(run, iv, &r, loss);
    moe_metrics(run, iv, M); /* after the interval's scalars, as training_log */
    if (log_due) log_iteration(run, iv, &r);
    if (args->eval_interval > 0 && t->iteration % args->eval_interval == 0 &&
        args->eval_iters > 0 && mc_data_source_len(&run->data, MC_SPLIT_VALID) > 0) {
        char label[64];
        snprintf(label, sizeof(label), "iteration %lld", (long long)t->iteration);
        print_eval(run, label, evaluate(run, MC_SPLIT_VALID, &t->consumed_valid_samples), true);
        iv->t0 = mc_now_s(); /* evaluation time is not training time */
    }
    /* post_training_step_callbacks */
    if (args->check_weight_hash_across_dp_replicas_interval > 0 &&
        t->iteration % args->check_weight_hash_across_dp_replicas_interval == 0)
        mc_check_weight_hashes(t);
    profiler_at(t, args->profile_step_end, 0);
    const bool saving = args->save[0] && t->iteration % args->save_interval == 0;
    const bool exiting = checkpoint_and_decide_exit(run, start);
    if (saving || exiting) iv->t0 = mc_now_s(); /* saving is not training time */
    return exiting;
}

/* Megatron's train() to the end: returns true when it stopped early. */
static bool train(run_t *run, double start)
{
    mc_trainer_t *t = &run->t;
    const mc_args_t *args = t->args;
    mc_microbatch_t *mbl = calloc((size_t)args->num_microbatches, sizeof(*mbl));
    if (!mbl) mc_fatal("out of host memory");
    if (g_printer) printf("training ...\n");
    /* train(): the machine's iteration is the loaded one (Megatron prints this from rank 0 in
     * every mode; megatron-c only with the machine on) */
    if (run->rerun.mode != MC_RERUN_DISABLED && run->rerun.current_iteration != t->iteration &&
        g_printer)
        printf("Overwriting rerun_state_machine.current_iteration from %lld to %lld...\n",
               (long long)run->rerun.current_iteration, (long long)t->iteration);
    run->rerun.current_iteration = t->iteration;
    print_datetime("before the start of training step");
    interval_t iv = {.first = true, .t0 = mc_now_s()};
    snapshot_volume(t, &iv);
    /* train(): "check weight hash across DP replicas to be very pedantic" before the loop */
    if (args->check_weight_hash_across_dp_replicas_interval > 0) mc_check_weight_hashes(t);
    bool exiting = false;
    while (!exiting && t->iteration < args->train_iters) /* derived from --train-samples too */
        exiting = train_iteration(run, mbl, &iv, start);
    mc_ckpt_finalize(t, run->async, true); /* the end of Megatron's train() */
    print_datetime("after training is done");
    /* the last iteration, unless the loop just saved it (an early exit saved already) */
    if (!exiting && args->save[0] && t->iteration != 0 && t->iteration % args->save_interval != 0)
        save_and_time(run);
    free(mbl);
    return exiting;
}

/* do_valid / do_test: a split with a dataset and --eval-iters > 0 */
static void evaluate_at_end(run_t *run)
{
    mc_trainer_t *t = &run->t;
    char label[96];
    if (mc_data_source_len(&run->data, MC_SPLIT_VALID) > 0) {
        snprintf(label, sizeof(label), "iteration %lld on validation set", (long long)t->iteration);
        print_eval(run, label, evaluate(run, MC_SPLIT_VALID, &t->consumed_valid_samples),
                   !t->args->skip_train);
    }
    int64_t consumed_test = 0;
    if (mc_data_source_len(&run->data, MC_SPLIT_TEST) > 0) {
        snprintf(label, sizeof(label), "iteration %lld on test set", (long long)t->iteration);
        /* Megatron writes the test loss under the validation tags too */
        print_eval(run, label, evaluate(run, MC_SPLIT_TEST, &consumed_test), !t->args->skip_train);
    }
}

int mc_pretrain(const mc_args_t *args, mc_data_source_t *data, double job_start)
{
    run_t *run = start_run(args, data);
    mc_trainer_t *t = &run->t;
    run->job_start_wall = job_start;
    run->flops_at_start = mc_trainer_flops_so_far(t);
    if (args->log_progress) mc_progress_append(t, "Starting job");
    if (args->profile && !t->be->profiler && g_printer)
        printf("> --profile: the %s backend has no CUDA profiler, so nothing is captured "
               "(cudaProfilerStart/Stop and NVTX ranges need --device cuda)\n",
               t->be->name);
    mc_comm_t *comm = t->comm;
    const double start = mc_now_s();
    bool exiting = false;
    if (!args->skip_train) exiting = train(run, start);
    if (!exiting && args->eval_iters > 0) evaluate_at_end(run);
    mc_ckpt_finalize(t, run->async, true); /* a final save written during the evaluation */
    mc_ckpt_free(run->async);
    mc_tensorboard_close(run->tb);
    const int code = run->exit_code;
    free_run(run);
    comm->finalize(comm);
    return code;
}
