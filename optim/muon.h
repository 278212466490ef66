/* Muon (--optimizer muon): Megatron main's TensorParallelMuon over emerging_optimizers'
 * OrthogonalizedOptimizer, at tensor-parallel size 1. The 2-D weights other than the word
 * embeddings and the output layer (Megatron's _is_muon_excluded: is_embedding_or_output_parameter
 * or ndim != 2) step by Muon; the rest by the Adam of optim/adam.h, as Megatron's chained
 * optimizers. One step of a Muon parameter p with gradient g (fp32 main grad), lr, wd:
 *   p -= lr*wd*p                                   (decoupled weight decay)
 *   buf = lerp(buf, g, 1 - momentum)               (momentum_buffer)
 *   u = nesterov ? lerp(g, buf, momentum) : buf
 *   p -= lr * NS(u) * scale(rows, cols) * extra    (per q, k, v block with split qkv)
 * NS is emerging_optimizers' newton_schulz: normalise by the Frobenius norm, work on the wide
 * orientation, X <- a X + (b A + c A A) X with A = X X^T per coefficient set; under
 * --muon-fp32-matmul-prec medium the iterate and each GEMM's result are bf16 (fp32 sums).
 * CPU backend only (the elementwise parts read host memory). */
#ifndef MC_OPTIM_MUON_H
#define MC_OPTIM_MUON_H

#include "optim/adam.h"

typedef struct mc_muon {
    mc_muon_config_t c;
    bool *owns;      /* [model params]: stepped by Muon */
    long *buf_off;   /* [model params]: its momentum buffer's offset */
    float *momentum; /* the momentum buffers (Megatron's state["momentum_buffer"]) */
    long len;
} mc_muon_t;

/* Whether Muon steps parameter p (2-D, not the word embeddings or the output layer). */
bool mc_muon_manages(const mc_param_t *p);
/* Muon for opt's model (every segment a whole parameter); opt->muon points at it. -1: out of
 * memory. */
int mc_muon_init(mc_adam_t *opt, const mc_muon_config_t *c);
void mc_muon_free(mc_adam_t *opt);
/* The Muon step of the parameters that are (inside) or are not (!inside) in [first, first + n)
 * (first = n = 0, !inside: all), with learning rate lr and weight decay wd (times no_wd). */
void mc_muon_step(mc_adam_t *opt, double lr, double wd, int first, int n, bool inside);

/* emerging_optimizers' get_muon_scale_factor(size_out, size_in, mode). */
double mc_muon_scale(long rows, long cols, mc_muon_scale_t mode);
/* newton_schulz(x, steps, type) in place on the row-major [rows, cols] x; false for an unknown
 * coefficient type. */
bool mc_newton_schulz(const mc_backend_t *be, float *x, int rows, int cols,
                      const mc_muon_config_t *c);

#endif
