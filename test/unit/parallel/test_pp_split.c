/* The pipeline layer split (mc_pp_layers) against Megatron-LM main's own split functions
 * (test/fixtures/megatron_pp_split.txt, made by test/ref/megatron_pp_split.py from
 * get_num_layers_to_build, get_transformer_layer_offset and TransformerConfig's checks): the
 * account-for-embedding/loss flags, uneven first/last stages, virtual stages. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/pp_plan.h"
#include "test/unit/fixture.h"

enum { MAX_STAGES = 64 };

/* Whether Megatron's stages hold layers 0..L-1 once each, in order. */
static bool covers(int L, int n, const int *off, const int *cnt)
{
    int next = 0;
    for (int s = 0; s < n; s++) {
        if (off[s] != next || cnt[s] < 0) return false;
        next += cnt[s];
    }
    return next == L;
}

/* A split Megatron divides by zero on (pp 2, first and last given, virtual stages): megatron-c
 * runs it, holding layers 0..L-1 once, in order, with the first and last counts on their
 * ranks. */
static void check_crashed(const char *line, const mc_pp_layers_cfg_t *c)
{
    const int pp = c->pp_size, vpp = c->vpp;
    int off[MAX_STAGES], cnt[MAX_STAGES], on_rank[MAX_STAGES] = {0};
    char err[512];
    assert_true(pp * vpp <= MAX_STAGES);
    for (int s = 0; s < pp * vpp; s++) {
        if (mc_pp_layers(c, s % pp, s / pp, &off[s], &cnt[s], err, sizeof err) != 0)
            print_error("refused %s: %s\n", line, err);
        assert_int_equal(mc_pp_layers(c, s % pp, s / pp, &off[s], &cnt[s], err, sizeof err), 0);
        on_rank[s % pp] += cnt[s];
    }
    assert_true(covers(c->num_layers, pp * vpp, off, cnt));
    assert_int_equal(on_rank[0], c->first_stage_layers);
    assert_int_equal(on_rank[pp - 1], c->last_stage_layers);
}

/* One fixture case: Megatron's offsets and counts per virtual stage, or refused. megatron-c
 * gives the same split where Megatron's is a model (covers), and refuses the rest. Returns
 * whether megatron-c accepted it. */
static bool check_case(const char *line, const mc_pp_layers_cfg_t *c, bool ok, char *rest)
{
    const int stages = c->pp_size * c->vpp;
    int off[MAX_STAGES], cnt[MAX_STAGES], n = 0;
    assert_true(stages <= MAX_STAGES);
    for (char *save = NULL, *t = ok ? strtok_r(rest, " \n", &save) : NULL; t;
         t = strtok_r(NULL, " \n", &save)) {
        assert_true(n < MAX_STAGES);
        assert_int_equal(sscanf(t, "%d+%d", &off[n], &cnt[n]), 2);
        n++;
    }
    if (ok) assert_int_equal(n, stages);
    const bool model = ok && covers(c->num_layers, n, off, cnt);
    char err[512];
    int f, k;
    for (int s = 0; s < stages; s++) {
        /* virtual stage s is chunk s / pp of pp rank s % pp (the fixture's order) */
        const int rc = mc_pp_layers(c, s % c->pp_size, s / c->pp_size, &f, &k, err, sizeof err);
        if (rc != 0) {
            if (model) print_error("refused %s: %s\n", line, err);
            assert_false(model);
            assert_true(strlen(err) > 0);
            return false;
        }
        if (!model) print_error("accepted %s\n", line);
        assert_true(model);
        if (f != off[s] || k != cnt[s])
            print_error("%s: stage %d got %d+%d\n", line, s, f, k);
        assert_int_equal(f, off[s]);
        assert_int_equal(k, cnt[s]);
    }
    return true;
}

static void test_megatron_split_table(void **state)
{
    (void)state;
    char path[4096], line[1024], copy[1024], verdict[16];
    assert_int_equal(mc_fx_path(path, sizeof(path), "megatron_pp_split.txt"), 0);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    int cases = 0, accepted = 0, accounted = 0, empty_chunks = 0, crashed = 0;
    while (fgets(line, sizeof(line), fp)) {
        if (line[0] == '#') continue;
        snprintf(copy, sizeof(copy), "%s", line);
        copy[strcspn(copy, "\n")] = '\0';
        int L, pp, vpp, first, last, emb, loss, used = 0;
        assert_int_equal(sscanf(line, "%d %d %d %d %d %d %d %15s %n", &L, &pp, &vpp, &first,
                                &last, &emb, &loss, verdict, &used),
                         8);
        const mc_pp_layers_cfg_t c = {.num_layers = L,
                                      .pp_size = pp,
                                      .vpp = vpp,
                                      .first_stage_layers = first,
                                      .last_stage_layers = last,
                                      .account_embedding = emb,
                                      .account_loss = loss};
        cases++;
        if (strcmp(verdict, "crashed") == 0) {
            check_crashed(copy, &c);
            crashed++;
            continue;
        }
        const bool ok = strcmp(verdict, "ok") == 0;
        if (!ok) assert_string_equal(verdict, "refused");
        if (check_case(copy, &c, ok, line + used)) {
            accepted++;
            accounted += emb || loss;
            empty_chunks += strstr(copy, "+0") != NULL; /* counts have no leading zeros */
        }
    }
    fclose(fp);
    /* the table is the one test/ref/megatron_pp_split.py writes, and exercises every kind */
    assert_int_equal(cases, 3684);
    assert_int_equal(accepted, 586); /* of Megatron's 710: the 124 others overlap or skip layers */
    assert_int_equal(accounted, 160);
    assert_int_equal(empty_chunks, 41); /* a stage of the embedding or the loss alone */
    assert_int_equal(crashed, 5);
}

/* The refusals name the flags (cli/validate.c adds the command line's values). */
static void test_split_messages(void **state)
{
    (void)state;
    char err[512];
    int f, k;
    mc_pp_layers_cfg_t c = {.num_layers = 8, .pp_size = 2, .vpp = 1, .account_embedding = true};
    assert_int_equal(mc_pp_layers(&c, 0, 0, &f, &k, err, sizeof err), -1);
    assert_string_equal(err, "number of layers (9, the embedding or loss counted as a layer by "
                             "--account-for-embedding-in-pipeline-split) must be divisible by the "
                             "pipeline-model-parallel size");
    c = (mc_pp_layers_cfg_t){.num_layers = 6, .pp_size = 2, .vpp = 3, .account_embedding = true,
                             .account_loss = true};
    assert_int_equal(mc_pp_layers(&c, 0, 0, &f, &k, err, sizeof err), -1);
    assert_string_equal(err, "number of layers on each pipeline rank (4, after "
                             "--account-for-embedding-in-pipeline-split and "
                             "--account-for-loss-in-pipeline-split) must be divisible by the "
                             "virtual pipeline size (3)");
    c = (mc_pp_layers_cfg_t){.num_layers = 8, .pp_size = 2, .vpp = 1, .last_stage_layers = 4,
                             .account_loss = true};
    assert_int_equal(mc_pp_layers(&c, 1, 0, &f, &k, err, sizeof err), -1);
    assert_string_equal(err, "--decoder-first/last-pipeline-num-layers cannot be set at the same "
                             "time with --account-for-loss-in-pipeline-split");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_megatron_split_table),
        cmocka_unit_test(test_split_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
