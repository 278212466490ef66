#include "comm/state.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

static mc_group_t *make_group(mc_parallel_t *ps, mc_group_kind_t kind, bool untied,
                              const char *name)
{
    int cap = ps->world, *members = malloc((size_t)cap * sizeof(int));
    if (!members) mc_fatal("out of host memory");
    int n = mc_group_members(&ps->layout, kind, ps->rank, untied, members, cap);
    if (n < 0) mc_fatal("internal error: no %s group for rank %d", name, ps->rank);
    mc_group_t *g = ps->comm->group_new(ps->comm, members, n, name);
    free(members);
    return g;
}

/* --hierarchical-context-parallel-sizes a p (two levels, as Transformer Engine's a2a+p2p takes
 * them): Megatron's create_hierarchical_groups over the cp group's members, level 0 the a
 * consecutive members holding this rank, level 1 the p members a apart. Collective over the
 * world like every group_new; NULLs without the flag. */
static void hierarchical_cp(mc_parallel_t *ps, const mc_parallel_config_t *c)
{
    const int cp = c->cp, inner = c->cp_a2a;
    if (cp <= 1 || inner <= 0) return;
    if (cp % inner != 0) mc_fatal("internal error: hierarchical cp sizes");
    const int me = ps->cp->rank, outer = cp / inner;
    int lvl0[cp], lvl1[cp];
    for (int i = 0; i < inner; i++) lvl0[i] = ps->cp->members[me / inner * inner + i];
    for (int j = 0; j < outer; j++) lvl1[j] = ps->cp->members[me % inner + j * inner];
    ps->hcp[0] = ps->comm->group_new(ps->comm, lvl0, inner, "cp-a2a");
    ps->hcp[1] = ps->comm->group_new(ps->comm, lvl1, outer, "cp-p2p");
}

/* Whether every group of kind a has the members of a group of kind b (the same partition of the
 * world): decided from the layout alone, so every rank decides alike. */
static bool same_partition(const mc_layout_t *l, mc_group_kind_t a, mc_group_kind_t b)
{
    int cap = l->world, sa = 0, sb = 0;
    int *ga = malloc(2 * (size_t)cap * sizeof(int)), *gb = ga + cap;
    if (!ga) mc_fatal("out of host memory");
    int na = mc_group_all(l, a, false, ga, cap, &sa), nb = mc_group_all(l, b, false, gb, cap, &sb);
    bool same = na == nb && sa == sb && memcmp(ga, gb, (size_t)na * (size_t)sa * sizeof(int)) == 0;
    free(ga);
    return same;
}

/* The group of kind, or the already made group of an earlier kind in `have` with the same
 * partition (no second communicator). */
static mc_group_t *expert_group(mc_parallel_t *ps, mc_group_kind_t kind, const char *name,
                                const mc_group_kind_t *have, mc_group_t *const *made, int nhave)
{
    for (int i = 0; i < nhave; i++)
        if (same_partition(&ps->layout, kind, have[i])) return made[i];
    return make_group(ps, kind, false, name);
}

static void make_expert_groups(mc_parallel_t *ps)
{
    mc_group_kind_t have[12] = {MC_GROUP_TP, MC_GROUP_DP, MC_GROUP_DP_CP,
                                MC_GROUP_CP, MC_GROUP_MP, MC_GROUP_TP_DP_CP};
    mc_group_t *made[12] = {ps->tp, ps->dp, ps->dp_cp, ps->cp, ps->mp, ps->tp_dp_cp};
    int n = 6;
    struct {
        mc_group_t **g;
        mc_group_kind_t kind;
        const char *name;
    } todo[] = {{&ps->tp_cp, MC_GROUP_TP_CP, "tp-cp"},
                {&ps->ep, MC_GROUP_EP, "ep"},
                {&ps->etp, MC_GROUP_ETP, "etp"},
                {&ps->tp_ep, MC_GROUP_TP_EP, "tp-ep"},
                {&ps->tp_ep_pp, MC_GROUP_TP_EP_PP, "tp-ep-pp"},
                {&ps->edp, MC_GROUP_EDP, "edp"}};
    for (size_t i = 0; i < sizeof(todo) / sizeof(todo[0]); i++) {
        *todo[i].g = expert_group(ps, todo[i].kind, todo[i].name, have, made, n);
        have[n] = todo[i].kind, made[n++] = *todo[i].g;
    }
}

static int by_rank(const void *x, const void *y) { return *(const int *)x - *(const int *)y; }

/* Create_hierarchical_groups' two levels over a group's members for N instances: this rank's
 * block of size / N consecutive members, and the members at its place in every block. */
static void two_levels(mc_parallel_t *ps, const mc_group_t *g, int n_inst, const char *names[2],
                       mc_group_t **intra_out, mc_group_t **inter_out)
{
    if (g->size % n_inst != 0) mc_fatal("internal error: distributed optimizer instances");
    const int intra = g->size / n_inst, me = g->rank;
    int *m = malloc((size_t)g->size * sizeof(int));
    if (!m) mc_fatal("out of host memory");
    for (int i = 0; i < intra; i++) m[i] = g->members[me / intra * intra + i];
    *intra_out = ps->comm->group_new(ps->comm, m, intra, names[0]);
    for (int k = 0; k < n_inst; k++) m[k] = g->members[me % intra + k * intra];
    *inter_out = ps->comm->group_new(ps->comm, m, n_inst, names[1]);
    free(m);
}

/* --num-distributed-optimizer-instances N > 1: Megatron's partial distributed optimizer groups
 * (initialize_model_parallel): the dense ones over the dp-cp group's members (Megatron's
 * ranks_with_cp, whose blocks of dp-cp / N consecutive members are the instances), the expert
 * ones over the expert data-parallel group's (expert parallelism), and the instance's ranks:
 * every edp / N consecutive tp-ep-pp groups. Collective over the world. */
static void dist_opt_instances(mc_parallel_t *ps, const mc_parallel_config_t *c)
{
    const int n_inst = c->dist_opt_instances;
    if (n_inst <= 1) return;
    two_levels(ps, ps->dp_cp, n_inst, (const char *[]){"intra-dp-cp", "inter-dist-opt"},
               &ps->intra_dp_cp, &ps->inter_dist_opt);
    if (c->num_experts && ps->layout.ep > 1)
        two_levels(ps, ps->edp, n_inst, (const char *[]){"intra-edp", "inter-edp"}, &ps->intra_edp,
                   &ps->inter_edp);
    int *all = malloc(2 * (size_t)ps->world * sizeof(int)), size = 0;
    if (!all) mc_fatal("out of host memory");
    const int ng = mc_group_all(&ps->layout, MC_GROUP_TP_EP_PP, false, all, ps->world, &size);
    const int per = ps->layout.edp / n_inst; /* tp-ep-pp groups per instance */
    int mine = -1;
    for (int g = 0; g < ng && mine < 0; g++)
        for (int i = 0; i < size; i++)
            if (all[g * size + i] == ps->rank) mine = g;
    if (mine < 0 || per < 1 || ng % per != 0)
        mc_fatal("internal error: no distributed optimizer instance for rank %d", ps->rank);
    int *inst = all + ps->world, n = per * size;
    memcpy(inst, all + (size_t)(mine / per * per) * (size_t)size, (size_t)n * sizeof(int));
    qsort(inst, (size_t)n, sizeof(int), by_rank);
    ps->intra_dist_opt = ps->comm->group_new(ps->comm, inst, n, "intra-dist-opt");
    free(all);
}

int mc_parallel_init(mc_parallel_t *ps, mc_comm_t *comm, const mc_parallel_config_t *c, char *err,
                     size_t n)
{
    memset(ps, 0, sizeof(*ps));
    ps->comm = comm;
    ps->rank = comm->rank;
    ps->world = comm->size;
    if (mc_layout_init(&ps->layout, comm->size, c->tp, c->pp, c->cp, c->tp_pp_dp_mapping, err, n) !=
        0)
        return -1;
    const int etp = c->etp ? c->etp : c->tp, ep = c->ep > 0 ? c->ep : 1;
    if (mc_layout_set_experts(&ps->layout, ep, etp, err, n) != 0) return -1;
    ps->me = mc_layout_coords(&ps->layout, ps->rank);
    ps->expert_me = mc_layout_expert_coords(&ps->layout, ps->rank);
    ps->last_rank = mc_layout_last_rank(&ps->layout);
    const bool untied = c->untied_embeddings;
    /* every rank creates the kinds in the same order: group_new is collective over the world */
    ps->tp = make_group(ps, MC_GROUP_TP, untied, "tp");
    ps->dp = make_group(ps, MC_GROUP_DP, untied, "dp");
    ps->dp_cp = make_group(ps, MC_GROUP_DP_CP, untied, "dp-cp");
    ps->pp = make_group(ps, MC_GROUP_PP, untied, "pp");
    ps->cp = make_group(ps, MC_GROUP_CP, untied, "cp");
    ps->mp = make_group(ps, MC_GROUP_MP, untied, "tp-pp");
    ps->tp_dp_cp = make_group(ps, MC_GROUP_TP_DP_CP, untied, "tp-dp-cp");
    ps->embedding = make_group(ps, MC_GROUP_EMBEDDING, untied, "embedding");
    ps->position_embedding =
        make_group(ps, MC_GROUP_POSITION_EMBEDDING, untied, "position-embedding");
    if (c->num_experts) make_expert_groups(ps);
    hierarchical_cp(ps, c);
    dist_opt_instances(ps, c);
    return 0;
}

void mc_parallel_free(mc_parallel_t *ps)
{
    mc_group_t **all[] = {&ps->tp,
                          &ps->dp,
                          &ps->dp_cp,
                          &ps->pp,
                          &ps->cp,
                          &ps->mp,
                          &ps->tp_dp_cp,
                          &ps->embedding,
                          &ps->position_embedding,
                          &ps->tp_cp,
                          &ps->ep,
                          &ps->etp,
                          &ps->tp_ep,
                          &ps->tp_ep_pp,
                          &ps->edp,
                          &ps->hcp[0],
                          &ps->hcp[1],
                          &ps->intra_dp_cp,
                          &ps->inter_dist_opt,
                          &ps->intra_dist_opt,
                          &ps->intra_edp,
                          &ps->inter_edp};
    const size_t n = sizeof(all) / sizeof(all[0]);
    for (size_t i = 0; i < n; i++) {
        mc_group_t *g = *all[i];
        if (!g) continue;
        for (size_t j = i; j < n; j++) /* shared groups once */
            if (*all[j] == g) *all[j] = NULL;
        ps->comm->group_free(ps->comm, g);
    }
}
