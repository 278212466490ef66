/* Trainer set-up and one training step (Megatron's train_step for one rank). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/error.h"
#include "train/train.h"

int mc_trainer_init(mc_trainer_t *t, const mc_args_t *args, const mc_backend_t *be, mc_comm_t *comm)
{
    memset(t, 0, sizeof(*t));
    t->args = args;
    t->be = be;
    t->comm = comm;
    mc_gpt_config_t cfg;
    mc_gpt_config_from_args(&cfg, args);
    mc_gpt_build_params(&t->model, &cfg);
    if (mc_gpt_alloc(&t->model, be) != 0) return -1;
    mc_gpt_init_params(&t->model);
    if (mc_adam_init(&t->opt, &t->model, args) != 0) return -1;
    mc_lr_sched_init(&t->sched, args);

    /* host staging: one slot of max_batch rows per microbatch of a step */
    const size_t rows = (size_t)cfg.max_batch * (size_t)args->num_microbatches, s = (size_t)cfg.seq;
    t->sample_idx = malloc((size_t)cfg.max_batch * sizeof(int64_t));
    t->tokens = malloc(rows * s * sizeof(int32_t));
    t->labels = malloc(rows * s * sizeof(int32_t));
    t->positions = malloc(rows * s * sizeof(int32_t));
    t->segments = malloc(rows * s * sizeof(int32_t));
    t->loss_mask = malloc(rows * s * sizeof(float));
    if (!t->sample_idx || !t->tokens || !t->labels || !t->positions || !t->segments || !t->loss_mask)
        return -1;
    return 0;
}

void mc_trainer_free(mc_trainer_t *t)
{
    mc_adam_free(&t->opt);
    mc_gpt_free(&t->model);
    mc_data_source_free(&t->data);
    free(t->sample_idx);
    free(t->tokens);
    free(t->labels);
    free(t->positions);
    free(t->segments);
    free(t->loss_mask);
    memset(t, 0, sizeof(*t));
}

static bool is_finite(double x) { return !isnan(x) && !isinf(x); }

void mc_forward_backward(mc_trainer_t *t, const mc_microbatch_t *mbs, int M, mc_step_result_t *r)
{
    const mc_args_t *a = t->args;
    mc_gpt_t *m = &t->model;
    const uint32_t it = (uint32_t)(t->iteration + 1); /* dropout key: the iteration being run */

    memset(r, 0, sizeof(*r));
    m->be->memset0(m->be, m->grad_buf, (size_t)m->n_elems * sizeof(float));
    for (int i = 0; i < M; i++) {
        double sum, cnt;
        mc_gpt_forward(m, &mbs[i], it, true, &sum, &cnt);
        if (a->check_for_nan_in_loss_and_grad && !is_finite(sum))
            mc_fatal("found NaN in local forward loss calculation at iteration %lld "
                     "(lower --lr, or check the data)", (long long)it);
        /* Section 5.3: objective per microbatch is sum / max(tokens, 1) / M, or the plain sum
         * with --calculate-per-token-loss (scaled by the global token count below). */
        float w = a->calculate_per_token_loss ? 1.0f : (float)(1.0 / (fmax(cnt, 1.0) * M));
        mc_gpt_backward(m, it, w);
        r->loss_sum += sum;
        r->num_tokens += cnt;
    }
    if (a->calculate_per_token_loss && r->num_tokens > 0)
        m->be->scale(m->be, m->grad_buf, (float)(1.0 / r->num_tokens), m->n_elems);
}

void mc_train_step(mc_trainer_t *t, const mc_microbatch_t *mbs, int M, mc_step_result_t *r)
{
    const mc_args_t *a = t->args;
    mc_gpt_t *m = &t->model;

    mc_forward_backward(t, mbs, M, r);
    r->grad_norm = mc_grad_norm(m);
    if (a->check_for_nan_in_loss_and_grad && !is_finite(r->grad_norm))
        mc_fatal("found NaN or Inf in the gradient norm at iteration %lld "
                 "(lower --lr, or check the data)", (long long)(t->iteration + 1));
    mc_clip_grads(m, r->grad_norm, a->clip_grad);

    r->lr = mc_lr_at(&t->sched, t->sched.num_steps);
    mc_adam_step(&t->opt, r->lr, mc_wd_at(&t->sched, t->sched.num_steps));
    mc_lr_sched_step(&t->sched, (int64_t)a->micro_batch_size * a->data_parallel_size * M);
}
