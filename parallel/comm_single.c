/* The single-rank communicator: every group has one member, so every collective is the
 * identity; out-of-place reduce-scatter and all-gather copy send to recv. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/error.h"
#include "parallel/comm.h"

static int g_world_member = 0;
static mc_group_t g_world = {.rank = 0, .size = 1, .members = &g_world_member, .name = "world"};

static mc_group_t *single_group_new(mc_comm_t *c, const int *members, int n, const char *name)
{
    (void)c;
    if (n == 0) return NULL;
    if (n != 1 || members[0] != 0)
        mc_fatal("group '%s' of %d ranks asked of the single-rank communicator (only rank 0 exists)",
                 name ? name : "?", n);
    mc_group_t *g = calloc(1, sizeof(*g));
    int *m = malloc(sizeof(*m));
    if (!g || !m) mc_fatal("out of memory creating group '%s'", name ? name : "?");
    m[0] = 0;
    g->rank = 0, g->size = 1, g->members = m, g->name = name;
    return g;
}

static void single_group_free(mc_comm_t *c, mc_group_t *g)
{
    (void)c;
    if (!g || g == &g_world) return;
    free(g->members);
    free(g);
}

static mc_req_t single_start(mc_comm_t *c, const mc_coll_t *op)
{
    mc_comm_count(c, op);
    size_t bytes = op->count * mc_dtype_size(op->dt);
    bool copies = op->kind == MC_COLL_REDUCE_SCATTER || op->kind == MC_COLL_ALL_GATHER ||
                  (op->kind == MC_COLL_ALL_REDUCE && op->send);
    /* memmove: "in place" here is send == recv, which must not be memcpy'd onto itself */
    if (copies && bytes && op->send != op->recv) memmove(op->recv, op->send, bytes);
    return MC_REQ_DONE;
}

static void single_wait(mc_comm_t *c, mc_req_t req) { (void)c, (void)req; }

static void single_abort(mc_comm_t *c, int code)
{
    (void)c;
    fflush(stdout);
    exit(code);
}

static void single_finalize(mc_comm_t *c) { (void)c; }

mc_comm_t *mc_comm_single(void)
{
    static mc_comm_t comm = {
        .name = "single",
        .rank = 0,
        .size = 1,
        .world = &g_world,
        .timeout_s = 600,
        .group_new = single_group_new,
        .group_free = single_group_free,
        .start = single_start,
        .wait = single_wait,
        .abort = single_abort,
        .finalize = single_finalize,
    };
    return &comm;
}
