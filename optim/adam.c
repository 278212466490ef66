#include <math.h>
#include <string.h>

#include "optim/adam.h"

long mc_adam_state_bytes(const mc_gpt_t *model) { return 2 * model->n_elems * (long)sizeof(float); }

int mc_adam_init(mc_adam_t *opt, mc_gpt_t *model, const mc_args_t *args)
{
    memset(opt, 0, sizeof(*opt));
    const mc_backend_t *be = model->be;
    size_t bytes = (size_t)model->n_elems * sizeof(float);
    opt->model = model;
    opt->exp_avg = be->alloc(be, bytes);
    opt->exp_avg_sq = be->alloc(be, bytes);
    opt->beta1 = args->adam_beta1;
    opt->beta2 = args->adam_beta2;
    opt->eps = args->adam_eps;
    opt->clip_grad = args->clip_grad;
    return opt->exp_avg && opt->exp_avg_sq ? 0 : -1;
}

void mc_adam_free(mc_adam_t *opt)
{
    const mc_backend_t *be = opt->model ? opt->model->be : NULL;
    if (be) {
        if (opt->exp_avg) be->free(be, opt->exp_avg);
        if (opt->exp_avg_sq) be->free(be, opt->exp_avg_sq);
    }
    memset(opt, 0, sizeof(*opt));
}

/* Norms go parameter by parameter (not over the flat buffer) so alignment padding never counts
 * and each tensor's sum is formed the same way in every layout. */
static double sumsq_params(const mc_gpt_t *m, const float *base)
{
    double s = 0;
    for (int i = 0; i < m->n_params; i++)
        s += m->be->sumsq(m->be, base + m->params[i].offset, m->params[i].numel);
    return s;
}

double mc_grad_norm(const mc_gpt_t *model) { return sqrt(sumsq_params(model, model->grad_buf)); }
double mc_params_norm(const mc_gpt_t *model) { return sqrt(sumsq_params(model, model->param_buf)); }

long mc_grad_num_zeros(const mc_gpt_t *m)
{
    long z = 0;
    for (int i = 0; i < m->n_params; i++)
        z += m->be->count_zeros(m->be, m->grad_buf + m->params[i].offset, m->params[i].numel);
    return z;
}

void mc_clip_grads(mc_gpt_t *model, double total_norm, double clip_grad)
{
    if (clip_grad <= 0) return;
    double coeff = clip_grad / (total_norm + 1.0e-6);
    if (coeff < 1.0) model->be->scale(model->be, model->grad_buf, (float)coeff, model->n_elems);
}

void mc_adam_step(mc_adam_t *opt, double lr, double wd)
{
    const mc_gpt_t *m = opt->model;
    opt->step++;
    for (int i = 0; i < m->n_params; i++) {
        const mc_param_t *p = &m->params[i];
        m->be->adam_step(m->be, m->param_buf + p->offset, m->grad_buf + p->offset,
                         opt->exp_avg + p->offset, opt->exp_avg_sq + p->offset, p->numel,
                         (float)lr, (float)opt->beta1, (float)opt->beta2, (float)opt->eps,
                         p->no_wd ? 0.0f : (float)wd, opt->step);
    }
}
