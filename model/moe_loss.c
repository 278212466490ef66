/* The MoE router's losses (Megatron core_v0.15.0 router.py: apply_z_loss, _apply_aux_loss,
 * _apply_seq_aux_loss, _apply_global_aux_loss; moe_utils.py switch_load_balancing_loss_func,
 * z_loss_func). None is added to the lm loss: as MoEAuxLossAutoScaler does, each one's gradient
 * enters the router's logits in the backward, scaled by m->moe_aux_grad (the loss scale over the
 * microbatches), and each one / its coefficient is recorded in the tracker training_log reads
 * (save_to_aux_losses_tracker). Only training forwards compute them (self.training and grad
 * enabled). Each rank routes its own tokens (its sequence rows under tensor parallelism, cp 1):
 * aux_loss's and seq_aux_loss's counts are summed over tp x cp (the tp group, r->tp) and their
 * token counts are the local ones times its size, as router.py's; global_aux_loss's counts are
 * summed over tp x dp x cp (m->tp_dp_cp_group). */
#include <math.h>
#include <stdlib.h>

#include "base/error.h"
#include "kernels/moe.h"
#include "model/block.h"

const char *mc_moe_loss_name(mc_moe_loss_t k)
{
    static const char *const names[MC_MOE_LOSSES] = {
        "load_balancing_loss", "seq_load_balancing_loss", "global_load_balancing_loss", "z_loss"};
    return (unsigned)k < MC_MOE_LOSSES ? names[k] : "?";
}

/* Whether any load-balancing loss runs (router.is_aux_loss_enabled: a coefficient > 0), and
 * whether loss k does (its coefficient not 0). */
static bool aux_enabled(const mc_moe_cfg_t *q)
{
    return q->coeff[MC_MOE_AUX] > 0 || q->coeff[MC_MOE_SEQ_AUX] > 0 ||
           q->coeff[MC_MOE_GLOBAL_AUX] > 0;
}

static bool runs(const mc_moe_cfg_t *q, mc_moe_loss_t k)
{
    if (k == MC_MOE_Z) return q->tracked[MC_MOE_Z]; /* moe_z_loss_coeff is not None */
    return aux_enabled(q) && q->coeff[k] != 0;
}

void mc_moe_losses_plan(mc_gpt_t *m, mc_alloc_t *a, mc_moe_acts_t *s)
{
    const mc_moe_cfg_t *q = &m->cfg.moe;
    const long E = q->num_experts, f = sizeof(float);
    s->seq_counts = runs(q, MC_MOE_SEQ_AUX) ? mc_gpt_take(a, m->cfg.max_batch * E * f) : NULL;
    s->global_counts = runs(q, MC_MOE_GLOBAL_AUX) ? mc_gpt_take(a, E * f) : NULL;
}

void mc_moe_losses_plan_shared(mc_gpt_t *m, mc_alloc_t *ws)
{
    const mc_moe_cfg_t *q = &m->cfg.moe;
    const long E = q->num_experts, f = sizeof(float);
    m->moe_ws.seq_psum = runs(q, MC_MOE_SEQ_AUX) ? mc_gpt_take(ws, m->cfg.max_batch * E * f) : NULL;
}

/* The tracker's entry of loss k at global layer `layer` (allocated at first use). */
static float *tracker(mc_gpt_t *m, mc_moe_loss_t k, int layer)
{
    if (!m->moe_tracker) {
        m->moe_tracker = calloc((size_t)MC_MOE_LOSSES * (size_t)m->cfg.num_layers, sizeof(float));
        if (!m->moe_tracker) mc_fatal("out of host memory for the MoE losses");
    }
    return &m->moe_tracker[(long)k * m->cfg.num_layers + layer];
}

/* sum_i a[i] * b[i] of n device floats (the loss's torch.sum(probs_sum * tokens_per_expert)). */
static double device_dot(const mc_backend_t *be, const float *a, const float *b, long n)
{
    float *h = malloc((size_t)(2 * n) * sizeof(float));
    if (!h) mc_fatal("out of host memory for the MoE losses");
    be->memcpy_d2h(be, h, a, (size_t)n * sizeof(float));
    be->memcpy_d2h(be, h + n, b, (size_t)n * sizeof(float));
    double sum = 0;
    for (long i = 0; i < n; i++) sum += (double)h[i] * (double)h[n + i];
    free(h);
    return sum;
}

/* switch_load_balancing_loss_func's factor E * coeff / (topk * tokens^2) (Python's double). */
static double switch_factor(const mc_moe_cfg_t *q, double coeff, double tokens)
{
    return (double)q->num_experts * coeff / ((double)q->router.topk * tokens * tokens);
}

/* Records loss (a float32 tensor's value) / coeff for the log, as attach_and_log does. */
static void record(mc_layer_run_t *r, mc_moe_loss_t k, float loss)
{
    const float coeff = (float)r->c->moe.coeff[k];
    *tracker(r->m, k, (int)r->layer_no - 1) += loss / coeff;
}

/* global_aux_loss's counts: this microbatch's summed over tp x dp x cp, added to the layer's
 * running sum; the average over the steps so far goes to s->global_counts (the backward's).
 * Returns the number of tokens they count (tokens x the group's size). */
static double global_counts(mc_layer_run_t *r, mc_moe_acts_t *s, const float *counts)
{
    mc_gpt_t *m = r->m;
    const mc_backend_t *be = r->be;
    const int E = r->c->moe.num_experts;
    if (!m->moe_global_tokens) {
        m->moe_global_tokens = calloc((size_t)m->n_local_layers * (size_t)E, sizeof(float));
        m->moe_ga_steps = calloc((size_t)m->n_local_layers, sizeof(float));
        if (!m->moe_global_tokens || !m->moe_ga_steps)
            mc_fatal("out of host memory for the MoE losses");
    }
    float *h = malloc((size_t)E * sizeof(float));
    if (!h) mc_fatal("out of host memory for the MoE losses");
    be->memcpy_d2h(be, h, counts, (size_t)E * sizeof(float));
    mc_group_t *g = m->tp_dp_cp_group;
    const int size = g ? g->size : 1;
    if (size > 1) mc_all_reduce(m->comm, g, h, (size_t)E, MC_DT_F32, MC_OP_SUM);
    float *run = m->moe_global_tokens + (long)r->local * E, *steps = &m->moe_ga_steps[r->local];
    *steps += 1.0f;
    for (int e = 0; e < E; e++) {
        run[e] += h[e];
        h[e] = run[e] / *steps; /* global_tokens_per_expert / ga_steps, float32 tensors */
    }
    be->memcpy_h2d(be, s->global_counts, h, (size_t)E * sizeof(float));
    free(h);
    return (double)mc_moe_tokens(r) * size;
}

/* The load-balancing losses (routing(): aux_loss, seq_aux_loss, global_aux_loss, each on the
 * aux loss's own scores and top-k of the logits). */
static void aux_losses(mc_layer_run_t *r, mc_moe_acts_t *s)
{
    const mc_backend_t *be = r->be;
    const mc_moe_cfg_t *q = &r->c->moe;
    mc_moe_ws_t *w = &r->m->moe_ws;
    const int E = q->num_experts, k = q->router.topk, sig = q->router.sigmoid, B = r->B;
    const long T = mc_moe_tokens(r), S = T / B, tp = r->tp.size > 1 ? r->tp.size : 1;
    const mc_dtype_t dt = r->c->moe.rdt; /* the router's type */
    if (runs(q, MC_MOE_AUX) || runs(q, MC_MOE_GLOBAL_AUX))
        be->moe->aux_stats(be, dt, sig, k, s->aux_counts, w->psum, s->logits, T, E, 1);
    /* global_aux_loss first: it reduces this rank's own counts (over tp x dp x cp) */
    if (runs(q, MC_MOE_GLOBAL_AUX)) {
        const double c = q->coeff[MC_MOE_GLOBAL_AUX];
        const double tokens = global_counts(r, s, s->aux_counts);
        const double sum = device_dot(be, w->psum, s->global_counts, E);
        record(r, MC_MOE_GLOBAL_AUX, (float)sum * (float)switch_factor(q, c, tokens));
    }
    if (runs(q, MC_MOE_AUX)) {
        const double c = q->coeff[MC_MOE_AUX];
        /* summed over tp in place (global_aux_loss has read the local ones) */
        mc_tp_all_reduce(&r->tp, s->aux_counts, E, MC_DT_F32, MC_OP_SUM);
        const double sum = device_dot(be, w->psum, s->aux_counts, E);
        record(r, MC_MOE_AUX, (float)sum * (float)switch_factor(q, c, (double)(T * tp)));
    }
    if (runs(q, MC_MOE_SEQ_AUX)) {
        /* [S, B * E]: each sequence's tokens count for it alone, the loss / B */
        const double c = q->coeff[MC_MOE_SEQ_AUX];
        be->moe->aux_stats(be, dt, sig, k, s->seq_counts, w->seq_psum, s->logits, T, E, B);
        mc_tp_all_reduce(&r->tp, s->seq_counts, (long)B * E, MC_DT_F32, MC_OP_SUM);
        const double sum = device_dot(be, w->seq_psum, s->seq_counts, (long)B * E);
        record(r, MC_MOE_SEQ_AUX,
               (float)sum * (float)switch_factor(q, c, (double)(S * tp)) / (float)B);
    }
}

/* apply_z_loss's coefficient: --moe-z-loss-coeff over the tp x cp group (each rank's mean is
 * over its own tokens; the router's gradient sums over the group); a Python float. */
static double z_coeff(const mc_layer_run_t *r)
{
    const int tp = r->tp.size > 1 ? r->tp.size : 1;
    return r->c->moe.coeff[MC_MOE_Z] / (double)tp;
}

/* The scale of the losses' injected gradients: MoEAuxLossAutoScaler's (m->moe_aux_grad), with
 * --calculate-per-token-loss times the local tokens (aux_loss * activation.shape[0]). */
static float grad_scale(const mc_layer_run_t *r)
{
    const float g = r->m->moe_aux_grad;
    return r->c->moe.per_token_loss ? g * (float)mc_moe_tokens(r) : g;
}

void mc_moe_losses_forward(mc_layer_run_t *r, mc_moe_acts_t *s)
{
    const mc_moe_cfg_t *q = &r->c->moe;
    if (!r->training || !r->grad) return; /* self.training and torch.is_grad_enabled() */
    if (runs(q, MC_MOE_Z)) {
        /* z_loss_func: mean(logsumexp(logits)^2) * coeff, tensors of the router's type (float
         * arithmetic, rounded to it), and its / coeff for the tracker: each tp rank's own value
         * (no reduce group; the log prints the last rank's) */
        const mc_backend_t *be = r->be;
        const mc_dtype_t rdt = r->c->moe.rdt;
        const float coeff = (float)z_coeff(r);
        float *zsum = r->m->moe_ws.psum, z;
        const long T = mc_moe_tokens(r);
        be->moe->z_loss(be, rdt, zsum, s->logits, T, q->num_experts);
        be->memcpy_d2h(be, &z, zsum, sizeof(float));
        const float loss = (float)mc_moe_round(rdt, (float)mc_moe_round(rdt, z / (float)T) * coeff);
        *tracker(r->m, MC_MOE_Z, (int)r->layer_no - 1) += (float)mc_moe_round(rdt, loss / coeff);
    }
    if (aux_enabled(q)) aux_losses(r, s);
}

void mc_moe_losses_backward(mc_layer_run_t *r, mc_moe_acts_t *s, void *dlogits)
{
    const mc_backend_t *be = r->be;
    const mc_moe_cfg_t *q = &r->c->moe;
    const int E = q->num_experts, sig = q->router.sigmoid, B = r->B;
    const long T = mc_moe_tokens(r), tp = r->tp.size > 1 ? r->tp.size : 1;
    const mc_dtype_t dt = r->c->moe.rdt; /* the router's type */
    const float g = grad_scale(r);
    if (runs(q, MC_MOE_AUX)) {
        const float coef = (float)switch_factor(q, q->coeff[MC_MOE_AUX], (double)(T * tp)) * g;
        be->moe->aux_backward(be, dt, sig, dlogits, s->logits, s->aux_counts, coef, T, E, 1);
    }
    if (runs(q, MC_MOE_SEQ_AUX)) {
        const double f = switch_factor(q, q->coeff[MC_MOE_SEQ_AUX], (double)(T / B * tp));
        const float coef = (float)f / (float)B * g;
        be->moe->aux_backward(be, dt, sig, dlogits, s->logits, s->seq_counts, coef, T, E, B);
    }
    if (runs(q, MC_MOE_GLOBAL_AUX)) {
        const mc_group_t *grp = r->m->tp_dp_cp_group;
        const double tokens = (double)T * (grp ? grp->size : 1);
        const float coef = (float)switch_factor(q, q->coeff[MC_MOE_GLOBAL_AUX], tokens) * g;
        be->moe->aux_backward(be, dt, sig, dlogits, s->logits, s->global_counts, coef, T, E, 1);
    }
    if (runs(q, MC_MOE_Z) && q->coeff[MC_MOE_Z] != 0) {
        const float coef = (float)z_coeff(r) / (float)T * g;
        be->moe->z_loss_backward(be, dt, dlogits, s->logits, coef, T, E);
    }
}

void mc_gpt_moe_take_losses(mc_gpt_t *m, float *out)
{
    const long n = (long)MC_MOE_LOSSES * m->cfg.num_layers;
    for (long i = 0; i < n; i++) {
        out[i] = m->moe_tracker ? m->moe_tracker[i] : 0.0f;
        if (m->moe_tracker) m->moe_tracker[i] = 0.0f;
    }
}

void mc_gpt_moe_step_end(mc_gpt_t *m)
{
    if (!m->moe_global_tokens) return;
    const long E = m->cfg.moe.num_experts;
    for (long i = 0; i < m->n_local_layers * E; i++) m->moe_global_tokens[i] = 0.0f;
    for (int i = 0; i < m->n_local_layers; i++) m->moe_ga_steps[i] = 0.0f;
}
