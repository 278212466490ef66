/* The tests' checks of pipeline schedules (schedule_check.h): the all-rank simulator and the
 * text form of action lists. */
#include "test/unit/schedule_check.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

int mc_pp_max_inflight(const mc_pp_config_t *cfg)
{
    if (cfg->forward_only)
        return 0;
    /* W forwards pile up in warmup; each steady step adds one before its backward frees one. */
    const int w = mc_pp_warmup(cfg), total = mc_pp_total(cfg);
    return w + 1 < total ? w + 1 : total;
}

/* ------------------------------------------------------------------------------------------ */
/* Text form                                                                                    */

static const char *dir_name(mc_p2p_dir_t d)
{
    switch (d) {
    case MC_P2P_SEND_PREV: return "SP";
    case MC_P2P_RECV_PREV: return "RP";
    case MC_P2P_SEND_NEXT: return "SN";
    case MC_P2P_RECV_NEXT: return "RN";
    }
    return "??";
}

typedef struct { char *buf; size_t cap, len; } sbuf_t;

static void sput(sbuf_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sput(sbuf_t *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = s->len < s->cap ? s->cap - s->len : 0;
    int k = vsnprintf(room ? s->buf + s->len : NULL, room, fmt, ap);
    va_end(ap);
    if (k > 0)
        s->len += (size_t)k;
}

static void format_one(sbuf_t *s, const mc_pp_action_t *a)
{
    if (a->type == MC_PP_COMPUTE) {
        sput(s, "%c%dc%d", a->kind == MC_PP_FORWARD ? 'F' : 'B', a->mb, a->chunk);
        return;
    }
    sput(s, "%c", a->async ? '<' : '[');
    for (int j = 0; j < a->n_ops; j++)
        sput(s, "%s%s%dc%d", j ? " " : "", dir_name(a->ops[j].dir), a->ops[j].mb, a->ops[j].chunk);
    sput(s, "%c", a->async ? '>' : ']');
}

int mc_pp_format(const mc_pp_action_t *a, int n, char *buf, size_t bufn)
{
    sbuf_t s = {buf, bufn, 0};
    if (buf && bufn)
        buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (i)
            sput(&s, " ");
        format_one(&s, &a[i]);
    }
    return (int)s.len;
}

/* ------------------------------------------------------------------------------------------ */
/* Simulation of all ranks                                                                      */

/* A FIFO of tensor ids per ordered rank pair, for the sends of src and the receives of dst. */
typedef struct { int *v, n, cap; } queue_t;

static int qpush(queue_t *q, int id)
{
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 16;
        int *v = realloc(q->v, (size_t)cap * sizeof(int));
        if (!v)
            return -1;
        q->v = v;
        q->cap = cap;
    }
    q->v[q->n++] = id;
    return q->n - 1;
}

typedef struct {
    const mc_pp_config_t *cfg;
    int pp, vpp, M, nvs;
    queue_t *sends, *recvs;    /* [src*pp + dst], [dst*pp + src] */
    /* per rank, indexed by chunk*M + mb */
    unsigned char *fwd, *bwd;  /* computed */
    int *recv_act, *recv_grad; /* index of the posted receive in its queue, -1 none */
    int *next_f, *next_b;      /* per rank*vpp + chunk: next microbatch expected */
    int *inflight, *max_inflight;
    char *err;
    size_t errn;
} sim_t;

/* Tensor ids: an activation or gradient of microbatch mb arriving at virtual stage vs. */
static int tensor_id(const sim_t *s, int grad, int mb, int vs) { return (vs * s->M + mb) * 2 + grad; }

static void tensor_text(const sim_t *s, int id, char *buf, size_t n)
{
    const int grad = id % 2, mb = (id / 2) % s->M, vs = id / 2 / s->M;
    snprintf(buf, n, "%s of microbatch %d for rank %d chunk %d", grad ? "gradient" : "activation",
             mb, vs % s->pp, vs / s->pp);
}

static const char *op_text(mc_p2p_dir_t d)
{
    switch (d) {
    case MC_P2P_SEND_PREV: return "send_prev";
    case MC_P2P_RECV_PREV: return "recv_prev";
    case MC_P2P_SEND_NEXT: return "send_next";
    case MC_P2P_RECV_NEXT: return "recv_next";
    }
    return "?";
}

/* Posts one op of rank r: returns its queue index via *qi and the queue holding its partner via
 * *other (matched once other->n > *qi). */
static int post_op(sim_t *s, int r, int ai, const mc_p2p_op_t *o, int *qi, queue_t **other)
{
    const int pp = s->pp, c = o->chunk, mb = o->mb, vs = c * pp + r;
    const bool send = o->dir == MC_P2P_SEND_PREV || o->dir == MC_P2P_SEND_NEXT;
    const bool to_next = o->dir == MC_P2P_SEND_NEXT || o->dir == MC_P2P_RECV_NEXT;
    const int peer = to_next ? (r + 1) % pp : (r - 1 + pp) % pp;
    if (pp == 1)
        return mc_errf(s->err, s->errn, "rank 0 action %d: %s without pipeline parallelism", ai,
                    op_text(o->dir));
    if (c < 0 || c >= s->vpp || mb < 0 || mb >= s->M)
        return mc_errf(s->err, s->errn, "rank %d action %d: %s of microbatch %d chunk %d is out of "
                    "range", r, ai, op_text(o->dir), mb, c);
    if (o->peer != peer)
        return mc_errf(s->err, s->errn, "rank %d action %d: %s names peer %d, not %d", r, ai,
                    op_text(o->dir), o->peer, peer);
    /* Ends of the pipeline: nothing enters virtual stage 0 or leaves the last one. */
    if ((o->dir == MC_P2P_SEND_PREV || o->dir == MC_P2P_RECV_PREV) && vs == 0)
        return mc_errf(s->err, s->errn, "rank %d action %d: %s on the first virtual stage", r, ai,
                    op_text(o->dir));
    if ((o->dir == MC_P2P_SEND_NEXT || o->dir == MC_P2P_RECV_NEXT) && vs == s->nvs - 1)
        return mc_errf(s->err, s->errn, "rank %d action %d: %s on the last virtual stage", r, ai,
                    op_text(o->dir));
    const int x = r * s->vpp * s->M + c * s->M + mb;
    int id;
    switch (o->dir) {
    case MC_P2P_SEND_NEXT:
        if (!s->fwd[x])
            return mc_errf(s->err, s->errn, "rank %d action %d: sends the activation of microbatch "
                        "%d chunk %d before computing it", r, ai, mb, c);
        id = tensor_id(s, 0, mb, vs + 1);
        break;
    case MC_P2P_SEND_PREV:
        if (!s->bwd[x])
            return mc_errf(s->err, s->errn, "rank %d action %d: sends the gradient of microbatch %d "
                        "chunk %d before computing it", r, ai, mb, c);
        id = tensor_id(s, 1, mb, vs - 1);
        break;
    case MC_P2P_RECV_PREV:
    case MC_P2P_RECV_NEXT: {
        int *slot = o->dir == MC_P2P_RECV_PREV ? &s->recv_act[x] : &s->recv_grad[x];
        if (*slot >= 0)
            return mc_errf(s->err, s->errn, "rank %d action %d: receives the %s of microbatch %d "
                        "chunk %d twice", r, ai, o->dir == MC_P2P_RECV_PREV ? "activation" :
                        "gradient", mb, c);
        id = tensor_id(s, o->dir == MC_P2P_RECV_NEXT, mb, vs);
        break;
    }
    default:
        return mc_errf(s->err, s->errn, "rank %d action %d: bad p2p op", r, ai);
    }
    queue_t *mine = send ? &s->sends[r * pp + peer] : &s->recvs[r * pp + peer];
    *other = send ? &s->recvs[peer * pp + r] : &s->sends[peer * pp + r];
    *qi = qpush(mine, id);
    if (*qi < 0)
        return mc_errf(s->err, s->errn, "out of memory in the schedule simulation");
    if (o->dir == MC_P2P_RECV_PREV)
        s->recv_act[x] = *qi;
    else if (o->dir == MC_P2P_RECV_NEXT)
        s->recv_grad[x] = *qi;
    /* Matching is in issue order per rank pair: the partner, once posted, must be this tensor. */
    if ((*other)->n > *qi && (*other)->v[*qi] != id) {
        char a[96], b[96];
        tensor_text(s, send ? id : (*other)->v[*qi], a, sizeof a);
        tensor_text(s, send ? (*other)->v[*qi] : id, b, sizeof b);
        return mc_errf(s->err, s->errn, "rank %d sends the %s to rank %d, which receives it as the %s",
                    send ? r : peer, a, send ? peer : r, b);
    }
    return 0;
}

/* Whether rank r's compute can run now (1), must wait (0), or is wrong (-1). */
static int run_compute(sim_t *s, int r, int ai, const mc_pp_action_t *a)
{
    const int c = a->chunk, mb = a->mb, vs = c * s->pp + r;
    const bool fwd = a->kind == MC_PP_FORWARD;
    if (c < 0 || c >= s->vpp || mb < 0 || mb >= s->M) {
        mc_errf(s->err, s->errn, "rank %d action %d: microbatch %d chunk %d is out of range", r, ai,
             mb, c);
        return -1;
    }
    const int x = r * s->vpp * s->M + c * s->M + mb, rc = r * s->vpp + c;
    /* The input (an activation forward, the output gradient backward) must have arrived, except
     * at the ends: virtual stage 0 reads data, the last one starts backward from its loss. */
    const bool has_input = fwd ? vs > 0 : vs < s->nvs - 1;
    const int need = !has_input ? -2 : fwd ? s->recv_act[x] : s->recv_grad[x];
    if (need == -1) {
        mc_errf(s->err, s->errn, "rank %d action %d: %s of microbatch %d chunk %d without receiving "
             "its %s", r, ai, fwd ? "forward" : "backward", mb, c, fwd ? "input" : "output gradient");
        return -1;
    }
    if (need >= 0) {
        const int peer = fwd ? (r - 1 + s->pp) % s->pp : (r + 1) % s->pp;
        if (s->sends[peer * s->pp + r].n <= need)
            return 0;
    }
    if (fwd) {
        if (s->fwd[x] || mb != s->next_f[rc]) {
            mc_errf(s->err, s->errn, "rank %d action %d: forward of microbatch %d chunk %d out of "
                 "order (expected microbatch %d)", r, ai, mb, c, s->next_f[rc]);
            return -1;
        }
        s->fwd[x] = 1;
        s->next_f[rc]++;
        if (!s->cfg->forward_only && ++s->inflight[r] > s->max_inflight[r])
            s->max_inflight[r] = s->inflight[r];
    } else {
        if (s->cfg->forward_only) {
            mc_errf(s->err, s->errn, "rank %d action %d: backward in a forward-only schedule", r, ai);
            return -1;
        }
        /* Megatron pops the oldest outstanding forward of the chunk. */
        if (s->bwd[x] || mb != s->next_b[rc] || !s->fwd[x]) {
            mc_errf(s->err, s->errn, "rank %d action %d: backward of microbatch %d chunk %d is not "
                 "the oldest outstanding forward of its chunk", r, ai, mb, c);
            return -1;
        }
        s->bwd[x] = 1;
        s->next_b[rc]++;
        s->inflight[r]--;
    }
    return 1;
}

/* The simulation's state beyond sim_t: where each rank is in its list and its posted batch. */
typedef struct {
    int *pos, *posted;   /* per rank: next action, whether its batch is posted */
    int *pend_qi;        /* [rank * MC_PP_MAX_BATCH_OPS + op]: the op's index in its queue */
    queue_t **pend_q;    /* ... and the queue its partner goes to */
} ranks_t;

static bool sim_alloc(sim_t *s, ranks_t *k)
{
    const int pp = s->pp, per_rank = s->vpp * s->M;
    k->pos = calloc((size_t)pp, sizeof(int));
    k->posted = calloc((size_t)pp, sizeof(int));
    k->pend_qi = calloc((size_t)pp * MC_PP_MAX_BATCH_OPS, sizeof(int));
    k->pend_q = calloc((size_t)pp * MC_PP_MAX_BATCH_OPS, sizeof(queue_t *));
    s->sends = calloc((size_t)pp * pp, sizeof(queue_t));
    s->recvs = calloc((size_t)pp * pp, sizeof(queue_t));
    s->fwd = calloc((size_t)pp * per_rank, 1);
    s->bwd = calloc((size_t)pp * per_rank, 1);
    s->recv_act = malloc((size_t)pp * per_rank * sizeof(int));
    s->recv_grad = malloc((size_t)pp * per_rank * sizeof(int));
    s->next_f = calloc((size_t)pp * s->vpp, sizeof(int));
    s->next_b = calloc((size_t)pp * s->vpp, sizeof(int));
    s->inflight = calloc((size_t)pp, sizeof(int));
    s->max_inflight = calloc((size_t)pp, sizeof(int));
    if (!k->pos || !k->posted || !k->pend_qi || !k->pend_q || !s->sends || !s->recvs || !s->fwd ||
        !s->bwd || !s->recv_act || !s->recv_grad || !s->next_f || !s->next_b || !s->inflight ||
        !s->max_inflight)
        return false;
    for (int i = 0; i < pp * per_rank; i++)
        s->recv_act[i] = s->recv_grad[i] = -1;
    return true;
}

static void sim_free(sim_t *s, ranks_t *k)
{
    if (s->sends)
        for (int i = 0; i < s->pp * s->pp; i++) {
            free(s->sends[i].v);
            free(s->recvs[i].v);
        }
    free(s->sends);
    free(s->recvs);
    free(s->fwd);
    free(s->bwd);
    free(s->recv_act);
    free(s->recv_grad);
    free(s->next_f);
    free(s->next_b);
    free(s->inflight);
    free(s->max_inflight);
    free(k->pos);
    free(k->posted);
    free(k->pend_qi);
    free(k->pend_q);
}

/* Runs rank r's list as far as it can go. Returns 1 if it moved, 0 if not, -1 on an error. */
static int sim_advance(sim_t *s, ranks_t *k, int r, const mc_pp_action_t *list, int n)
{
    int moved = 0;
    int *qi = &k->pend_qi[r * MC_PP_MAX_BATCH_OPS];
    queue_t **q = &k->pend_q[r * MC_PP_MAX_BATCH_OPS];
    while (k->pos[r] < n) {
        const mc_pp_action_t *a = &list[k->pos[r]];
        if (a->type == MC_PP_COMPUTE) {
            int c = run_compute(s, r, k->pos[r], a);
            if (c < 0)
                return -1;
            if (c == 0)
                break;
        } else {
            if (a->n_ops < 1 || a->n_ops > MC_PP_MAX_BATCH_OPS) {
                mc_errf(s->err, s->errn, "rank %d action %d: batch of %d ops", r, k->pos[r],
                        a->n_ops);
                return -1;
            }
            if (!k->posted[r]) {
                for (int j = 0; j < a->n_ops; j++)
                    if (post_op(s, r, k->pos[r], &a->ops[j], &qi[j], &q[j]))
                        return -1;
                k->posted[r] = 1;
                moved = 1;
            }
            if (!a->async) {
                bool done = true;
                for (int j = 0; j < a->n_ops; j++)
                    if (q[j]->n <= qi[j])
                        done = false;
                if (!done)
                    break;
            }
            k->posted[r] = 0;
        }
        k->pos[r]++;
        moved = 1;
    }
    return moved;
}

/* After the run: nobody stuck, every send received, every (microbatch, chunk) run, and the
 * activations held as mc_pp_max_inflight says. Returns 0, or -1 with the error. */
static int sim_check_end(const sim_t *s, const ranks_t *k, mc_pp_action_t *const *lists,
                         const int *n, int *max_inflight)
{
    const int pp = s->pp;
    char msg[512];
    size_t len = 0;
    for (int r = 0; r < pp; r++)
        if (k->pos[r] < n[r] && len < sizeof msg) {
            char act[160];
            mc_pp_format(&lists[r][k->pos[r]], 1, act, sizeof act);
            len += (size_t)snprintf(msg + len, sizeof msg - len, "%srank %d at action %d %s",
                                    len ? ", " : "", r, k->pos[r], act);
        }
    if (len)
        return mc_errf(s->err, s->errn, "deadlock: %s", msg);
    for (int a = 0; a < pp; a++)
        for (int b = 0; b < pp; b++)
            if (s->sends[a * pp + b].n != s->recvs[b * pp + a].n)
                return mc_errf(s->err, s->errn, "rank %d sends %d tensors to rank %d, which "
                               "receives %d", a, s->sends[a * pp + b].n, b, s->recvs[b * pp + a].n);
    for (int r = 0; r < pp; r++)
        for (int c = 0; c < s->vpp; c++)
            if (s->next_f[r * s->vpp + c] != s->M ||
                (!s->cfg->forward_only && s->next_b[r * s->vpp + c] != s->M))
                return mc_errf(s->err, s->errn, "rank %d chunk %d runs %d forwards and %d "
                               "backwards of %d microbatches", r, c, s->next_f[r * s->vpp + c],
                               s->next_b[r * s->vpp + c], s->M);
    for (int r = 0; r < pp; r++) {
        mc_pp_config_t rc_cfg = *s->cfg;
        rc_cfg.pp_rank = r;
        const int want = mc_pp_max_inflight(&rc_cfg);
        if (s->max_inflight[r] != want)
            return mc_errf(s->err, s->errn, "rank %d holds up to %d activations, expected %d", r,
                           s->max_inflight[r], want);
        if (max_inflight)
            max_inflight[r] = s->max_inflight[r];
    }
    return 0;
}

int mc_pp_simulate_lists(const mc_pp_config_t *cfg, mc_pp_action_t *const *lists, const int *n,
                         int *max_inflight, char *err, size_t errn)
{
    sim_t s = {.cfg = cfg, .pp = cfg->pp_size, .vpp = cfg->vpp, .M = cfg->num_microbatches,
               .err = err, .errn = errn};
    ranks_t k = {0};
    s.nvs = s.pp * s.vpp;
    if (err && errn)
        err[0] = '\0';
    if (s.pp < 1 || s.vpp < 1 || s.M < 1)
        return mc_errf(err, errn, "bad pipeline configuration for the simulation");
    int rc = -1;
    if (!sim_alloc(&s, &k)) {
        mc_errf(err, errn, "out of memory in the schedule simulation");
        goto out;
    }
    /* Run every rank as far as it can go until nobody moves. The outcome does not depend on the
     * order: posting only ever adds matches. */
    for (bool progress = true; progress;) {
        progress = false;
        for (int r = 0; r < s.pp; r++) {
            int moved = sim_advance(&s, &k, r, lists[r], n[r]);
            if (moved < 0)
                goto out;
            if (moved)
                progress = true;
        }
    }
    rc = sim_check_end(&s, &k, lists, n, max_inflight);
out:
    sim_free(&s, &k);
    return rc;
}

int mc_pp_simulate(const mc_pp_config_t *cfg, int *max_inflight, char *err, size_t errn)
{
    const int pp = cfg->pp_size;
    if (pp < 1)
        return mc_errf(err, errn, "pipeline-model-parallel size (%d) must be at least 1", pp);
    mc_pp_action_t **lists = calloc((size_t)pp, sizeof(*lists));
    int *n = calloc((size_t)pp, sizeof(int)), rc = -1;
    if (!lists || !n) {
        mc_errf(err, errn, "out of memory in the schedule simulation");
        goto out;
    }
    for (int r = 0; r < pp; r++) {
        mc_pp_config_t c = *cfg;
        c.pp_rank = r;
        if (mc_pp_schedule(&c, &lists[r], &n[r], err, errn))
            goto out;
    }
    rc = mc_pp_simulate_lists(cfg, lists, n, max_inflight, err, errn);
out:
    if (lists)
        for (int r = 0; r < pp; r++)
            free(lists[r]);
    free(lists);
    free(n);
    return rc;
}
