#include "config/mup.h"

#include <math.h>
#include <string.h>

#include "base/error.h"

mc_mup_t mc_mup_derive(const mc_args_t *a)
{
    mc_mup_t u;
    memset(&u, 0, sizeof(u));
    u.width_mult = u.embedding_mult = u.output_mult = u.hidden_lr_mult = 1.0;
    u.init_std = a->init_method_std;
    u.output_init_std = a->init_method_std / sqrt(2.0 * a->num_layers);
    u.softmax_scale = 1.0 / sqrt((double)a->kv_channels);
    if (!a->use_mup) return u;
    u.on = true;
    const double base =
        a->mup_base_hidden_size > 0 ? (double)a->mup_base_hidden_size : (double)a->hidden_size;
    u.width_mult = a->hidden_size / base;
    const double head = a->mup_base_head_dim > 0 ? sqrt(a->mup_base_head_dim) : 1.0;
    u.softmax_scale = head / pow((double)a->kv_channels, a->mup_attn_scale_power);
    u.embedding_mult = a->mup_embedding_mult;
    /* only when left at its default, as Megatron */
    u.output_mult =
        a->mup_output_mult == 1.0 && u.width_mult != 1.0 ? 1.0 / u.width_mult : a->mup_output_mult;
    u.init_std = a->init_method_std / sqrt(u.width_mult);
    /* mup_scaled_init_method_normal(sigma, L, m, multiplier 2) */
    u.output_init_std = a->init_method_std / (sqrt(2.0 * a->num_layers) * sqrt(u.width_mult));
    u.hidden_lr_mult = 1.0 / u.width_mult;
    return u;
}

void mc_mup_validate(mc_args_t *a, int world_size)
{
    (void)world_size;
    if (!a->use_mup) return;
    if (a->mup_base_hidden_size <= 0 && a->mup_base_hidden_size != -1)
        mc_user_error("--mup-base-hidden-size must be positive (got %lld)",
                      (long long)a->mup_base_hidden_size);
    /* Megatron takes its square root: a negative one gives no real scale */
    if (a->mup_base_head_dim <= 0 && a->mup_base_head_dim != -1)
        mc_user_error("--mup-base-head-dim must be positive (got %g)", a->mup_base_head_dim);
    const bool wide = a->mup_base_hidden_size > 0 && a->mup_base_hidden_size != a->hidden_size;
    if (wide && (a->save[0] || a->load[0]))
        mc_user_error("--use-mup with --mup-base-hidden-size other than --hidden-size and "
                      "--save/--load is not implemented yet (the optimizer's MuP parameter "
                      "groups in checkpoints); train without checkpoints or with width_mult 1");
}
