/* Maximal Update Parametrization (--use-mup), as Megatron-LM main's TransformerConfig
 * __post_init__ derives it (not in core_v0.15.0): the width multiplier, the softmax scale, the
 * output-logit multiplier and the init standard deviations, from the validated arguments. */
#ifndef MC_CONFIG_MUP_H
#define MC_CONFIG_MUP_H

#include <stdbool.h>

#include "config/args.h"

typedef struct {
    bool on;
    double width_mult;     /* hidden_size / mup_base_hidden_size (base: hidden_size if not given) */
    double softmax_scale;  /* sqrt(base_head_dim or 1) / kv_channels^attn_scale_power */
    double embedding_mult; /* --mup-embedding-mult, on the embedding output */
    double output_mult;    /* on the logits: --mup-output-mult, or 1/width_mult if left at 1 */
    double init_std;       /* hidden weights: init_method_std / sqrt(width_mult) */
    double output_init_std; /* proj and fc2: init_method_std / (sqrt(2 L) sqrt(width_mult)) */
    double hidden_lr_mult;  /* Adam's hidden (matrix-like) groups: lr, min_lr, eps x 1/width_mult */
} mc_mup_t;

/* The derived values; on false (and every multiplier 1) without --use-mup. */
mc_mup_t mc_mup_derive(const mc_args_t *a);

/* Megatron's check (--mup-base-hidden-size must be positive), a base head size whose square root
 * is real, and what megatron-c does not do yet, one line each (mc_user_error): a rule of
 * cli/validate.c's table (world_size unused). */
void mc_mup_validate(mc_args_t *a, int world_size);

#endif
