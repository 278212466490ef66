/* The configs of a run, made once from the validated arguments (trainer/config.h). */
#include "trainer/config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "config/context_parallel.h"
#include "config/moe_pattern.h"
#include "config/tp_overlap_cfg.h"

/* The router's losses: each --moe-router-load-balancing-type's coefficient (router.py's
 * get_aux_loss_coeff, one per type) and training_log's track_names. One type is a string in
 * Megatron (validate_args turns a list of one into its element), and `"aux_loss" in type` is a
 * substring test then: seq_aux_loss and global_aux_loss track load_balancing_loss too (zeros). */
/* The pipelined GEMMs' chunk count: --tp-comm-overlap-cfg's num_splits, else 4 (Transformer
 * Engine's default for its pipelined method). A file megatron-c cannot take is refused. */
static int overlap_splits(const mc_args_t *a)
{
    if (!a->tp_comm_overlap_cfg[0]) return 4;
    mc_tp_overlap_cfg_t cfg;
    char err[512];
    if (mc_tp_overlap_cfg_read(a->tp_comm_overlap_cfg, &cfg, err, sizeof(err)))
        mc_user_error("--tp-comm-overlap-cfg: %s", err);
    return cfg.splits ? cfg.splits : 4;
}

static void moe_losses(mc_moe_cfg_t *q, const mc_args_t *a)
{
    static const char *const kinds[] = {"aux_loss", "seq_aux_loss", "global_aux_loss"};
    const int n = a->n_moe_router_load_balancing_type;
    for (int i = 0; i < (n ? n : 1); i++) {
        const char *type = n ? a->moe_router_load_balancing_type[i] : "aux_loss";
        const double coeff = a->n_moe_aux_loss_coeff ? strtod(a->moe_aux_loss_coeff[i], NULL) : 0;
        for (int k = 0; k < 3; k++) {
            if (strcmp(type, kinds[k]) == 0) {
                q->coeff[k] = coeff;
                q->tracked[k] = true;
            }
            if (n <= 1 && strstr(type, kinds[k])) q->tracked[k] = true;
        }
    }
    q->tracked[MC_MOE_Z] = a->moe_z_loss_coeff_set;
    q->coeff[MC_MOE_Z] = a->moe_z_loss_coeff_set ? a->moe_z_loss_coeff : 0;
}

/* The MoE layer's settings (validation has checked them, and refused what is not
 * implemented). */
static void moe_config(mc_moe_cfg_t *q, const mc_args_t *a)
{
    if (!a->num_experts) return;
    q->num_experts = a->num_experts;
    q->ffn = a->moe_ffn_hidden_size ? a->moe_ffn_hidden_size : a->ffn_hidden_size;
    q->router = (mc_moe_router_t){
        .num_experts = a->num_experts,
        .topk = a->moe_router_topk,
        .sigmoid = strcmp(a->moe_router_score_function, "sigmoid") == 0,
        .pre_softmax = a->moe_router_pre_softmax,
        .num_groups = a->moe_router_num_groups,
        .group_topk = a->moe_router_group_topk,
        .scaling_factor = a->moe_router_topk_scaling_factor,
    };
    q->shared_ffn = a->moe_shared_expert_intermediate_size;
    q->shared_gate = q->shared_ffn && a->moe_shared_expert_gate;
    q->shared_overlap = q->shared_ffn && a->moe_shared_expert_overlap;
    q->expert_bias = a->moe_router_enable_expert_bias;
    q->bias_update_rate = (float)a->moe_router_bias_update_rate;
    q->drop = a->moe_expert_capacity_factor_set; /* validation made a negative factor None */
    q->capacity_factor = a->moe_expert_capacity_factor;
    q->drop_by_position = strcmp(a->moe_token_drop_policy, "position") == 0;
    q->pad_to_capacity = a->moe_pad_expert_input_to_capacity;
    q->per_token_loss = a->calculate_per_token_loss;
    q->rdt = strcmp(a->moe_router_dtype, "fp32") == 0 ? MC_DT_F32
             : a->bf16                                ? MC_DT_BF16
             : a->fp16                                ? MC_DT_F16
                                                      : MC_DT_F32;
    q->allgather = strcmp(a->moe_token_dispatcher_type, "allgather") == 0;
    moe_losses(q, a);
    char err[256];
    if (a->num_layers > MC_MOE_MAX_LAYERS ||
        mc_moe_layer_pattern(a->moe_layer_freq, a->num_layers, q->layer, err, sizeof(err)) < 0)
        mc_fatal("internal error: --moe-layer-freq unchecked");
}

void mc_gpt_config_from_args(mc_gpt_config_t *c, const mc_args_t *a)
{
    memset(c, 0, sizeof(*c));
    c->num_layers = a->num_layers;
    c->hidden = a->hidden_size;
    c->heads = a->num_attention_heads;
    c->groups = a->num_query_groups > 0 ? a->num_query_groups : a->num_attention_heads;
    c->head_dim = a->kv_channels;
    c->ffn = a->ffn_hidden_size;
    /* context parallelism: this rank's two chunks of the sequence (config/context_parallel.h) */
    c->cp = a->context_parallel_size > 1 ? a->context_parallel_size : 1;
    c->seq_full = a->seq_length;
    c->seq = a->seq_length / c->cp;
    int p2p;
    mc_cp_levels(a, &c->cp_a2a, &p2p);
    c->cp_comm_one = a->n_cp_comm_type > 1 ? -1 : (int)mc_cp_comm_of_layer(a, 0);
    for (int l = 0; c->cp_comm_one < 0 && l < a->num_layers && l < MC_MAX_LAYER_LIST; l++)
        c->cp_comm[l] = (unsigned char)mc_cp_comm_of_layer(a, l);
    c->max_batch = a->micro_batch_size > a->eval_micro_batch_size ? a->micro_batch_size
                                                                  : a->eval_micro_batch_size;
    c->vocab = a->padded_vocab_size;
    c->max_pos = a->max_position_embeddings;
    c->eps = (float)a->norm_epsilon;
    c->bias = a->add_bias_linear;
    c->qkv_bias = a->add_qkv_bias;
    c->tied = !a->untie_embeddings_and_output_weights;
    c->rms = strcmp(a->normalization, "RMSNorm") == 0;
    c->qk_norm = a->qk_layernorm;
    c->wd_qk_norm = a->apply_wd_to_qk_layernorm;
    c->norm_1p = a->apply_layernorm_1p;
    /* Megatron's MLP: squared_relu, else bias_gelu_impl (tanh) with the fusion, else F.gelu */
    c->act = a->squared_relu       ? MC_ACT_SQUARED_RELU
             : a->bias_gelu_fusion ? MC_ACT_GELU_TANH
                                   : MC_ACT_GELU_ERF;
    c->swiglu = a->swiglu;
    c->pos = strcmp(a->position_embedding_type, "rope") == 0   ? MC_POS_ROPE
             : strcmp(a->position_embedding_type, "none") == 0 ? MC_POS_NONE
                                                               : MC_POS_LEARNED;
    if (c->pos == MC_POS_ROPE)
        c->rope = (mc_rope_cfg_t){.rot_dim = (int)(a->kv_channels * a->rotary_percent),
                                  .interleaved = a->rotary_interleaved,
                                  .base = a->rotary_base,
                                  .interp = a->rotary_seq_len_interpolation_factor,
                                  .scaling = a->use_rope_scaling ? a->rope_scaling_factor : 0};
    c->post_ln_residual = a->apply_residual_connection_post_layernorm;
    c->hidden_dropout = (float)a->hidden_dropout;
    c->attention_dropout = (float)a->attention_dropout;
    c->init_std = (float)a->init_method_std;
    c->embedding_init_std = (float)a->embedding_init_method_std;
    if (a->use_mup) { /* Megatron main's TransformerConfig.__post_init__ (config/mup.h) */
        const mc_mup_t u = mc_mup_derive(a);
        c->init_std = (float)u.init_std;
        c->softmax_scale = (float)u.softmax_scale;
        c->embedding_mult = (float)u.embedding_mult;
        c->output_mult = (float)u.output_mult;
        /* an untied output layer starts like the embedding (embedding_init_method) */
        c->output_layer_init_std = c->embedding_init_std;
    }
    c->seed = (uint64_t)a->seed;
    /* section 7: 16-bit params and activations; the grad buffer is fp32 for bf16 (Megatron sets
     * accumulate_allreduce_grads_in_fp32, unless --grad-reduce-in-bf16) and the param type for
     * fp16 unless asked for fp32 */
    c->dt = a->bf16 ? MC_DT_BF16 : a->fp16 ? MC_DT_F16 : MC_DT_F32;
    c->gdt = (a->fp16 || a->bf16) && !a->accumulate_allreduce_grads_in_fp32 ? c->dt : MC_DT_F32;
    c->tp = a->tensor_model_parallel_size > 0 ? a->tensor_model_parallel_size : 1;
    c->tp_rank = 0; /* the trainer sets this rank's */
    c->sequence_parallel = a->sequence_parallel && c->tp > 1;
    /* --tp-comm-overlap: 4 chunks, Transformer Engine's default num_splits for its pipelined
     * overlaps, or --tp-comm-overlap-cfg's */
    if (a->tp_comm_overlap && c->sequence_parallel)
        c->tp_overlap = (mc_tp_overlap_t){.chunks = overlap_splits(a),
                                          .ag = a->tp_comm_overlap_ag,
                                          .rs = a->tp_comm_overlap_rs,
                                          .bulk_dgrad = a->tp_comm_bulk_dgrad,
                                          .bulk_wgrad = a->tp_comm_bulk_wgrad};
    c->recompute = strcmp(a->recompute_granularity, "selective") == 0 ? MC_RECOMPUTE_SELECTIVE
                   : strcmp(a->recompute_granularity, "full") != 0    ? MC_RECOMPUTE_NONE
                   : strcmp(a->recompute_method, "block") == 0        ? MC_RECOMPUTE_FULL_BLOCK
                                                                      : MC_RECOMPUTE_FULL_UNIFORM;
    c->recompute_num_layers = a->recompute_num_layers;
    /* a step defers at most its microbatches (the ramp's steps have fewer), or the limit */
    if (a->defer_embedding_wgrad_compute) {
        const int lim = a->wgrad_deferral_limit,
                  most = a->num_microbatches > 0 ? a->num_microbatches : 1;
        c->defer_wgrad_limit = lim;
        c->defer_wgrad = lim > 0 && lim < most ? lim : most;
    }
    c->n_chunks = 1;
    c->chunk[0] =
        (mc_chunk_cfg_t){.first_layer = 0, .n_layers = c->num_layers, .pre = true, .post = true};
    c->slots[0] = 0;
    c->slots[1] = 1;
    moe_config(&c->moe, a);
    /* Megatron reads the flag's type (moe_freq_type: a list when it holds '['), with or
     * without experts */
    c->dist_per_layer = strchr(a->moe_layer_freq, '[') || atoi(a->moe_layer_freq) > 1;
}

/* --lr-decay-style and --weight-decay-incr-style by name (the flag table accepts these names
 * only; WSD is refused there as not implemented). */
static mc_lr_decay_style_t decay_style(const char *s)
{
    if (!strcmp(s, "constant")) return MC_LR_CONSTANT;
    if (!strcmp(s, "linear")) return MC_LR_LINEAR;
    if (!strcmp(s, "cosine")) return MC_LR_COSINE;
    if (!strcmp(s, "inverse-square-root")) return MC_LR_INVERSE_SQRT;
    if (!strcmp(s, "WSD"))
        mc_user_error("--lr-decay-style WSD is not supported yet (use constant, linear, cosine or "
                      "inverse-square-root)");
    mc_user_error("unknown --lr-decay-style '%s' (use constant, linear, cosine or "
                  "inverse-square-root)",
                  s);
}

static mc_wd_incr_style_t wd_incr_style(const char *s)
{
    if (!strcmp(s, "constant")) return MC_WD_CONSTANT;
    if (!strcmp(s, "linear")) return MC_WD_LINEAR;
    if (!strcmp(s, "cosine")) return MC_WD_COSINE;
    mc_user_error("unknown --weight-decay-incr-style '%s' (use constant, linear or cosine)", s);
}

/* training.get_optimizer_param_scheduler: iteration-based lengths are *_iters times the global
 * batch, sample-based ones *_samples, --lr-warmup-fraction a fraction of the decay. */
void mc_lr_config_from_args(mc_lr_config_t *c, const mc_args_t *a)
{
    memset(c, 0, sizeof(*c));
    const int64_t gbs = a->global_batch_size;
    const bool fraction = a->lr_warmup_fraction >= 0;
    /* Sample-based first: validation derives train_iters from train_samples, so train_iters
     * is set in both modes (Megatron decides before deriving it). */
    if (a->train_samples > 0) {
        c->decay_steps = a->lr_decay_samples ? a->lr_decay_samples : a->train_samples;
        c->wd_incr_steps = a->train_samples;
        c->warmup_steps = fraction ? a->lr_warmup_fraction * (double)c->decay_steps
                                   : (double)a->lr_warmup_samples;
    } else if (a->train_iters > 0) {
        int64_t decay_iters = a->lr_decay_iters ? a->lr_decay_iters : a->train_iters;
        c->decay_steps = decay_iters * gbs;
        c->wd_incr_steps = a->train_iters * gbs;
        c->warmup_steps = fraction ? a->lr_warmup_fraction * (double)c->decay_steps
                                   : (double)(a->lr_warmup_iters * gbs);
    } else {
        c->no_length = true; /* the scheduler refuses it (the planner needs none) */
    }
    c->init_lr = a->lr_warmup_init;
    c->max_lr = a->lr;
    c->min_lr = a->min_lr;
    c->decay_style = decay_style(a->lr_decay_style);
    c->wd_incr_style = wd_incr_style(a->weight_decay_incr_style);
    if (c->wd_incr_style == MC_WD_CONSTANT) {
        /* validate_args: both come from --weight-decay in the constant style */
        c->start_wd = c->end_wd = a->weight_decay;
    } else {
        if (!a->start_weight_decay_set || !a->end_weight_decay_set)
            mc_user_error("--weight-decay-incr-style %s needs --start-weight-decay and "
                          "--end-weight-decay (give both)",
                          a->weight_decay_incr_style);
        c->start_wd = a->start_weight_decay;
        c->end_wd = a->end_weight_decay;
    }
    c->decoupled_max_lr = a->decoupled_lr; /* < 0: not given */
    c->decoupled_min_lr = a->decoupled_min_lr >= 0 ? a->decoupled_min_lr : a->min_lr;
    const mc_mup_t u = mc_mup_derive(a); /* get_mup_config_overrides: lr x 1/width_mult */
    if (u.on && u.width_mult != 1.0) {
        c->mup_max_lr = a->lr * u.hidden_lr_mult;
        c->mup_min_lr = a->min_lr * u.hidden_lr_mult;
    }
}

static void optim_config(mc_optim_config_t *c, const mc_args_t *a)
{
    memset(c, 0, sizeof(*c));
    c->adam_beta1 = a->adam_beta1;
    c->adam_beta2 = a->adam_beta2;
    c->adam_eps = a->adam_eps;
    const mc_mup_t u = mc_mup_derive(a);
    if (u.on && u.width_mult != 1.0) c->mup_hidden_mult = u.hidden_lr_mult;
    c->clip_grad = a->clip_grad;
    c->use_distributed_optimizer = a->use_distributed_optimizer;
    c->fp16 = a->fp16;
    c->bf16 = a->bf16;
    c->loss_scale = a->loss_scale;
    c->initial_loss_scale = a->initial_loss_scale;
    c->min_loss_scale = a->min_loss_scale;
    c->loss_scale_window = a->loss_scale_window;
    c->hysteresis = a->hysteresis;
    mc_muon_config_t *mu = &c->muon;
    mu->on = strcmp(a->optimizer, "muon") == 0;
    mu->momentum = a->muon_momentum;
    mu->extra_scale = a->muon_extra_scale_factor;
    mu->nesterov = a->muon_nesterov;
    mu->split_qkv = a->muon_split_qkv;
    mu->bf16_matmul = strcmp(a->muon_fp32_matmul_prec, "medium") == 0;
    mu->ns_steps = (int)a->muon_num_ns_steps;
    snprintf(mu->coefficients, sizeof(mu->coefficients), "%s", a->muon_coefficient_type);
    mu->scale = strcmp(a->muon_scale_mode, "unit_rms_norm") == 0   ? MC_MUON_UNIT_RMS_NORM
                : strcmp(a->muon_scale_mode, "shape_scaling") == 0 ? MC_MUON_SHAPE_SCALING
                                                                   : MC_MUON_SPECTRAL;
}

static void ddp_config(mc_ddp_config_t *c, const mc_args_t *a)
{
    memset(c, 0, sizeof(*c));
    c->use_distributed_optimizer = a->use_distributed_optimizer;
    c->overlap_grad_reduce = a->overlap_grad_reduce;
    c->overlap_param_gather = a->overlap_param_gather;
    c->overlap_param_gather_with_optimizer_step = a->overlap_param_gather_with_optimizer_step;
    c->bucket_size = (long)a->ddp_bucket_size;
    c->num_buckets = a->ddp_num_buckets;
    c->dp_cp_size = a->data_parallel_size * a->context_parallel_size;
    c->num_instances =
        a->num_distributed_optimizer_instances > 1 ? a->num_distributed_optimizer_instances : 1;
    c->pad_buckets_for_high_nccl_busbw = a->ddp_pad_buckets_for_high_nccl_busbw;
    c->average_in_collective = a->ddp_average_in_collective;
    c->calculate_per_token_loss = a->calculate_per_token_loss;
}

void mc_pp_plan_from_args(mc_pp_plan_t *p, const mc_args_t *a)
{
    memset(p, 0, sizeof(*p));
    p->layers = (mc_pp_layers_cfg_t){
        .num_layers = a->num_layers,
        .pp_size = a->pipeline_model_parallel_size > 1 ? a->pipeline_model_parallel_size : 1,
        .vpp = a->virtual_pipeline_model_parallel_size > 1 ? a->virtual_pipeline_model_parallel_size
                                                           : 1,
        .first_stage_layers = a->decoder_first_pipeline_num_layers,
        .last_stage_layers = a->decoder_last_pipeline_num_layers,
        .account_embedding = a->account_for_embedding_in_pipeline_split,
        .account_loss = a->account_for_loss_in_pipeline_split};
    p->group_size = a->microbatch_group_size_per_vp_stage;
    p->overlap_p2p_comm = a->overlap_p2p_comm;
    p->overlap_warmup_flush = a->overlap_p2p_comm_warmup_flush;
    p->num_microbatches = a->num_microbatches;
    p->eval_microbatches = a->eval_iters > 0 ? mc_args_eval_microbatches(a) : 0;
    if (p->eval_microbatches < 0) p->eval_microbatches = 0;
    p->ramp_start = a->rampup_start;
    p->ramp_increment = a->rampup_increment;
    p->global_batch_size = a->global_batch_size;
    p->batch_per_microbatch = a->micro_batch_size * a->data_parallel_size;
    p->n_step_sizes = a->n_batch_schedule;
    p->step_sizes = a->batch_schedule_size;
}

mc_tokenizer_spec_t mc_tokenizer_spec_of(const mc_args_t *a)
{
    return (mc_tokenizer_spec_t){
        .type = a->tokenizer_type,
        .vocab_file = a->vocab_file,
        .merge_file = a->merge_file,
        .tokenizer_model = a->tokenizer_model,
        .vocab_size = a->vocab_size,
        .vocab_extra_ids = a->vocab_extra_ids,
        .tiktoken_pattern = a->tiktoken_pattern[0] ? a->tiktoken_pattern : NULL,
        .tiktoken_num_special_tokens = a->tiktoken_num_special_tokens,
        .tiktoken_special_tokens =
            a->n_tiktoken_special_tokens ? (const char *const *)a->tiktoken_special_tokens : NULL,
        .n_tiktoken_special_tokens = a->n_tiktoken_special_tokens,
        .legacy = a->legacy_tokenizer};
}

/* a * b, or INT64_MAX when it overflows (Python's int would not; the dataset then refuses the
 * count as too many samples). Operands are non-negative counts. */
static int64_t mul_sat(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

void mc_gpt_num_samples(const mc_args_t *a, int64_t out[3])
{
    int64_t eval_gbs =
        a->eval_global_batch_size > 0 ? a->eval_global_batch_size : a->global_batch_size;
    out[0] =
        a->train_samples > 0 ? a->train_samples : mul_sat(a->train_iters, a->global_batch_size);
    int64_t points = a->eval_interval > 0 ? a->train_iters / a->eval_interval : 0;
    points = points < INT64_MAX ? points + 1 : INT64_MAX;
    out[1] = mul_sat(mul_sat(points, a->eval_iters), eval_gbs);
    out[2] = mul_sat(a->eval_iters, eval_gbs);
}

void mc_gpt_data_config_from_args(mc_gpt_data_config_t *c, const mc_args_t *a, int32_t eod,
                                  int32_t pad)
{
    memset(c, 0, sizeof *c);
    c->n_data_path = a->n_data_path;
    c->data_path = a->data_path;
    c->split = a->split[0] ? a->split : NULL;
    c->seq_length = a->seq_length;
    c->seed = a->seed;
    mc_gpt_num_samples(a, c->num_samples);
    c->mid_level_dataset_surplus = 0.005;
    c->drop_last_partial_validation_sequence = true;
    c->sample.eod = eod;
    c->sample.pad = pad;
    c->sample.eod_mask_loss = a->eod_mask_loss;
    c->sample.reset_position_ids = a->reset_position_ids;
    c->sample.reset_attention_mask = a->reset_attention_mask;
    c->cache_path = a->data_cache_path; /* "" when not given: the default per prefix */
}

void mc_data_config_from_args(mc_data_config_t *c, const mc_args_t *a)
{
    memset(c, 0, sizeof(*c));
    c->tokenizer = mc_tokenizer_spec_of(a);
    mc_gpt_data_config_from_args(&c->gpt, a, 0, MC_PAD_TOKEN_ID);
    c->gpt.mid_level_dataset_surplus = a->mid_level_dataset_surplus;
    c->gpt.mock = a->mock_data;
    c->gpt.n_split_data_path[MC_SPLIT_TRAIN] = a->n_train_data_path;
    c->gpt.split_data_path[MC_SPLIT_TRAIN] = a->train_data_path;
    c->gpt.n_split_data_path[MC_SPLIT_VALID] = a->n_valid_data_path;
    c->gpt.split_data_path[MC_SPLIT_VALID] = a->valid_data_path;
    c->gpt.n_split_data_path[MC_SPLIT_TEST] = a->n_test_data_path;
    c->gpt.split_data_path[MC_SPLIT_TEST] = a->test_data_path;
    c->padded_vocab_size = a->padded_vocab_size;
    c->vocab_divisible_by = a->make_vocab_size_divisible_by;
    c->tp = a->tensor_model_parallel_size;
    c->fim = (mc_fim_config_t){
        .on = a->fim_data,
        .rate = a->fim_rate,
        .spm_rate = a->fim_spm_rate,
        .fragment_rate = a->fim_fragment_rate,
        .fragment_rate_set = a->fim_fragment_rate_set,
        .split_sample = a->fim_split_sample[0] ? a->fim_split_sample : NULL,
        .no_prefix = a->fim_no_prefix[0] ? a->fim_no_prefix : NULL,
        .prefix = a->fim_prefix_token,
        .middle = a->fim_middle_token,
        .suffix = a->fim_suffix_token,
        .pad = a->fim_pad_token,
        .eod = a->fim_eod_token,
        .num_workers = a->num_workers,
        .seed = a->seed,
    };
}

void mc_run_config(mc_run_config_t *c, const mc_args_t *a)
{
    memset(c, 0, sizeof(*c));
    mc_gpt_config_from_args(&c->model, a);
    c->parallel =
        (mc_parallel_config_t){.tp = a->tensor_model_parallel_size,
                               .pp = a->pipeline_model_parallel_size,
                               .cp = a->context_parallel_size,
                               .cp_a2a = a->n_hierarchical_context_parallel_sizes == 2
                                             ? atoi(a->hierarchical_context_parallel_sizes[0])
                                             : 0,
                               .tp_pp_dp_mapping = a->use_tp_pp_dp_mapping,
                               .untied_embeddings = a->untie_embeddings_and_output_weights,
                               .num_experts = a->num_experts,
                               .ep = a->expert_model_parallel_size,
                               .etp = a->expert_tensor_parallel_size,
                               .dist_opt_instances = a->num_distributed_optimizer_instances};
    c->data_parallel_size = a->data_parallel_size;
    ddp_config(&c->ddp, a);
    optim_config(&c->optim, a);
    mc_lr_config_from_args(&c->sched, a);
    mc_pp_plan_from_args(&c->pipeline, a);
    mc_data_config_from_args(&c->data, a);
}
