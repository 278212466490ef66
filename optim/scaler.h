/* Megatron's loss scaler (MEGATRON.md section 7; core/optimizer/grad_scaler.py, created in
 * core/optimizer/__init__.py): with --loss-scale X a constant scaler (fp16 or bf16); with fp16
 * and no --loss-scale the dynamic one (initial --initial-loss-scale, halved on overflow after
 * --hysteresis overflows, doubled after --loss-scale-window good steps, never below
 * --min-loss-scale); otherwise none, and the logged loss scale is 1.0. The backward starts from
 * the loss times the scale; the optimizer unscales the gradients, and an overflow (inf or nan in
 * any gradient, on any rank) skips the step. */
#ifndef MC_OPTIM_SCALER_H
#define MC_OPTIM_SCALER_H

#include <stdbool.h>

#include "optim/config.h"

typedef struct {
    bool enabled; /* a grad scaler exists: overflow checks and skipped steps */
    bool dynamic;
    double scale;
    double min_scale;
    int growth_interval, hysteresis;
    int growth_tracker, hysteresis_tracker;
} mc_scaler_t;

void mc_scaler_init(mc_scaler_t *s, const mc_optim_config_t *c);
/* DynamicGradScaler.update (a constant scaler never changes). */
void mc_scaler_update(mc_scaler_t *s, bool found_inf);
/* The loss scale for the log line and the backward: the scale, or 1.0 without a scaler. */
double mc_scaler_value(const mc_scaler_t *s);

#endif
