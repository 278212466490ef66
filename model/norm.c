/* The norms of the model (Megatron's LayerNorm and RMSNorm, --normalization) over rows of the
 * hidden size: the backend's ops, the residual add fused with one, their saved activations and
 * parameters, and --apply-layernorm-1p's (1 + w) weights. */
#include <stdlib.h>

#include "model/block.h"

static void ln_forward(const mc_gpt_t *m, mc_norm_acts_t *a, const void *x, const void *w,
                       const void *b, int rows)
{
    const mc_gpt_config_t *c = &m->cfg;
    m->be->layernorm_forward(m->be, c->dt, a->out, a->mean, a->rstd, x, w, b, rows, c->hidden,
                             c->eps);
}

static void ln_add_forward(const mc_gpt_t *m, void *sum, mc_norm_acts_t *a, const void *x,
                           const void *y, const void *w, const void *b, int rows)
{
    const mc_gpt_config_t *c = &m->cfg;
    m->be->add_layernorm_forward(m->be, c->dt, sum, a->out, a->mean, a->rstd, x, y, w, b, rows,
                                 c->hidden, c->eps);
}

static void ln_backward_acc(const mc_gpt_t *m, void *dx, void *dw, void *db, const void *dout,
                            const void *x, const void *w, const mc_norm_acts_t *a, int rows)
{
    const mc_gpt_config_t *c = &m->cfg;
    m->be->layernorm_backward_acc(m->be, c->dt, c->gdt, dx, dw, db, dout, x, w, a->mean, a->rstd,
                                  rows, c->hidden);
}

const mc_norm_ops_t mc_norm_layernorm = {
    .name = "LayerNorm",
    .bias = true,
    .forward = ln_forward,
    .add_forward = ln_add_forward,
    .backward_acc = ln_backward_acc,
};

static void rms_forward(const mc_gpt_t *m, mc_norm_acts_t *a, const void *x, const void *w,
                        const void *b, int rows)
{
    const mc_gpt_config_t *c = &m->cfg;
    m->be->rmsnorm_forward(m->be, c->dt, a->out, a->rstd, x, w, rows, c->hidden, c->eps);
}

static void rms_add_forward(const mc_gpt_t *m, void *sum, mc_norm_acts_t *a, const void *x,
                            const void *y, const void *w, const void *b, int rows)
{
    const mc_gpt_config_t *c = &m->cfg;
    m->be->add_rmsnorm_forward(m->be, c->dt, sum, a->out, a->rstd, x, y, w, rows, c->hidden,
                               c->eps);
}

static void rms_backward_acc(const mc_gpt_t *m, void *dx, void *dw, void *db, const void *dout,
                             const void *x, const void *w, const mc_norm_acts_t *a, int rows)
{
    const mc_gpt_config_t *c = &m->cfg;
    m->be->rmsnorm_backward_acc(m->be, c->dt, c->gdt, dx, dw, dout, x, w, a->rstd, rows, c->hidden);
}

const mc_norm_ops_t mc_norm_rmsnorm = {
    .name = "RMSNorm",
    .bias = false,
    .forward = rms_forward,
    .add_forward = rms_add_forward,
    .backward_acc = rms_backward_acc,
};

void mc_norm_plan(const mc_norm_ops_t *ops, const mc_gpt_t *m, mc_alloc_t *a, mc_norm_acts_t *acts,
                  long rows)
{
    const long f = sizeof(float);
    acts->out = mc_gpt_take(a, rows * m->cfg.hidden * (long)mc_dtype_size(m->cfg.dt));
    if (ops->bias) acts->mean = mc_gpt_take(a, rows * f); /* RMSNorm keeps only rstd */
    acts->rstd = mc_gpt_take(a, rows * f);
}

void mc_norm_params(const mc_norm_ops_t *ops, mc_gpt_t *m, mc_pkind_t weight, int layer,
                    int64_t size)
{
    /* --apply-layernorm-1p: Megatron's zero_centered_gamma initialises the weights to zero */
    mc_gpt_add_param(m, weight, layer, size, 0, 0, m->cfg.norm_1p ? 0.0f : 1.0f);
    if (ops->bias) mc_gpt_add_param(m, (mc_pkind_t)(weight + 1), layer, size, 0, 0, 0.0f);
}

/* ---- --apply-layernorm-1p ---- */

/* The most elements of one norm weight and the total of all (the ones vector, the copies). */
static void norm_1p_sizes(const mc_gpt_t *m, long *most, long *total)
{
    *most = *total = 1;
    for (int i = 0; i < m->n_params; i++)
        if (mc_pkind_norm_weight(m->params[i].kind)) {
            *total += m->params[i].numel;
            if (m->params[i].numel > *most) *most = m->params[i].numel;
        }
}

void mc_norm_1p_plan(mc_gpt_t *m, mc_alloc_t *ws)
{
    long most, total;
    norm_1p_sizes(m, &most, &total);
    const long e = (long)mc_dtype_size(m->cfg.dt);
    m->norm_1p_ones = mc_gpt_take(ws, most * e);
    m->norm_1p_eff = mc_gpt_take(ws, total * e);
}

/* The norm weight pointer *w of m->p, redirected to its (1 + w) copy. */
static void to_norm_1p(const mc_gpt_t *m, void **w)
{
    for (int i = 0; *w && i < m->n_params; i++)
        if (m->norm_1p[i] && mc_elem(m->param_buf, m->cfg.dt, m->params[i].offset) == *w) {
            *w = m->norm_1p[i];
            return;
        }
}

/* The ones vector, a (1 + w) copy per norm weight, and m->p's norm weights pointing at the
 * copies (the gradients stay w's: d(1 + w)/dw = 1). */
int mc_norm_1p_setup(mc_gpt_t *m)
{
    const mc_dtype_t dt = m->cfg.dt;
    long most, total, used = 0;
    norm_1p_sizes(m, &most, &total);
    m->norm_1p = calloc((size_t)m->n_params, sizeof(void *));
    uint16_t *ones = malloc((size_t)most * sizeof(float));
    if (!m->norm_1p || !ones) {
        free(ones);
        return -1;
    }
    for (long i = 0; i < most; i++)
        if (dt == MC_DT_F32) ((float *)(void *)ones)[i] = 1.0f;
        else ones[i] = dt == MC_DT_BF16 ? mc_bf16_from_f32(1.0f) : mc_f16_from_f32(1.0f);
    m->be->memcpy_h2d(m->be, m->norm_1p_ones, ones, (size_t)most * mc_dtype_size(dt));
    free(ones);
    for (int i = 0; i < m->n_params; i++)
        if (mc_pkind_norm_weight(m->params[i].kind)) {
            m->norm_1p[i] = mc_elem(m->norm_1p_eff, dt, used);
            used += m->params[i].numel;
        }
    for (int k = 0; k < MC_PK_COUNT; k++) {
        if (!mc_pkind_norm_weight((mc_pkind_t)k)) continue;
        to_norm_1p(m, &m->p.t[k]);
        for (int j = 0; j < m->n_local_layers; j++) to_norm_1p(m, &m->p.layers[j].t[k]);
    }
    return 0;
}

void mc_norm_1p_refresh(mc_gpt_t *m, int first, int n)
{
    for (int i = first; m->norm_1p && i < first + n; i++)
        if (m->norm_1p[i])
            m->be->add(m->be, m->cfg.dt, m->norm_1p[i],
                       mc_elem(m->param_buf, m->cfg.dt, m->params[i].offset), m->norm_1p_ones,
                       m->params[i].numel);
}
