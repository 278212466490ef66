/* Token + position embedding on a vocab shard. tokens/positions are [b, s]; the output is
 * [s, b, h]. */
#include <string.h>

#include "kernels/cpu/cpu.h"

void mc_cpu_embedding_forward_f32(const mc_backend_t *be, float *out, const int32_t *tokens,
                                  const int32_t *positions, const float *wte, const float *wpe,
                                  int S, int B, int H, int vocab_start, int V)
{
    (void)be;
    for (int s = 0; s < S; s++)
        for (int b = 0; b < B; b++) {
            float *o = out + ((long)s * B + b) * H;
            const long t = (long)tokens[(long)b * S + s] - vocab_start;
            if (t >= 0 && t < V) memcpy(o, wte + t * H, (size_t)H * sizeof(float));
            else memset(o, 0, (size_t)H * sizeof(float));
            if (wpe) {
                const float *p = wpe + (long)positions[(long)b * S + s] * H;
                for (int i = 0; i < H; i++) o[i] += p[i];
            }
        }
}

void mc_cpu_embedding_backward_f32(const mc_backend_t *be, float *dwte, float *dwpe,
                                   const float *dout, const int32_t *tokens,
                                   const int32_t *positions, int S, int B, int H, int vocab_start,
                                   int V)
{
    (void)be;
    /* Rows are visited in [s, b] order, so repeated tokens accumulate in a fixed order. */
    for (int s = 0; s < S; s++)
        for (int b = 0; b < B; b++) {
            const float *g = dout + ((long)s * B + b) * H;
            const long t = (long)tokens[(long)b * S + s] - vocab_start;
            if (dwte && t >= 0 && t < V) {
                float *w = dwte + t * H;
                for (int i = 0; i < H; i++) w[i] += g[i];
            }
            if (dwpe) {
                float *p = dwpe + (long)positions[(long)b * S + s] * H;
                for (int i = 0; i < H; i++) p[i] += g[i];
            }
        }
}
