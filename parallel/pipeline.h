/* Executes a pipeline schedule (parallel/schedule.h) on this rank's model chunks: Megatron's
 * forward_backward_no_pipelining / _pipelining_without_interleaving / _with_interleaving
 * (MEGATRON.md section 5), one code path for all three.
 *
 * Activations and their gradients cross stages as [s/(tp if sequence parallel), b, h] tensors in
 * p2p batches (mc_p2p_batch: one ncclGroupStart/End), ops in Megatron's order. A microbatch's
 * activations through a chunk live in a slot of the chunk's group (model/gpt.h): a slot is taken
 * when the chunk's input is received (or, on the first virtual stage, at the forward) and given
 * back once the batch that sends its last tensor (the input gradient; with forward_only the
 * output) is posted, or after the backward (forward) that needs nothing sent. A slot taken again
 * first waits for that batch, so a buffer is never reused while a send reads it.
 * mc_pipeline_slots counts the slots each group needs at once with the same rules.
 *
 * Asynchronous batches (interleaving with overlap_p2p_comm) are started and waited for only
 * before the compute that reads what they receive, or before their slot is reused. The
 * communicator completes its operations in order, so a later collective (a tensor-parallel
 * all-reduce inside a compute) may wait behind a pending batch; that never deadlocks, because
 * every schedule also completes with all batches synchronous (checked by the schedule tests). */
#ifndef MC_PARALLEL_PIPELINE_H
#define MC_PARALLEL_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>

#include "model/gpt.h"
#include "comm/comm.h"
#include "parallel/schedule.h"
#include "comm/timers.h"

/* Slots each group needs at once for this schedule (slots[g] for g < MC_SLOT_GROUPS: the chunks
 * without the loss, the chunk with it; 0 for a group without chunks). Returns 0, or -1 with one
 * line in err. */
int mc_pipeline_slots(const mc_pp_config_t *cfg, int *slots, char *err, size_t errn);

/* The model chunks of pp rank pp_rank in the plan: layers (mc_pp_layers) and pre/post process.
 * Returns 0, or -1 with one line in err. */
int mc_pipeline_chunks(mc_gpt_config_t *cfg, const mc_pp_plan_t *plan, int pp_rank, char *err,
                       size_t errn);

/* This rank's chunks for pp rank pp_rank: layers (mc_pp_layers), pre/post process, and slots for
 * the plan's training (the ramp's steps included) and evaluation schedules. Returns 0, or -1
 * with one line in err. */
int mc_pipeline_configure(mc_gpt_config_t *cfg, const mc_pp_plan_t *plan, int pp_rank, char *err,
                          size_t errn);

typedef struct {
    int mb;       /* microbatch in the slot, -1 when free */
    mc_req_t req; /* the last batch that reads or writes the slot's buffers */
    int timer;    /* its timer (mc_timer_id_t), to account the wait */
} mc_pipe_slot_t;

/* An action list of this rank, built once and reused by every step with the same M. */
typedef struct {
    int M; /* 0: not built */
    mc_pp_action_t *acts;
    int n;
} mc_pipe_schedule_t;

typedef struct {
    mc_gpt_t *model;
    mc_comm_t *comm;
    mc_group_t *pp_group; /* NULL with pp = 1 */
    mc_pp_plan_t plan;    /* a copy: the schedules of another M are rebuilt from it */
    int pp_rank;
    mc_timers_t *timers; /* may be NULL */
    mc_pipe_slot_t *slots[MC_SLOT_GROUPS];
    int *slot_of;  /* [M * vpp]: slot of (mb, chunk), -1 when none */
    float *weight; /* [M]: loss weight of each microbatch's backward (post chunk) */
    int cap_m;
    mc_pipe_schedule_t sched[2]; /* training, evaluation (forward only) */
} mc_pipeline_t;

/* One run of the schedule over M microbatches. */
typedef struct {
    const mc_microbatch_t *mbs;
    int M;
    uint32_t iteration; /* dropout key */
    bool forward_only;  /* evaluation: no dropout, no backward */
    void *ctx;
    /* After the forward of microbatch mb on the post chunk: its loss sum and tokens; returns the
     * weight of its backward (ignored with forward_only). */
    float (*on_loss)(void *ctx, int mb, double loss_sum, double num_tokens);
    /* Before the backward of (mb, chunk): grad sync arming. May be NULL. */
    void (*before_backward)(void *ctx, int mb, int chunk);
} mc_pipeline_step_t;

/* Also builds the plan's training schedule and, with evaluation, the forward-only one; a step
 * with another M (the ramp's) rebuilds that schedule once. */
void mc_pipeline_init(mc_pipeline_t *p, mc_gpt_t *model, mc_comm_t *comm, mc_group_t *pp_group,
                      const mc_pp_plan_t *plan, int pp_rank, mc_timers_t *timers);
void mc_pipeline_free(mc_pipeline_t *p);

/* Runs this rank's action list for the step; returns when every batch it started is complete. */
void mc_pipeline_run(mc_pipeline_t *p, const mc_pipeline_step_t *s);

#endif
