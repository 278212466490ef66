#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "optim/adam.h"
#include "optim/muon.h"

void mc_opt_segments_full(const mc_gpt_t *m, mc_opt_seg_t **segs, int *n, long *state_len)
{
    *segs = calloc((size_t)(m->n_params ? m->n_params : 1), sizeof(mc_opt_seg_t));
    if (!*segs) mc_fatal("out of host memory");
    for (int i = 0; i < m->n_params; i++) {
        const mc_param_t *p = &m->params[i];
        (*segs)[i] =
            (mc_opt_seg_t){.off = p->offset, .state_off = p->offset, .len = p->numel, .param = i};
    }
    *n = m->n_params;
    *state_len = m->n_elems;
}

long mc_adam_state_bytes(long state_len, mc_dtype_t dt, mc_dtype_t gdt)
{
    const int copies = 2 + (dt != MC_DT_F32) + (gdt != MC_DT_F32);
    return copies * state_len * (long)sizeof(float);
}

int mc_adam_init(mc_adam_t *opt, mc_gpt_t *model, const mc_optim_config_t *c, mc_opt_seg_t *segs,
                 int n_segs, long state_len)
{
    memset(opt, 0, sizeof(*opt));
    const mc_backend_t *be = model->be;
    size_t bytes = (size_t)(state_len ? state_len : 1) * sizeof(float);
    opt->model = model;
    opt->segs = segs;
    opt->n_segs = n_segs;
    opt->state_len = state_len;
    opt->step_list = calloc((size_t)(n_segs ? n_segs : 1), sizeof(mc_adam_tensor_t));
    if (!opt->step_list) mc_fatal("out of host memory");
    opt->exp_avg = be->alloc(be, bytes);
    opt->exp_avg_sq = be->alloc(be, bytes);
    if (model->cfg.dt != MC_DT_F32 && !(opt->master = be->alloc(be, bytes))) return -1;
    if (model->cfg.gdt != MC_DT_F32 && !(opt->main_grad = be->alloc(be, bytes))) return -1;
    opt->beta1 = c->adam_beta1;
    opt->beta2 = c->adam_beta2;
    opt->eps = c->adam_eps;
    if (c->mup_hidden_mult > 0 && c->mup_hidden_mult != 1.0)
        opt->mup_eps = c->adam_eps * c->mup_hidden_mult;
    opt->clip_grad = c->clip_grad;
    if (c->muon.on && mc_muon_init(opt, &c->muon) != 0) return -1;
    return opt->exp_avg && opt->exp_avg_sq ? 0 : -1;
}

void mc_adam_free(mc_adam_t *opt)
{
    const mc_backend_t *be = opt->model ? opt->model->be : NULL;
    if (be) {
        float *bufs[] = {opt->exp_avg, opt->exp_avg_sq, opt->master, opt->main_grad};
        for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
            if (bufs[i]) be->free(be, bufs[i]);
    }
    mc_muon_free(opt);
    free(opt->segs);
    free(opt->step_list);
    memset(opt, 0, sizeof(*opt));
}

float *mc_opt_param(const mc_adam_t *opt, const mc_opt_seg_t *s)
{
    return opt->master ? opt->master + s->state_off : (float *)opt->model->param_buf + s->off;
}

float *mc_opt_grad(const mc_adam_t *opt, const mc_opt_seg_t *s)
{
    return opt->main_grad ? opt->main_grad + s->state_off : (float *)opt->model->grad_buf + s->off;
}

void mc_opt_master_from_model(mc_adam_t *opt)
{
    const mc_gpt_t *m = opt->model;
    if (!opt->master) return;
    for (int i = 0; i < opt->n_segs; i++) {
        const mc_opt_seg_t *s = &opt->segs[i];
        m->be->convert(m->be, opt->master + s->state_off, MC_DT_F32, mc_gpt_param_at(m, s->off),
                       m->cfg.dt, s->len);
    }
}

void mc_opt_prepare_grads(mc_adam_t *opt)
{
    const mc_gpt_t *m = opt->model;
    if (!opt->main_grad) return;
    for (int i = 0; i < opt->n_segs; i++) {
        const mc_opt_seg_t *s = &opt->segs[i];
        m->be->convert(m->be, opt->main_grad + s->state_off, MC_DT_F32, mc_gpt_grad_at(m, s->off),
                       m->cfg.gdt, s->len);
    }
}

bool mc_opt_unscale_and_check(mc_adam_t *opt, float inv_scale)
{
    const mc_backend_t *be = opt->model->be;
    bool found = false;
    for (int i = 0; i < opt->n_segs; i++) {
        float *g = mc_opt_grad(opt, &opt->segs[i]);
        const long n = opt->segs[i].len;
        if (inv_scale != 1.0f) be->scale(be, MC_DT_F32, g, inv_scale, n);
        found |= be->has_nonfinite(be, MC_DT_F32, g, n) != 0;
    }
    return found;
}

/* A parameter duplicated on every tp rank counts on tp rank 0 only (Megatron's
 * param_is_not_tensor_parallel_duplicate), so the sums reduced over tp count it once; the last
 * stage's copy of tied embeddings does not count (param_is_not_shared). */
static bool counted_here(const mc_gpt_t *m, int param)
{
    if (m->params[param].shared) return false;
    /* experts are never duplicates (Megatron's expert linears are tensor-parallel at any etp):
     * their sums reduce over the expert model-parallel group */
    return m->cfg.tp_rank == 0 || m->params[param].split != MC_SPLIT_NONE ||
           m->params[param].expert >= 0;
}

/* The sum over tensors x[i] (n[i] elements of dt, i < count) of their sums of squares: one
 * multi-tensor reduction on the device and one read (sumsq_multi, each tensor's sum the one sumsq
 * gives), added here in list order. Frees x and n. */
static double sumsq_list(const mc_backend_t *be, mc_dtype_t dt, const void **x, long *n, int count)
{
    double *each = malloc((size_t)(count > 0 ? count : 1) * sizeof(double)), s = 0;
    if (!each) mc_fatal("out of host memory");
    be->sumsq_multi(be, dt, x, n, count, each);
    for (int i = 0; i < count; i++) s += each[i];
    free(each), free(x), free(n);
    return s;
}

static void list_alloc(int cap, const void ***x, long **n)
{
    *x = malloc((size_t)(cap > 0 ? cap : 1) * sizeof(**x));
    *n = malloc((size_t)(cap > 0 ? cap : 1) * sizeof(**n));
    if (!*x || !*n) mc_fatal("out of host memory");
}

/* Whether parameter i is in the selection: every one (which < 0), the experts' (1), the
 * others (0). */
static bool selected(const mc_gpt_t *m, int i, int which)
{
    return which < 0 || (m->params[i].expert >= 0) == (which == 1);
}

/* The counted segments' grads (params: the masters) in segment order, of the selection. */
static double segments_sumsq(const mc_adam_t *opt, bool grads, int which)
{
    const mc_gpt_t *m = opt->model;
    const void **x;
    long *n;
    int count = 0;
    list_alloc(opt->n_segs, &x, &n);
    for (int i = 0; i < opt->n_segs; i++)
        if (counted_here(m, opt->segs[i].param) && selected(m, opt->segs[i].param, which)) {
            x[count] = grads ? mc_opt_grad(opt, &opt->segs[i]) : mc_opt_param(opt, &opt->segs[i]);
            n[count++] = opt->segs[i].len;
        }
    return sumsq_list(m->be, MC_DT_F32, x, n, count);
}

/* Sums go segment by segment (not over the flat buffer) so alignment padding never counts and,
 * without sharding, each tensor's sum is formed the same way in every layout. */
double mc_opt_grad_sumsq(const mc_adam_t *opt) { return segments_sumsq(opt, true, -1); }

double mc_opt_master_sumsq(const mc_adam_t *opt) { return segments_sumsq(opt, false, -1); }

double mc_opt_grad_sumsq_of(const mc_adam_t *opt, bool experts)
{
    return segments_sumsq(opt, true, experts ? 1 : 0);
}

double mc_opt_master_sumsq_of(const mc_adam_t *opt, bool experts)
{
    return segments_sumsq(opt, false, experts ? 1 : 0);
}

double mc_opt_grad_zeros(const mc_adam_t *opt)
{
    const mc_gpt_t *m = opt->model;
    double z = 0;
    for (int i = 0; i < opt->n_segs; i++)
        if (counted_here(m, opt->segs[i].param))
            z += (double)m->be->count_zeros(m->be, MC_DT_F32, mc_opt_grad(opt, &opt->segs[i]),
                                            opt->segs[i].len);
    return z;
}

static double params_sumsq(const mc_gpt_t *m, int which)
{
    const void **x;
    long *n;
    int count = 0;
    list_alloc(m->n_params, &x, &n);
    for (int i = 0; i < m->n_params; i++)
        if (counted_here(m, i) && selected(m, i, which)) {
            x[count] = mc_gpt_param_at(m, m->params[i].offset);
            n[count++] = m->params[i].numel;
        }
    return sumsq_list(m->be, m->cfg.dt, x, n, count);
}

double mc_params_sumsq(const mc_gpt_t *m) { return params_sumsq(m, -1); }

double mc_params_sumsq_of(const mc_gpt_t *m, bool experts)
{
    return params_sumsq(m, experts ? 1 : 0);
}

void mc_opt_scale_grads(mc_adam_t *opt, float s)
{
    const mc_gpt_t *m = opt->model;
    for (int i = 0; i < opt->n_segs; i++)
        m->be->scale(m->be, MC_DT_F32, mc_opt_grad(opt, &opt->segs[i]), s, opt->segs[i].len);
}

void mc_opt_scale_model_grads(mc_adam_t *opt, float s)
{
    const mc_gpt_t *m = opt->model;
    for (int i = 0; i < opt->n_segs; i++)
        m->be->scale(m->be, m->cfg.gdt, mc_gpt_grad_at(m, opt->segs[i].off), s, opt->segs[i].len);
}

void mc_clip_grads(mc_adam_t *opt, double total_norm, double clip_grad)
{
    if (clip_grad <= 0) return;
    double coeff = clip_grad / (total_norm + 1.0e-6);
    if (coeff < 1.0) mc_opt_scale_grads(opt, (float)coeff);
}

/* A segment's parameter group: the main one, MuP's hidden one, or --decoupled-lr's. */
enum { G_MAIN, G_MUP, G_DEC, N_GROUPS };

static int group_of(const mc_adam_t *opt, const mc_param_t *p, double decoupled_lr)
{
    if (decoupled_lr >= 0 && p->embedding_or_output) return G_DEC;
    return opt->mup_eps > 0 && p->mup_hidden ? G_MUP : G_MAIN;
}

static bool by_muon(const mc_adam_t *opt, const mc_opt_seg_t *s)
{
    return opt->muon && opt->muon->owns[s->param];
}

/* The step of the segments whose parameter is (inside true) or is not (false) in [first, first +
 * n); opt->step is the step's number already. */
static void step_part(mc_adam_t *opt, double lr, double decoupled_lr, double wd, int first, int n,
                      bool inside)
{
    const mc_gpt_t *m = opt->model;
    /* the groups' segments one after another, each group stepped by one call with its lr/eps */
    int count[N_GROUPS] = {0}, at[N_GROUPS];
    for (int i = 0; i < opt->n_segs; i++) {
        const mc_opt_seg_t *s = &opt->segs[i];
        if ((s->param >= first && s->param < first + n) == inside && !by_muon(opt, s))
            count[group_of(opt, &m->params[s->param], decoupled_lr)]++;
    }
    at[0] = 0;
    for (int g = 1; g < N_GROUPS; g++) at[g] = at[g - 1] + count[g - 1];
    for (int i = 0; i < opt->n_segs; i++) {
        const mc_opt_seg_t *s = &opt->segs[i];
        if ((s->param >= first && s->param < first + n) != inside || by_muon(opt, s)) continue;
        const int k = at[group_of(opt, &m->params[s->param], decoupled_lr)]++;
        opt->step_list[k] = (mc_adam_tensor_t){
            .p = mc_opt_param(opt, s),
            .g = mc_opt_grad(opt, s),
            .m = opt->exp_avg + s->state_off,
            .v = opt->exp_avg_sq + s->state_off,
            /* Megatron's _copy_main_params_to_model_params, in the same pass */
            .model = opt->master ? mc_gpt_param_at(m, s->off) : NULL,
            .n = s->len,
            .wd = m->params[s->param].no_wd ? 0.0f : (float)wd,
        };
    }
    const double lrs[N_GROUPS] = {lr, opt->mup_lr >= 0 ? opt->mup_lr : lr, decoupled_lr};
    const double eps[N_GROUPS] = {opt->eps, opt->mup_eps, opt->eps};
    for (int g = 0, k = 0; g < N_GROUPS; k += count[g++])
        if (count[g])
            m->be->adam_step(m->be, opt->step_list + k, count[g], m->cfg.dt, (float)lrs[g],
                             (float)opt->beta1, (float)opt->beta2, (float)eps[g], opt->step);
}

void mc_adam_step(mc_adam_t *opt, double lr, double decoupled_lr, double wd)
{
    opt->step++;
    if (opt->muon) mc_muon_step(opt, lr, wd, 0, 0, false);
    step_part(opt, lr, decoupled_lr, wd, 0, 0, false); /* every segment */
}

void mc_adam_step_first(mc_adam_t *opt, double lr, double decoupled_lr, double wd, int first, int n,
                        void (*between)(void *ctx, int first, int n), void *ctx)
{
    opt->step++;
    if (opt->muon) mc_muon_step(opt, lr, wd, first, n, true);
    step_part(opt, lr, decoupled_lr, wd, first, n, true);
    between(ctx, first, n);
    if (opt->muon) mc_muon_step(opt, lr, wd, first, n, false);
    step_part(opt, lr, decoupled_lr, wd, first, n, false);
}
