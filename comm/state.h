/* Megatron's parallel state (megatron/core/parallel_state.py): this rank's coordinates in the
 * layout and its communicators for every group kind (MEGATRON.md section 4). */
#ifndef MC_DIST_STATE_H
#define MC_DIST_STATE_H

#include "config/args.h"
#include "comm/comm.h"
#include "comm/groups.h"

typedef struct {
    mc_comm_t *comm;
    mc_layout_t layout;
    mc_rank_coords_t me;
    int rank, world, last_rank;
    mc_group_t *tp, *dp, *dp_cp, *pp, *cp, *mp, *tp_dp_cp, *embedding, *position_embedding;
    /* --hierarchical-context-parallel-sizes a p: the cp group's levels (a2a, then p2p), or NULL */
    mc_group_t *hcp[2];
} mc_parallel_t;

/* Creates every group (collective over the world). Returns 0, or -1 with one line in err. */
int mc_parallel_init(mc_parallel_t *ps, mc_comm_t *comm, const mc_args_t *a, char *err, size_t n);
void mc_parallel_free(mc_parallel_t *ps);

#endif
