/* Megatron rank layout and process groups (MEGATRON.md section 4; comm/groups.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/groups.h"
#include "comm/state.h"
#include "test/unit/fixture.h"

#define MAXW 64

static mc_layout_t layout(int world, int tp, int pp, int cp, bool tp_pp_dp)
{
    mc_layout_t l;
    char err[256];
    assert_int_equal(mc_layout_init(&l, world, tp, pp, cp, tp_pp_dp, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    return l;
}

/* Checks every group of `kind` against the expected flat list (ng groups of gs). */
static void expect_all(const mc_layout_t *l, mc_group_kind_t kind, bool untied, int ng, int gs,
                       const int *want)
{
    int got[MAXW * MAXW], size = -1;
    assert_int_equal(mc_group_all(l, kind, untied, got, MAXW * MAXW, &size), ng);
    assert_int_equal(size, gs);
    for (int i = 0; i < ng * gs; i++)
        assert_int_equal(got[i], want[i]);
    /* Per-rank membership agrees with the enumeration. */
    for (int r = 0; r < l->world; r++) {
        int m[MAXW], n = mc_group_members(l, kind, r, untied, m, MAXW), found = -1;
        for (int g = 0; g < ng && found < 0; g++)
            for (int i = 0; i < gs; i++)
                if (want[g * gs + i] == r)
                    found = g;
        if (found < 0) {
            assert_int_equal(n, 0);
            continue;
        }
        assert_int_equal(n, gs);
        for (int i = 0; i < gs; i++)
            assert_int_equal(m[i], want[found * gs + i]);
    }
}

/* The table of MEGATRON.md section 4: world 8, tp 2, pp 2, dp 2 (cp 1), default order. */
static void test_section4_table(void **state)
{
    mc_layout_t l = layout(8, 2, 2, 1, false);
    assert_int_equal(l.dp, 2);
    assert_int_equal(l.ep, 1);
    for (int r = 0; r < 8; r++) {
        mc_rank_coords_t c = mc_layout_coords(&l, r);
        assert_int_equal(c.tp, r % 2);
        assert_int_equal(c.dp, (r / 2) % 2);
        assert_int_equal(c.pp, r / 4);
        assert_int_equal(c.cp, 0);
        assert_int_equal(c.ep, 0);
    }
    static const int tp[] = {0, 1, 2, 3, 4, 5, 6, 7};
    static const int dp[] = {0, 2, 1, 3, 4, 6, 5, 7};
    static const int pp[] = {0, 4, 1, 5, 2, 6, 3, 7};
    static const int mp[] = {0, 1, 4, 5, 2, 3, 6, 7};
    static const int tpdp[] = {0, 1, 2, 3, 4, 5, 6, 7};
    static const int emb[] = {0, 4, 1, 5, 2, 6, 3, 7};
    static const int emb_untied[] = {0, 1, 2, 3};
    static const int pos[] = {0, 1, 2, 3};
    static const int cp[] = {0, 1, 2, 3, 4, 5, 6, 7};
    expect_all(&l, MC_GROUP_TP, false, 4, 2, tp);
    expect_all(&l, MC_GROUP_DP, false, 4, 2, dp);
    expect_all(&l, MC_GROUP_DP_CP, false, 4, 2, dp); /* cp 1: same as dp */
    expect_all(&l, MC_GROUP_PP, false, 4, 2, pp);
    expect_all(&l, MC_GROUP_MP, false, 2, 4, mp);
    expect_all(&l, MC_GROUP_TP_DP_CP, false, 2, 4, tpdp);
    expect_all(&l, MC_GROUP_CP, false, 8, 1, cp);
    expect_all(&l, MC_GROUP_EMBEDDING, false, 4, 2, emb);
    expect_all(&l, MC_GROUP_EMBEDDING, true, 4, 1, emb_untied);
    expect_all(&l, MC_GROUP_POSITION_EMBEDDING, false, 4, 1, pos);
    expect_all(&l, MC_GROUP_POSITION_EMBEDDING, true, 4, 1, pos);

    /* Last rank prints the logs: pp-last, tp 1, dp 1. */
    assert_int_equal(mc_layout_last_rank(&l), 7);
    mc_rank_coords_t c = mc_layout_coords(&l, 7);
    assert_int_equal(c.tp, 1);
    assert_int_equal(c.dp, 1);
    assert_int_equal(c.pp, 1);

    /* Middle-of-nothing cases: a non-first stage is in no position-embedding group; the last
     * stage is in no embedding group when untied. cap limits what is written. */
    int m[4] = {-1, -1, -1, -1};
    assert_int_equal(mc_group_members(&l, MC_GROUP_POSITION_EMBEDDING, 5, false, m, 4), 0);
    assert_int_equal(mc_group_members(&l, MC_GROUP_EMBEDDING, 5, true, m, 4), 0);
    assert_int_equal(mc_group_members(&l, MC_GROUP_EMBEDDING, 5, false, m, 4), 2);
    assert_int_equal(m[0], 1);
    assert_int_equal(m[1], 5);
    m[0] = m[1] = -1;
    assert_int_equal(mc_group_members(&l, MC_GROUP_MP, 6, false, m, 1), 4);
    assert_int_equal(m[0], 2);
    assert_int_equal(m[1], -1);
}

/* pp == 1: the embedding group is [pp_ranks[0]], a one-member group (default_embedding_ranks). */
static void test_single_stage_embedding(void **state)
{
    mc_layout_t l = layout(4, 2, 1, 1, false);
    static const int emb[] = {0, 1, 2, 3};
    expect_all(&l, MC_GROUP_EMBEDDING, false, 4, 1, emb);
    expect_all(&l, MC_GROUP_EMBEDDING, true, 4, 1, emb);
    expect_all(&l, MC_GROUP_POSITION_EMBEDDING, false, 4, 1, emb);

    mc_layout_t one = layout(1, 1, 1, 1, false);
    assert_int_equal(mc_layout_last_rank(&one), 0);
    int m[1];
    assert_int_equal(mc_group_members(&one, MC_GROUP_EMBEDDING, 0, false, m, 1), 1);
    assert_int_equal(m[0], 0);
}

/* --use-tp-pp-dp-mapping, world 8, tp 2, pp 2, dp 2. Order tp-cp-ep-pp-dp, so
 * rank = tp + 2*(pp + 2*dp): tp = r%2, pp = (r/2)%2, dp = r/4.
 *   TP ('tp'): vary tp, group index (pp,dp)      -> [0,1] [2,3] [4,5] [6,7]
 *   PP ('pp', stride 2): index (tp,dp) tp fastest -> [0,2] [1,3] [4,6] [5,7]
 *   DP ('dp', stride 4): index (tp,pp)            -> [0,4] [1,5] [2,6] [3,7]
 *   MP ('tp-pp'): strides 1,2, index dp           -> [0,1,2,3] [4,5,6,7]
 *   TP-DP-CP: strides 1,4, index pp               -> [0,1,4,5] [2,3,6,7]
 *   embedding: first/last of each PP group        -> [0,2] [1,3] [4,6] [5,7]
 *   position embedding: first of each PP group    -> [0] [1] [4] [5] */
static void test_tp_pp_dp_order(void **state)
{
    mc_layout_t l = layout(8, 2, 2, 1, true);
    assert_int_equal(l.order_pp_before_dp, 1);
    for (int r = 0; r < 8; r++) {
        mc_rank_coords_t c = mc_layout_coords(&l, r);
        assert_int_equal(c.tp, r % 2);
        assert_int_equal(c.pp, (r / 2) % 2);
        assert_int_equal(c.dp, r / 4);
    }
    static const int tp[] = {0, 1, 2, 3, 4, 5, 6, 7};
    static const int pp[] = {0, 2, 1, 3, 4, 6, 5, 7};
    static const int dp[] = {0, 4, 1, 5, 2, 6, 3, 7};
    static const int mp[] = {0, 1, 2, 3, 4, 5, 6, 7};
    static const int tpdp[] = {0, 1, 4, 5, 2, 3, 6, 7};
    static const int emb[] = {0, 2, 1, 3, 4, 6, 5, 7};
    static const int pos[] = {0, 1, 4, 5};
    expect_all(&l, MC_GROUP_TP, false, 4, 2, tp);
    expect_all(&l, MC_GROUP_PP, false, 4, 2, pp);
    expect_all(&l, MC_GROUP_DP, false, 4, 2, dp);
    expect_all(&l, MC_GROUP_DP_CP, false, 4, 2, dp);
    expect_all(&l, MC_GROUP_MP, false, 2, 4, mp);
    expect_all(&l, MC_GROUP_TP_DP_CP, false, 2, 4, tpdp);
    expect_all(&l, MC_GROUP_EMBEDDING, false, 4, 2, emb);
    expect_all(&l, MC_GROUP_POSITION_EMBEDDING, false, 4, 1, pos);
    assert_int_equal(mc_layout_last_rank(&l), 7);
}

/* Context parallel, world 16, tp 2, cp 2, pp 2 -> dp 2; rank = tp + 2*(cp + 2*(dp + 2*pp)).
 *   CP (stride 2): index (tp,dp,pp)       -> [0,2] [1,3] [4,6] [5,7] [8,10] ...
 *   DP-CP (strides 2,4): index (tp,pp)    -> [0,2,4,6] [1,3,5,7] [8,10,12,14] [9,11,13,15]
 *   DP (stride 4): index (tp,cp,pp)       -> [0,4] [1,5] [2,6] [3,7] [8,12] ... */
static void test_context_parallel(void **state)
{
    mc_layout_t l = layout(16, 2, 2, 2, false);
    assert_int_equal(l.dp, 2);
    static const int cp[] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
    static const int dpcp[] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
    static const int dp[] = {0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15};
    static const int pp[] = {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15};
    expect_all(&l, MC_GROUP_CP, false, 8, 2, cp);
    expect_all(&l, MC_GROUP_DP_CP, false, 4, 4, dpcp);
    expect_all(&l, MC_GROUP_DP, false, 8, 2, dp);
    expect_all(&l, MC_GROUP_PP, false, 8, 2, pp);
}

/* Which coordinates a kind's members vary over (the rest are shared within a group). */
static void varied(mc_group_kind_t k, bool *tp, bool *cp, bool *dp, bool *pp)
{
    *tp = k == MC_GROUP_TP || k == MC_GROUP_MP || k == MC_GROUP_TP_DP_CP;
    *cp = k == MC_GROUP_CP || k == MC_GROUP_DP_CP || k == MC_GROUP_TP_DP_CP;
    *dp = k == MC_GROUP_DP || k == MC_GROUP_DP_CP || k == MC_GROUP_TP_DP_CP;
    *pp = k == MC_GROUP_PP || k == MC_GROUP_MP || k == MC_GROUP_EMBEDDING ||
          k == MC_GROUP_POSITION_EMBEDDING;
}

static void check_partitions(const mc_layout_t *l)
{
    static int groups[MAXW * MAXW];
    for (int k = MC_GROUP_TP; k <= MC_GROUP_POSITION_EMBEDDING; k++) {
        for (int untied = 0; untied < 2; untied++) {
            int gs = -1, ng = mc_group_all(l, k, untied, groups, MAXW * MAXW, &gs);
            bool emb = k == MC_GROUP_EMBEDDING || k == MC_GROUP_POSITION_EMBEDDING;
            int want_gs;
            switch (k) {
            case MC_GROUP_TP: want_gs = l->tp; break;
            case MC_GROUP_DP: want_gs = l->dp; break;
            case MC_GROUP_DP_CP: want_gs = l->dp * l->cp; break;
            case MC_GROUP_PP: want_gs = l->pp; break;
            case MC_GROUP_CP: want_gs = l->cp; break;
            case MC_GROUP_MP: want_gs = l->tp * l->pp; break;
            case MC_GROUP_TP_DP_CP: want_gs = l->tp * l->dp * l->cp; break;
            case MC_GROUP_EMBEDDING: want_gs = (l->pp > 1 && !untied) ? 2 : 1; break;
            default: want_gs = 1; break;
            }
            assert_int_equal(gs, want_gs);
            assert_int_equal(ng, emb ? l->world / l->pp : l->world / gs);
            int seen[MAXW] = {0};
            for (int g = 0; g < ng; g++) {
                mc_rank_coords_t c0 = mc_layout_coords(l, groups[g * gs]);
                bool vtp, vcp, vdp, vpp;
                varied(k, &vtp, &vcp, &vdp, &vpp);
                for (int i = 0; i < gs; i++) {
                    int r = groups[g * gs + i];
                    assert_true(r >= 0 && r < l->world);
                    seen[r]++;
                    if (i > 0)
                        assert_true(r > groups[g * gs + i - 1]); /* ascending */
                    mc_rank_coords_t c = mc_layout_coords(l, r);
                    if (!vtp) assert_int_equal(c.tp, c0.tp);
                    if (!vcp) assert_int_equal(c.cp, c0.cp);
                    if (!vdp) assert_int_equal(c.dp, c0.dp);
                    if (!vpp) assert_int_equal(c.pp, c0.pp);
                    if (emb) {
                        bool first = c.pp == 0, last = c.pp == l->pp - 1;
                        bool ok = k == MC_GROUP_POSITION_EMBEDDING || untied ? first
                                                                             : (first || last);
                        assert_true(ok);
                    }
                    int m[MAXW];
                    assert_int_equal(mc_group_members(l, k, r, untied, m, MAXW), gs);
                    for (int j = 0; j < gs; j++)
                        assert_int_equal(m[j], groups[g * gs + j]);
                }
            }
            for (int r = 0; r < l->world; r++) {
                assert_true(seen[r] <= 1);
                if (!emb)
                    assert_int_equal(seen[r], 1);
                if (!seen[r]) {
                    int m[MAXW];
                    assert_int_equal(mc_group_members(l, k, r, untied, m, MAXW), 0);
                }
            }
        }
    }
}

/* Every layout up to world 64, both orders: coords/rank round trip, ranges, partitions. */
static void test_all_layouts(void **state)
{
    int layouts = 0;
    for (int world = 1; world <= MAXW; world++)
        for (int tp = 1; tp <= world; tp++)
            for (int pp = 1; pp <= world; pp++)
                for (int cp = 1; cp <= world; cp++) {
                    if (world % (tp * pp * cp))
                        continue;
                    for (int order = 0; order < 2; order++) {
                        mc_layout_t l = layout(world, tp, pp, cp, order);
                        assert_int_equal(l.dp * tp * pp * cp, world);
                        assert_int_equal(mc_layout_last_rank(&l), world - 1);
                        for (int r = 0; r < world; r++) {
                            mc_rank_coords_t c = mc_layout_coords(&l, r);
                            assert_true(c.tp >= 0 && c.tp < tp);
                            assert_true(c.cp >= 0 && c.cp < cp);
                            assert_true(c.pp >= 0 && c.pp < pp);
                            assert_true(c.dp >= 0 && c.dp < l.dp);
                            assert_int_equal(c.ep, 0);
                            assert_int_equal(mc_layout_rank(&l, c), r);
                            if (!order)
                                assert_int_equal(
                                    r, c.tp + tp * (c.cp + cp * (c.dp + l.dp * c.pp)));
                            else
                                assert_int_equal(r, c.tp + tp * (c.cp + cp * (c.pp + pp * c.dp)));
                        }
                        mc_rank_coords_t last = mc_layout_coords(&l, world - 1);
                        assert_int_equal(last.pp, pp - 1);
                        check_partitions(&l);
                        layouts++;
                    }
                }
    assert_true(layouts > 500);
}

static void test_bad_layouts(void **state)
{
    mc_layout_t l;
    char err[256];
    assert_int_equal(mc_layout_init(&l, 6, 4, 1, 1, false, err, sizeof(err)), -1);
    assert_true(strlen(err) > 0);
    assert_null(strchr(err, '\n'));
    assert_non_null(strstr(err, "divisible"));
    assert_int_equal(mc_layout_init(&l, 8, 2, 3, 1, false, err, sizeof(err)), -1);
    assert_null(strchr(err, '\n'));
    assert_int_equal(mc_layout_init(&l, 8, 2, 2, 4, true, err, sizeof(err)), -1);
    assert_int_equal(mc_layout_init(&l, 8, 0, 1, 1, false, err, sizeof(err)), -1);
    assert_true(strlen(err) > 0);
    assert_null(strchr(err, '\n'));
    assert_int_equal(mc_layout_init(&l, 0, 1, 1, 1, false, err, sizeof(err)), -1);
    /* A short buffer is still a terminated line. */
    char tiny[8];
    assert_int_equal(mc_layout_init(&l, 6, 4, 1, 1, false, tiny, sizeof(tiny)), -1);
    assert_true(strlen(tiny) == 7);
}

/* ---- Megatron's own groups (test/fixtures/megatron_groups.txt, test/ref/megatron_groups.py) ---- */

static const struct {
    const char *name;
    mc_group_kind_t kind;
} FX_KINDS[] = {
    {"tp", MC_GROUP_TP},       {"cp", MC_GROUP_CP},       {"dp", MC_GROUP_DP},
    {"dp-cp", MC_GROUP_DP_CP}, {"pp", MC_GROUP_PP},       {"tp-pp", MC_GROUP_MP},
    {"tp-cp", MC_GROUP_TP_CP}, {"tp-dp-cp", MC_GROUP_TP_DP_CP}, {"ep", MC_GROUP_EP},
    {"etp", MC_GROUP_ETP},     {"tp-ep", MC_GROUP_TP_EP}, {"tp-ep-pp", MC_GROUP_TP_EP_PP},
    {"edp", MC_GROUP_EDP},
};

/* "0,1 2,3 ..." into groups (flat); returns the number of groups, *gs their size. */
static int parse_groups(char *text, int *flat, int cap, int *gs)
{
    int ng = 0, n = 0;
    *gs = 0;
    for (char *save = NULL, *grp = strtok_r(text, " \n", &save); grp; grp = strtok_r(NULL, " \n", &save)) {
        int k = 0;
        for (char *s2 = NULL, *r = strtok_r(grp, ",", &s2); r; r = strtok_r(NULL, ",", &s2), k++) {
            assert_true(n < cap);
            flat[n++] = atoi(r);
        }
        if (*gs == 0) *gs = k;
        assert_int_equal(k, *gs);
        ng++;
    }
    return ng;
}

/* The expert coordinates agree with the groups: a rank's place in its EP group is its ep rank,
 * in its ETP group its etp rank, in its EDP group its edp rank. */
static void expect_expert_coords(const mc_layout_t *l)
{
    for (int r = 0; r < l->world; r++) {
        mc_expert_coords_t c = mc_layout_expert_coords(l, r);
        int m[MAXW];
        const struct { mc_group_kind_t kind; int want; } places[] = {
            {MC_GROUP_EP, c.ep}, {MC_GROUP_ETP, c.etp}, {MC_GROUP_EDP, c.edp}, {MC_GROUP_PP, c.pp}};
        for (size_t k = 0; k < sizeof(places) / sizeof(places[0]); k++) {
            int n = mc_group_members(l, places[k].kind, r, false, m, MAXW);
            assert_true(places[k].want < n);
            assert_int_equal(m[places[k].want], r);
        }
    }
}

static void test_megatron_rank_generators(void **state)
{
    (void)state;
    char path[4096], line[8192], order[32];
    assert_int_equal(mc_fx_path(path, sizeof(path), "megatron_groups.txt"), 0);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    mc_layout_t l;
    int layouts = 0, checked = 0, have = 0;
    while (fgets(line, sizeof(line), f)) {
        int world, tp, cp, pp, ep, etp;
        if (line[0] == '#') continue;
        if (sscanf(line, "layout %d %d %d %d %d %d %31s", &world, &tp, &cp, &pp, &ep, &etp, order) == 7) {
            char err[256];
            assert_int_equal(mc_layout_init(&l, world, tp, pp, cp, strcmp(order, "tp-cp-ep-pp-dp") == 0, err,
                                            sizeof(err)), 0);
            assert_int_equal(mc_layout_set_experts(&l, ep, etp, err, sizeof(err)), 0);
            assert_int_equal(l.edp, world / (etp * ep * pp));
            expect_expert_coords(&l);
            layouts++, have = 1;
            continue;
        }
        assert_true(have);
        char *sp = strchr(line, ' ');
        assert_non_null(sp);
        *sp = '\0';
        size_t k = 0;
        while (k < sizeof(FX_KINDS) / sizeof(FX_KINDS[0]) && strcmp(FX_KINDS[k].name, line) != 0) k++;
        if (k == sizeof(FX_KINDS) / sizeof(FX_KINDS[0])) fail_msg("unknown kind '%s' in %s", line, path);
        int want[MAXW * MAXW], gs;
        int ng = parse_groups(sp + 1, want, MAXW * MAXW, &gs);
        expect_all(&l, FX_KINDS[k].kind, false, ng, gs, want);
        checked++;
    }
    fclose(f);
    assert_int_equal(layouts, 11);
    assert_int_equal(checked, layouts * (int)(sizeof(FX_KINDS) / sizeof(FX_KINDS[0])));
}

/* Without mc_layout_set_experts the experts fold as ep 1, etp tp: the expert groups are the
 * dense ones (EDP is dp x cp). */
static void test_expert_defaults(void **state)
{
    (void)state;
    mc_layout_t l = layout(16, 2, 2, 2, false);
    assert_int_equal(l.ep, 1);
    assert_int_equal(l.etp, 2);
    assert_int_equal(l.edp, 4);
    int a[MAXW * MAXW], b[MAXW * MAXW], sa, sb;
    const mc_group_kind_t same[][2] = {{MC_GROUP_ETP, MC_GROUP_TP}, {MC_GROUP_TP_EP, MC_GROUP_TP},
                                       {MC_GROUP_TP_EP_PP, MC_GROUP_MP}, {MC_GROUP_EDP, MC_GROUP_DP_CP}};
    for (size_t k = 0; k < sizeof(same) / sizeof(same[0]); k++) {
        int na = mc_group_all(&l, same[k][0], false, a, MAXW * MAXW, &sa);
        assert_int_equal(na, mc_group_all(&l, same[k][1], false, b, MAXW * MAXW, &sb));
        assert_int_equal(sa, sb);
        assert_memory_equal(a, b, (size_t)(na * sa) * sizeof(int));
    }
    int m[MAXW];
    assert_int_equal(mc_group_members(&l, MC_GROUP_EP, 5, false, m, MAXW), 1);
    assert_int_equal(m[0], 5);
}

static void test_bad_expert_layouts(void **state)
{
    (void)state;
    char err[256];
    mc_layout_t l = layout(8, 2, 1, 1, false), before = l;
    /* etp x ep x pp must divide the world */
    assert_int_equal(mc_layout_set_experts(&l, 3, 1, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "expert_model_parallel_size (3)"));
    assert_null(strchr(err, '\n'));
    assert_memory_equal(&l, &before, sizeof(l));
    assert_int_equal(mc_layout_set_experts(&l, 2, 3, err, sizeof(err)), -1);
    assert_int_equal(mc_layout_set_experts(&l, 0, 1, err, sizeof(err)), -1);
    assert_int_equal(mc_layout_set_experts(&l, 2, 0, err, sizeof(err)), -1);
    assert_int_equal(mc_layout_set_experts(&l, 8, 1, err, sizeof(err)), 0); /* ep over tp x dp */
    assert_int_equal(l.edp, 1);
    /* pp before dp: the two generators' pp groups agree only when edp == dp */
    l = layout(8, 2, 2, 1, true);
    assert_int_equal(mc_layout_set_experts(&l, 4, 1, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "must equal the data parallel size (2)"));
    assert_int_equal(mc_layout_set_experts(&l, 2, 1, err, sizeof(err)), 0);
    /* with pp 1 any folding is fine in either order */
    l = layout(8, 2, 1, 1, true);
    assert_int_equal(mc_layout_set_experts(&l, 8, 1, err, sizeof(err)), 0);
    /* the pp groups of both generators are the same whenever set_experts accepts */
    for (int tp = 1; tp <= 4; tp *= 2)
        for (int pp = 1; pp <= 4; pp *= 2)
            for (int ep = 1; ep <= 8; ep *= 2)
                for (int etp = 1; etp <= 4; etp *= 2)
                    for (int o = 0; o <= 1; o++) {
                        mc_layout_t x;
                        if (mc_layout_init(&x, 32, tp, pp, 1, o, err, sizeof(err)) != 0) continue;
                        if (mc_layout_set_experts(&x, ep, etp, err, sizeof(err)) != 0) continue;
                        for (int r = 0; r < 32; r++) {
                            assert_int_equal(mc_layout_expert_coords(&x, r).pp, mc_layout_coords(&x, r).pp);
                        }
                    }
}

/* A communicator that only makes groups: one rank's view, for mc_parallel_init. */
static mc_group_t *rec_group_new(mc_comm_t *c, const int *members, int n, const char *name)
{
    if (n == 0) return NULL;
    mc_group_t *g = calloc(1, sizeof(*g));
    g->members = malloc((size_t)n * sizeof(int));
    memcpy(g->members, members, (size_t)n * sizeof(int));
    g->size = n, g->name = name, g->rank = -1;
    for (int i = 0; i < n; i++)
        if (members[i] == c->rank) g->rank = i;
    assert_true(g->rank >= 0);
    return g;
}

static void rec_group_free(mc_comm_t *c, mc_group_t *g)
{
    (void)c;
    free(g->members);
    free(g);
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static void expect_members(const mc_group_t *g, int *want, int n)
{
    assert_non_null(g);
    qsort(want, (size_t)n, sizeof(int), cmp_int);
    assert_int_equal(g->size, n);
    assert_memory_equal(g->members, want, (size_t)n * sizeof(int));
}

/* --num-distributed-optimizer-instances: the groups of mc_parallel_t against Megatron's own
 * construction (initialize_model_parallel): the intra group a block of dp-cp / N consecutive
 * members of the dp-cp group, the inter group create_hierarchical_groups' second level over the
 * expert dp group (the dp-cp group without experts), the instance group every
 * intra_partial_expert_data_parallel_size consecutive tp-ep-pp groups. */
static void test_dist_opt_instance_groups(void **state)
{
    (void)state;
    const struct {
        int world, tp, pp, cp, n;
    } cases[] = {{16, 2, 2, 1, 2}, {16, 2, 1, 2, 4}, {16, 1, 2, 2, 2}, {8, 2, 1, 1, 4}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const int world = cases[c].world, n_inst = cases[c].n;
        mc_layout_t l = layout(world, cases[c].tp, cases[c].pp, cases[c].cp, false);
        int mp[MAXW * MAXW], mp_size, dpcp[MAXW], w[MAXW];
        const int n_mp = mc_group_all(&l, MC_GROUP_TP_EP_PP, false, mp, MAXW * MAXW, &mp_size);
        for (int r = 0; r < world; r++) {
            mc_comm_t comm = {.rank = r, .size = world, .group_new = rec_group_new,
                              .group_free = rec_group_free};
            mc_parallel_config_t pc = {.tp = cases[c].tp, .pp = cases[c].pp, .cp = cases[c].cp,
                                       .dist_opt_instances = n_inst};
            mc_parallel_t ps;
            char err[256];
            assert_int_equal(mc_parallel_init(&ps, &comm, &pc, err, sizeof(err)), 0);
            const int dn = mc_group_members(&l, MC_GROUP_DP_CP, r, false, dpcp, MAXW);
            const int intra = dn / n_inst;
            int me = 0;
            while (dpcp[me] != r) me++;
            for (int i = 0; i < intra; i++) w[i] = dpcp[me / intra * intra + i];
            expect_members(ps.intra_dp_cp, w, intra);
            for (int k = 0; k < n_inst; k++) w[k] = dpcp[me % intra + k * intra];
            expect_members(ps.inter_dist_opt, w, n_inst);
            /* Megatron: model_parallel_group_id % intra == 0 closes an instance */
            int got = 0;
            bool found = false;
            for (int g = 0; g < n_mp; g++) {
                for (int i = 0; i < mp_size; i++) {
                    w[got++] = mp[g * mp_size + i];
                    found |= mp[g * mp_size + i] == r;
                }
                if ((g + 1) % intra != 0) continue;
                if (found) break;
                got = 0;
            }
            assert_int_equal(got, world / n_inst);
            expect_members(ps.intra_dist_opt, w, world / n_inst);
            mc_parallel_free(&ps);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_section4_table),
        cmocka_unit_test(test_single_stage_embedding),
        cmocka_unit_test(test_tp_pp_dp_order),
        cmocka_unit_test(test_context_parallel),
        cmocka_unit_test(test_all_layouts),
        cmocka_unit_test(test_bad_layouts),
        cmocka_unit_test(test_megatron_rank_generators),
        cmocka_unit_test(test_expert_defaults),
        cmocka_unit_test(test_bad_expert_layouts),
        cmocka_unit_test(test_dist_opt_instance_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
