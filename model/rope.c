/* Rotary embedding angles (Megatron's RotaryEmbedding): the cosine and sine tables the rope op
 * reads, computed once on the host. The angles are float32 as Megatron builds them (inverse
 * frequencies, Llama 3.1's rescaling, positions divided by the interpolation factor, their
 * product, each rounded to float); their cosine and sine are taken in double and rounded once. */
#include <math.h>

#include "model/rope.h"

/* Llama 3.1's frequency scaling (RotaryEmbedding._apply_scaling, Megatron's constants: low and
 * high frequency factors 1 and 4, original context 8192), in float32 like torch's. */
static float scaled_inv_freq(float f, float factor)
{
    const float low = 1, high = 4, old_len = 8192;
    const float low_wavelen = old_len / low, high_wavelen = old_len / high;
    const float wavelen = (float)(2 * M_PI) / f;
    const float g = wavelen > low_wavelen ? f / factor : f;
    if (wavelen < high_wavelen || wavelen > low_wavelen) return g;
    const float smooth = (old_len / wavelen - low) / (high - low);
    return (1 - smooth) * g / factor + smooth * g;
}

void mc_rope_tables(const mc_rope_cfg_t *r, int S, float *cos_t, float *sin_t)
{
    const int half = r->rot_dim / 2;
    const float step = r->interp > 0 ? 1.0f / (float)r->interp : 1.0f;
    for (int i = 0; i < half; i++) {
        const float expo = (float)(2 * i) / (float)r->rot_dim;
        float f = 1.0f / powf((float)r->base, expo);
        if (r->scaling > 0) f = scaled_inv_freq(f, (float)r->scaling);
        for (int s = 0; s < S; s++) {
            const float angle = ((float)s * step) * f;
            cos_t[(long)s * half + i] = (float)cos((double)angle);
            sin_t[(long)s * half + i] = (float)sin((double)angle);
        }
    }
}
