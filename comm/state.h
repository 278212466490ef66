/* Megatron's parallel state (megatron/core/parallel_state.py): this rank's coordinates in the
 * layout and its communicators for every group kind (MEGATRON.md section 4). */
#ifndef MC_DIST_STATE_H
#define MC_DIST_STATE_H

#include <stdbool.h>

#include "comm/comm.h"
#include "comm/groups.h"

/* The layout initialize_model_parallel is given. */
typedef struct {
    int tp, pp, cp; /* tensor-, pipeline- and context-parallel sizes (dp: the rest) */
    int cp_a2a;     /* --hierarchical-context-parallel-sizes a p: a (the a2a level), or 0 without */
    bool tp_pp_dp_mapping;  /* --use-tp-pp-dp-mapping: rank order tp-cp-ep-pp-dp */
    bool untied_embeddings; /* no embedding group ties the output layer to the embeddings */
    /* --num-experts (0: no expert groups), --expert-model-parallel-size and
     * --expert-tensor-parallel-size (0: tp) */
    int num_experts, ep, etp;
    /* --num-distributed-optimizer-instances (0 or 1: one instance, no instance groups) */
    int dist_opt_instances;
} mc_parallel_config_t;

typedef struct {
    mc_comm_t *comm;
    mc_layout_t layout;
    mc_rank_coords_t me;
    mc_expert_coords_t expert_me; /* this rank in the expert generator (parallel folding) */
    int rank, world, last_rank;
    mc_group_t *tp, *dp, *dp_cp, *pp, *cp, *mp, *tp_dp_cp, *embedding, *position_embedding;
    /* --hierarchical-context-parallel-sizes a p: the cp group's levels (a2a, then p2p), or NULL */
    mc_group_t *hcp[2];
    /* With --num-experts (NULL otherwise): 'tp-cp' (the aux loss's token counts) and the expert
     * generator's ep (the dispatcher's all-to-all), etp (expt_tp), tp_ep (the dispatcher's
     * tp_ep), tp_ep_pp (the expert grad norm's model-parallel group) and edp (expt_dp, the
     * expert grads' reduction). A group whose members equal another's for every rank is that
     * group (one communicator), e.g. etp is tp when --expert-tensor-parallel-size is tp. */
    mc_group_t *tp_cp, *ep, *etp, *tp_ep, *tp_ep_pp, *edp;
    /* --num-distributed-optimizer-instances N > 1 (NULL otherwise): Megatron's
     * intra_partial_data_parallel_group_with_cp (the dp-cp group's N blocks of consecutive
     * members: the distributed optimizer's shards), the inter-instance group (the members at this
     * rank's place in every block: gradients are all-reduced over it) and the intra distributed
     * optimizer instance group (the ranks of this rank's block of every model-parallel group:
     * world / N ranks holding one copy of the state, over which gradient statistics reduce:
     * Megatron's edp / N consecutive tp-ep-pp groups) */
    mc_group_t *intra_dp_cp, *inter_dist_opt, *intra_dist_opt;
    /* the same two levels over the edp group's members (expert parallelism with N > 1: Megatron's
     * intra_partial_expert_data_parallel_group and its inter level) */
    mc_group_t *intra_edp, *inter_edp;
} mc_parallel_t;

/* Creates every group (collective over the world). Returns 0, or -1 with one line in err. */
int mc_parallel_init(mc_parallel_t *ps, mc_comm_t *comm, const mc_parallel_config_t *c, char *err,
                     size_t n);
void mc_parallel_free(mc_parallel_t *ps);

#endif
