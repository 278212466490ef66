/* Megatron's ConstantGradScaler and DynamicGradScaler (optim/scaler.h). */
#include "optim/scaler.h"

#include <string.h>

void mc_scaler_init(mc_scaler_t *s, const mc_optim_config_t *c)
{
    memset(s, 0, sizeof(*s));
    s->scale = 1.0;
    if (!(c->fp16 || c->bf16)) return;
    if (c->loss_scale > 0) {
        s->enabled = true;
        s->scale = c->loss_scale;
    } else if (c->fp16) {
        s->enabled = s->dynamic = true;
        s->scale = c->initial_loss_scale;
        s->min_scale = c->min_loss_scale;
        s->growth_interval = c->loss_scale_window;
        s->hysteresis = c->hysteresis;
        s->hysteresis_tracker = c->hysteresis;
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
