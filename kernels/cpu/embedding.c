/* Token + position embedding. tokens/positions are [b, s]; the output is [s, b, h]. */
#include "kernels/cpu/cpu.h"

void mc_cpu_embedding_forward(const mc_backend_t *be, float *out, const int32_t *tokens,
                              const int32_t *positions, const float *wte, const float *wpe, int S,
                              int B, int H)
{
    (void)be;
    for (int s = 0; s < S; s++)
        for (int b = 0; b < B; b++) {
            float *o = out + ((long)s * B + b) * H;
            const float *t = wte + (long)tokens[(long)b * S + s] * H;
            if (wpe) {
                const float *p = wpe + (long)positions[(long)b * S + s] * H;
                for (int i = 0; i < H; i++) o[i] = t[i] + p[i];
            } else {
                for (int i = 0; i < H; i++) o[i] = t[i];
            }
        }
}

void mc_cpu_embedding_backward(const mc_backend_t *be, float *dwte, float *dwpe, const float *dout,
                               const int32_t *tokens, const int32_t *positions, int S, int B, int H)
{
    (void)be;
    /* Rows are visited in [s, b] order, so repeated tokens accumulate in a fixed order. */
    for (int s = 0; s < S; s++)
        for (int b = 0; b < B; b++) {
            const float *g = dout + ((long)s * B + b) * H;
            float *t = dwte + (long)tokens[(long)b * S + s] * H;
            for (int i = 0; i < H; i++) t[i] += g[i];
            if (dwpe) {
                float *p = dwpe + (long)positions[(long)b * S + s] * H;
                for (int i = 0; i < H; i++) p[i] += g[i];
            }
        }
}
