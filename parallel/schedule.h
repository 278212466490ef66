/* Pipeline schedules as pure functions (MEGATRON.md section 5; Megatron-LM
 * megatron/core/pipeline_parallel/schedules.py). Nothing here communicates: mc_pp_schedule lists,
 * for one pipeline rank, the exact sequence of forward/backward steps and the p2p operations
 * Megatron issues around them, and parallel/pipeline.c executes such a list.
 *
 * Which schedule (get_forward_backward_func):
 *   pp == 1            forward_backward_no_pipelining: F(i), B(i) for each microbatch in order;
 *   pp > 1, vpp == 1   forward_backward_pipelining_without_interleaving (1F1B);
 *   pp > 1, vpp > 1    forward_backward_pipelining_with_interleaving (interleaved 1F1B).
 *
 * Vocabulary. A model chunk c on pp rank r is virtual stage v = c*pp + r; activations flow
 * v -> v+1, gradients v+1 -> v. Hence "next" is pp rank (r+1) % pp and "prev" (r-1+pp) % pp:
 * with interleaving the last rank sends chunk c's output to chunk c+1 on rank 0 (and rank 0
 * sends chunk c+1's input gradient back to the last rank). Virtual stage 0 (chunk 0 of rank 0)
 * reads data (pre_process); the last one (chunk vpp-1 of rank pp-1) computes the loss
 * (post_process). Megatron never receives an activation into, or sends a gradient out of,
 * virtual stage 0, and never sends an activation out of, or receives a gradient into, the last.
 *
 * An action list is: [P2P batch] -> COMPUTE -> [P2P batch] -> ... A P2P batch is one
 * batch_isend_irecv (ncclGroupStart/End) with its ops in Megatron's order send_prev, recv_prev,
 * send_next, recv_next (_batched_p2p_ops); Megatron issues no call when a batch would be empty, and
 * neither does this list. Matching is per ordered pair of ranks in issue order (as NCCL does), so
 * the order of the batches and of the ops in them is part of the contract.
 *
 * Executor contract. A synchronous batch (async = false) is waited for completely before the
 * next action. An asynchronous batch (only with overlap_p2p_comm, see below) is started and not
 * waited for: before COMPUTE F(mb, c) wait for the RECV_PREV of (mb, c) if it is still pending,
 * before B(mb, c) for its RECV_NEXT, keep a send's buffer alive until the send completed, and
 * wait for everything at the end. B(mb, c) always consumes the oldest outstanding forward of
 * chunk c (Megatron pops input_tensors[c][0]); this list names that microbatch explicitly.
 *
 * Interleaving and overlap_p2p_comm. Megatron defaults overlap_p2p_comm to True with VPP (and
 * forces it False without). Both variants are modelled, because they pair the ops differently:
 *   false (--no-overlap-p2p-communication): each steady step ends in ONE synchronous batch
 *         send_forward_backward_recv_forward_backward; the last warmup step already receives the
 *         first gradient. Megatron requires pp > 2 here, since with pp == 2 "prev" and "next" are
 *         the same rank and one batch would carry two sends to it (a gradient and an activation)
 *         that the peer matches the other way round.
 *   true:  warmup batches stay synchronous; the first gradient is received by an async batch
 *         after the last warmup step; each steady step is F, async [recv_prev, send_next], B,
 *         async [send_prev, recv_next]; cooldown batches are synchronous (Megatron's default,
 *         overlap_p2p_comm_warmup_flush False).
 *   true with overlap_warmup_flush (--overlap-p2p-communication-warmup-flush): the warmup and
 *         cooldown batches are asynchronous too. A warmup step of a rank other than the first
 *         posts the receive of the next forward's input before its forward, <recv_prev>, and
 *         sends its output after it, <send_next>; the first rank posts both after the forward.
 *         The cooldown mirrors it: ranks other than the last post <recv_next> before each
 *         backward and <send_prev> after it, the last rank both after. (The first receive of the
 *         step and the one after an all-warmup schedule stay synchronous, as in Megatron.)
 * Both are checked by the tests' all-rank simulator (test/unit/schedule_check.h) for every
 * configuration they enumerate. */
#ifndef MC_PARALLEL_SCHEDULE_H
#define MC_PARALLEL_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>

#include "parallel/pp_plan.h"

typedef enum { MC_PP_FORWARD, MC_PP_BACKWARD } mc_pp_kind_t;

/* One p2p operation. The tensor is named by this rank's microbatch and LOCAL chunk: */
typedef enum {
    MC_P2P_SEND_PREV, /* input gradient of (mb, chunk), to the prev rank (send_backward) */
    MC_P2P_RECV_PREV, /* input activation of (mb, chunk), from the prev rank (recv_forward) */
    MC_P2P_SEND_NEXT, /* output activation of (mb, chunk), to the next rank (send_forward) */
    MC_P2P_RECV_NEXT, /* output gradient of (mb, chunk), from the next rank (recv_backward) */
} mc_p2p_dir_t;

typedef struct {
    mc_p2p_dir_t dir;
    int mb, chunk;
    int peer; /* pp-group rank of the other side: (rank -/+ 1) mod pp */
} mc_p2p_op_t;

#define MC_PP_MAX_BATCH_OPS 4

typedef enum { MC_PP_COMPUTE, MC_PP_P2P } mc_pp_action_type_t;

typedef struct {
    mc_pp_action_type_t type;
    /* MC_PP_COMPUTE */
    mc_pp_kind_t kind;
    int mb, chunk;
    /* MC_PP_P2P: ops in Megatron's order send_prev, recv_prev, send_next, recv_next */
    int n_ops;
    mc_p2p_op_t ops[MC_PP_MAX_BATCH_OPS];
    bool async; /* started, not waited for (see the executor contract above) */
} mc_pp_action_t;

/* The action list of cfg->pp_rank into *out (malloc'ed, caller frees) and *n_out. Returns 0, or
 * -1 with one line in err (invalid config, out of memory). */
int mc_pp_schedule(const mc_pp_config_t *cfg, mc_pp_action_t **out, int *n_out, char *err,
                   size_t errn);

/* Forward steps per rank: M * vpp. */
int mc_pp_total(const mc_pp_config_t *cfg);

/* Warmup forwards of cfg->pp_rank (get_pp_rank_microbatches), capped at the total:
 *   pp == 1: 0;  1F1B: min(pp - rank - 1, M);  interleaved: (pp - rank - 1)*2 + (vpp - 1)*G,
 *   and all M*vpp when forward_only. */
int mc_pp_warmup(const mc_pp_config_t *cfg);

/* The interleaved schedule table (get_schedule_table): for each block of G microbatches (the
 * last block takes the remainder), for each chunk, for each microbatch of the block: virtual
 * microbatch k runs microbatch mb[k] on forward chunk chunk[k]; backward step k runs mb[k] on
 * chunk vpp - 1 - chunk[k]. Writes M*vpp entries to each array. G must be >= 1. */
void mc_pp_table(int num_microbatches, int vpp, int group_size, int *mb, int *chunk);

#endif
