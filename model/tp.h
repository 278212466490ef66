/* Megatron's tensor-parallel mappings (megatron/core/tensor_parallel/mappings.py) for an explicit
 * forward and backward: each autograd function's forward and backward as a call over the model's
 * tp group. Activations are [s, b, h] (row-major), so the sequence-parallel mappings cut the
 * first dimension into tp blocks of n_local elements, rank r holding block r; the tensor-parallel
 * gather and scatter cut the last one. With a tp group of one rank every mapping is the identity
 * (a copy where out of place) and no collective is started. */
#ifndef MC_MODEL_TP_H
#define MC_MODEL_TP_H

#include <stdbool.h>

#include "comm/comm.h"
#include "kernels/backend.h"

/* --tp-comm-overlap (Megatron's tp_comm_overlap: Transformer Engine's userbuffers overlap, with
 * sequence parallelism): which of the parallel linears' collectives run beside their GEMMs. */
typedef struct {
    /* 0: off; else the pipelined GEMMs' splits of each rank's sequence block (Transformer
     * Engine's num_splits) */
    int chunks;
    bool ag; /* tp_comm_overlap_ag: the all-gather before linear_qkv/linear_fc1's forward and
                linear_proj/linear_fc2's input-gradient GEMM, chunk by chunk */
    bool rs; /* tp_comm_overlap_rs: the reduce-scatter after linear_proj/linear_fc2's forward,
                chunk by chunk */
    bool bulk_dgrad; /* tp_comm_bulk_dgrad: linear_qkv/linear_fc1's input all-gather (for their
                        weight gradient) beside their input-gradient GEMM */
    bool bulk_wgrad; /* tp_comm_bulk_wgrad: their input gradient's reduce-scatter beside their
                        weight-gradient GEMM */
} mc_tp_overlap_t;

typedef struct {
    const mc_backend_t *be; /* copies of the scatters and the last-dimension gather */
    mc_comm_t *comm;
    mc_group_t *group;  /* the tp group; unused with size 1 */
    int size, rank;     /* tp and this rank's place in it */
    bool sp;            /* sequence parallelism (--sequence-parallel with tp > 1) */
    mc_dtype_t dt;      /* the activations' type */
    mc_tp_overlap_t ov; /* only with sp */
} mc_tp_t;

/* ---- the mappings, forward and backward ---- */

/* copy_to_tensor_model_parallel_region: forward the identity; backward all-reduces the gradient. */
void mc_tp_copy_backward(const mc_tp_t *tp, void *grad, long n);
/* reduce_from_tensor_model_parallel_region: forward all-reduces x in place; backward the
 * identity. */
void mc_tp_reduce_forward(const mc_tp_t *tp, void *x, long n);
/* An all-reduce over tp of any type and operation (the vocab-parallel loss's MAX and SUM). */
void mc_tp_all_reduce(const mc_tp_t *tp, void *buf, long n, mc_dtype_t dt, mc_redop_t op);

/* gather_from_sequence_parallel_region: forward all-gathers the sequence blocks into full
 * [n_local * size]; backward reduce-scatters a whole-sequence gradient into this rank's block. */
void mc_tp_sp_gather(const mc_tp_t *tp, const void *local, void *full, long n_local);
void mc_tp_sp_gather_backward(const mc_tp_t *tp, const void *dfull, void *dlocal, long n_local);
/* reduce_scatter_to_sequence_parallel_region: forward reduce-scatters a partial sum of the whole
 * sequence into this rank's block; backward is mc_tp_sp_gather. */
void mc_tp_sp_reduce_scatter(const mc_tp_t *tp, const void *partial, void *local, long n_local);
/* scatter_to_sequence_parallel_region: forward copies this rank's block of full; backward is
 * mc_tp_sp_gather. */
void mc_tp_sp_scatter(const mc_tp_t *tp, const void *full, void *local, long n_local);

/* gather_from_tensor_model_parallel_region: forward all-gathers [rows, cols] blocks of the last
 * dimension into full [rows, cols * size] (work: rows * cols * size elements); backward is
 * mc_tp_scatter_last. scatter_to_tensor_model_parallel_region: forward copies this rank's
 * columns of full into local; backward is mc_tp_gather_last. The GPT model keeps its logits
 * vocab-parallel (Megatron's parallel_output) and its linears' inputs whole, so it uses neither. */
void mc_tp_gather_last(const mc_tp_t *tp, const void *local, void *full, void *work, long rows,
                       long cols);
void mc_tp_scatter_last(const mc_tp_t *tp, const void *full, void *local, long rows, long cols);

/* ---- the parallel linears' seams (ColumnParallelLinear, RowParallelLinear) ---- */

/* A column-parallel layer's input: the local activation itself (copy_to's forward) or, with
 * sequence parallelism, the whole sequence gathered into full (gather_from_sequence_parallel's). */
const void *mc_tp_column_input(const mc_tp_t *tp, const void *local, void *full, long n_local);
/* Its input gradient, a partial sum over tp of the whole sequence: all-reduced in place in dfull
 * (copy_to's backward) or reduce-scattered into dlocal (gather_from_sequence_parallel's). Returns
 * the buffer that holds the sum. */
void *mc_tp_column_input_grad(const mc_tp_t *tp, void *dfull, void *dlocal, long n_local);
/* A row-parallel layer's output, a partial sum over tp: all-reduced in place
 * (reduce_from_tensor_model_parallel_region) or reduce-scattered into local
 * (reduce_scatter_to_sequence_parallel_region). Returns the buffer that holds the sum. */
void *mc_tp_row_output(const mc_tp_t *tp, void *partial, void *local, long n_local);
/* Its output gradient as the layer reads it: the local one, or the whole sequence gathered into
 * full. */
const void *mc_tp_row_output_grad(const mc_tp_t *tp, const void *dlocal, void *full, long n_local);

/* ---- --tp-comm-overlap (model/tp_overlap.c): the sequence-parallel collectives in chunks ----
 * Activations are rows of `width` elements ([s * b] rows); a rank's block has n_local / width
 * rows, split into tp->ov.chunks chunks (at most one row each). fn computes rows
 * [row0, row0 + rows) of the whole sequence's GEMM: from `in`, the first of those input rows
 * (mc_tp_gather_rows), or into `out`, where the first of those output rows goes
 * (mc_tp_rows_reduce_scatter); the other pointer is NULL and fn finds its other operands by
 * row0 itself. */
typedef void (*mc_tp_rows_fn)(void *ctx, const void *in, void *out, long row0, long rows);

/* Whether the overlap of kind `on` (one of tp->ov's flags) runs: sequence parallelism, chunks. */
bool mc_tp_overlaps(const mc_tp_t *tp, bool on);
/* mc_tp_column_input, then fn over every row of its result, which it returns. With the overlap
 * (tp->ov.ag) chunk c of every rank's block is exchanged (a p2p batch: an all-gather of the
 * chunk into its place in full) while fn runs on chunk c - 1's rows. */
const void *mc_tp_gather_rows(const mc_tp_t *tp, const void *local, void *full, long n_local,
                              long width, mc_tp_rows_fn fn, void *ctx);
/* fn over every row into partial (the whole sequence's partial sum), then mc_tp_row_output,
 * whose result it returns. With the overlap (tp->ov.rs) fn writes chunk c of every rank's block
 * (partial holds them chunk by chunk, rank by rank) and chunk c's reduce-scatter into local runs
 * while fn computes chunk c + 1. */
void *mc_tp_rows_reduce_scatter(const mc_tp_t *tp, void *partial, void *local, long n_local,
                                long width, mc_tp_rows_fn fn, void *ctx);
/* The bulk overlaps' halves: mc_tp_sp_gather and mc_tp_sp_gather_backward started (they run
 * beside what the caller computes next), and the wait for either. */
mc_req_t mc_tp_sp_gather_start(const mc_tp_t *tp, const void *local, void *full, long n_local);
mc_req_t mc_tp_sp_reduce_scatter_start(const mc_tp_t *tp, const void *partial, void *local,
                                       long n_local);
void mc_tp_wait(const mc_tp_t *tp, mc_req_t req, mc_coll_kind_t kind);

#endif
