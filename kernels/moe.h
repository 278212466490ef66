/* The mixture-of-experts ops of the op table (mc_backend_t.moe; DESIGN decision 2): the router
 * (Megatron's TopKRouter: scores, top-k, expert bias, capacity), its losses' statistics (aux,
 * seq-aux and global aux loss, z-loss), the token dispatcher's local steps (permute by expert,
 * unpermute with a probability-weighted sum, chunk sorting) and the local experts' grouped GEMM,
 * each with its backward. Pointers are the backend's (host memory on `cpu`); the `long *` and
 * `int *` size arrays named host are host memory on every backend (the dispatcher copies the
 * token counts to the host once per layer, as Megatron's does).
 *
 * Types: rdt is the router's (Megatron's --moe-router-dtype fp32 | fp64, else the input's:
 * F32, F64, BF16 or F16) for logits, probs and their gradients; dt/gdt are the backend's
 * activation and gradient types (kernels/backend.h). Maps are uint8 [T, E]: 1 where token t goes
 * to expert e. Tokens are rows of [s, b] (t = s_i * b + b_i), as activations are. */
#ifndef MC_KERNELS_MOE_H
#define MC_KERNELS_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/dtype.h"
#include "kernels/moe_route.h"

struct mc_backend;

typedef struct mc_moe_ops {
    /* ---- router (kernels/moe_route.h has the per-token arithmetic) ----
     * probs [T, E] (rdt): the routing probabilities of the chosen experts, 0 elsewhere; map
     * [T, E]: the chosen experts. logits [T, E] (rdt); expert_bias [E] (fp32, sigmoid scores
     * only; NULL: none): added to the scores to choose, not to weigh. */
    void (*route)(const struct mc_backend *be, mc_dtype_t rdt, const mc_moe_router_t *r,
                  void *probs, uint8_t *map, const void *logits, const float *expert_bias, long T);
    /* dlogits [T, E] (rdt, overwritten): the gradient of route's probs given dprobs [T, E]; keep
     * (NULL, or capacity's map): the probs outside it were dropped and carry no gradient. */
    void (*route_backward)(const struct mc_backend *be, mc_dtype_t rdt, const mc_moe_router_t *r,
                           void *dlogits, const void *dprobs, const void *logits,
                           const float *expert_bias, const uint8_t *keep, long T);
    /* apply_router_token_dropping: each expert keeps its `capacity` best tokens, by probability
     * (by_position 0) or by position (1: the first routed ones), ties to the lowest token index
     * as torch.topk on CUDA; keep [T, E] = the kept routed tokens, or (pad) the capacity mask
     * itself (tokens not routed fill the rest, lowest index first); probs_out = probs * keep. */
    void (*capacity)(const struct mc_backend *be, mc_dtype_t rdt, void *probs_out, uint8_t *keep,
                     const void *probs, const uint8_t *map, long T, int E, long capacity,
                     int by_position, int pad);

    /* ---- losses (router.py: aux_loss, seq_aux_loss, global_aux_loss, z-loss) ----
     * The aux loss's scores (compute_routing_scores_for_aux_loss: softmax, or sigmoid normalised
     * to sum 1) and their plain top-k, summed per group of tokens: token t is in group t % G (G =
     * micro-batch size for seq_aux_loss, 1 otherwise); counts [G, E] and psum [G, E] (fp32,
     * overwritten, psum summed in double, tokens in order). The loss is then
     * sum(psum * counts_reduced) * E * coeff / (topk * T_total^2) (/ G for seq_aux_loss). */
    void (*aux_stats)(const struct mc_backend *be, mc_dtype_t rdt, int sigmoid, int topk,
                      float *counts, float *psum, const void *logits, long T, int E, int G);
    /* dlogits (rdt) += the gradient of coef * sum_{t,e} score[t, e] * counts[t % G, e] (the aux
     * loss, coef its factor times the loss's gradient). */
    void (*aux_backward)(const struct mc_backend *be, mc_dtype_t rdt, int sigmoid, void *dlogits,
                         const void *logits, const float *counts, float coef, long T, int E, int G);
    /* zsum[0] (fp32, device) = sum over tokens of logsumexp(logits[t])^2, summed in double. */
    void (*z_loss)(const struct mc_backend *be, mc_dtype_t rdt, float *zsum, const void *logits,
                   long T, int E);
    /* dlogits (rdt) += coef * 2 * lse[t] * softmax(logits[t]): the gradient of coef * zsum. */
    void (*z_loss_backward)(const struct mc_backend *be, mc_dtype_t rdt, void *dlogits,
                            const void *logits, float coef, long T, int E);
    /* counts [E] (int32) = tokens routed to each expert (map's column sums). */
    void (*tokens_per_expert)(const struct mc_backend *be, int32_t *counts, const uint8_t *map,
                              long T, int E);
    /* The aux-loss-free balancing step (get_updated_expert_bias): bias[e] += rate *
     * sign(mean(counts) - counts[e]), counts [E] fp32 (the global batch's, reduced). */
    void (*expert_bias_update)(const struct mc_backend *be, float *bias, const float *counts, int E,
                               float rate);

    /* ---- token permutation (moe_utils.permute / unpermute) ----
     * The permuted order is Megatron's: expert by expert, each expert's tokens in token order;
     * N = the ones of map. rows [N] (int32): the token of each permuted row; row_of [T, E]
     * (int32): the permuted row of token t for expert e, -1 where not routed; pprobs [N] (rdt,
     * NULL: not wanted): probs at each permuted row's (token, expert). */
    void (*permute_map)(const struct mc_backend *be, mc_dtype_t rdt, int32_t *rows, int32_t *row_of,
                        void *pprobs, const void *probs, const uint8_t *map, long T, int E, long N);
    /* out [N, H] = in [rows[i]] (type dt). */
    void (*permute)(const struct mc_backend *be, mc_dtype_t dt, void *out, const void *in,
                    const int32_t *rows, long N, int H);
    /* out [T, H] (dt) = for each token the sum over its experts e (ascending: the permuted rows
     * in order) of x[row_of[t, e]] (* pprobs[row_of[t, e]], of type pdt, when pprobs is given),
     * computed in fp32 (pdt F64: double) and rounded once; 0 for a token with no expert. Also
     * permute's backward (pprobs NULL). */
    void (*unpermute)(const struct mc_backend *be, mc_dtype_t dt, mc_dtype_t pdt, void *out,
                      const void *x, const int32_t *row_of, const void *pprobs, long T, int E,
                      int H);
    /* The backward of unpermute: dx [N, H] (dt) = dout[rows[i]] (* pprobs[i]); dpprobs [N] (pdt,
     * only with pprobs) = dot(dout[rows[i]], x[i]) in fp32 (pdt F64: double). */
    void (*unpermute_backward)(const struct mc_backend *be, mc_dtype_t dt, mc_dtype_t pdt, void *dx,
                               void *dpprobs, const void *dout, const void *x, const int32_t *rows,
                               const void *pprobs, long N, int H);
    /* sort_chunks_by_idxs: in [sum sizes, H] cut into chunks of sizes[0..n) rows (host), out =
     * chunk order[0], chunk order[1], ... (order: host, a permutation of 0..n). */
    void (*sort_chunks)(const struct mc_backend *be, mc_dtype_t dt, void *out, const void *in,
                        const long *sizes, const int *order, int n, int H);
    /* The probs applied inside the experts (mlp.py: after the activation, before fc2): out [N, H]
     * (dt, may equal x) = x * p[i] (p of type pdt), computed in pdt's precision (fp32 at least),
     * rounded to dt. */
    void (*scale_rows)(const struct mc_backend *be, mc_dtype_t dt, mc_dtype_t pdt, void *out,
                       const void *x, const void *p, long N, int H);
    /* dx [N, H] (dt, may equal dout) = dout * p; dp [N] (pdt) = dot(dout[i], x[i]). */
    void (*scale_rows_backward)(const struct mc_backend *be, mc_dtype_t dt, mc_dtype_t pdt,
                                void *dx, void *dp, const void *dout, const void *x, const void *p,
                                long N, int H);

    /* ---- the local experts' linear layers, all in one call ----
     * G experts; expert g's rows are the m[g] (host) rows after those of experts 0..g-1:
     * out[rows of g] [m_g, N] = in[rows of g] [m_g, K] @ W[g]^T, W[g] expert g's [N, K] (type dt;
     * W a host array of G of the backend's pointers: the experts are parameters of their own,
     * wherever the gradient buffers' layout puts them). */
    void (*grouped_linear_forward)(const struct mc_backend *be, mc_dtype_t dt, void *out,
                                   const void *in, const void *const *W, const long *m, int G,
                                   int K, int N);
    /* din [M, K] (dt, NULL: skipped) = dout @ W[g] per expert; dW[g] [N, K] (gdt; a host array
     * like W) += dout_g^T @ in_g (the gradient buffer accumulates, as linear_backward's). */
    void (*grouped_linear_backward)(const struct mc_backend *be, mc_dtype_t dt, mc_dtype_t gdt,
                                    void *din, void *const *dW, const void *dout, const void *in,
                                    const void *const *W, const long *m, int G, int K, int N);
} mc_moe_ops_t;

/* Megatron's get_capacity: ceil((tokens / num_experts) * capacity_factor) in Python's double
 * arithmetic, tokens being the routed assignments (tokens x top-k) of the micro-batch. */
long mc_moe_expert_capacity(long tokens, int num_experts, double capacity_factor);

/* A router setting the per-token arithmetic cannot hold (more experts, k or groups than its
 * arrays): one line naming it, or NULL. */
const char *mc_moe_router_unsupported(const mc_moe_router_t *r);

#endif
