/* Tensor (and data) parallelism keeps the single-rank model: trained with the layout given on
 * the command line for 12 steps, the parameters of every rank, gathered over tp, equal those of
 * the single-rank model that rank 0 trains alongside with the same microbatches (DESIGN
 * decision 6: layout-invariant init and dropout). Norm-wise per tensor to 2e-5: Adam turns
 * fp32 rounding noise in near-zero gradients into lr-sized steps element by element (see
 * test/unit/model/test_gpt_ref.c), which norms average out. The key bias has a gradient that is
 * mathematically zero (softmax does not change when a constant is added to every score), so
 * Adam moves it by rounding noise alone: it is held to Adam's bound instead, at most lr per step.
 *
 *   mpirun -np 4 test_tp_params --tensor-model-parallel-size 2 [--sequence-parallel] [...]
 *
 * Rank 0 prints one TAP line per tensor and a summary; exit status 0 iff all match. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cli/cli.h"
#include "kernels/device.h"
#include "comm/runtime.h"
#include "train/train.h"

enum { STEPS = 12 };

static const char *BASE[] = {
    "--device", "cpu", "--mock-data", "--vocab-size", "256", "--make-vocab-size-divisible-by", "64",
    "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
    "--max-position-embeddings", "16", "--micro-batch-size", "2", "--global-batch-size", "8",
    "--train-iters", "12", "--lr", "3e-3", "--lr-warmup-iters", "2", "--weight-decay", "0.1",
    "--clip-grad", "1.0", "--seed", "77", "--hidden-dropout", "0.1", "--attention-dropout", "0.1",
};
enum { NBASE = sizeof(BASE) / sizeof(BASE[0]) };

/* The microbatches of one step for dp rank r (MEGATRON.md 2.9), from a fixed token stream. */
static void make_batches(const mc_args_t *a, int64_t step, int dp_rank, int32_t *buf, mc_microbatch_t *mbs)
{
    const int s = a->seq_length, b = a->micro_batch_size, M = a->num_microbatches;
    for (int i = 0; i < M; i++) {
        int32_t *tok = buf + (size_t)i * 4 * b * s, *lab = tok + b * s, *pos = lab + b * s;
        float *mask = (float *)(pos + b * s);
        int64_t first = step * a->global_batch_size + (int64_t)i * b * a->data_parallel_size +
                        (int64_t)dp_rank * b;
        for (int r = 0; r < b; r++)
            for (int j = 0; j < s; j++) {
                uint64_t x = (uint64_t)(first + r) * 1000003u + (uint64_t)j * 7919u;
                tok[r * s + j] = (int32_t)(x % 250);
                lab[r * s + j] = (int32_t)((x / 250) % 250);
                pos[r * s + j] = j;
                mask[r * s + j] = 1.0f;
            }
        mbs[i] = (mc_microbatch_t){.b = b, .s = s, .tokens = tok, .labels = lab, .positions = pos,
                                   .loss_mask = mask, .sample0 = (uint64_t)first};
    }
}

static void train(mc_trainer_t *t, int dp_rank)
{
    const mc_args_t *a = t->args;
    int32_t *buf = malloc((size_t)a->num_microbatches * 4 * a->micro_batch_size * a->seq_length * sizeof(int32_t));
    mc_microbatch_t *mbs = calloc((size_t)a->num_microbatches, sizeof(*mbs));
    for (int64_t step = 0; step < STEPS; step++) {
        make_batches(a, step, dp_rank, buf, mbs);
        mc_step_result_t r;
        mc_train_step(t, mbs, a->num_microbatches, &r);
        t->iteration++;
    }
    mc_ddp_finish_param_gather(&t->ddp);
    free(buf);
    free(mbs);
}

/* The full tensor from every tp rank's slice (gathered over the tp group). */
static void gather_param(mc_trainer_t *t, const mc_param_t *p, float *full)
{
    const int tp = t->par.layout.tp;
    const float *mine = mc_gpt_param_at(&t->model, p->offset);
    if (p->split == MC_SPLIT_NONE || tp == 1) {
        memcpy(full, mine, (size_t)p->numel * sizeof(float));
        return;
    }
    float *blocks = malloc((size_t)p->numel * tp * sizeof(float));
    mc_all_gather(t->comm, t->par.tp, mine, blocks, (size_t)p->numel, MC_DT_F32);
    const long rows = p->local[0], cols = p->ndim == 2 ? p->local[1] : 1;
    const long full_cols = p->ndim == 2 ? p->shape[1] : 1;
    for (int r = 0; r < tp; r++)
        for (long i = 0; i < rows; i++)
            for (long j = 0; j < cols; j++) {
                long fi = p->split == MC_SPLIT_ROWS ? r * rows + i : i;
                long fj = p->split == MC_SPLIT_COLS ? r * cols + j : j;
                full[fi * full_cols + fj] = blocks[(long)r * p->numel + i * cols + j];
            }
    free(blocks);
}

int main(int argc, char **argv)
{
    static mc_runtime_t rt;
    char err[512];
    if (mc_runtime_init(&rt, err, sizeof(err)) != 0 ||
        mc_runtime_connect(&rt, 60, err, sizeof(err)) != 0)
        mc_user_error("%s", err);
    /* the layout's flags for the parallel model; the same model on one rank without them */
    const char **av = calloc((size_t)(NBASE + argc), sizeof(char *));
    const char **av1 = calloc((size_t)(NBASE + argc), sizeof(char *));
    memcpy(av, BASE, sizeof(BASE));
    memcpy(av1, BASE, sizeof(BASE));
    int n1 = NBASE;
    for (int i = 1; i < argc; i++) av[NBASE + i - 1] = argv[i];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tensor-model-parallel-size") == 0) i++;
        else if (strcmp(argv[i], "--sequence-parallel") != 0 && strncmp(argv[i], "--overlap-", 10) != 0 &&
                 strcmp(argv[i], "--use-distributed-optimizer") != 0 &&
                 strcmp(argv[i], "--tp-comm-overlap") != 0)
            av1[n1++] = argv[i];
    }
    static mc_args_t par_args, one_args;
    mc_args_parse(&par_args, NBASE + argc - 1, (char **)av, rt.size);
    mc_args_parse(&one_args, n1, (char **)av1, 1);
    par_args.padded_vocab_size = one_args.padded_vocab_size = 256;

    mc_comm_t *comm = rt.size > 1 ? mc_comm_mpi(&rt, err, sizeof(err)) : mc_comm_single();
    if (!comm) mc_fatal("%s", err);
    const mc_backend_t *be = mc_backend_cpu();
    mc_trainer_t *t = calloc(1, sizeof(*t)), *one = calloc(1, sizeof(*one));
    mc_run_config_t par_cfg, one_cfg;
    mc_run_config(&par_cfg, &par_args);
    mc_run_config(&one_cfg, &one_args);
    if (mc_trainer_init(t, &par_args, &par_cfg, be, comm) != 0) mc_fatal("trainer init failed");
    train(t, t->par.me.dp);
    if (comm->rank == 0) {
        if (mc_trainer_init(one, &one_args, &one_cfg, be, mc_comm_single()) != 0)
            mc_fatal("trainer init failed");
        train(one, 0);
    }

    int64_t bad = 0;
    for (int i = 0; i < t->model.n_params; i++) {
        const mc_param_t *p = &t->model.params[i];
        long full_n = p->ndim == 2 ? (long)(p->shape[0] * p->shape[1]) : (long)p->shape[0];
        float *full = malloc((size_t)full_n * sizeof(float));
        gather_param(t, p, full);
        if (comm->rank != 0) {
            free(full);
            continue;
        }
        const mc_param_t *q = mc_gpt_find_param(&one->model, p->name);
        const float *ref = mc_gpt_param_at(&one->model, q->offset);
        /* key-bias elements of the per-head [q k v] layout */
        const int HD = one_args.kv_channels;
        const bool qkv_bias = strstr(p->name, "linear_qkv.bias") != NULL;
        double d2 = 0, r2 = 0, key_max = 0;
        for (long e = 0; e < full_n; e++) {
            double d = (double)full[e] - (double)ref[e];
            if (qkv_bias && (e % (3 * HD)) / HD == 1) {
                key_max = fmax(key_max, fabs(d));
                continue;
            }
            d2 += d * d;
            r2 += (double)ref[e] * ref[e];
        }
        double rel = sqrt(d2) / (sqrt(r2) > 0 ? sqrt(r2) : 1);
        bool ok = rel < 2e-5 && key_max <= 2.0 * STEPS * one_args.lr;
        bad += !ok;
        printf("%s - %s gathered equals the single-rank tensor (relative difference %.2e)\n",
               ok ? "ok" : "not ok", p->name, rel);
        free(full);
    }
    mc_broadcast(comm, comm->world, &bad, 1, MC_DT_I64, 0);
    if (comm->rank == 0) {
        printf("%s - %d tensors after %d steps\n", bad ? "not ok" : "ok", t->model.n_params, STEPS);
        fflush(stdout);
        mc_trainer_free(one);
    }
    mc_trainer_free(t);
    comm->finalize(comm);
    mc_runtime_finalize(&rt);
    mc_args_free(&par_args);
    mc_args_free(&one_args);
    free(av);
    free(av1);
    free(t);
    free(one);
    return bad ? 1 : 0;
}
