/* Megatron's rank layout and process groups as pure functions (MEGATRON.md section 4,
 * megatron/core/parallel_state.py RankGenerator). Nothing here communicates: the MPI/NCCL
 * communicators are built from these member lists.
 *
 * Order 'tp-cp-ep-dp-pp' (default) or 'tp-cp-ep-pp-dp' (--use-tp-pp-dp-mapping), leftmost token
 * at stride 1. Two generators share the order and the world (Megatron-Core's parallel folding):
 * the dense one over (tp, cp, ep = 1, dp, pp), default global_rank = tp + TP*(cp + CP*(dp +
 * DP*pp)), for everything but the experts, and the expert one over (etp, cp = 1, ep, edp, pp),
 * rank = etp + ETP*(ep + EP*(edp + EDP*pp)), for the expert layers. Their pp groups are the same. */
#ifndef MC_DIST_GROUPS_H
#define MC_DIST_GROUPS_H

#include <stdbool.h>
#include <stddef.h>

/* A rank's coordinates in the dense generator (ep is always 0 there). */
typedef struct {
    int tp, cp, ep, dp, pp;
} mc_rank_coords_t;
/* A rank's coordinates in the expert generator: expert tensor, expert model (which slice of the
 * experts), expert data parallel and pipeline rank. */
typedef struct {
    int etp, ep, edp, pp;
} mc_expert_coords_t;
typedef struct {
    int world, tp, cp, dp, pp; /* the dense generator (its ep axis has size 1) */
    int order_pp_before_dp;
    /* the expert generator: --expert-model-parallel-size, --expert-tensor-parallel-size and
     * world/(etp*ep*pp); 1, tp, dp until mc_layout_set_experts */
    int ep, etp, edp;
} mc_layout_t;

/* world % (tp*cp*pp) == 0; dp = world/(tp*cp*pp); experts folded as ep 1, etp tp (then edp is
 * dp*cp). Returns 0, or -1 with one line in err. */
int mc_layout_init(mc_layout_t *l, int world, int tp, int pp, int cp, bool tp_pp_dp_order,
                   char *err, size_t n);
/* The expert generator (initialize_model_parallel's checks): world % (etp*ep*pp) == 0, edp =
 * world/(etp*ep*pp); with the pp-before-dp order and pp > 1, edp must equal dp (the pp groups of
 * the two generators would differ otherwise). Returns 0, or -1 with one line in err (l is left
 * unchanged). */
int mc_layout_set_experts(mc_layout_t *l, int ep, int etp, char *err, size_t n);
mc_rank_coords_t mc_layout_coords(const mc_layout_t *l, int rank);
int mc_layout_rank(const mc_layout_t *l, mc_rank_coords_t c);
mc_expert_coords_t mc_layout_expert_coords(const mc_layout_t *l, int rank);

typedef enum {
    MC_GROUP_TP,                 /* 'tp' */
    MC_GROUP_DP,                 /* 'dp' */
    MC_GROUP_DP_CP,              /* 'dp-cp' (gradient reduction) */
    MC_GROUP_PP,                 /* 'pp' */
    MC_GROUP_CP,                 /* 'cp' */
    MC_GROUP_MP,                 /* 'tp-pp' (grad norm, found_inf) */
    MC_GROUP_TP_DP_CP,           /* 'tp-dp-cp' */
    MC_GROUP_EMBEDDING,          /* first and last rank of each PP group (first only if untied) */
    MC_GROUP_POSITION_EMBEDDING, /* first rank of each PP group */
    MC_GROUP_TP_CP,              /* 'tp-cp' (the MoE aux loss's token counts) */
    /* the expert generator's */
    MC_GROUP_EP,       /* 'ep': the token dispatcher's all-to-all */
    MC_GROUP_ETP,      /* 'tp' of the expert generator: Megatron's expt_tp */
    MC_GROUP_TP_EP,    /* 'tp-ep': ETP x EP, the dispatcher's tp_ep */
    MC_GROUP_TP_EP_PP, /* 'tp-ep-pp': the expert model-parallel group (grad norm, found_inf) */
    MC_GROUP_EDP,      /* 'dp' of the expert generator: expt_dp, the expert grads' reduction */
} mc_group_kind_t;

/* The members (ascending, as Megatron lists them) of the group of `kind` that `rank` belongs to.
 * Returns the member count (0 if rank is in no group of that kind, e.g. position-embedding on a
 * non-first stage) and writes at most cap ranks. untied_embeddings: the embedding group has only
 * the first stage (pretrain_gpt.get_embedding_ranks). Returns -1 for a bad kind or rank. */
int mc_group_members(const mc_layout_t *l, mc_group_kind_t kind, int rank, bool untied_embeddings,
                     int *members, int cap);

/* All groups of a kind in Megatron's enumeration order (generate_masked_orthogonal_rank_groups:
 * group index from the unmasked coordinates, leftmost fastest; embedding groups follow the PP
 * groups). Returns the number of groups and writes groups[g*group_size + i] while the index is
 * below cap; *group_size gets the (common) group size. Returns -1 for a bad kind. */
int mc_group_all(const mc_layout_t *l, mc_group_kind_t kind, bool untied_embeddings, int *groups,
                 int cap, int *group_size);

/* world - 1: the rank that prints logs (print_rank_last). */
int mc_layout_last_rank(const mc_layout_t *l);

#endif
