/* Megatron's validate_args rules (MEGATRON.md section 3.1) and the values it derives, plus the
 * checks Megatron makes later (tokenizer padding, the lr scheduler's asserts) so that every
 * configuration problem is a one-line user error before any work starts. */
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/args.h"
#include "base/error.h"
#include "config/flags.h"
#include "config/microbatches.h"
#include "data/tokenizer.h"
#include "config/context_parallel.h"
#include "parallel/pp_plan.h"
#include "data/mock.h"
#include "data/source.h"
#include "trainer/config.h"
#include "cli/validate_moe.h"
#include "cli/validate_pipe.h"
#include "cli/validate_data.h"
#include "cli/validate_optim.h"

/* ---- values filled by hand (tests) must still respect the table ---- */

/* The field's numeric value, or false when the field holds its "not given" value. */
static bool field_number(const mc_args_t *a, const mc_flag_t *f, double *out)
{
    const char *p = (const char *)a + f->field;
    int i;
    int64_t l;
    switch (f->type) {
    case MC_FLAG_INT:
        memcpy(&i, p, sizeof(i));
        *out = i;
        break;
    case MC_FLAG_INT64:
        memcpy(&l, p, sizeof(l));
        *out = (double)l;
        break;
    case MC_FLAG_FLOAT: memcpy(out, p, sizeof(*out)); break;
    default: return false;
    }
    if (f->def) return true;
    double none = 0;
    if (f->none) sscanf(f->none, "%lf", &none);
    return *out != none;
}

static void check_field(const mc_args_t *a, const mc_flag_t *f)
{
    double v;
    if (field_number(a, f, &v) && !mc_flag_within_bounds(f, v)) {
        char range[96];
        mc_flag_bounds_text(f, range, sizeof(range));
        mc_user_error("%s must be %s (got %.15g)", f->name, range, v);
    }
    if (f->type == MC_FLAG_CHOICE) {
        const char *s = (const char *)a + f->field;
        if (!*s && !f->def) return; /* None */
        for (const char *const *c = f->choices; *c; c++)
            if (strcmp(*c, s) == 0) return;
        mc_user_error("%s: invalid choice '%.80s'", f->name, s);
    }
}

static void check_fields(const mc_args_t *a)
{
    for (size_t i = 0; i < mc_flag_count(); i++) {
        const mc_flag_t *f = mc_flag_at(i);
        if (f->field_size) check_field(a, f);
    }
}

/* ---- rules ---- */

static void append(char *list, size_t n, bool missing, const char *name)
{
    if (!missing) return;
    if (*list) strncat(list, ", ", n - strlen(list) - 1);
    strncat(list, name, n - strlen(list) - 1);
}

/* The SentencePiece types: their --tokenizer-model sizes the vocabulary, for mock data too. */
/* GPT2BPETokenizer built from --vocab-file/--merge-file: the tokenizer, not --vocab-size, sizes
 * the vocabulary (Megatron passes --vocab-size to NullTokenizer and TikTokenizer only). */
static bool tokenizer_files(const mc_args_t *a)
{
    if (strcmp(a->tokenizer_type, "GPT2BPETokenizer") != 0) return false;
    if (a->mock_data) return a->vocab_file[0] || a->merge_file[0];
    return a->n_data_path + a->n_train_data_path + a->n_valid_data_path + a->n_test_data_path > 0;
}

/* HuggingFaceTokenizer, TikTokenizer and the SentencePiece types read --tokenizer-model; all but
 * TikTokenizer (--vocab-size or its default 2**17) size the vocabulary themselves. */
static bool tokenizer_model(const mc_args_t *a)
{
    return strcmp(a->tokenizer_type, "HuggingFaceTokenizer") == 0 ||
           strcmp(a->tokenizer_type, "TikTokenizer") == 0 ||
           mc_tokenizer_is_sentencepiece(a->tokenizer_type);
}

/* validate_args' required arguments plus what pretrain needs later, named together the way
 * argparse names missing required arguments. */
static void check_required(const mc_args_t *a)
{
    char list[512] = "";
    append(list, sizeof(list), a->num_layers == 0, "--num-layers");
    append(list, sizeof(list), a->hidden_size == 0, "--hidden-size");
    append(list, sizeof(list), a->num_attention_heads == 0, "--num-attention-heads");
    append(list, sizeof(list), a->seq_length == 0, "--seq-length");
    append(list, sizeof(list), a->max_position_embeddings == 0, "--max-position-embeddings");
    append(list, sizeof(list), a->micro_batch_size == 0, "--micro-batch-size");
    append(list, sizeof(list), !a->lr_set, "--lr");
    append(list, sizeof(list), !a->skip_train && !a->train_iters && !a->train_samples,
           "--train-iters or --train-samples");
    /* NullTokenizer has no vocabulary file to size the embedding from; the GPT-2 tokenizer
     * reads its files, for --mock-data too when either is given (without them, megatron-c's
     * mock data takes --vocab-size). */
    const bool files = tokenizer_files(a);
    const bool model = tokenizer_model(a);
    append(list, sizeof(list), !files && !model && a->vocab_size == 0 && !a->vocab_file[0],
           "--vocab-size");
    append(list, sizeof(list), model && !a->tokenizer_model[0], "--tokenizer-model");
    append(list, sizeof(list),
           strcmp(a->tokenizer_type, "TikTokenizer") == 0 && !a->tiktoken_pattern[0],
           "--tiktoken-pattern");
    append(list, sizeof(list), files && !a->vocab_file[0], "--vocab-file");
    append(list, sizeof(list), files && !a->merge_file[0], "--merge-file");
    if (*list) mc_user_error("the following arguments are required: %s", list);
}

static int checked_int(int64_t v, const char *what)
{
    if (v > INT_MAX) mc_user_error("%s (%lld) is too large", what, (long long)v);
    return (int)v;
}

static void parallel_sizes(mc_args_t *a, int world_size)
{
    const int tp = a->tensor_model_parallel_size, pp = a->pipeline_model_parallel_size;
    const int cp = a->context_parallel_size;
    const int64_t model = (int64_t)tp * pp * cp;
    if (world_size % model != 0)
        mc_user_error(
            "world size (%d) is not divisible by tensor x pipeline x context parallel size "
            "(%d x %d x %d = %lld)",
            world_size, tp, pp, cp, (long long)model);
    a->world_size = world_size;
    a->data_parallel_size = (int)(world_size / model);
    if (tp == 1) a->sequence_parallel = false;       /* Megatron: no change of numerics at tp 1 */
    if (a->tp_comm_overlap && !a->sequence_parallel) /* arguments.py's, after tp 1's */
        mc_user_error("--tp-comm-overlap needs --sequence-parallel and tp > 1 (the overlap "
                      "pipelines the sequence-parallel collectives, as in Megatron)");
    if (a->sequence_parallel && a->seq_length % tp != 0)
        mc_user_error(
            "--seq-length (%d) must be divisible by --tensor-model-parallel-size (%d) with "
            "--sequence-parallel",
            a->seq_length, tp);
}

/* Activation recomputation (arguments.py, TransformerBlock._checkpointed_forward). */
static void recompute(mc_args_t *a)
{
    if (a->recompute_activations) strcpy(a->recompute_granularity, "selective");
    const bool full = strcmp(a->recompute_granularity, "full") == 0;
    const bool selective = strcmp(a->recompute_granularity, "selective") == 0;
    if (selective && a->recompute_method[0])
        mc_user_error("recompute method is not yet supported for selective recomputing granularity "
                      "(drop --recompute-method)");
    if (full && !a->recompute_method[0])
        mc_user_error("--recompute-granularity full needs --recompute-method uniform or block "
                      "(Megatron: Invalid activation recompute method.)");
    if (full && a->recompute_num_layers == 0)
        mc_user_error("--recompute-granularity full needs --recompute-num-layers (layers per "
                      "recomputed chunk with uniform, recomputed layers per stage with block)");
    if (!full && !selective && (a->recompute_method[0] || a->recompute_num_layers))
        mc_user_error("--recompute-method and --recompute-num-layers need --recompute-granularity "
                      "full");
    for (int i = 0; i < a->n_recompute_modules; i++)
        if (strcmp(a->recompute_modules[i], "core_attn") != 0) {
            char shown[MC_SHOWN_MAX + 4];
            mc_user_error(
                "--recompute-modules %s is recognised but not implemented yet in megatron-c "
                "(supported: core_attn)",
                mc_shown(a->recompute_modules[i], shown));
        }
}

/* Gradient buckets and overlap (arguments.py and training.resolve_ddp_bucket_size). */
static void data_parallel(const mc_args_t *a)
{
    if (a->overlap_param_gather && !a->use_distributed_optimizer)
        mc_user_error("--overlap-param-gather only supported with distributed optimizer (add "
                      "--use-distributed-optimizer)");
    if (a->overlap_param_gather && !a->overlap_grad_reduce)
        mc_user_error("must use --overlap-param-gather with --overlap-grad-reduce");
    if (a->ddp_average_in_collective && a->calculate_per_token_loss)
        mc_user_error("cannot average in collective when calculating per-token loss (drop "
                      "--ddp-average-in-collective or --calculate-per-token-loss)");
    if (a->ddp_num_buckets > 0 && a->ddp_bucket_size > 0)
        mc_user_error("cannot specify both --ddp-num-buckets and --ddp-bucket-size");
}

/* --num-distributed-optimizer-instances: Megatron's asserts (DistributedDataParallel,
 * initialize_model_parallel), then what megatron-c does not do with it yet. */
static void distopt_instances(const mc_args_t *a)
{
    const int n = a->num_distributed_optimizer_instances;
    if (n <= 1) return;
    const int dp_cp = a->data_parallel_size * a->context_parallel_size;
    if (!a->use_distributed_optimizer)
        mc_user_error("--num-distributed-optimizer-instances %d needs --use-distributed-optimizer "
                      "(Megatron: Partial DistOpt cannot be used without DistOpt)",
                      n);
    if (dp_cp % n != 0)
        mc_user_error("--num-distributed-optimizer-instances (%d) must divide the data-parallel "
                      "size times the context-parallel size (%d) (Megatron: Data parallel size "
                      "should be divisible by partial DistOpt shard factor)",
                      n, dp_cp);
    /* the expert data-parallel size: world / (etp x ep x pp) */
    const int tp = a->tensor_model_parallel_size, ep = a->expert_model_parallel_size;
    const int etp = a->expert_tensor_parallel_size ? a->expert_tensor_parallel_size : tp;
    const int edp = a->world_size / (etp * ep * a->pipeline_model_parallel_size);
    if (a->num_experts && ep > 1 && edp % n != 0)
        mc_user_error("--num-distributed-optimizer-instances (%d) must divide the expert "
                      "data-parallel size (%d) (Megatron: Expert data parallel size should be "
                      "divisible by partial DistOpt shard factor)",
                      n, edp);
}

/* --rampup-batch-size's three strings (argparse keeps nargs='*' values as text; Megatron calls
 * int() on them when it builds the calculator). a->num_microbatches stays the final batch's, the
 * most any iteration uses: the buffers are planned for it. */
static void rampup_values(mc_args_t *a)
{
    if (a->n_rampup_batch_size == 0) return;
    long long v[3];
    for (int i = 0; i < 3; i++) v[i] = strtoll(a->rampup_batch_size[i], NULL, 10);
    if (v[0] < 1 || v[1] < 1 || v[2] < 0 || v[0] > INT_MAX || v[1] > INT_MAX)
        mc_user_error("--rampup-batch-size %lld %lld %lld: the start batch size and increment "
                      "must be positive and the ramp-up samples not negative",
                      v[0], v[1], v[2]);
    a->rampup_start = (int)v[0];
    a->rampup_increment = (int)v[1];
    a->rampup_samples = v[2];
}

/* --step-batch-size-schedule (Megatron main): refused with --global-batch-size (validate_args),
 * parsed as the calculator parses it (thresholds in tokens: pretrain_gpt passes seq_length).
 * Megatron main no longer builds the ramp-up calculator: --rampup-batch-size changes nothing
 * there, so with a schedule it is dropped, saying so. args.global_batch_size stays mbs x dp as
 * Megatron leaves it (the eval batch and iteration-based sizes derive from it); num_microbatches
 * becomes the largest entry's, the most any iteration uses, which the buffers are planned for. */
static void step_schedule(mc_args_t *a)
{
    if (!a->step_batch_size_schedule[0]) return;
    char err[512];
    if (mc_batch_schedule_parse(a->step_batch_size_schedule, a->seq_length,
                                a->batch_schedule_samples, a->batch_schedule_size,
                                MC_MAX_BATCH_SCHEDULE, &a->n_batch_schedule, err, sizeof(err)) != 0)
        mc_user_error("%s", err);
    if (a->rampup_start) {
        mc_input_warn("--rampup-batch-size is ignored with --step-batch-size-schedule (Megatron "
                      "main's calculator follows the schedule only)");
        a->rampup_start = a->rampup_increment = 0;
        a->rampup_samples = 0;
    }
    const int64_t per_step = (int64_t)a->micro_batch_size * a->data_parallel_size;
    for (int i = 0; i < a->n_batch_schedule; i++)
        if (a->batch_schedule_size[i] / per_step > a->num_microbatches)
            a->num_microbatches = (int)(a->batch_schedule_size[i] / per_step);
}

static void batch_sizes(mc_args_t *a)
{
    const int dp = a->data_parallel_size, mbs = a->micro_batch_size;
    if (a->step_batch_size_schedule[0] && a->global_batch_size)
        mc_user_error("cannot specify both --step-batch-size-schedule and --global-batch-size "
                      "(drop --global-batch-size: the schedule's last entry is the final batch)");
    if (a->global_batch_size == 0)
        a->global_batch_size = checked_int((int64_t)mbs * dp, "global batch size");
    const int64_t per_step = (int64_t)mbs * dp;
    if (a->global_batch_size % per_step != 0)
        mc_user_error("global batch size (%d) is not divisible by micro batch size (%d) times data "
                      "parallel size (%d)",
                      a->global_batch_size, mbs, dp);
    a->num_microbatches = (int)(a->global_batch_size / per_step);
    rampup_values(a);
    step_schedule(a);

    if (a->eval_micro_batch_size == 0) a->eval_micro_batch_size = mbs;
    if (a->eval_global_batch_size == 0) a->eval_global_batch_size = a->global_batch_size;
    if (a->eval_global_batch_size % ((int64_t)a->eval_micro_batch_size * dp) != 0)
        mc_user_error("eval global batch size (%d) is not divisible by eval micro batch size (%d) "
                      "times data parallel size (%d)",
                      a->eval_global_batch_size, a->eval_micro_batch_size, dp);
}

/* ---- pipeline parallelism ---- */

/* The virtual pipeline size: validate_args' "Uneven virtual pipeline parallelism" block
 * (Megatron-LM main), where --num-layers-per-virtual-pipeline-stage divides the layers of a
 * stage counting the embedding and the loss as layers under the account-for flags.
 * --pipeline-model-parallel-layout is refused by the parser (not implemented yet), so it takes
 * no part here. */
static int virtual_pipeline_size(const mc_args_t *a)
{
    const int pp = a->pipeline_model_parallel_size;
    const int L = a->num_layers + a->account_for_embedding_in_pipeline_split +
                  a->account_for_loss_in_pipeline_split;
    const int K = a->num_layers_per_virtual_pipeline_stage,
              V = a->num_virtual_stages_per_pipeline_rank;
    if (K && V)
        mc_user_error(
            "No more than one of the following arguments can be set at the same time: "
            "--num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank, "
            "--pipeline-model-parallel-layout (got --num-layers-per-virtual-pipeline-stage %d "
            "and --num-virtual-stages-per-pipeline-rank %d)",
            K, V);
    if (V) return V;
    if (!K) return 1;
    if (a->decoder_first_pipeline_num_layers || a->decoder_last_pipeline_num_layers)
        mc_user_error(
            "please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline "
            "parallel degree when enable uneven pipeline parallelism "
            "(--num-layers-per-virtual-pipeline-stage cannot be combined with "
            "--decoder-first/last-pipeline-num-layers)");
    char counted[160];
    snprintf(counted, sizeof(counted), "%s%s",
             a->account_for_embedding_in_pipeline_split
                 ? " + 1 for --account-for-embedding-in-pipeline-split"
                 : "",
             a->account_for_loss_in_pipeline_split ? " + 1 for --account-for-loss-in-pipeline-split"
                                                   : "");
    if (L % pp != 0)
        mc_user_error("number of layers of the model (--num-layers %d%s) must be divisible by the "
                      "pipeline-model-parallel size (%d)",
                      a->num_layers, counted, pp);
    if ((L / pp) % K != 0)
        mc_user_error(
            "number of layers per pipeline stage (%d = %s--num-layers %d%s%s / "
            "--pipeline-model-parallel-size %d) must be divisible by the number of layers "
            "per virtual pipeline stage (--num-layers-per-virtual-pipeline-stage %d)",
            L / pp, counted[0] ? "(" : "", a->num_layers, counted, counted[0] ? ")" : "", pp, K);
    return L / pp / K;
}

/* The schedule's checks (mc_pp_validate: the interleaved schedule's microbatch rules) for one
 * microbatch count, with where the count comes from. */
static void schedule_fits(const mc_args_t *a, int num_microbatches, bool forward_only,
                          const char *what, int gbs, int mbs)
{
    const mc_pp_config_t c = {
        .pp_rank = 0,
        .pp_size = a->pipeline_model_parallel_size,
        .vpp = a->virtual_pipeline_model_parallel_size,
        .num_microbatches = num_microbatches,
        .group_size = a->microbatch_group_size_per_vp_stage,
        .overlap_p2p_comm = a->overlap_p2p_comm,
        .forward_only = forward_only,
    };
    char err[512];
    if (mc_pp_validate(&c, err, sizeof(err)) != 0)
        mc_user_error(
            "%s (%s: %d microbatches = %sglobal batch size %d / (%smicro batch size %d x "
            "data parallel size %d), pipeline-model-parallel size %d, %d model chunks per "
            "pipeline rank, microbatch group size %d)",
            err, what, num_microbatches, forward_only ? "eval " : "", gbs,
            forward_only ? "eval " : "", mbs, a->data_parallel_size, c.pp_size, c.vpp,
            mc_pp_group_size(&c));
}

/* Virtual pipeline size and p2p overlap (validate_args), the layers of every (pp rank, model
 * chunk) (TransformerConfig.__post_init__, mc_pp_layers), and the schedule's microbatch rules
 * for training and evaluation (schedules.py, mc_pp_validate), in Megatron's order. */
static void pipeline(mc_args_t *a)
{
    const int pp = a->pipeline_model_parallel_size;
    const int vpp = virtual_pipeline_size(a);
    a->virtual_pipeline_model_parallel_size = vpp; /* a vpp of 1 is None: no interleaving */
    /* Overlap P2P communication is disabled if not using the interleaved schedule. */
    if (vpp == 1) a->overlap_p2p_comm = false;
    char err[512];
    if (vpp > 1) {
        /* validate_args' pp > 1 (overlap) / pp > 2 (no overlap) rules come before the layer
         * checks; mc_pp_validate owns their wording. A count of pp microbatches in groups of pp
         * passes every microbatch rule, so only the pp rules can fail here. */
        const mc_pp_config_t c = {.pp_size = pp,
                                  .vpp = vpp,
                                  .num_microbatches = pp,
                                  .group_size = pp,
                                  .overlap_p2p_comm = a->overlap_p2p_comm};
        if (mc_pp_validate(&c, err, sizeof(err)) != 0) mc_user_error("%s", err);
    }

    const mc_pp_layers_cfg_t lc = {.num_layers = a->num_layers,
                                   .pp_size = pp,
                                   .vpp = vpp,
                                   .first_stage_layers = a->decoder_first_pipeline_num_layers,
                                   .last_stage_layers = a->decoder_last_pipeline_num_layers,
                                   .account_embedding = a->account_for_embedding_in_pipeline_split,
                                   .account_loss = a->account_for_loss_in_pipeline_split};
    for (int r = 0; r < pp; r++)
        for (int c = 0; c < vpp; c++) {
            int first, n;
            if (mc_pp_layers(&lc, r, c, &first, &n, err, sizeof(err)) == 0) continue;
            char ctx[256];
            int len =
                snprintf(ctx, sizeof(ctx), "--num-layers %d, --pipeline-model-parallel-size %d",
                         lc.num_layers, pp);
            if (vpp > 1 && len < (int)sizeof(ctx))
                len += snprintf(ctx + len, sizeof(ctx) - (size_t)len,
                                ", %d virtual stages per pipeline rank", vpp);
            if (lc.first_stage_layers && len < (int)sizeof(ctx))
                len += snprintf(ctx + len, sizeof(ctx) - (size_t)len,
                                ", --decoder-first-pipeline-num-layers %d", lc.first_stage_layers);
            if (lc.last_stage_layers && len < (int)sizeof(ctx))
                snprintf(ctx + len, sizeof(ctx) - (size_t)len,
                         ", --decoder-last-pipeline-num-layers %d", lc.last_stage_layers);
            mc_user_error("%s (%s)", err, ctx);
        }

    schedule_fits(a, a->num_microbatches, false, "training", a->global_batch_size,
                  a->micro_batch_size);
    if (a->eval_iters > 0) {
        const int m = mc_args_eval_microbatches(a);
        schedule_fits(a, m, true, "evaluation", a->eval_global_batch_size,
                      a->eval_micro_batch_size);
    }
}

static void iteration_based(const mc_args_t *a)
{
    if (a->train_samples)
        mc_user_error("--train-iters and --train-samples are mutually exclusive (iteration-based "
                      "or sample-based training)");
    if (a->lr_decay_samples)
        mc_user_error("--lr-decay-samples needs sample-based training (use --lr-decay-iters with "
                      "--train-iters)");
    if (a->lr_warmup_samples)
        mc_user_error("--lr-warmup-samples needs sample-based training (use --lr-warmup-iters with "
                      "--train-iters)");
    if (a->lr_warmup_fraction >= 0 && a->lr_warmup_iters)
        mc_user_error("can only specify one of --lr-warmup-fraction and --lr-warmup-iters");
    if (a->rampup_start)
        mc_user_error("expected no batch-size rampup for iteration-based training "
                      "(--rampup-batch-size needs --train-samples in place of --train-iters; "
                      "Megatron refuses this too)");
}

static void sample_based(const mc_args_t *a)
{
    if (a->lr_decay_iters)
        mc_user_error("--lr-decay-iters needs iteration-based training (use --lr-decay-samples "
                      "with --train-samples)");
    if (a->lr_warmup_iters)
        mc_user_error("--lr-warmup-iters needs iteration-based training (use --lr-warmup-samples "
                      "with --train-samples)");
    if (a->lr_warmup_fraction >= 0 && a->lr_warmup_samples)
        mc_user_error("can only specify one of --lr-warmup-fraction and --lr-warmup-samples");
}

/* The scheduler's constructor asserts (core/optimizer_param_scheduler.py), in its units:
 * samples (training.get_optimizer_param_scheduler). */
static void lr_schedule(const mc_args_t *a)
{
    const int64_t gbs = a->global_batch_size;
    double decay, warmup;
    if (a->train_samples) {
        decay = (double)(a->lr_decay_samples ? a->lr_decay_samples : a->train_samples);
        warmup = a->lr_warmup_fraction >= 0 ? a->lr_warmup_fraction * decay
                                            : (double)a->lr_warmup_samples;
    } else {
        decay = (double)(a->lr_decay_iters ? a->lr_decay_iters : a->train_iters) * (double)gbs;
        warmup = a->lr_warmup_fraction >= 0 ? a->lr_warmup_fraction * decay
                                            : (double)a->lr_warmup_iters * (double)gbs;
    }
    if (!(warmup < decay))
        mc_user_error("the learning-rate warmup (%.15g samples) must be shorter than the decay "
                      "(%.15g samples) (fewer --lr-warmup-*, or more --lr-decay-* / --train-*)",
                      warmup, decay);
    if (a->lr_warmup_init > a->lr)
        mc_user_error("--lr-warmup-init (%g) must not exceed --lr (%g)", a->lr_warmup_init, a->lr);
}

static void training_length(mc_args_t *a)
{
    if (a->train_iters) iteration_based(a);
    if (a->train_samples) sample_based(a);
    if (a->train_iters || a->train_samples) lr_schedule(a);
    /* training.update_train_iters: the loop counts iterations either way; train_samples > 0
     * still marks sample-based training for the lr schedule. */
    mc_microbatches_t c;
    char err[512];
    if (mc_microbatches_init(&c, a, err, sizeof(err)) != 0) mc_user_error("%s", err);
    if (a->train_samples) a->train_iters = mc_microbatches_train_iters(&c, a->train_samples);
}

/* The batches of the ramp-up that training reaches, in the loop's order: Megatron checks each
 * at the start of its iteration (update_num_microbatches' consistency check) and its pipeline
 * schedule then takes that number of microbatches (the interleaved schedule's rules); here
 * both are user errors before any work starts. */
static void rampup_batches(const mc_args_t *a)
{
    if (!a->rampup_start && !a->n_batch_schedule) return;
    mc_microbatches_t c;
    char err[512];
    if (mc_microbatches_init(&c, a, err, sizeof(err)) != 0) mc_user_error("%s", err);
    c.current_global_batch_size = 0; /* every batch is new */
    int64_t consumed = 0;
    for (int64_t it = 0, before = 0; it < a->train_iters; it++) {
        if (mc_microbatches_update(&c, consumed)) {
            /* a schedule's early entries may be smaller than mbs x dp when a run resumes past
             * them on more ranks: after --load the loop checks the batches it reaches */
            if (mc_microbatches_check(&c, a, err, sizeof(err)) != 0) {
                if (a->n_batch_schedule && a->load[0]) goto next;
                mc_user_error("%s", err);
            }
            /* train(): "Number of microbatches should not decrease" */
            if (it > 0 && c.num_microbatches < before)
                mc_user_error("--step-batch-size-schedule: the number of microbatches should not "
                              "decrease; going from %lld to %d (make the batch sizes increase)",
                              (long long)before, c.num_microbatches);
            before = c.num_microbatches;
            schedule_fits(a, c.num_microbatches, false,
                          a->n_batch_schedule ? "training, step batch size schedule"
                                              : "training, batch size ramp-up",
                          c.current_global_batch_size, a->micro_batch_size);
        }
    next:
        if (a->rampup_start && consumed > c.rampup_samples) break; /* the final batch on */
        if (a->n_batch_schedule && consumed >= a->batch_schedule_samples[a->n_batch_schedule - 1])
            break;
        consumed += c.current_global_batch_size;
    }
}

static void model_shape(mc_args_t *a)
{
    const int h = a->hidden_size, heads = a->num_attention_heads;
    const int tp = a->tensor_model_parallel_size;
    if (a->ffn_hidden_size == 0)
        a->ffn_hidden_size =
            a->swiglu ? checked_int((int64_t)((4.0 * h * 2 / 3) / 64) * 64, "--ffn-hidden-size")
                      : checked_int(4 * (int64_t)h, "--ffn-hidden-size (4 x --hidden-size)");
    /* Megatron's SwiGLU default rounds down to a multiple of 64: below a hidden size of 24 it
     * is 0, an MLP with no units (Megatron goes on with empty weights) */
    if (a->ffn_hidden_size == 0)
        mc_user_error("--swiglu with --hidden-size %d gives an --ffn-hidden-size of 0 (Megatron's "
                      "int(4 x hidden x 2/3 / 64) x 64); give --ffn-hidden-size",
                      h);
    if (a->kv_channels == 0) {
        if (h % heads != 0)
            mc_user_error("--hidden-size (%d) must be divisible by --num-attention-heads (%d) (or "
                          "give --kv-channels)",
                          h, heads);
        a->kv_channels = h / heads;
    }
    if (heads % tp != 0)
        mc_user_error(
            "--num-attention-heads (%d) must be divisible by --tensor-model-parallel-size "
            "(%d)",
            heads, tp);
    if (!a->group_query_attention) a->num_query_groups = heads;
    if (heads % a->num_query_groups != 0)
        mc_user_error("--num-attention-heads (%d) must be divisible by --num-query-groups (%d)",
                      heads, a->num_query_groups);
    if (a->num_query_groups % tp != 0)
        mc_user_error("--num-query-groups (%d) must be divisible by --tensor-model-parallel-size "
                      "(%d) (each tp rank holds whole query groups)",
                      a->num_query_groups, tp);
    if (a->squared_relu && a->swiglu)
        mc_user_error("--squared-relu and --swiglu exclude one another (Megatron's activation is "
                      "one or the other)");
    if (a->max_position_embeddings < a->seq_length)
        mc_user_error("--max-position-embeddings (%d) must be greater than or equal to "
                      "--seq-length (%d)",
                      a->max_position_embeddings, a->seq_length);
    if (a->embedding_init_method_std == 0) a->embedding_init_method_std = a->init_method_std;
}

/* Context parallelism (config/context_parallel.h); the comm type defaults to Megatron's ["p2p"]. */
static void context_parallel(mc_args_t *a)
{
    char err[512];
    if (a->n_cp_comm_type == 0) {
        const char *const p2p[] = {"p2p"};
        mc_flag_set_list(a, mc_flag_find("--cp-comm-type"), p2p, 1);
    }
    if (mc_cp_validate(a, err, sizeof(err)) != 0) mc_user_error("%s", err);
}

/* Megatron-Core keeps the two bias flags in sync (add_qkv_bias is the narrower one). */
static void biases(mc_args_t *a)
{
    if (!a->add_bias_linear) a->bias_gelu_fusion = false;
    if (a->add_bias_linear) a->add_qkv_bias = true;
}

/* Megatron's legacy RoPE spellings, and what rotary embeddings need of the head size. */
static void position_embeddings(mc_args_t *a)
{
    if (a->use_rotary_position_embeddings)
        snprintf(a->position_embedding_type, sizeof(a->position_embedding_type), "rope");
    const bool rope = strcmp(a->position_embedding_type, "rope") == 0;
    if (!a->add_position_embedding && !rope)
        mc_user_error("--no-position-embedding is deprecated, use --position-embedding-type");
    if (!rope) return;
    /* RotaryEmbedding: dim = int(kv_channels * rotary_percent) frequencies in pairs */
    const int rot = (int)(a->kv_channels * a->rotary_percent);
    if (rot < 2 || rot % 2 != 0)
        mc_user_error("--rotary-percent (%g) of --kv-channels (%d) gives %d rotary dimensions; "
                      "it must be a positive even number",
                      a->rotary_percent, a->kv_channels, rot);
}

static void vocabulary(mc_args_t *a)
{
    /* sized by the tokenizer's own files (mc_args_open_data pads it); of the --tokenizer-model
     * types only TikTokenizer takes --vocab-size */
    if (a->vocab_size == 0 || tokenizer_files(a) ||
        (tokenizer_model(a) && strcmp(a->tokenizer_type, "TikTokenizer") != 0))
        return;
    const int tp = a->tensor_model_parallel_size;
    const int64_t v = mc_args_vocab_from_size(a);
    if (v > INT_MAX) mc_user_error("--vocab-size (%d) is too large", a->vocab_size);
    if (a->padded_vocab_size) {
        if (a->padded_vocab_size < v)
            mc_user_error("--padded-vocab-size (%d) is smaller than the vocabulary (%lld)",
                          a->padded_vocab_size, (long long)v);
        if (a->padded_vocab_size % tp != 0)
            mc_user_error("--padded-vocab-size (%d) must be divisible by "
                          "--tensor-model-parallel-size (%d)",
                          a->padded_vocab_size, tp);
        return;
    }
    a->padded_vocab_size = mc_padded_vocab_size((int)v, a->make_vocab_size_divisible_by, tp);
    if (a->padded_vocab_size < 0)
        mc_user_error("--vocab-size (%d) is too large to pad", a->vocab_size);
}

static void precision(mc_args_t *a)
{
    if (a->fp16 && a->bf16) mc_user_error("--fp16 and --bf16 are mutually exclusive");
    /* With dynamic loss scaling inf/nan gradients are the scaler's signal, not an error. */
    if (a->fp16 && a->loss_scale == 0) a->check_for_nan_in_loss_and_grad = false;
    /* Megatron: bf16 accumulates and reduces gradients in fp32 unless --grad-reduce-in-bf16
     * (which wins over --accumulate-allreduce-grads-in-fp32); without --bf16 the flag does
     * nothing */
    if (a->bf16) a->accumulate_allreduce_grads_in_fp32 = !a->grad_reduce_in_bf16;
}

/* Megatron's rerun state machine injects errors only where it validates results: refuse what
 * would be ignored. */
static void rerun_engine(const mc_args_t *a)
{
    if (a->error_injection_rate > 0 && strcmp(a->rerun_mode, "validate_results") != 0)
        mc_user_error("--error-injection-rate injects errors only with --rerun-mode "
                      "validate_results (add it, or drop the flag)");
    if (a->error_injection_rate > 0 && !a->check_for_nan_in_loss_and_grad &&
        !a->check_for_spiky_loss)
        mc_user_error("--error-injection-rate needs a result to validate (keep "
                      "--check-for-nan-in-loss-and-grad, or add --check-for-spiky-loss)");
}

/* --wandb-project: Megatron's last rank logs to Weights & Biases (global_vars._set_wandb_writer),
 * a Python service megatron-c does not run; the same scalars go to TensorBoard and the log. */
static void logging(mc_args_t *a)
{
    if (!a->wandb_project[0]) return;
    char shown[MC_SHOWN_MAX + 4], dir[MC_SHOWN_MAX + 4];
    if (a->tensorboard_dir[0])
        mc_input_warn("--wandb-project %s: Weights & Biases is a Python service megatron-c does "
                      "not run; the metrics are in --tensorboard-dir (%s) and the log",
                      mc_shown(a->wandb_project, shown), mc_shown(a->tensorboard_dir, dir));
    else
        mc_input_warn("--wandb-project %s: Weights & Biases is a Python service megatron-c does "
                      "not run; the metrics are in the log (and in --tensorboard-dir when given)",
                      mc_shown(a->wandb_project, shown));
}

/* validate_args' checkpoint rules, and OptimizerParamScheduler's assert on its two flags. */
static void checkpointing(mc_args_t *a)
{
    if (a->save[0] && a->save_interval == 0)
        mc_user_error("--save needs --save-interval (the iterations between checkpoints; the last "
                      "iteration is saved too)");
    if (a->save[0] && a->save_retain_interval > 0 && a->save_retain_interval % a->save_interval)
        mc_user_error("--save-retain-interval (%d) must be a multiple of --save-interval (%d)",
                      a->save_retain_interval, a->save_interval);
    if (a->override_opt_param_scheduler && a->use_checkpoint_opt_param_scheduler)
        mc_user_error("--override-opt-param-scheduler and --use-checkpoint-opt-param-scheduler "
                      "are mutually exclusive (both override and use-checkpoint are set)");
    /* Megatron: the legacy format gathers the distributed optimizer's state to dp rank 0 over
     * Gloo groups, so without them the state needs a distributed checkpoint format */
    if (!a->use_gloo_process_groups && a->use_distributed_optimizer &&
        strcmp(a->ckpt_format, "torch") == 0)
        mc_user_error("--disable-gloo-process-groups with --use-distributed-optimizer needs a "
                      "distributed checkpoint format (--ckpt-format torch_dist; Megatron's legacy "
                      "--ckpt-format torch gathers the optimizer's state over Gloo groups)");
    /* Megatron: "enabling --no-load-optim when skipping training" */
    if (a->skip_train) a->no_load_optim = true;
}

/* ---- every problem at once ---- */

/* The rule groups in Megatron's order. A group that derives values other groups read (the
 * data-parallel size, the microbatch count, the head size) is a prerequisite of those: when it
 * fails they are skipped, since they would judge values never set. Every other group runs
 * whatever failed before it, so a command line's problems are reported together. */
enum {
    R_REQUIRED = 1 << 0, /* nothing is sized without the required arguments */
    R_SIZES = 1 << 1,
    R_BATCH = 1 << 2,
    R_SHAPE = 1 << 3,
    R_PIPE = 1 << 4,   /* the virtual pipeline size */
    R_LENGTH = 1 << 5, /* the iterations of sample-based training */
    R_MOE = 1 << 6,    /* Megatron's MoE rules: what megatron-c lacks is listed on a valid line */
};
typedef struct {
    void (*run)(mc_args_t *a, int world_size);
    unsigned provides, needs;
} rule_t;

#define RULE(fn)                                                                                   \
    static void rule_##fn(mc_args_t *a, int world_size) { fn(a); }
RULE(check_fields)
RULE(check_required)
RULE(data_parallel)
RULE(distopt_instances)
RULE(recompute)
RULE(batch_sizes)
RULE(pipeline)
RULE(model_shape)
RULE(context_parallel)
RULE(biases)
RULE(position_embeddings)
RULE(vocabulary)
RULE(training_length)
RULE(rampup_batches)
RULE(precision)
RULE(rerun_engine)
RULE(checkpointing)
#undef RULE
/* the rules of their own files (cli/validate_optim.c, cli/validate_data.c) */
static void rule_optimizer(mc_args_t *a, int world_size) { mc_validate_optimizer(a); }
static void rule_muon(mc_args_t *a, int world_size) { mc_validate_muon(a); }
static void rule_data(mc_args_t *a, int world_size) { mc_validate_data(a); }
static void rule_parallel_sizes(mc_args_t *a, int world_size) { parallel_sizes(a, world_size); }
static void rule_moe(mc_args_t *a, int world_size) { mc_validate_moe(a, world_size); }
static void rule_pipeline_overlaps(mc_args_t *a, int world_size)
{
    (void)world_size;
    mc_validate_pipeline_overlaps(a);
}
static void note_problem(const char *line);
static void rule_logging(mc_args_t *a, int world_size);
static void rule_moe_unimplemented(mc_args_t *a, int world_size)
{
    (void)world_size;
    mc_moe_unimplemented(a, note_problem);
}

static const rule_t RULES[] = {
    {rule_check_fields, R_REQUIRED, 0},
    {rule_check_required, R_REQUIRED, 0},
    {rule_parallel_sizes, R_SIZES, R_REQUIRED},
    {rule_data_parallel, 0, R_REQUIRED},
    {rule_distopt_instances, 0, R_REQUIRED | R_SIZES},
    {rule_recompute, 0, R_REQUIRED},
    {rule_batch_sizes, R_BATCH, R_REQUIRED | R_SIZES},
    {rule_pipeline, R_PIPE, R_REQUIRED | R_SIZES | R_BATCH},
    {rule_pipeline_overlaps, 0, R_REQUIRED | R_SIZES | R_PIPE},
    {rule_model_shape, R_SHAPE, R_REQUIRED},
    {rule_context_parallel, 0, R_REQUIRED | R_SIZES | R_SHAPE},
    {rule_biases, 0, R_REQUIRED},
    {rule_position_embeddings, 0, R_REQUIRED | R_SHAPE},
    {rule_vocabulary, 0, R_REQUIRED},
    {rule_optimizer, 0, R_REQUIRED},
    {rule_training_length, R_LENGTH, R_REQUIRED | R_SIZES | R_BATCH},
    {rule_rampup_batches, 0, R_REQUIRED | R_SIZES | R_BATCH | R_PIPE | R_LENGTH},
    {rule_precision, 0, R_REQUIRED},
    {rule_muon, 0, R_REQUIRED | R_SIZES},
    {rule_rerun_engine, 0, R_REQUIRED},
    {rule_data, 0, R_REQUIRED},
    {rule_checkpointing, 0, R_REQUIRED},
    {mc_mup_validate, 0, R_REQUIRED | R_SHAPE}, /* config/mup.h */
    {rule_moe, R_MOE, R_REQUIRED | R_SIZES | R_SHAPE},
    {rule_moe_unimplemented, 0, R_REQUIRED | R_SIZES | R_SHAPE | R_MOE},
    {rule_logging, 0, R_REQUIRED}, /* last: a note only for a line without problems */
};

#define MAX_PROBLEMS 32
static char g_problems[MAX_PROBLEMS][1024];
static int g_n_problems;
static jmp_buf g_rule_failed;

static void rule_logging(mc_args_t *a, int world_size)
{
    (void)world_size;
    if (g_n_problems == 0) logging(a);
}

/* A problem that does not stop its rule group (a group reporting several at once). */
static void note_problem(const char *line)
{
    if (g_n_problems < MAX_PROBLEMS)
        snprintf(g_problems[g_n_problems++], sizeof(g_problems[0]), "%s", line);
}

__attribute__((noreturn)) static void trap_problem(const char *line)
{
    note_problem(line);
    longjmp(g_rule_failed, 1);
}

/* Runs the rule groups under the trap; the problems are left in g_problems. */
static int run_rules(mc_args_t *args, int world_size)
{
    if (world_size < 1) mc_fatal("internal error: world size %d", world_size);
    volatile unsigned failed = 0; /* volatile: read after longjmp */
    g_n_problems = 0;
    for (volatile size_t i = 0; i < sizeof(RULES) / sizeof(RULES[0]); i++) {
        if (RULES[i].needs & failed) continue;
        mc_user_error_trap(trap_problem);
        if (setjmp(g_rule_failed) == 0) RULES[i].run(args, world_size);
        else failed |= RULES[i].provides;
        mc_user_error_trap(NULL);
    }
    return g_n_problems;
}

int mc_args_check(mc_args_t *args, int world_size, char *first, size_t n)
{
    const int problems = run_rules(args, world_size);
    if (problems > 0 && first && n > 0) snprintf(first, n, "%s", g_problems[0]);
    return problems;
}

void mc_args_finalize(mc_args_t *args, int world_size)
{
    if (run_rules(args, world_size) > 0) {
        const char *lines[MAX_PROBLEMS];
        for (int i = 0; i < g_n_problems; i++) lines[i] = g_problems[i];
        mc_user_errors(lines, g_n_problems);
    }
}

void mc_args_open_data(mc_args_t *a, mc_data_source_t *data)
{
    mc_data_config_t dc;
    mc_data_config_from_args(&dc, a);
    char err[1024];
    if (mc_data_source_open(data, &dc, true, err, sizeof(err)) != 0) mc_user_error("%s", err);
    if (a->padded_vocab_size == 0)
        a->padded_vocab_size = mc_padded_vocab_size(
            (int)data->vocab_size, a->make_vocab_size_divisible_by, a->tensor_model_parallel_size);
    else if (a->padded_vocab_size < data->vocab_size)
        mc_user_error("--padded-vocab-size (%d) is smaller than the tokenizer's vocabulary (%lld)",
                      a->padded_vocab_size, (long long)data->vocab_size);
}
