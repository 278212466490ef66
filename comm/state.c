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
    ps->me = mc_layout_coords(&ps->layout, ps->rank);
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
    return 0;
}

void mc_parallel_free(mc_parallel_t *ps)
{
    mc_group_t **all[] = {&ps->tp,       &ps->dp,        &ps->dp_cp,
                          &ps->pp,       &ps->cp,        &ps->mp,
                          &ps->tp_dp_cp, &ps->embedding, &ps->position_embedding};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (*all[i]) ps->comm->group_free(ps->comm, *all[i]), *all[i] = NULL;
}
