/* Rotary position embedding tables (model/rope.c). */
#ifndef MC_MODEL_ROPE_H
#define MC_MODEL_ROPE_H

#include "model/gpt.h"

/* cos_t/sin_t [S, rot_dim/2]: the angle of sequence position s (0-based, times 1/the
 * interpolation factor) and frequency i = base^(-2i/rot_dim), Llama-3.1-scaled if asked. */
void mc_rope_tables(const mc_rope_cfg_t *r, int S, float *cos_t, float *sin_t);

#endif
