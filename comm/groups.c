/* Megatron rank layout and process-group membership (see groups.h). */
#include "comm/groups.h"

#include <stdio.h>

#include "base/error.h"

enum { AX_TP, AX_CP, AX_EP, AX_DP, AX_PP, NAX };

/* One of Megatron's two RankGenerators: axis sizes (by axis id) and the order. */
typedef struct {
    int size[NAX];
    int pp_before_dp;
} gen_t;

static gen_t dense_gen(const mc_layout_t *l)
{
    return (gen_t){
        .size = {[AX_TP] = l->tp, [AX_CP] = l->cp, [AX_EP] = 1, [AX_DP] = l->dp, [AX_PP] = l->pp},
        .pp_before_dp = l->order_pp_before_dp};
}

static gen_t expert_gen(const mc_layout_t *l)
{
    return (gen_t){
        .size = {[AX_TP] = l->etp, [AX_CP] = 1, [AX_EP] = l->ep, [AX_DP] = l->edp, [AX_PP] = l->pp},
        .pp_before_dp = l->order_pp_before_dp};
}

/* Axes in order, leftmost at stride 1. */
static void order_axes(const gen_t *g, int ax[NAX])
{
    ax[0] = AX_TP;
    ax[1] = AX_CP;
    ax[2] = AX_EP;
    ax[3] = g->pp_before_dp ? AX_PP : AX_DP;
    ax[4] = g->pp_before_dp ? AX_DP : AX_PP;
}

/* Coordinates (by axis id) of rank in generator g. */
static void gen_coords(const gen_t *g, int rank, int v[NAX])
{
    int ax[NAX];
    order_axes(g, ax);
    for (int i = 0; i < NAX; i++) {
        v[ax[i]] = rank % g->size[ax[i]];
        rank /= g->size[ax[i]];
    }
}

int mc_layout_init(mc_layout_t *l, int world, int tp, int pp, int cp, bool tp_pp_dp_order,
                   char *err, size_t n)
{
    if (err && n) err[0] = '\0';
    if (world < 1 || tp < 1 || pp < 1 || cp < 1)
        return mc_errf(err, n,
                       "world size (%d), tensor (%d), pipeline (%d) and context (%d) "
                       "parallel sizes must be positive",
                       world, tp, pp, cp);
    long mp = (long)tp * pp * cp;
    if (world % mp != 0)
        return mc_errf(err, n,
                       "world_size (%d) is not divisible by tensor_model_parallel_size (%d) "
                       "x pipeline_model_parallel_size (%d) x context_parallel_size (%d)",
                       world, tp, pp, cp);
    l->world = world;
    l->tp = tp;
    l->cp = cp;
    l->pp = pp;
    l->dp = (int)(world / mp);
    l->order_pp_before_dp = tp_pp_dp_order ? 1 : 0;
    l->ep = 1, l->etp = tp, l->edp = l->dp * cp;
    return 0;
}

int mc_layout_set_experts(mc_layout_t *l, int ep, int etp, char *err, size_t n)
{
    if (err && n) err[0] = '\0';
    if (ep < 1 || etp < 1)
        return mc_errf(err, n,
                       "expert model (%d) and expert tensor (%d) parallel sizes must be "
                       "positive",
                       ep, etp);
    long emp = (long)etp * ep * l->pp;
    if (l->world % emp != 0)
        return mc_errf(err, n,
                       "world_size (%d) is not divisible by expert_tensor_parallel_size (%d) x "
                       "expert_model_parallel_size (%d) x pipeline_model_parallel_size (%d)",
                       l->world, etp, ep, l->pp);
    int edp = (int)(l->world / emp);
    if (l->order_pp_before_dp && l->pp > 1 && edp != l->dp)
        return mc_errf(err, n,
                       "with --use-tp-pp-dp-mapping and pipeline parallelism the expert data "
                       "parallel size (%d = %d / (%d x %d x pp)) must equal the data parallel "
                       "size (%d): the attention and MoE layers' pipeline groups would differ",
                       edp, l->world, etp, ep, l->dp);
    l->ep = ep, l->etp = etp, l->edp = edp;
    return 0;
}

mc_rank_coords_t mc_layout_coords(const mc_layout_t *l, int rank)
{
    gen_t g = dense_gen(l);
    int v[NAX];
    gen_coords(&g, rank, v);
    return (mc_rank_coords_t){
        .tp = v[AX_TP], .cp = v[AX_CP], .ep = v[AX_EP], .dp = v[AX_DP], .pp = v[AX_PP]};
}

mc_expert_coords_t mc_layout_expert_coords(const mc_layout_t *l, int rank)
{
    gen_t g = expert_gen(l);
    int v[NAX];
    gen_coords(&g, rank, v);
    return (mc_expert_coords_t){.etp = v[AX_TP], .ep = v[AX_EP], .edp = v[AX_DP], .pp = v[AX_PP]};
}

int mc_layout_rank(const mc_layout_t *l, mc_rank_coords_t c)
{
    gen_t g = dense_gen(l);
    int ax[NAX],
        v[NAX] = {[AX_TP] = c.tp, [AX_CP] = c.cp, [AX_EP] = c.ep, [AX_DP] = c.dp, [AX_PP] = c.pp};
    order_axes(&g, ax);
    int r = 0;
    for (int i = NAX - 1; i >= 0; i--) r = r * g.size[ax[i]] + v[ax[i]];
    return r;
}

int mc_layout_last_rank(const mc_layout_t *l) { return l->world - 1; }

/* The generator and the mask (over axis ids) of the token set of a base (non-embedding) kind;
 * mask 0 for a bad kind. */
static unsigned kind_mask(const mc_layout_t *l, mc_group_kind_t kind, gen_t *g)
{
    const unsigned TP = 1u << AX_TP, CP = 1u << AX_CP, EP = 1u << AX_EP, DP = 1u << AX_DP,
                   PP = 1u << AX_PP;
    *g = kind >= MC_GROUP_EP ? expert_gen(l) : dense_gen(l);
    switch (kind) {
    case MC_GROUP_TP: return TP;
    case MC_GROUP_DP: return DP;
    case MC_GROUP_DP_CP: return DP | CP;
    case MC_GROUP_PP: return PP;
    case MC_GROUP_CP: return CP;
    case MC_GROUP_MP: return TP | PP;
    case MC_GROUP_TP_DP_CP: return TP | DP | CP;
    case MC_GROUP_EMBEDDING:
    case MC_GROUP_POSITION_EMBEDDING: return PP;
    case MC_GROUP_TP_CP: return TP | CP;
    case MC_GROUP_EP: return EP;
    case MC_GROUP_ETP: return TP;
    case MC_GROUP_TP_EP: return TP | EP;
    case MC_GROUP_TP_EP_PP: return TP | EP | PP;
    case MC_GROUP_EDP: return DP;
    }
    return 0;
}

static int masked_size(const gen_t *g, unsigned mask)
{
    int n = 1;
    for (int a = 0; a < NAX; a++)
        if (mask & (1u << a)) n *= g->size[a];
    return n;
}

static int gen_world(const gen_t *g) { return masked_size(g, (1u << NAX) - 1); }

/* generate_masked_orthogonal_rank_groups: the group_index-th group of `mask`, members in masked
 * coordinate order (leftmost fastest). out must hold masked_size ranks. */
static void masked_group(const gen_t *g, unsigned mask, int group_index, int *out)
{
    int ax[NAX], stride[NAX], base = 0, st = 1;
    order_axes(g, ax);
    for (int i = 0; i < NAX; i++) {
        stride[i] = st;
        st *= g->size[ax[i]];
    }
    int gi = group_index;
    for (int i = 0; i < NAX; i++) {
        if (mask & (1u << ax[i])) continue;
        int s = g->size[ax[i]];
        base += (gi % s) * stride[i];
        gi /= s;
    }
    int gs = masked_size(g, mask);
    for (int k = 0; k < gs; k++) {
        int r = base, m = k;
        for (int i = 0; i < NAX; i++) {
            if (!(mask & (1u << ax[i]))) continue;
            int s = g->size[ax[i]];
            r += (m % s) * stride[i];
            m /= s;
        }
        out[k] = r;
    }
}

/* Index of the group of `mask` that holds rank: its unmasked coordinates, leftmost fastest. */
static int group_index_of(const gen_t *g, unsigned mask, int rank)
{
    int ax[NAX], v[NAX];
    order_axes(g, ax);
    gen_coords(g, rank, v);
    int gi = 0;
    for (int i = NAX - 1; i >= 0; i--) {
        if (mask & (1u << ax[i])) continue;
        gi = gi * g->size[ax[i]] + v[ax[i]];
    }
    return gi;
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
    gen_t g;
    unsigned mask = kind_mask(l, kind, &g);
    if (!mask || rank < 0 || rank >= l->world || gen_world(&g) != l->world) return -1;
    int gi = group_index_of(&g, mask, rank);
    int gs = masked_size(&g, mask);
    if (is_embedding_kind(kind)) {
        int pp_ranks[gs], emb[2];
        masked_group(&g, mask, gi, pp_ranks);
        int ne = embedding_subset(l, kind, untied_embeddings, pp_ranks, emb);
        int in = 0;
        for (int i = 0; i < ne; i++) in |= emb[i] == rank;
        if (!in) return 0;
        for (int i = 0; i < ne && i < cap; i++) members[i] = emb[i];
        return ne;
    }
    int buf[gs];
    masked_group(&g, mask, gi, buf);
    for (int i = 0; i < gs && i < cap; i++) members[i] = buf[i];
    return gs;
}

int mc_group_all(const mc_layout_t *l, mc_group_kind_t kind, bool untied_embeddings, int *groups,
                 int cap, int *group_size)
{
    gen_t g;
    unsigned mask = kind_mask(l, kind, &g);
    if (!mask || gen_world(&g) != l->world) return -1;
    int gs = masked_size(&g, mask);
    int ng = l->world / gs;
    int buf[gs], emb[2];
    int out_size = gs;
    for (int gi = 0; gi < ng; gi++) {
        masked_group(&g, mask, gi, buf);
        const int *src = buf;
        if (is_embedding_kind(kind)) {
            out_size = embedding_subset(l, kind, untied_embeddings, buf, emb);
            src = emb;
        }
        for (int i = 0; i < out_size; i++) {
            long idx = (long)gi * out_size + i;
            if (idx < cap) groups[idx] = src[i];
        }
    }
    if (is_embedding_kind(kind) && ng == 0) out_size = 0;
    if (group_size) *group_size = out_size;
    return ng;
}
