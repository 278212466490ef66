/* Megatron's rank layout and process groups as pure functions (MEGATRON.md section 4,
 * megatron/core/parallel_state.py RankGenerator). Nothing here communicates: the MPI/NCCL
 * communicators are built from these member lists.
 *
 * Order 'tp-cp-ep-dp-pp' (default) or 'tp-cp-ep-pp-dp' (--use-tp-pp-dp-mapping), leftmost token
 * at stride 1: default global_rank = tp + TP*(cp + CP*(ep + EP*(dp + DP*pp))). ep is 1 for the
 * dense decoder. */
#ifndef MC_DIST_GROUPS_H
#define MC_DIST_GROUPS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    int tp, cp, ep, dp, pp;
} mc_rank_coords_t;
typedef struct {
    int world, tp, cp, ep, dp, pp;
    int order_pp_before_dp;
} mc_layout_t;

/* world % (tp*cp*pp) == 0; dp = world/(tp*cp*pp), ep = 1. Returns 0, or -1 with one line in err. */
int mc_layout_init(mc_layout_t *l, int world, int tp, int pp, int cp, bool tp_pp_dp_order,
                   char *err, size_t n);
mc_rank_coords_t mc_layout_coords(const mc_layout_t *l, int rank);
int mc_layout_rank(const mc_layout_t *l, mc_rank_coords_t c);

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
