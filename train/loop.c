/* pretrain(): start-up report, the training loop, periodic and final evaluation, exits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "data/sampler.h"
#include "kernels/device.h"
#include "kernels/memstats.h"
#include "comm/devmem.h"
#include "comm/runtime.h"
#include "ckpt/checkpoint.h"
#include "train/log.h"
#include "train/progress.h"
#include "train/weight_hash.h"
#include "train/signals.h"
#include "train/tensorboard.h"
#include "train/train.h"

/* Megatron prints start-up lines and datetimes from rank 0 (print_rank_0) and the training log
 * from the last rank (print_rank_last). megatron-c prints both from the last rank: with a single
 * writer, launchers that merge the ranks' stdout (mpirun, srun) can never interleave or split
 * lines, so the log stays parseable. */
static bool g_printer = true;

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
static void load_microbatch(mc_trainer_t *t, int slot, int split, int64_t first, int b,
                            mc_microbatch_t *mb)
{
    const int s = t->args->seq_length;
    const size_t base = (size_t)slot * t->model.cfg.max_batch * s;
    char err[512];
    mc_timer_start(&t->timers, MC_T_BATCH_GENERATOR);
    int64_t len = mc_data_source_len(&t->data, split);
    for (int r = 0; r < b; r++) t->sample_idx[r] = first + r;
    if (first + b > len)
        mc_fatal("the %s dataset has %lld samples but sample %lld was asked for (the dataset is "
                 "built for the requested iterations; this is a bug)",
                 split == MC_SPLIT_TRAIN   ? "train"
                 : split == MC_SPLIT_VALID ? "validation"
                                           : "test",
                 (long long)len, (long long)(first + b - 1));
    int32_t *segments = t->args->reset_attention_mask ? t->segments + base : NULL;
    int rc =
        mc_data_source_batch(&t->data, split, t->sample_idx, b, t->tokens + base, t->labels + base,
                             t->loss_mask + base, t->positions + base, segments, err, sizeof(err));
    if (rc == MC_DATA_BAD_TOKENS) mc_user_error("%s", err); /* the data's fault: this rank's */
    if (rc != 0) mc_fatal("%s", err);
    mc_microbatch_t out = {.b = b,
                           .s = s,
                           .tokens = t->tokens + base,
                           .labels = t->labels + base,
                           .positions = t->positions + base,
                           .loss_mask = t->loss_mask + base,
                           .segments = segments,
                           .sample0 = (uint64_t)first,
                           .pinned = true,
                           .losses_out = t->losses + base};
    *mb = out;
    mc_timer_stop(&t->timers, MC_T_BATCH_GENERATOR);
}

/* Token-weighted validation loss over eval_iters iterations of the split, consuming
 * eval_global_batch_size samples per iteration from *consumed. */
static double evaluate(mc_trainer_t *t, int split, int64_t *consumed)
{
    const mc_args_t *a = t->args;
    const int mbs = a->eval_micro_batch_size;
    const int M = mc_args_eval_microbatches(a);
    double sum = 0, tokens = 0;
    mc_microbatch_t *mbl = calloc((size_t)(M > 0 ? M : 1), sizeof(*mbl));
    if (!mbl) mc_fatal("out of host memory");
    mc_ddp_finish_param_gather(&t->ddp);
    for (int it = 0; it < a->eval_iters; it++) {
        for (int i = 0; i < M; i++)
            load_microbatch(
                t, i, split,
                mc_sampler_index(*consumed, mbs, a->data_parallel_size, t->par.me.dp, i, 0), mbs,
                &mbl[i]);
        double s, c;
        mc_forward_only(t, mbl, M, &s, &c); /* over the global batch already */
        sum += s;
        tokens += c;
        *consumed += (int64_t)mbs * a->data_parallel_size * M;
    }
    free(mbl);
    return tokens > 0 ? sum / tokens : 0.0;
}

/* Megatron's print_rank_last: the last rank prints the training log and evaluations. */
static bool is_last_rank(const mc_trainer_t *t) { return t->par.rank == t->par.last_rank; }

/* evaluate_and_print_results: the block, and the validation scalars unless write_tb is false
 * (the end-of-run evaluations with --skip-train) */
static void print_eval(const mc_trainer_t *t, const char *label, double loss, bool write_tb)
{
    if (!is_last_rank(t)) return;
    if (write_tb)
        mc_tensorboard_validation(t->tb, t->args, t->iteration, t->consumed_train_samples,
                                  "lm loss", loss);
    char buf[1024];
    const char *names[] = {"lm loss"};
    mc_format_eval_block(buf, sizeof(buf), label, names, &loss, 1);
    fputs(buf, stdout);
    fflush(stdout);
}

static void fmt_bytes(char *buf, size_t n, double bytes)
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
    if (a->use_distributed_optimizer && a->data_parallel_size > 1)
        snprintf(opt_name, sizeof(opt_name), "optimizer state (Adam m, v; 1/%d shard)",
                 a->data_parallel_size);
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
        fmt_bytes(b, sizeof(b), bytes[i]);
        fprintf(out, "    %-40s %12s\n", names[i], b);
        total += bytes[i];
    }
    char b[32];
    fmt_bytes(b, sizeof(b), total);
    fprintf(out, "    %-40s %12s\n", "total", b);
    return total;
}

/* The plan is checked before allocating: on the CPU backend an allocation larger than physical
 * memory may "succeed" (overcommit) and be killed later, and on the CUDA backend the GPU's free
 * memory is what there is. sharing: how many ranks of this node use the same memory (every local
 * rank for the CPU, those driving the same GPU for CUDA). */
static void check_plan_fits(const mc_args_t *args, const mc_memory_plan_t *plan,
                            const mc_backend_t *be, int sharing, const char *where)
{
    const mc_memory_plan_t p = *plan;
    bool cpu = strcmp(be->name, "cpu") == 0;
    /* the asynchronous checkpoint snapshot is host memory: the CPU backend's, not a GPU's */
    double need =
        (p.params + p.grads + p.optimizer + p.activations + p.workspace + (cpu ? p.snapshot : 0)) *
        sharing;
    double free_bytes = 0, total = 0;
    if (mc_backend_memory(be, &free_bytes, &total) != 0) return;
    double have = cpu ? total : free_bytes;
    if (have > 0 && need > have) {
        mc_memory_plan_print(stdout, args, plan, be->name);
        char nb[32], hb[32];
        fmt_bytes(nb, sizeof(nb), need);
        fmt_bytes(hb, sizeof(hb), have);
        /* GPUs differ per rank: whichever rank meets this reports it and ends the job */
        if (!cpu) mc_error_set_rank_local(true);
        mc_user_error("the memory plan needs %s for the %d rank(s) on %s but it has %s%s "
                      "(reduce --micro-batch-size, --seq-length, --num-layers or --hidden-size, "
                      "use --use-distributed-optimizer%s)",
                      nb, sharing, where, hb, cpu ? "" : " free",
                      cpu && p.snapshot > 0 ? ", or save without --async-save" : "");
    }
}

/* Megatron's num_microbatches_calculator logs with logger.info; training.py's
 * logging.basicConfig prints its records to stdout in Python's default format. */
#define MC_CALC_LOG "INFO:megatron.core.num_microbatches_calculator:"

/* update_num_microbatches(consumed_train_samples, consistency_check=True, verbose=True): the
 * batch of the coming iteration (or, after --load, of the checkpoint's next one). */
static void update_microbatches(mc_trainer_t *t)
{
    mc_microbatches_t *c = &t->microbatches;
    const int old = c->current_global_batch_size;
    if (mc_microbatches_update(c, t->consumed_train_samples) && g_printer) {
        printf(MC_CALC_LOG "ramping up batch size from %d to %d\n", old,
               c->current_global_batch_size);
        fflush(stdout);
    }
    char err[512];
    if (mc_microbatches_check(c, t->args, err, sizeof(err)) != 0) mc_user_error("%s", err);
}

static void print_startup(const mc_trainer_t *t, const mc_memory_plan_t *plan, const char *why)
{
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
               t->microbatches.current_global_batch_size);
    }
    printf("> device: %s\n", why);
    printf("> attention: %s\n", mc_backend_attention_line(t->be));
    bool nccl = strcmp(a->distributed_backend, "nccl") == 0,
         cuda = strcmp(t->be->name, "cuda") == 0;
    if (t->comm->size > 1)
        printf("> collectives: %s over %d ranks (%s)\n", t->comm->name, t->comm->size,
               nccl && !cuda
                   ? "--distributed-backend nccl needs the cuda backend; the cpu backend's tensors "
                     "are in host memory"
               : nccl ? "--distributed-backend nccl"
               : cuda
                   ? "--distributed-backend mpi; device buffers staged through pinned host memory"
                   : "--distributed-backend mpi");
    printf("> building %s tokenizer ...\n", a->tokenizer_type);
    int v = (int)t->data.vocab_size;
    printf(" > padded vocab (size: %d) with %d dummy tokens (new size: %d)\n", v,
           a->padded_vocab_size - v, a->padded_vocab_size);
    long n = 0;
    for (int i = 0; i < t->model.n_params; i++) n += t->model.params[i].numel;
    printf(" > number of parameters on (tensor, pipeline) model parallel rank (0, 0): %ld\n", n);
    mc_memory_plan_print(stdout, a, plan, t->be->name);
    if (t->data.is_mock) /* Megatron's MockGPTDataset: 100000 documents split 1,1,1 */
        printf("> mock data: %d documents, split %s\n", MC_MOCK_NUM_DOCS, MC_MOCK_SPLIT);
    printf("> datasets: train %lld, validation %lld, test %lld samples of %d tokens\n",
           (long long)mc_data_source_len(&t->data, MC_SPLIT_TRAIN),
           (long long)mc_data_source_len(&t->data, MC_SPLIT_VALID),
           (long long)mc_data_source_len(&t->data, MC_SPLIT_TEST), a->seq_length);
    fflush(stdout);
}

/* Accumulated over one log interval, as Megatron's total_loss_dict. */
typedef struct {
    double loss_sum; /* sum of per-iteration lm loss over advanced iterations */
    int advanced, skipped, nan;
    /* num_floating_point_operations_since_last_log_event: each iteration's, of its own batch
     * (--rampup-batch-size changes it within an interval) */
    double flops;
    /* total_loss_dict holds 'lm loss' from the first advanced iteration of this train() on
     * (kept across intervals): before it, the line has no loss at all */
    bool have_loss;
    /* the first iteration of this train(): Megatron main logs it and resets nothing
     * (should_reset = not is_first_iteration), so the next line covers it again */
    bool first;
    double t0;
    double params_norm; /* of this iteration, with --log-params-norm when it is logged */
    /* collective volume on the tp and dp-cp groups at the interval's start */
    uint64_t tp_calls[MC_COLL_KINDS], tp_bytes[MC_COLL_KINDS];
    uint64_t dp_calls[MC_COLL_KINDS], dp_bytes[MC_COLL_KINDS];
} interval_t;

static void snapshot_volume(const mc_trainer_t *t, interval_t *iv)
{
    memcpy(iv->tp_calls, t->par.tp->calls, sizeof(iv->tp_calls));
    memcpy(iv->tp_bytes, t->par.tp->bytes, sizeof(iv->tp_bytes));
    memcpy(iv->dp_calls, t->par.dp_cp->calls, sizeof(iv->dp_calls));
    memcpy(iv->dp_bytes, t->par.dp_cp->bytes, sizeof(iv->dp_bytes));
}

/* megatron-c's addition to the timers block (--timing-log-level >= 1): this rank's collectives
 * per iteration on its tp and dp-cp groups, as counted by the comm layer, in the timers' style. */
static size_t format_volume(const mc_trainer_t *t, const interval_t *iv, int iters, char *buf,
                            size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "communication per iteration on this rank (calls, MB):");
    const struct {
        const char *group;
        const mc_group_t *g;
        const uint64_t *c0, *b0;
    } rows[] = {
        {"tp", t->par.tp, iv->tp_calls, iv->tp_bytes},
        {"dp-cp", t->par.dp_cp, iv->dp_calls, iv->dp_bytes},
    };
    for (size_t r = 0; r < 2; r++)
        for (int k = 0; k < MC_COLL_KINDS; k++) {
            uint64_t calls = rows[r].g->calls[k] - rows[r].c0[k];
            if (!calls || len >= n) continue;
            char label[64], kind[32];
            snprintf(kind, sizeof(kind), " %s", mc_coll_name(k));
            mc_timer_label(label, sizeof(label), rows[r].group, kind);
            len += (size_t)snprintf(buf + len, n - len, "\n    %s: (%.1f, %.4f)", label,
                                    (double)calls / iters,
                                    (double)(rows[r].g->bytes[k] - rows[r].b0[k]) / iters / 1e6);
        }
    return len;
}

/* Megatron's calc_params_l2_norm, a collective over the model-parallel group (the world with the
 * distributed optimizer): it reads a bf16 model's fp32 main params (this rank's shards with the
 * distributed optimizer), other models' own params. */
static double params_norm(mc_trainer_t *t)
{
    mc_ddp_finish_param_gather(&t->ddp);
    double sq;
    if (t->opt.master && t->model.cfg.dt == MC_DT_BF16) {
        sq = mc_opt_master_sumsq(&t->opt);
        mc_all_reduce(t->comm, t->ddp.dist_opt ? t->comm->world : t->par.mp, &sq, 1, MC_DT_F64,
                      MC_OP_SUM);
    } else {
        sq = mc_params_sumsq(&t->model);
        mc_all_reduce(t->comm, t->par.mp, &sq, 1, MC_DT_F64, MC_OP_SUM);
    }
    return sqrt(sq);
}

static void log_iteration(mc_trainer_t *t, interval_t *iv, const mc_step_result_t *r)
{
    const mc_args_t *a = t->args;
    /* the batch of this iteration: mbs x dp x get_num_microbatches() */
    const int gbs = t->microbatches.current_global_batch_size;
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
        l.tflops_per_gpu = iv->flops / (iters > 0 ? iters : 1) / (elapsed * 1e12 * a->world_size);
    }
    l.has_lr = 1;
    l.lr = mc_lr_at(&t->sched, t->sched.num_steps); /* read after the scheduler step */
    l.has_decoupled_lr = a->decoupled_lr >= 0;
    l.decoupled_lr = mc_decoupled_lr_at(&t->sched, t->sched.num_steps);
    l.global_batch_size = gbs;
    /* avg = total / max(1, advanced): 0 in an interval that skipped every step, which main
     * prints (`if avg >= 0.0`; core_v0.15's `> 0.0` left it out) */
    l.n_losses = iv->have_loss ? 1 : 0;
    l.loss_names[0] = "lm loss";
    l.loss_values[0] = iv->loss_sum / (iv->advanced > 1 ? iv->advanced : 1);
    l.loss_scale = mc_scaler_value(&t->scaler);
    /* a skipped step has no grad norm (Megatron's optimizer returns None) */
    l.has_grad_norm = !r->skipped;
    l.grad_norm = r->grad_norm;
    /* collectives first, on every rank; only the last rank prints */
    if (a->log_num_zeros_in_grad && !r->skipped) {
        l.has_num_zeros = 1;
        l.num_zeros = (long)r->num_zeros;
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
        mc_tensorboard_timers(t->tb, a, t->iteration, elapsed, l.has_throughput, l.tflops_per_gpu,
                              max_s);
    }
    mc_tensorboard_flush(t->tb);
    char timers[1 << 16], volume[2048] = ""; /* --timing-log-option all lists every rank */
    mc_timers_report(&t->timers, a->log_interval, !iv->first, timers, sizeof(timers));
    if (a->timing_log_level >= 1)
        format_volume(t, iv, iters > 0 ? iters : 1, volume, sizeof(volume));
    if (is_last_rank(t)) {
        puts(buf);
        if (timers[0]) puts(timers);
        if (volume[0]) puts(volume);
        fflush(stdout);
    }
    if (iv->first) {
        iv->first = false;
        return;
    }
    iv->loss_sum = 0;
    iv->advanced = iv->skipped = iv->nan = 0;
    iv->flops = 0;
    iv->t0 = mc_now_s();
    snapshot_volume(t, iv);
}

/* training_log's TensorBoard part, at --tensorboard-log-interval (the writer is the last rank's;
 * the values every rank has) */
static void write_tensorboard(mc_trainer_t *t, const interval_t *iv, const mc_step_result_t *r,
                              double loss)
{
    const mc_args_t *a = t->args;
    mc_tb_iteration_t v = {
        .iteration = t->iteration,
        .consumed_samples = t->consumed_train_samples,
        .lr = mc_lr_at(&t->sched, t->sched.num_steps), /* as the log line: after the step */
        .has_decoupled_lr = a->decoupled_lr >= 0,
        .decoupled_lr = mc_decoupled_lr_at(&t->sched, t->sched.num_steps),
        .batch_size = t->microbatches.current_global_batch_size, /* this iteration's */
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
    mc_tensorboard_iteration(t->tb, a, &v);
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
static void save_and_time(mc_trainer_t *t)
{
    mc_timer_start(&t->timers, MC_T_SAVE_CHECKPOINT);
    mc_ckpt_save(t);
    mc_timer_stop(&t->timers, MC_T_SAVE_CHECKPOINT);
    log_timer(t, MC_T_SAVE_CHECKPOINT);
    if (t->args->log_progress) mc_progress_saved(t, t->job_start_wall, t->flops_at_start);
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
static bool checkpoint_and_decide_exit(mc_trainer_t *t, double start)
{
    const mc_args_t *a = t->args;
    const bool save = a->save[0] != 0;
    char what[96];
    if (a->exit_signal_handler && mc_signals_received(t->comm)) {
        if (save) save_and_time(t);
        /* Megatron's words, except that it names SIGTERM whatever --exit-signal is */
        snprintf(what, sizeof(what), "exiting program after receiving %s.", a->exit_signal);
        print_datetime(what);
        return true;
    }
    bool saved = false;
    if (save && t->iteration % a->save_interval == 0) {
        save_and_time(t);
        saved = true;
    }
    if (a->exit_duration_in_mins > 0 && duration_exceeded(t, start)) {
        if (save && !saved) save_and_time(t);
        snprintf(what, sizeof(what), "exiting program after %.2f minutes",
                 (mc_now_s() - start) / 60.0);
        print_datetime(what);
        return true;
    }
    if (a->exit_interval > 0 && t->iteration % a->exit_interval == 0) {
        if (save && !saved) save_and_time(t);
        snprintf(what, sizeof(what), "exiting program at iteration %lld", (long long)t->iteration);
        print_datetime(what);
        return true;
    }
    return false;
}

static mc_comm_t *g_comm;
static void abort_job(int code) { g_comm->abort(g_comm, code); }

/* One rank: the identity communicator. More: NCCL for the cuda backend with
 * --distributed-backend nccl, else MPI (host memory: the cpu backend's tensors live there
 * whichever backend is asked for; the cuda backend's device buffers are staged). */
static mc_comm_t *start_comm(const mc_args_t *args, mc_runtime_t *rt, const mc_backend_t *be)
{
    mc_comm_t *comm = mc_comm_single();
    double timeout_s = 60.0 * args->distributed_timeout_minutes;
    if (rt && rt->size > 1) {
        char err[512];
#ifdef MC_WITH_CUDA
        if (strcmp(be->name, "cuda") == 0 && strcmp(args->distributed_backend, "nccl") == 0)
            comm = mc_comm_nccl(rt, be, timeout_s, err, sizeof(err));
        else
#endif
            comm = mc_comm_mpi(rt, err, sizeof(err));
        if (!comm) mc_fatal("%s", err);
    }
    comm->timeout_s = timeout_s;
    comm->heartbeat_s = args->heartbeat_timeout_seconds;
    comm->devmem = mc_devmem_for(be); /* NULL for the cpu backend; NCCL does without */
    g_comm = comm;
    mc_error_set_abort_hook(abort_job);
    return comm;
}

/* Where the plan's memory comes from, for check_plan_fits: the ranks sharing it and its name. */
static int memory_sharing(const mc_backend_t *be, const mc_runtime_t *rt, char *where, size_t n)
{
    int local_rank = rt ? rt->local_rank : 0, local_size = rt ? rt->local_size : 1;
#ifdef MC_WITH_CUDA
    if (strcmp(be->name, "cuda") == 0) {
        int gpus = mc_cuda_device_count();
        snprintf(where, n, "GPU %d", mc_cuda_backend_device(be));
        return mc_ranks_per_gpu(local_rank, local_size, gpus);
    }
#endif
    (void)be, (void)local_rank;
    snprintf(where, n, "this node");
    return local_size;
}

/* Data first: bad files are reported before any memory is planned, and the tokenizer fixes the
 * vocabulary (Megatron pads it in build_tokenizer). Then the backend, the memory plan checked
 * against what this rank may use, the communicator and the trainer, with --load applied. */
static mc_trainer_t *start_trainer(mc_args_t *args)
{
    mc_data_source_t data;
    char err[1024];
    if (mc_data_source_open(&data, args, true, err, sizeof(err)) != 0) mc_user_error("%s", err);
    if (args->padded_vocab_size == 0)
        args->padded_vocab_size =
            mc_padded_vocab_size((int)data.vocab_size, args->make_vocab_size_divisible_by,
                                 args->tensor_model_parallel_size);
    else if (args->padded_vocab_size < data.vocab_size)
        mc_user_error("--padded-vocab-size (%d) is smaller than the tokenizer's vocabulary (%lld)",
                      args->padded_vocab_size, (long long)data.vocab_size);
    char why[256];
    mc_runtime_t *rt = mc_runtime();
    mc_signals_init(args->exit_signal_handler ? mc_signal_number(args->exit_signal) : 0);
    const mc_backend_t *be = mc_backend_select(args->device, args->cpu_threads,
                                               rt ? rt->local_rank : 0, why, sizeof(why));
    mc_attention_spec_t attention; /* before the memory plan: the choice sizes its scratch */
    mc_attention_spec_from_args(args, &attention);
    mc_backend_attention_setup(be, &attention, NULL, 0);
    mc_memory_plan_t plan; /* sized once: checked, and logged at start-up */
    mc_trainer_memory(args, be, &plan);
    char where[64];
    int sharing = memory_sharing(be, rt, where, sizeof(where));
    check_plan_fits(args, &plan, be, sharing, where);
    mc_comm_t *comm = start_comm(args, rt, be);
    mc_trainer_t *t = calloc(1, sizeof(*t));
    if (!t) mc_fatal("out of host memory");
    if (mc_trainer_init(t, args, be, comm) != 0) {
        mc_memory_plan_print(stderr, args, &plan, be->name);
        mc_fatal("not enough %s memory for the plan above (reduce --micro-batch-size, "
                 "--seq-length or the model size)",
                 be->name);
    }
    t->data = data;
    g_printer = t->par.rank == t->par.last_rank;
    mc_error_set_rank_local(true);
    if (mc_microbatches_init(&t->microbatches, args, err, sizeof(err)) != 0)
        mc_user_error("%s", err); /* validation refused it already */
    if (g_printer) print_startup(t, &plan, why);
    t->tb = mc_tensorboard_open(args, t->par.rank == t->par.last_rank);
    load_and_time(t);                               /* --load */
    if (args->load[0]) update_microbatches(t);      /* load_checkpoint's update */
    mc_tensorboard_args(t->tb, args, t->iteration); /* after the load, as pretrain() */
    mc_ckpt_init(t);                                /* --async-save's snapshot buffer */
    return t;
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

/* One iteration of Megatron's train(): the step, the log line, evaluation and saving at their
 * intervals. Returns true when the run must stop early (exit conditions, signals). */
static bool train_iteration(mc_trainer_t *t, mc_microbatch_t *mbl, interval_t *iv, double start)
{
    const mc_args_t *args = t->args;
    const int mbs = args->micro_batch_size;
    profiler_at(t, args->profile_step_start, 1);
    mc_ckpt_finalize(t, false); /* publishes an asynchronous save once written */
    /* Megatron's train(): a ramp-up step saves a checkpoint before the first iteration with
     * more microbatches (not at iteration 0) */
    const int before = t->microbatches.num_microbatches;
    update_microbatches(t);
    const int M = t->microbatches.num_microbatches;
    if (M != before && t->iteration != 0 && args->save[0]) save_and_time(t);
    for (int i = 0; i < M; i++)
        load_microbatch(t, i, MC_SPLIT_TRAIN,
                        mc_sampler_index(t->consumed_train_samples, mbs, args->data_parallel_size,
                                         t->par.me.dp, i, 0),
                        mbs, &mbl[i]);
    mc_step_result_t r;
    mc_train_step(t, mbl, M, &r);
    if (args->log_throughput)
        iv->flops +=
            mc_num_floating_point_operations(args, t->microbatches.current_global_batch_size);
    t->iteration++;
    t->consumed_train_samples += (int64_t)mbs * args->data_parallel_size * M;
    double loss = r.num_tokens > 0 ? r.loss_sum / r.num_tokens : 0.0;
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
    if (tb_due) write_tensorboard(t, iv, &r, loss);
    if (log_due) log_iteration(t, iv, &r);
    if (args->eval_interval > 0 && t->iteration % args->eval_interval == 0 &&
        args->eval_iters > 0 && mc_data_source_len(&t->data, MC_SPLIT_VALID) > 0) {
        char label[64];
        snprintf(label, sizeof(label), "iteration %lld", (long long)t->iteration);
        print_eval(t, label, evaluate(t, MC_SPLIT_VALID, &t->consumed_valid_samples), true);
        iv->t0 = mc_now_s(); /* evaluation time is not training time */
    }
    /* post_training_step_callbacks */
    if (args->check_weight_hash_across_dp_replicas_interval > 0 &&
        t->iteration % args->check_weight_hash_across_dp_replicas_interval == 0)
        mc_check_weight_hashes(t);
    profiler_at(t, args->profile_step_end, 0);
    const bool saving = args->save[0] && t->iteration % args->save_interval == 0;
    const bool exiting = checkpoint_and_decide_exit(t, start);
    if (saving || exiting) iv->t0 = mc_now_s(); /* saving is not training time */
    return exiting;
}

/* Megatron's train() to the end: returns true when it stopped early. */
static bool train(mc_trainer_t *t, double start)
{
    const mc_args_t *args = t->args;
    mc_microbatch_t *mbl = calloc((size_t)args->num_microbatches, sizeof(*mbl));
    if (!mbl) mc_fatal("out of host memory");
    if (g_printer) printf("training ...\n");
    print_datetime("before the start of training step");
    interval_t iv = {.first = true, .t0 = mc_now_s()};
    snapshot_volume(t, &iv);
    /* train(): "check weight hash across DP replicas to be very pedantic" before the loop */
    if (args->check_weight_hash_across_dp_replicas_interval > 0) mc_check_weight_hashes(t);
    bool exiting = false;
    while (!exiting && t->iteration < args->train_iters) /* derived from --train-samples too */
        exiting = train_iteration(t, mbl, &iv, start);
    mc_ckpt_finalize(t, true); /* the end of Megatron's train() */
    print_datetime("after training is done");
    /* the last iteration, unless the loop just saved it (an early exit saved already) */
    if (!exiting && args->save[0] && t->iteration != 0 && t->iteration % args->save_interval != 0)
        save_and_time(t);
    free(mbl);
    return exiting;
}

/* do_valid / do_test: a split with a dataset and --eval-iters > 0 */
static void evaluate_at_end(mc_trainer_t *t)
{
    char label[96];
    if (mc_data_source_len(&t->data, MC_SPLIT_VALID) > 0) {
        snprintf(label, sizeof(label), "iteration %lld on validation set", (long long)t->iteration);
        print_eval(t, label, evaluate(t, MC_SPLIT_VALID, &t->consumed_valid_samples),
                   !t->args->skip_train);
    }
    int64_t consumed_test = 0;
    if (mc_data_source_len(&t->data, MC_SPLIT_TEST) > 0) {
        snprintf(label, sizeof(label), "iteration %lld on test set", (long long)t->iteration);
        /* Megatron writes the test loss under the validation tags too */
        print_eval(t, label, evaluate(t, MC_SPLIT_TEST, &consumed_test), !t->args->skip_train);
    }
}

int mc_pretrain(mc_args_t *args)
{
    const double job_start = mc_wall_s();
    mc_trainer_t *t = start_trainer(args);
    t->job_start_wall = job_start;
    t->flops_at_start =
        mc_floating_point_operations_so_far(args, t->iteration, t->consumed_train_samples);
    if (args->log_progress) mc_progress_append(t, "Starting job");
    if (args->profile && !t->be->profiler && g_printer)
        printf("> --profile: the %s backend has no CUDA profiler, so nothing is captured "
               "(cudaProfilerStart/Stop and NVTX ranges need --device cuda)\n",
               t->be->name);
    mc_comm_t *comm = t->comm;
    const double start = mc_now_s();
    bool exiting = false;
    if (!args->skip_train) exiting = train(t, start);
    if (!exiting && args->eval_iters > 0) evaluate_at_end(t);
    mc_ckpt_finalize(t, true); /* a final save written during the evaluation */
    mc_ckpt_free(t);
    mc_tensorboard_close(t->tb);
    mc_trainer_free(t);
    free(t);
    comm->finalize(comm);
    return 0;
}
