/* Dropout with layout-invariant Philox masks (kernels/philox.h, mc_dropout_t in backend.h).
 * Kept values are multiplied by mc_cpu_dropout_scale(p) = 1/(1-p) in fp32. */
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/philox.h"

float mc_cpu_dropout_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

/* The same words as mc_dropout_bits, one Philox call per block of four elements. The test
 * suite checks this against mc_dropout_keep element by element. */
void mc_cpu_dropout_span(float *dst, const float *src, long n, const mc_dropout_t *d,
                         uint64_t sample, uint64_t e0, float scale)
{
    const float p = d->p;
    mc_philox_ctr_t c;
    c.v[1] = (uint32_t)sample;
    c.v[2] = d->iteration;
    c.v[3] = (d->layer << 4) | (d->site & 15u);
    const uint32_t k0 = (uint32_t)d->seed;
    const uint32_t k1 =
        (uint32_t)(d->seed >> 32) ^ (MC_PHILOX_TAG_DROPOUT << 16) ^ (uint32_t)(sample >> 32);
    uint64_t e = e0;
    long i = 0;
    while (i < n) {
        c.v[0] = (uint32_t)(e >> 2);
        mc_philox_ctr_t r = mc_philox4x32_10(c, k0, k1);
        for (unsigned k = (unsigned)(e & 3u); k < 4u && i < n; k++, i++, e++)
            dst[i] = mc_u32_to_unit(r.v[k]) >= p ? src[i] * scale : 0.0f;
    }
}

static void dropout_apply(float *out, const float *x, const mc_dropout_t *d, int d0, int B,
                          int inner, int d0_offset, int inner_full, int inner_offset)
{
    if (d0 <= 0 || B <= 0 || inner <= 0) return;
    if (!d || d->p <= 0.0f) {
        if (out != x) memmove(out, x, (size_t)d0 * (size_t)B * (size_t)inner * sizeof(float));
        return;
    }
    const float scale = mc_cpu_dropout_scale(d->p);
    for (int i = 0; i < d0; i++)
        for (int b = 0; b < B; b++) {
            long row = ((long)i * B + b) * inner;
            uint64_t e0 = (uint64_t)(i + d0_offset) * (uint64_t)inner_full + (uint64_t)inner_offset;
            mc_cpu_dropout_span(out + row, x + row, inner, d, d->sample0 + (uint64_t)b, e0, scale);
        }
}

void mc_cpu_dropout_forward_f32(const mc_backend_t *be, float *out, const float *x,
                                const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                                int inner_full, int inner_offset)
{
    (void)be;
    dropout_apply(out, x, d, d0, B, inner, d0_offset, inner_full, inner_offset);
}

void mc_cpu_dropout_backward_f32(const mc_backend_t *be, float *dx, const float *dout,
                                 const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                                 int inner_full, int inner_offset)
{
    (void)be;
    dropout_apply(dx, dout, d, d0, B, inner, d0_offset, inner_full, inner_offset);
}
