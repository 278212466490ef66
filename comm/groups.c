/* Megatron rank layout and process-group membership (see groups.h). */
#include "comm/groups.h"

#include <stdio.h>

enum { AX_TP, AX_CP, AX_EP, AX_DP, AX_PP, NAX };

/* Axes in order, leftmost at stride 1. */
static void order_axes(const mc_layout_t *l, int ax[NAX])
{
    ax[0] = AX_TP;
    ax[1] = AX_CP;
    ax[2] = AX_EP;
    ax[3] = l->order_pp_before_dp ? AX_PP : AX_DP;
    ax[4] = l->order_pp_before_dp ? AX_DP : AX_PP;
}

static int axis_size(const mc_layout_t *l, int a)
{
    switch (a) {
    case AX_TP: return l->tp;
    case AX_CP: return l->cp;
    case AX_EP: return l->ep;
    case AX_DP: return l->dp;
    default: return l->pp;
    }
}

static void coords_to_arr(mc_rank_coords_t c, int v[NAX])
{
    v[AX_TP] = c.tp;
    v[AX_CP] = c.cp;
    v[AX_EP] = c.ep;
    v[AX_DP] = c.dp;
    v[AX_PP] = c.pp;
}

int mc_layout_init(mc_layout_t *l, int world, int tp, int pp, int cp, bool tp_pp_dp_order,
                   char *err, size_t n)
{
    if (err && n) err[0] = '\0';
    if (world < 1 || tp < 1 || pp < 1 || cp < 1) {
        if (err && n)
            snprintf(err, n,
                     "world size (%d), tensor (%d), pipeline (%d) and context (%d) "
                     "parallel sizes must be positive",
                     world, tp, pp, cp);
        return -1;
    }
    long mp = (long)tp * pp * cp;
    if (world % mp != 0) {
        if (err && n)
            snprintf(err, n,
                     "world_size (%d) is not divisible by tensor_model_parallel_size (%d) "
                     "x pipeline_model_parallel_size (%d) x context_parallel_size (%d)",
                     world, tp, pp, cp);
        return -1;
    }
    l->world = world;
    l->tp = tp;
    l->cp = cp;
    l->ep = 1;
    l->pp = pp;
    l->dp = (int)(world / mp);
    l->order_pp_before_dp = tp_pp_dp_order ? 1 : 0;
    return 0;
}

mc_rank_coords_t mc_layout_coords(const mc_layout_t *l, int rank)
{
    int ax[NAX], v[NAX];
    order_axes(l, ax);
    for (int i = 0; i < NAX; i++) {
        int s = axis_size(l, ax[i]);
        v[ax[i]] = rank % s;
        rank /= s;
    }
    return (mc_rank_coords_t){
        .tp = v[AX_TP], .cp = v[AX_CP], .ep = v[AX_EP], .dp = v[AX_DP], .pp = v[AX_PP]};
}

int mc_layout_rank(const mc_layout_t *l, mc_rank_coords_t c)
{
    int ax[NAX], v[NAX];
    order_axes(l, ax);
    coords_to_arr(c, v);
    int r = 0;
    for (int i = NAX - 1; i >= 0; i--) r = r * axis_size(l, ax[i]) + v[ax[i]];
    return r;
}

int mc_layout_last_rank(const mc_layout_t *l) { return l->world - 1; }

/* Mask (over axis ids) of the token set for a base (non-embedding) kind; 0 for a bad kind. */
static unsigned kind_mask(mc_group_kind_t kind)
{
    switch (kind) {
    case MC_GROUP_TP: return 1u << AX_TP;
    case MC_GROUP_DP: return 1u << AX_DP;
    case MC_GROUP_DP_CP: return (1u << AX_DP) | (1u << AX_CP);
    case MC_GROUP_PP: return 1u << AX_PP;
    case MC_GROUP_CP: return 1u << AX_CP;
    case MC_GROUP_MP: return (1u << AX_TP) | (1u << AX_PP);
    case MC_GROUP_TP_DP_CP: return (1u << AX_TP) | (1u << AX_DP) | (1u << AX_CP);
    case MC_GROUP_EMBEDDING:
    case MC_GROUP_POSITION_EMBEDDING: return 1u << AX_PP;
    }
    return 0;
}

static int masked_size(const mc_layout_t *l, unsigned mask)
{
    int n = 1;
    for (int a = 0; a < NAX; a++)
        if (mask & (1u << a)) n *= axis_size(l, a);
    return n;
}

/* generate_masked_orthogonal_rank_groups: the group_index-th group of `mask`, members in masked
 * coordinate order (leftmost fastest). out must hold masked_size ranks. */
static void masked_group(const mc_layout_t *l, unsigned mask, int group_index, int *out)
{
    int ax[NAX], stride[NAX], base = 0, st = 1;
    order_axes(l, ax);
    for (int i = 0; i < NAX; i++) {
        stride[i] = st;
        st *= axis_size(l, ax[i]);
    }
    int g = group_index;
    for (int i = 0; i < NAX; i++) {
        if (mask & (1u << ax[i])) continue;
        int s = axis_size(l, ax[i]);
        base += (g % s) * stride[i];
        g /= s;
    }
    int gs = masked_size(l, mask);
    for (int k = 0; k < gs; k++) {
        int r = base, m = k;
        for (int i = 0; i < NAX; i++) {
            if (!(mask & (1u << ax[i]))) continue;
            int s = axis_size(l, ax[i]);
            r += (m % s) * stride[i];
            m /= s;
        }
        out[k] = r;
    }
}

/* Index of the group of `mask` that holds rank: its unmasked coordinates, leftmost fastest. */
static int group_index_of(const mc_layout_t *l, unsigned mask, int rank)
{
    int ax[NAX], v[NAX];
    order_axes(l, ax);
    coords_to_arr(mc_layout_coords(l, rank), v);
    int g = 0;
    for (int i = NAX - 1; i >= 0; i--) {
        if (mask & (1u << ax[i])) continue;
        g = g * axis_size(l, ax[i]) + v[ax[i]];
    }
    return g;
}

/* Embedding subset of one PP group (pp_ranks has l->pp entries): default_embedding_ranks /
 * pretrain_gpt.get_embedding_ranks / default_position_embedding_ranks. */
static int embedding_subset(const mc_layout_t *l, mc_group_kind_t kind, bool untied,
                            const int *pp_ranks, int out[2])
{
    out[0] = pp_ranks[0];
    if (kind == MC_GROUP_EMBEDDING && l->pp > 1 && !untied) {
        out[1] = pp_ranks[l->pp - 1];
        return 2;
    }
    return 1;
}

static int is_embedding_kind(mc_group_kind_t kind)
{
    return kind == MC_GROUP_EMBEDDING || kind == MC_GROUP_POSITION_EMBEDDING;
}

int mc_group_members(const mc_layout_t *l, mc_group_kind_t kind, int rank, bool untied_embeddings,
                     int *members, int cap)
{
    unsigned mask = kind_mask(kind);
    if (!mask || rank < 0 || rank >= l->world) return -1;
    int g = group_index_of(l, mask, rank);
    int gs = masked_size(l, mask);
    if (is_embedding_kind(kind)) {
        int pp_ranks[gs], emb[2];
        masked_group(l, mask, g, pp_ranks);
        int ne = embedding_subset(l, kind, untied_embeddings, pp_ranks, emb);
        int in = 0;
        for (int i = 0; i < ne; i++) in |= emb[i] == rank;
        if (!in) return 0;
        for (int i = 0; i < ne && i < cap; i++) members[i] = emb[i];
        return ne;
    }
    int buf[gs];
    masked_group(l, mask, g, buf);
    for (int i = 0; i < gs && i < cap; i++) members[i] = buf[i];
    return gs;
}

int mc_group_all(const mc_layout_t *l, mc_group_kind_t kind, bool untied_embeddings, int *groups,
                 int cap, int *group_size)
{
    unsigned mask = kind_mask(kind);
    if (!mask) return -1;
    int gs = masked_size(l, mask);
    int ng = l->world / gs;
    int buf[gs], emb[2];
    int out_size = gs;
    for (int g = 0; g < ng; g++) {
        masked_group(l, mask, g, buf);
        const int *src = buf;
        if (is_embedding_kind(kind)) {
            out_size = embedding_subset(l, kind, untied_embeddings, buf, emb);
            src = emb;
        }
        for (int i = 0; i < out_size; i++) {
            long idx = (long)g * out_size + i;
            if (idx < cap) groups[idx] = src[i];
        }
    }
    if (is_embedding_kind(kind) && ng == 0) out_size = 0;
    if (group_size) *group_size = out_size;
    return ng;
}
