/* Rotary position embedding (Megatron's apply_rotary_pos_emb on sbhd tensors), fp32, in place on
 * the query and key heads of linear_qkv's output. Megatron's rotate_half pairs element i with
 * i + rot/2 (or 2i with 2i+1 when interleaved); its frequency table repeats each frequency for
 * both members of a pair, so one angle per pair: the tables hold rot/2 entries per position. */
#include "kernels/cpu/cpu.h"

/* One head's first rot elements turned by the angles of one position (sin negated: inverse). */
static void rope_head(float *x, const float *c, const float *s, int rot, int interleaved, float sg)
{
    const int half = rot / 2;
    for (int i = 0; i < half; i++) {
        const int a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
        const float xa = x[a], xb = x[b], sn = sg * s[i];
        x[a] = xa * c[i] - xb * sn;
        x[b] = xb * c[i] + xa * sn;
    }
}

void mc_cpu_rope_f32(const mc_backend_t *be, float *qkv, const float *cos_t, const float *sin_t,
                     int S, int B, int NG, int QPG, int HD, int rot_dim, int interleaved,
                     int inverse)
{
    (void)be;
    const long row = (long)NG * (QPG + 2) * HD;
    const float sg = inverse ? -1.0f : 1.0f;
    for (int s = 0; s < S; s++) {
        const float *c = cos_t + (long)s * (rot_dim / 2), *sn = sin_t + (long)s * (rot_dim / 2);
        for (int b = 0; b < B; b++) {
            float *x = qkv + ((long)s * B + b) * row;
            for (int g = 0; g < NG; g++) /* QPG query heads and the key head; not the value */
                for (int h = 0; h <= QPG; h++)
                    rope_head(x + ((long)g * (QPG + 2) + h) * HD, c, sn, rot_dim, interleaved, sg);
        }
    }
}
