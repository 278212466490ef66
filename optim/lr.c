/* OptimizerParamScheduler in sample units. The arithmetic follows Megatron's expression order
 * (and pow(x, 0.5) rather than sqrt) so the values are the same doubles Python computes. */
#include "optim/lr.h"

#include <math.h>
#include <string.h>

#include "base/error.h"

static int parse_decay_style(const char *s)
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

static int parse_wd_style(const char *s)
{
    if (!strcmp(s, "constant")) return MC_WD_CONSTANT;
    if (!strcmp(s, "linear")) return MC_WD_LINEAR;
    if (!strcmp(s, "cosine")) return MC_WD_COSINE;
    mc_user_error("unknown --weight-decay-incr-style '%s' (use constant, linear or cosine)", s);
}

void mc_lr_sched_init(mc_lr_sched_t *s, const mc_args_t *a)
{
    memset(s, 0, sizeof(*s));
    const int64_t gbs = a->global_batch_size;
    const bool fraction = a->lr_warmup_fraction >= 0;

    /* Sample-based first: finalize derives train_iters from train_samples, so train_iters
     * is set in both modes (Megatron decides before deriving it). */
    if (a->train_samples > 0) { /* sample-based training */
        s->decay_steps = a->lr_decay_samples ? a->lr_decay_samples : a->train_samples;
        s->wd_incr_steps = a->train_samples;
        s->warmup_steps = fraction ? a->lr_warmup_fraction * (double)s->decay_steps
                                   : (double)a->lr_warmup_samples;
    } else if (a->train_iters > 0) { /* iteration-based training */
        int64_t decay_iters = a->lr_decay_iters ? a->lr_decay_iters : a->train_iters;
        s->decay_steps = decay_iters * gbs;
        s->wd_incr_steps = a->train_iters * gbs;
        s->warmup_steps = fraction ? a->lr_warmup_fraction * (double)s->decay_steps
                                   : (double)(a->lr_warmup_iters * gbs);
    } else {
        mc_user_error("either --train-iters or --train-samples must be given (add one of them)");
    }

    s->init_lr = a->lr_warmup_init;
    s->max_lr = a->lr;
    s->min_lr = a->min_lr;
    s->decay_style = parse_decay_style(a->lr_decay_style);
    s->wd_incr_style = parse_wd_style(a->weight_decay_incr_style);
    if (s->wd_incr_style == MC_WD_CONSTANT) {
        /* validate_args: both come from --weight-decay in the constant style */
        s->start_wd = s->end_wd = a->weight_decay;
    } else {
        if (!a->start_weight_decay_set || !a->end_weight_decay_set)
            mc_user_error("--weight-decay-incr-style %s needs --start-weight-decay and "
                          "--end-weight-decay (give both)",
                          a->weight_decay_incr_style);
        s->start_wd = a->start_weight_decay;
        s->end_wd = a->end_weight_decay;
    }

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

    s->decoupled_max_lr = a->decoupled_lr; /* < 0: not given */
    s->decoupled_min_lr = a->decoupled_min_lr >= 0 ? a->decoupled_min_lr : a->min_lr;
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
