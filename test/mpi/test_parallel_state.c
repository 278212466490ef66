/* Multi-rank test of comm/state.c's expert-parallel groups (Megatron-Core's parallel folding):
 * for several layouts of the job's ranks, every group this rank gets has the members
 * comm/groups.c computes (test_groups checks those against Megatron's RankGenerator), groups
 * with the same members for every rank are one communicator, each group really connects its
 * members (an all-reduce of the world ranks), and a dense run makes no expert groups.
 *
 *   mpirun -np 8 test_parallel_state     (1, 2 and 4 ranks run the layouts that fit)
 *
 * Rank 0 prints one TAP line per layout; a check fails when it fails on any rank. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "comm/comm.h"
#include "comm/runtime.h"
#include "comm/state.h"

typedef struct {
    int tp, cp, pp, ep, etp, tp_pp_dp, experts;
} layout_t;

static const layout_t LAYOUTS[] = {
    {2, 1, 2, 2, 1, 0, 4}, /* tp2 pp2, experts over ep2 with etp 1 */
    {2, 1, 1, 4, 1, 0, 8}, /* ep spans tp and dp */
    {1, 1, 1, 8, 1, 0, 8}, /* ep over the whole world */
    {2, 2, 1, 2, 2, 0, 4}, /* cp 2: EDP folds cp in */
    {2, 1, 2, 2, 1, 1, 4}, /* pp before dp (edp == dp) */
    {2, 1, 1, 2, 2, 0, 4}, /* etp = tp: etp and tp-ep-pp alias dense groups */
    {1, 1, 1, 1, 1, 0, 4}, /* ep 1 etp 1 on tp 1: every expert group is a dense one */
    {2, 1, 1, 1, 2, 0, 0}, /* dense: no expert groups */
};

static int check_group(const mc_parallel_t *ps, mc_group_t *g, mc_group_kind_t kind,
                       const char *name)
{
    int want[64], n = mc_group_members(&ps->layout, kind, ps->rank, false, want, 64), bad = 0;
    if (!g || g->size != n) {
        fprintf(stderr, "rank %d: %s group: %d members, expected %d\n", ps->rank, name,
                g ? g->size : -1, n);
        return 1;
    }
    for (int i = 0; i < n; i++) bad |= g->members[i] != want[i];
    int64_t sum = ps->rank, expect = 0;
    for (int i = 0; i < n; i++) expect += want[i];
    mc_all_reduce(ps->comm, g, &sum, 1, MC_DT_I64, MC_OP_SUM);
    bad |= sum != expect;
    if (bad) fprintf(stderr, "rank %d: %s group members or all-reduce wrong\n", ps->rank, name);
    return bad;
}

static int run_layout(mc_comm_t *c, const layout_t *L)
{
    const mc_parallel_config_t a = {.tp = L->tp,
                                    .pp = L->pp,
                                    .cp = L->cp,
                                    .tp_pp_dp_mapping = L->tp_pp_dp,
                                    .num_experts = L->experts,
                                    .ep = L->ep,
                                    .etp = L->etp};
    mc_parallel_t ps;
    char err[512];
    if (mc_parallel_init(&ps, c, &a, err, sizeof(err)) != 0) {
        fprintf(stderr, "rank %d: %s\n", c->rank, err);
        return 1;
    }
    int bad = 0;
    if (!L->experts) {
        bad |= ps.tp_cp || ps.ep || ps.etp || ps.tp_ep || ps.tp_ep_pp || ps.edp;
    } else {
        bad |= check_group(&ps, ps.tp_cp, MC_GROUP_TP_CP, "tp-cp");
        bad |= check_group(&ps, ps.ep, MC_GROUP_EP, "ep");
        bad |= check_group(&ps, ps.etp, MC_GROUP_ETP, "etp");
        bad |= check_group(&ps, ps.tp_ep, MC_GROUP_TP_EP, "tp-ep");
        bad |= check_group(&ps, ps.tp_ep_pp, MC_GROUP_TP_EP_PP, "tp-ep-pp");
        bad |= check_group(&ps, ps.edp, MC_GROUP_EDP, "edp");
        bad |= ps.expert_me.ep != ps.ep->rank || ps.expert_me.etp != ps.etp->rank ||
               ps.expert_me.edp != ps.edp->rank;
        /* one communicator for groups with the same members */
        if (L->etp == L->tp) bad |= ps.etp != ps.tp;
        bad |= (L->cp == 1) != (ps.tp_cp == ps.tp);
        bool dense_edp = ps.edp == ps.tp || ps.edp == ps.dp || ps.edp == ps.dp_cp ||
                         ps.edp == ps.cp || ps.edp == ps.mp || ps.edp == ps.tp_dp_cp;
        if (L->etp * L->ep == L->tp * L->cp) bad |= !dense_edp; /* edp folds onto dp */
    }
    mc_parallel_free(&ps);
    return bad;
}

int main(void)
{
    mc_runtime_t rt;
    char err[512];
    if (mc_runtime_init(&rt, err, sizeof(err)) != 0 ||
        mc_runtime_connect(&rt, 60, err, sizeof(err)) != 0) {
        fprintf(stderr, "test_parallel_state: %s\n", err);
        return 2;
    }
    mc_comm_t *c = rt.launched ? mc_comm_mpi(&rt, err, sizeof(err)) : mc_comm_single();
    if (!c) {
        fprintf(stderr, "test_parallel_state: %s\n", err);
        return 2;
    }
    int failed = 0;
    for (size_t k = 0; k < sizeof(LAYOUTS) / sizeof(LAYOUTS[0]); k++) {
        const layout_t *L = &LAYOUTS[k];
        int need = L->tp * L->cp * L->pp, eneed = L->etp * L->ep * L->pp;
        if (c->size % need || c->size % eneed || (L->tp_pp_dp && L->pp > 1 &&
                                                 c->size / need != c->size / eneed))
            continue; /* does not fit this many ranks */
        int64_t bad = run_layout(c, L);
        mc_all_reduce(c, c->world, &bad, 1, MC_DT_I64, MC_OP_MAX);
        failed += bad != 0;
        if (c->rank == 0)
            printf("%s - %d ranks: tp %d cp %d pp %d ep %d etp %d%s, %d experts: expert groups\n",
                   bad ? "not ok" : "ok", c->size, L->tp, L->cp, L->pp, L->ep, L->etp,
                   L->tp_pp_dp ? " (tp-cp-ep-pp-dp)" : "", L->experts);
    }
    c->finalize(c);
    mc_runtime_finalize(&rt);
    return failed ? 1 : 0;
}
