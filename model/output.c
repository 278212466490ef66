/* The output of the last stage (Megatron-core's GPTModel after its decoder): the final norm, the
 * output layer (column-parallel over the vocabulary: this rank's logits, Megatron's
 * parallel_output), and the vocab-parallel cross-entropy in fp32 (_VocabParallelCrossEntropy:
 * the global max, then the global sum of exponentials and the target's logit, each reduced over
 * tp; the loss and, in training, its gradient in one pass over the logits). */
#include <math.h>

#include "base/error.h"
#include "model/block.h"

void mc_output_params(mc_gpt_t *m, bool shared)
{
    const mc_gpt_config_t *c = &m->cfg;
    mc_norm_params(m->final_norm, m, MC_PK_FINAL_NORM_W, -1, c->hidden);
    if (!c->tied) {
        mc_gpt_add_param(m, MC_PK_OUTPUT_W, -1, c->vocab, c->hidden,
                         c->output_layer_init_std > 0 ? c->output_layer_init_std : c->init_std, 0)
            ->embedding_or_output = true;
    } else if (shared) {
        /* Megatron zero-fills the last stage's copy and all-reduces it over the embedding
         * group, which makes it the first stage's initial word embeddings */
        mc_param_t *o = mc_gpt_add_param(m, MC_PK_OUTPUT_W, -1, c->vocab, c->hidden, 0, 0);
        o->shared_embedding = o->shared = o->embedding_or_output = true;
    }
}

void mc_output_norm(mc_gpt_t *m, mc_gpt_slot_t *sl)
{
    const int rows = mc_gpt_tp_dims(&m->cfg).seq * sl->batch;
    m->final_norm->forward(m, &sl->lnf, sl->x_final, m->p.t[MC_PK_FINAL_NORM_W],
                           m->p.t[MC_PK_FINAL_NORM_B], rows);
}

/* Vocab-parallel cross-entropy in fp32: with tp > 1 the global max, then the global sum-exp and
 * predicted logit, reduced over tp; then the loss, and in a training forward whose loss weight
 * is known the loss gradient in the same pass over the logits (left in their place: ce_fused).
 * One rank holding the whole vocabulary needs no reductions between the steps: the one op forms
 * the statistics too. */
static void cross_entropy(mc_gpt_t *m, mc_gpt_slot_t *sl, const mc_microbatch_t *mb, bool training)
{
    const mc_backend_t *be = m->be;
    const mc_gpt_config_t *c = &m->cfg;
    const mc_tp_dims_t t = mc_gpt_tp_dims(c);
    const mc_tp_t tp = mc_gpt_tp(m);
    const int S = c->seq, B = sl->batch, N = S * B;
    const mc_dtype_t dt = c->dt;
    const bool grad = training && mb->loss_weight > 0, stats = c->tp > 1;
    /* d loss / d loss[b,s] = mask * weight, times the loss scale (Megatron's scale_loss) */
    const float scale = mb->loss_weight * m->loss_scale;
    sl->grad_weight = grad ? mb->loss_weight : 0.0f;
    if (stats) {
        be->ce_max(be, dt, sl->ce_max, sl->logits, N, t.vocab);
        mc_tp_all_reduce(&tp, sl->ce_max, N, MC_DT_F32, MC_OP_MAX);
        be->ce_sums(be, dt, sl->ce_sum, sl->ce_target, sl->logits, sl->ce_max, sl->labels, S, B,
                    t.vocab, t.vocab_start);
        mc_tp_all_reduce(&tp, sl->ce_sum, 2L * N, MC_DT_F32, MC_OP_SUM); /* with ce_target */
    }
    be->ce_fused(be, dt, sl->losses, sl->logits, stats ? sl->ce_max : NULL,
                 stats ? sl->ce_sum : NULL, stats ? sl->ce_target : NULL, sl->labels,
                 grad ? sl->loss_mask : NULL, scale, S, B, t.vocab, t.vocab_start);
    if (training && !grad && !stats) { /* the backward forms the gradient from these */
        be->ce_max(be, dt, sl->ce_max, sl->logits, N, t.vocab);
        be->ce_sums(be, dt, sl->ce_sum, sl->ce_target, sl->logits, sl->ce_max, sl->labels, S, B,
                    t.vocab, t.vocab_start);
    }
}

void mc_output_forward(mc_gpt_t *m, mc_gpt_slot_t *sl, const mc_microbatch_t *mb, bool training,
                       double *loss_sum, double *num_tokens)
{
    const mc_backend_t *be = m->be;
    const mc_gpt_config_t *c = &m->cfg;
    const mc_tp_dims_t t = mc_gpt_tp_dims(c);
    const mc_tp_t tp = mc_gpt_tp(m);
    const int N = c->seq * sl->batch;
    const size_t fb = (size_t)N * sizeof(float);

    be->linear_forward(
        be, c->dt, sl->logits,
        mc_tp_column_input(&tp, sl->lnf.out, m->gath, (long)t.seq * sl->batch * c->hidden),
        m->p.t[MC_PK_OUTPUT_W], NULL, N, c->hidden, t.vocab);
    /* MuP's _scale_logits: the logits (in their type) times the output multiplier */
    if (c->output_mult > 0 && c->output_mult != 1.0f)
        be->scale(be, c->dt, sl->logits, c->output_mult, (long)N * t.vocab);
    cross_entropy(m, sl, mb, training);

    /* The loss sum is a [b*s] reduction: done on the host in double for a layout-independent
     * order (the same sum for any backend), now or, with losses_out, after the caller's
     * synchronize (no wait here). */
    *num_tokens = mc_gpt_mb_tokens(mb);
    if (mb->losses_out) {
        be->memcpy_d2h_async(be, mb->losses_out, sl->losses, fb);
        *loss_sum = NAN;
        return;
    }
    be->memcpy_d2h(be, m->host_losses, sl->losses, fb);
    *loss_sum = mc_gpt_loss_sum(mb, m->host_losses);
}

double mc_gpt_loss_sum(const mc_microbatch_t *mb, const float *losses)
{
    double sum = 0;
    for (long i = 0; i < (long)mb->b * mb->s; i++)
        sum += (double)losses[i] * (double)mb->loss_mask[i];
    return sum;
}

double mc_gpt_mb_tokens(const mc_microbatch_t *mb)
{
    double cnt = 0;
    for (long i = 0; i < (long)mb->b * mb->s; i++) cnt += mb->loss_mask[i];
    return cnt;
}

/* dlogits in place of the logits: formed by the forward already (ce_fused, with the same weight),
 * else from the statistics: d objective / d loss[b,s] = mask * weight, times the loss scale
 * (Megatron's scale_loss). */
static void loss_backward(mc_gpt_t *m, mc_gpt_slot_t *sl, float weight)
{
    const mc_backend_t *be = m->be;
    const mc_tp_dims_t t = mc_gpt_tp_dims(&m->cfg);
    const int S = m->cfg.seq, B = sl->batch, N = S * B;
    if (sl->grad_weight > 0) {
        if (sl->grad_weight != weight)
            mc_fatal("internal error: the loss gradient was formed with weight %g, the backward "
                     "has %g",
                     (double)sl->grad_weight, (double)weight);
        return;
    }
    be->memcpy_d2d(be, m->dloss, sl->loss_mask, (size_t)N * sizeof(float));
    be->scale(be, MC_DT_F32, m->dloss, weight * m->loss_scale, N);
    be->ce_backward(be, m->cfg.dt, sl->logits, sl->logits, sl->ce_max, sl->ce_sum, sl->labels,
                    m->dloss, S, B, t.vocab, t.vocab_start);
}

/* --defer-embedding-wgrad-compute: whether this backward's weight gradient waits for the flush
 * (Megatron: len(grad_output_buffer) < wgrad_deferral_limit, or any with the limit 0), and if so
 * its input and output gradient kept. */
static bool defer_wgrad(mc_gpt_t *m, const mc_gpt_slot_t *sl, long NL, long NV)
{
    const mc_gpt_config_t *c = &m->cfg;
    if (c->defer_wgrad == 0 || (c->defer_wgrad_limit > 0 && m->defer_n >= c->defer_wgrad_limit))
        return false;
    if (m->defer_n >= c->defer_wgrad)
        mc_fatal("internal error: more than the %d planned output-layer weight gradients deferred",
                 c->defer_wgrad);
    const size_t e = mc_dtype_size(c->dt);
    const int k = m->defer_n++;
    m->be->memcpy_d2d(m->be, m->defer_in[k], sl->lnf.out, (size_t)NL * e);
    m->be->memcpy_d2d(m->be, m->defer_dout[k], sl->logits, (size_t)NV * e);
    m->defer_batch[k] = sl->batch;
    return true;
}

int mc_output_drain_wgrad(mc_gpt_t *m)
{
    const mc_backend_t *be = m->be;
    const mc_gpt_config_t *c = &m->cfg;
    const mc_tp_dims_t t = mc_gpt_tp_dims(c);
    const mc_tp_t tp = mc_gpt_tp(m);
    const int n = m->defer_n;
    for (int k = 0; k < n; k++) {
        const int B = m->defer_batch[k], N = c->seq * B;
        const long NL = (long)t.seq * B * c->hidden;
        be->linear_backward(be, c->dt, c->gdt, NULL, m->g.t[MC_PK_OUTPUT_W], NULL, m->defer_dout[k],
                            mc_tp_column_input(&tp, m->defer_in[k], m->gath, NL),
                            m->p.t[MC_PK_OUTPUT_W], N, c->hidden, t.vocab);
    }
    m->defer_n = 0;
    return n;
}

void mc_output_backward(mc_gpt_t *m, mc_gpt_slot_t *sl, float weight)
{
    const mc_backend_t *be = m->be;
    const mc_gpt_config_t *c = &m->cfg;
    const mc_tp_dims_t t = mc_gpt_tp_dims(c);
    const mc_tp_t tp = mc_gpt_tp(m);
    const int S = c->seq, B = sl->batch, N = S * B, H = c->hidden, rows = t.seq * B;
    const long NL = (long)rows * H;
    const mc_dtype_t dt = c->dt;
    /* the column-parallel (vocab) input gradient over the whole sequence, then summed */
    void *dfull = t.sp ? m->tmp_h : m->dx;

    loss_backward(m, sl, weight);
    if (c->output_mult > 0 && c->output_mult != 1.0f) /* through _scale_logits */
        be->scale(be, dt, sl->logits, c->output_mult, (long)N * t.vocab);
    if (defer_wgrad(m, sl, NL, (long)N * t.vocab)) /* the input gradient alone */
        be->linear_backward(be, dt, c->gdt, dfull, NULL, NULL, sl->logits, NULL,
                            m->p.t[MC_PK_OUTPUT_W], N, H, t.vocab);
    else
        be->linear_backward(be, dt, c->gdt, dfull, m->g.t[MC_PK_OUTPUT_W], NULL, sl->logits,
                            mc_tp_column_input(&tp, sl->lnf.out, m->gath, NL),
                            m->p.t[MC_PK_OUTPUT_W], N, H, t.vocab);
    mc_tp_column_input_grad(&tp, dfull, m->dx, NL);
    /* dx holds d lnf; the final norm's backward accumulates into dres (= d x_final) */
    be->memset0(be, m->dres, (size_t)NL * mc_dtype_size(dt));
    m->final_norm->backward_acc(m, m->dres, m->g.t[MC_PK_FINAL_NORM_W], m->g.t[MC_PK_FINAL_NORM_B],
                                m->dx, sl->x_final, m->p.t[MC_PK_FINAL_NORM_W], &sl->lnf, rows);
}
