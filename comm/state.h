/* Megatron's parallel state (megatron/core/parallel_state.py): this rank's coordinates in the
 * layout and its communicators for every group kind (MEGATRON.md section 4). */
#ifndef MC_DIST_STATE_H
#define MC_DIST_STATE_H

#include <stdbool.h>

#include "comm/comm.h"
#include "comm/groups.h"

/* The layout initialize_model_parallel is given. */
typedef struct {
    int tp, pp, cp;         /* tensor-, pipeline- and context-parallel sizes (dp: the rest) */
    bool tp_pp_dp_mapping;  /* --use-tp-pp-dp-mapping: rank order tp-cp-ep-pp-dp */
    bool untied_embeddings; /* no embedding group ties the output layer to the embeddings */
    /* --num-experts (0: no expert groups), --expert-model-parallel-size and
     * --expert-tensor-parallel-size (0: tp) */
    int num_experts, ep, etp;
} mc_parallel_config_t;

typedef struct {
    mc_comm_t *comm;
    mc_layout_t layout;
    mc_rank_coords_t me;
    mc_expert_coords_t expert_me; /* this rank in the expert generator (parallel folding) */
    int rank, world, last_rank;
    mc_group_t *tp, *dp, *dp_cp, *pp, *cp, *mp, *tp_dp_cp, *embedding, *position_embedding;
    /* With --num-experts (NULL otherwise): 'tp-cp' (the aux loss's token counts) and the expert
     * generator's ep (the dispatcher's all-to-all), etp (expt_tp), tp_ep (the dispatcher's
     * tp_ep), tp_ep_pp (the expert grad norm's model-parallel group) and edp (expt_dp, the
     * expert grads' reduction). A group whose members equal another's for every rank is that
     * group (one communicator), e.g. etp is tp when --expert-tensor-parallel-size is tp. */
    mc_group_t *tp_cp, *ep, *etp, *tp_ep, *tp_ep_pp, *edp;
} mc_parallel_t;

/* Creates every group (collective over the world). Returns 0, or -1 with one line in err. */
int mc_parallel_init(mc_parallel_t *ps, mc_comm_t *comm, const mc_parallel_config_t *c, char *err,
                     size_t n);
void mc_parallel_free(mc_parallel_t *ps);

#endif
