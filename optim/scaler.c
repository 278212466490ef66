/* Megatron's ConstantGradScaler and DynamicGradScaler (optim/scaler.h). */
#include "optim/scaler.h"

#include <string.h>

void mc_scaler_init(mc_scaler_t *s, const mc_args_t *a)
{
    memset(s, 0, sizeof(*s));
    s->scale = 1.0;
    if (!(a->fp16 || a->bf16)) return;
    if (a->loss_scale > 0) {
        s->enabled = true;
        s->scale = a->loss_scale;
    } else if (a->fp16) {
        s->enabled = s->dynamic = true;
        s->scale = a->initial_loss_scale;
        s->min_scale = a->min_loss_scale;
        s->growth_interval = a->loss_scale_window;
        s->hysteresis = a->hysteresis;
        s->hysteresis_tracker = a->hysteresis;
    }
}

void mc_scaler_update(mc_scaler_t *s, bool found_inf)
{
    if (!s->dynamic) return;
    if (found_inf) {
        /* the hysteresis counter is reset only on growth, not by a good step */
        s->growth_tracker = 0;
        s->hysteresis_tracker--;
        if (s->hysteresis_tracker <= 0) {
            s->scale *= 0.5;
            if (s->scale < s->min_scale) s->scale = s->min_scale;
        }
    } else if (++s->growth_tracker == s->growth_interval) {
        s->growth_tracker = 0;
        s->hysteresis_tracker = s->hysteresis;
        s->scale *= 2.0;
    }
}

double mc_scaler_value(const mc_scaler_t *s) { return s->enabled ? s->scale : 1.0; }
