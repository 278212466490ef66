/* OptimizerParamScheduler in sample units. The arithmetic follows Megatron's expression order
 * (and pow(x, 0.5) rather than sqrt) so the values are the same doubles Python computes. */
#include "optim/lr.h"

#include <math.h>
#include <string.h>

#include "base/error.h"

void mc_lr_sched_init(mc_lr_sched_t *s, const mc_lr_config_t *c)
{
    memset(s, 0, sizeof(*s));
    if (c->no_length)
        mc_user_error("either --train-iters or --train-samples must be given (add one of them)");
    s->init_lr = c->init_lr;
    s->max_lr = c->max_lr;
    s->min_lr = c->min_lr;
    s->warmup_steps = c->warmup_steps;
    s->decay_steps = c->decay_steps;
    s->decay_style = c->decay_style;
    s->start_wd = c->start_wd;
    s->end_wd = c->end_wd;
    s->wd_incr_steps = c->wd_incr_steps;
    s->wd_incr_style = c->wd_incr_style;

    /* The constructor's asserts, in Megatron's order. */
    if (!(s->min_lr >= 0.0))
        mc_user_error("--min-lr (%g) must be >= 0 (raise --min-lr)", s->min_lr);
    if (!(s->max_lr >= s->min_lr))
        mc_user_error("--lr (%g) must be >= --min-lr (%g) (lower --min-lr)", s->max_lr, s->min_lr);
    if (!(s->init_lr <= s->max_lr))
        mc_user_error("--lr-warmup-init (%g) must be <= --lr (%g) (lower --lr-warmup-init)",
                      s->init_lr, s->max_lr);
    if (!(s->decay_steps > 0))
        mc_user_error("the lr decay length must be > 0 samples, got %lld (raise --lr-decay-iters "
                      "or --lr-decay-samples)",
                      (long long)s->decay_steps);
    if (!(s->warmup_steps < (double)s->decay_steps))
        mc_user_error("lr warmup (%.17g samples) must be shorter than lr decay (%lld samples) "
                      "(lower the warmup or raise --lr-decay-iters/--lr-decay-samples)",
                      s->warmup_steps, (long long)s->decay_steps);
    if (!(s->start_wd >= 0.0))
        mc_user_error("start weight decay (%g) must be >= 0 (raise --start-weight-decay)",
                      s->start_wd);
    if (!(s->end_wd >= s->start_wd))
        mc_user_error("end weight decay (%g) must be >= start weight decay (%g) "
                      "(raise --end-weight-decay)",
                      s->end_wd, s->start_wd);

    s->decoupled_max_lr = c->decoupled_max_lr;
    s->decoupled_min_lr = c->decoupled_min_lr;
    s->mup_max_lr = c->mup_max_lr;
    s->mup_min_lr = c->mup_min_lr;
    s->num_steps = 0; /* step(0) */
}

/* get_lr(param_group): the group's max_lr and min_lr with the scheduler's warmup and decay */
static double lr_at(const mc_lr_sched_t *s, int64_t num_steps, double max_lr, double min_lr)
{
    const double n = (double)num_steps;

    /* linear warmup */
    if (s->warmup_steps > 0 && n <= s->warmup_steps)
        return s->init_lr + (max_lr - s->init_lr) * n / s->warmup_steps;

    if (s->decay_style == MC_LR_CONSTANT) return max_lr;

    if (num_steps > s->decay_steps) return min_lr;

    if (s->decay_style == MC_LR_INVERSE_SQRT) {
        double w = 1.0 > s->warmup_steps ? 1.0 : s->warmup_steps; /* max(warmup, 1) */
        double k = num_steps > 1 ? n : 1.0;                       /* max(num_steps, 1) */
        double lr = max_lr * pow(w, 0.5) / pow(k, 0.5);
        return lr > min_lr ? lr : min_lr; /* max(min_lr, lr) */
    }

    double decay_ratio = (n - s->warmup_steps) / ((double)s->decay_steps - s->warmup_steps);
    double delta_lr = max_lr - min_lr;
    double coeff;
    if (s->decay_style == MC_LR_LINEAR) coeff = 1.0 - decay_ratio;
    else coeff = 0.5 * (cos(M_PI * decay_ratio) + 1.0); /* MC_LR_COSINE */
    return min_lr + coeff * delta_lr;
}

double mc_lr_at(const mc_lr_sched_t *s, int64_t num_steps)
{
    return lr_at(s, num_steps, s->max_lr, s->min_lr);
}

double mc_decoupled_lr_at(const mc_lr_sched_t *s, int64_t num_steps)
{
    if (s->decoupled_max_lr < 0) return -1;
    return lr_at(s, num_steps, s->decoupled_max_lr, s->decoupled_min_lr);
}

double mc_mup_lr_at(const mc_lr_sched_t *s, int64_t num_steps)
{
    if (s->mup_max_lr <= 0) return -1;
    return lr_at(s, num_steps, s->mup_max_lr, s->mup_min_lr);
}

double mc_wd_at(const mc_lr_sched_t *s, int64_t num_steps)
{
    if (num_steps > s->wd_incr_steps) return s->end_wd;
    if (s->wd_incr_style == MC_WD_CONSTANT) return s->end_wd;

    double incr_ratio = (double)num_steps / (double)s->wd_incr_steps;
    double delta_wd = s->end_wd - s->start_wd;
    double coeff;
    if (s->wd_incr_style == MC_WD_LINEAR) coeff = incr_ratio;
    else coeff = 0.5 * (cos(M_PI * (1 - incr_ratio)) + 1.0); /* MC_WD_COSINE */
    return s->start_wd + coeff * delta_wd;
}

void mc_lr_sched_step(mc_lr_sched_t *s, int64_t increment) { s->num_steps += increment; }
