/* Pipeline schedules as pure functions: see schedule.h. The generators below follow
 * megatron/core/pipeline_parallel/schedules.py step by step; the comments name the Megatron
 * call each batch stands for. */
#include "parallel/schedule.h"

#include "base/error.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ------------------------------------------------------------------------------------------ */
/* Counts, tables, checks                                                                      */

int mc_pp_group_size(const mc_pp_config_t *cfg)
{
    return cfg->group_size > 0 ? cfg->group_size : cfg->pp_size;
}

int mc_pp_total(const mc_pp_config_t *cfg) { return cfg->num_microbatches * cfg->vpp; }

int mc_pp_warmup(const mc_pp_config_t *cfg)
{
    const int pp = cfg->pp_size, r = cfg->pp_rank, total = mc_pp_total(cfg);
    int w;
    if (pp == 1)
        return 0; /* forward_backward_no_pipelining has no warmup */
    if (cfg->vpp == 1) {
        /* forward_backward_pipelining_without_interleaving: also when forward_only */
        w = pp - r - 1;
        return w < cfg->num_microbatches ? w : cfg->num_microbatches;
    }
    /* get_pp_rank_microbatches (overlap_moe_expert_parallel_comm is not modelled) */
    if (cfg->forward_only)
        return total;
    w = (pp - r - 1) * 2 + (cfg->vpp - 1) * mc_pp_group_size(cfg);
    return w >= total ? total : w;
}

int mc_pp_max_inflight(const mc_pp_config_t *cfg)
{
    if (cfg->forward_only)
        return 0;
    /* W forwards pile up in warmup; each steady step adds one before its backward frees one. */
    const int w = mc_pp_warmup(cfg), total = mc_pp_total(cfg);
    return w + 1 < total ? w + 1 : total;
}

void mc_pp_table(int num_microbatches, int vpp, int group_size, int *mb, int *chunk)
{
    int k = 0;
    for (int lo = 0; lo < num_microbatches; lo += group_size) {
        int hi = lo + group_size >= num_microbatches ? num_microbatches : lo + group_size;
        for (int c = 0; c < vpp; c++)
            for (int m = lo; m < hi; m++) {
                mb[k] = m;
                chunk[k] = c;
                k++;
            }
    }
}

int mc_pp_validate(const mc_pp_config_t *cfg, char *err, size_t errn)
{
    const int pp = cfg->pp_size, vpp = cfg->vpp, M = cfg->num_microbatches;
    if (err && errn)
        err[0] = '\0';
    if (pp < 1)
        return mc_errf(err, errn, "pipeline-model-parallel size (%d) must be at least 1", pp);
    if (cfg->pp_rank < 0 || cfg->pp_rank >= pp)
        return mc_errf(err, errn, "pipeline rank %d is outside [0, %d)", cfg->pp_rank, pp);
    if (vpp < 1)
        return mc_errf(err, errn, "number of model chunks (%d) must be at least 1", vpp);
    if (M < 1)
        return mc_errf(err, errn, "number of microbatches (%d) must be at least 1", M);
    if (vpp > 1) {
        /* arguments.py:validate_args */
        if (cfg->overlap_p2p_comm && pp <= 1)
            return mc_errf(err, errn, "When interleaved schedule is used, pipeline-model-parallel "
                                   "size should be greater than 1");
        if (!cfg->overlap_p2p_comm && pp <= 2)
            return mc_errf(err, errn,
                        "When interleaved schedule is used and p2p communication overlap is "
                        "disabled, pipeline-model-parallel size should be greater than 2 to avoid "
                        "having multiple p2p sends and recvs between same 2 ranks per "
                        "communication batch");
        /* forward_backward_pipelining_with_interleaving (ValueError, then RuntimeError) */
        const int G = mc_pp_group_size(cfg);
        if (G > M || G < pp)
            return mc_errf(err, errn, "The number of contiguous micro-batches in a virtual pipeline "
                                   "stage should range in [PP=%d , M=%d]", pp, M);
        const int rem = M % G;
        if (rem > 0 && rem < pp)
            return mc_errf(err, errn,
                        "The remainder of M (the total micro-batches) divided by N (number of "
                        "contiguous micro-batches in a virtual pipeline stage) should be 0, or "
                        "larger than or equal to the pipeline-parallel size, but it is %d. "
                        "Otherwise, it introduces dependency bubbles in the pipeline and reduces "
                        "throughput.", rem);
    } else if (pp > 1 && cfg->overlap_p2p_comm) {
        /* forward_backward_pipelining_without_interleaving; validate_args turns the flag off
         * without VPP before it gets here. */
        return mc_errf(err, errn, "Non-interleaved pipeline parallelism does not support overlapping "
                               "p2p communication");
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Building a list                                                                              */

typedef struct { int mb, chunk; } tensor_t; /* mb < 0: None (nothing to send) */
static const tensor_t NONE = {-1, -1};

typedef struct {
    mc_pp_action_t *a;
    int n, cap;
    int rank, pp;
    /* Received tensors are queued per chunk and consumed in microbatch order (input_tensors[c],
     * output_tensor_grads[c]), so the i-th receive for chunk c carries microbatch i. */
    int *n_recv_act, *n_recv_grad;
    int oom;
} builder_t;

static mc_pp_action_t *push(builder_t *b)
{
    if (b->oom)
        return NULL;
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 64;
        mc_pp_action_t *a = realloc(b->a, (size_t)cap * sizeof(*a));
        if (!a) {
            b->oom = 1;
            return NULL;
        }
        b->a = a;
        b->cap = cap;
    }
    mc_pp_action_t *x = &b->a[b->n++];
    memset(x, 0, sizeof(*x));
    return x;
}

static void compute(builder_t *b, mc_pp_kind_t kind, int mb, int chunk)
{
    mc_pp_action_t *x = push(b);
    if (!x)
        return;
    x->type = MC_PP_COMPUTE;
    x->kind = kind;
    x->mb = mb;
    x->chunk = chunk;
}

static void add_op(mc_pp_action_t *x, mc_p2p_dir_t dir, int mb, int chunk, int peer)
{
    mc_p2p_op_t *o = &x->ops[x->n_ops++];
    o->dir = dir;
    o->mb = mb;
    o->chunk = chunk;
    o->peer = peer;
}

/* One _communicate call: send_prev / send_next are tensors or NONE, recv_prev / recv_next the
 * local chunk that receives, or -1. Empty calls issue nothing. */
static void batch(builder_t *b, bool async, tensor_t send_prev, int recv_prev, tensor_t send_next,
                  int recv_next)
{
    if (send_prev.mb < 0 && recv_prev < 0 && send_next.mb < 0 && recv_next < 0)
        return;
    mc_pp_action_t *x = push(b);
    if (!x)
        return;
    const int prev = (b->rank - 1 + b->pp) % b->pp, next = (b->rank + 1) % b->pp;
    x->type = MC_PP_P2P;
    x->async = async;
    if (send_prev.mb >= 0)
        add_op(x, MC_P2P_SEND_PREV, send_prev.mb, send_prev.chunk, prev);
    if (recv_prev >= 0)
        add_op(x, MC_P2P_RECV_PREV, b->n_recv_act[recv_prev]++, recv_prev, prev);
    if (send_next.mb >= 0)
        add_op(x, MC_P2P_SEND_NEXT, send_next.mb, send_next.chunk, next);
    if (recv_next >= 0)
        add_op(x, MC_P2P_RECV_NEXT, b->n_recv_grad[recv_next]++, recv_next, next);
}

static tensor_t T(int mb, int chunk) { return (tensor_t){mb, chunk}; }

/* forward_backward_no_pipelining */
static void gen_no_pipelining(builder_t *b, const mc_pp_config_t *cfg)
{
    for (int i = 0; i < cfg->num_microbatches; i++) {
        compute(b, MC_PP_FORWARD, i, 0);
        if (!cfg->forward_only)
            compute(b, MC_PP_BACKWARD, i, 0);
    }
}

/* forward_backward_pipelining_without_interleaving. recv_forward / send_backward do nothing on
 * the first stage, send_forward / recv_backward nothing on the last, and the paired calls
 * send_forward_recv_backward / send_backward_recv_forward likewise. */
static void gen_1f1b(builder_t *b, const mc_pp_config_t *cfg)
{
    const int M = cfg->num_microbatches, W = mc_pp_warmup(cfg), R = M - W;
    const bool first = cfg->pp_rank == 0, last = cfg->pp_rank == cfg->pp_size - 1;

    for (int i = 0; i < W; i++) {
        if (!first)
            batch(b, false, NONE, 0, NONE, -1); /* recv_forward */
        compute(b, MC_PP_FORWARD, i, 0);
        if (!last)
            batch(b, false, NONE, -1, T(i, 0), -1); /* send_forward */
    }
    /* Before 1F1B, the first steady forward's input (skipped when everything was warmup). */
    if (R > 0 && !first)
        batch(b, false, NONE, 0, NONE, -1); /* recv_forward */

    for (int i = 0; i < R; i++) {
        const bool last_it = i == R - 1;
        compute(b, MC_PP_FORWARD, W + i, 0);
        if (cfg->forward_only) {
            if (!last)
                batch(b, false, NONE, -1, T(W + i, 0), -1); /* send_forward */
            if (!last_it && !first)
                batch(b, false, NONE, 0, NONE, -1); /* recv_forward */
            continue;
        }
        if (!last)
            batch(b, false, NONE, -1, T(W + i, 0), 0); /* send_forward_recv_backward */
        compute(b, MC_PP_BACKWARD, i, 0);               /* pops the oldest: microbatch i */
        if (!first) {
            if (last_it)
                batch(b, false, T(i, 0), -1, NONE, -1); /* send_backward */
            else
                batch(b, false, T(i, 0), 0, NONE, -1); /* send_backward_recv_forward */
        }
    }
    if (cfg->forward_only)
        return;
    for (int i = 0; i < W; i++) {
        const int mb = R + i;
        if (!last)
            batch(b, false, NONE, -1, NONE, 0); /* recv_backward */
        compute(b, MC_PP_BACKWARD, mb, 0);
        if (!first)
            batch(b, false, T(mb, 0), -1, NONE, -1); /* send_backward */
    }
}

typedef struct {
    int pp, rank, vpp, total;
    const int *mb, *chunk; /* the schedule table */
} ileave_t;

/* get_model_chunk_id */
static int chunk_of(const ileave_t *s, int k, bool forward)
{
    int c = s->chunk[k % s->total];
    return forward ? c : s->vpp - 1 - c;
}

/* recv_tensor_from_previous_stage: whether step k's p2p call receives (an activation when
 * forward, a gradient when backward) and for which local chunk. The leading stage (rank 0
 * forward, the last rank backward) is pp - 1 steps ahead of the stage that feeds it around the
 * ring, so it receives what that stage produced pp - 1 steps earlier, unless that was the end of
 * the pipeline (the last chunk forward, chunk 0 backward). */
static bool recv_from_prev(const ileave_t *s, int k, bool forward, int *next_chunk)
{
    const bool leading = forward ? s->rank == 0 : s->rank == s->pp - 1;
    const int last_chunk = forward ? s->vpp - 1 : 0;
    bool recv = true;
    int next;
    if (leading) {
        if (k < s->pp - 1) {
            recv = false;
            next = chunk_of(s, k + 1, forward);
        } else {
            next = chunk_of(s, k - (s->pp - 1), forward);
        }
        if (next == last_chunk)
            recv = false;
        next += forward ? 1 : -1;
    } else {
        next = chunk_of(s, k + 1, forward);
    }
    *next_chunk = next;
    return recv;
}

/* forward_backward_pipelining_with_interleaving (overlap_p2p_comm_warmup_flush False). */
static void gen_interleaved(builder_t *b, const mc_pp_config_t *cfg, const int *mbt,
                            const int *cht)
{
    const int vpp = cfg->vpp, total = mc_pp_total(cfg), W = mc_pp_warmup(cfg), R = total - W;
    const bool first = cfg->pp_rank == 0, last = cfg->pp_rank == cfg->pp_size - 1;
    const bool all_warmup = W == total, overlap = cfg->overlap_p2p_comm, fwd_only = cfg->forward_only;
    const ileave_t s = {cfg->pp_size, cfg->pp_rank, vpp, total, mbt, cht};
    int nf, nb;

    /* input_tensors[0].append(recv_forward(...)): nothing on virtual stage 0 */
    if (!first)
        batch(b, false, NONE, 0, NONE, -1);

    for (int k = 0; k < W; k++) {
        const int c = chunk_of(&s, k, true), mb = mbt[k];
        bool recv_prev = recv_from_prev(&s, k, true, &nf);
        if (k == total - 1)
            recv_prev = false;
        compute(b, MC_PP_FORWARD, mb, c);
        /* The loss output of the last virtual stage is not sent. */
        const tensor_t out = c == vpp - 1 && last ? NONE : T(mb, c);
        const bool grad_next = k == W - 1 && !fwd_only && !all_warmup;
        if (grad_next && !overlap) {
            /* send_forward_backward_recv_forward_backward: also receives the gradient the first
             * steady backward (chunk vpp-1) needs */
            batch(b, false, NONE, recv_prev ? nf : -1, out, last ? -1 : vpp - 1);
        } else {
            batch(b, false, NONE, recv_prev ? nf : -1, out, -1); /* send_forward_recv_forward */
        }
        if (grad_next && overlap)
            batch(b, true, NONE, -1, NONE, last ? -1 : vpp - 1); /* send_backward_recv_backward */
    }

    for (int k = 0; k < R; k++) {
        const int fk = k + W, bk = k;
        const int fc = chunk_of(&s, fk, true), fmb = mbt[fk];
        const int bc = chunk_of(&s, bk, false), bmb = mbt[bk];
        const tensor_t out = fc == vpp - 1 && last ? NONE : T(fmb, fc);
        const tensor_t grad = bc == 0 && first ? NONE : T(bmb, bc);
        if (overlap) {
            compute(b, MC_PP_FORWARD, fmb, fc);
            /* pp_post_forward; the last step's forward input was already received */
            bool recv_prev = recv_from_prev(&s, fk, true, &nf);
            if (k == R - 1)
                recv_prev = false;
            batch(b, true, NONE, recv_prev ? nf : -1, out, -1);
            compute(b, MC_PP_BACKWARD, bmb, bc);
            /* pp_post_backward */
            bool recv_next = recv_from_prev(&s, bk, false, &nb);
            batch(b, true, grad, -1, NONE, recv_next ? nb : -1);
        } else {
            compute(b, MC_PP_FORWARD, fmb, fc);
            compute(b, MC_PP_BACKWARD, bmb, bc);
            bool recv_prev = recv_from_prev(&s, fk, true, &nf);
            bool recv_next = recv_from_prev(&s, bk, false, &nb);
            if (k == R - 1)
                recv_prev = false;
            /* send_forward_backward_recv_forward_backward */
            batch(b, false, grad, recv_prev ? nf : -1, out, recv_next ? nb : -1);
        }
    }

    if (fwd_only)
        return;
    /* Everything was warmup: the first gradient (of the last chunk) is received here. */
    if (all_warmup && !last)
        batch(b, false, NONE, -1, NONE, vpp - 1); /* recv_backward */
    for (int k = R; k < total; k++) {
        const int c = chunk_of(&s, k, false), mb = mbt[k];
        bool recv_next = recv_from_prev(&s, k, false, &nb);
        if (k == total - 1)
            recv_next = false;
        compute(b, MC_PP_BACKWARD, mb, c);
        /* Virtual stage 0 sends no gradient. */
        const tensor_t grad = c == 0 && first ? NONE : T(mb, c);
        batch(b, false, grad, -1, NONE, recv_next ? nb : -1); /* send_backward_recv_backward */
    }
}

int mc_pp_schedule(const mc_pp_config_t *cfg, mc_pp_action_t **out, int *n_out, char *err,
                   size_t errn)
{
    *out = NULL;
    *n_out = 0;
    if (mc_pp_validate(cfg, err, errn))
        return -1;
    builder_t b = {.rank = cfg->pp_rank, .pp = cfg->pp_size};
    int *mbt = NULL, *cht = NULL;
    const int total = mc_pp_total(cfg);
    b.n_recv_act = calloc((size_t)cfg->vpp, sizeof(int));
    b.n_recv_grad = calloc((size_t)cfg->vpp, sizeof(int));
    if (!b.n_recv_act || !b.n_recv_grad)
        b.oom = 1;
    else if (cfg->pp_size == 1)
        gen_no_pipelining(&b, cfg);
    else if (cfg->vpp == 1)
        gen_1f1b(&b, cfg);
    else {
        mbt = malloc((size_t)total * sizeof(int));
        cht = malloc((size_t)total * sizeof(int));
        if (!mbt || !cht)
            b.oom = 1;
        else {
            mc_pp_table(cfg->num_microbatches, cfg->vpp, mc_pp_group_size(cfg), mbt, cht);
            gen_interleaved(&b, cfg, mbt, cht);
        }
    }
    free(mbt);
    free(cht);
    free(b.n_recv_act);
    free(b.n_recv_grad);
    if (b.oom) {
        free(b.a);
        return mc_errf(err, errn, "out of memory building the pipeline schedule");
    }
    *out = b.a;
    *n_out = b.n;
    return 0;
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

int mc_pp_simulate_lists(const mc_pp_config_t *cfg, mc_pp_action_t *const *lists, const int *n,
                         int *max_inflight, char *err, size_t errn)
{
    sim_t s = {.cfg = cfg, .pp = cfg->pp_size, .vpp = cfg->vpp, .M = cfg->num_microbatches,
               .err = err, .errn = errn};
    const int pp = s.pp, per_rank = s.vpp * s.M;
    s.nvs = pp * s.vpp;
    if (err && errn)
        err[0] = '\0';
    if (pp < 1 || s.vpp < 1 || s.M < 1)
        return mc_errf(err, errn, "bad pipeline configuration for the simulation");
    int rc = -1;
    int *pos = calloc((size_t)pp, sizeof(int)), *posted = calloc((size_t)pp, sizeof(int));
    int *pend_qi = calloc((size_t)pp * MC_PP_MAX_BATCH_OPS, sizeof(int));
    queue_t **pend_q = calloc((size_t)pp * MC_PP_MAX_BATCH_OPS, sizeof(queue_t *));
    s.sends = calloc((size_t)pp * pp, sizeof(queue_t));
    s.recvs = calloc((size_t)pp * pp, sizeof(queue_t));
    s.fwd = calloc((size_t)pp * per_rank, 1);
    s.bwd = calloc((size_t)pp * per_rank, 1);
    s.recv_act = malloc((size_t)pp * per_rank * sizeof(int));
    s.recv_grad = malloc((size_t)pp * per_rank * sizeof(int));
    s.next_f = calloc((size_t)pp * s.vpp, sizeof(int));
    s.next_b = calloc((size_t)pp * s.vpp, sizeof(int));
    s.inflight = calloc((size_t)pp, sizeof(int));
    s.max_inflight = calloc((size_t)pp, sizeof(int));
    if (!pos || !posted || !pend_qi || !pend_q || !s.sends || !s.recvs || !s.fwd || !s.bwd ||
        !s.recv_act || !s.recv_grad || !s.next_f || !s.next_b || !s.inflight || !s.max_inflight) {
        mc_errf(err, errn, "out of memory in the schedule simulation");
        goto out;
    }
    for (int i = 0; i < pp * per_rank; i++)
        s.recv_act[i] = s.recv_grad[i] = -1;

    /* Run every rank as far as it can go until nobody moves. The outcome does not depend on the
     * order: posting only ever adds matches. */
    for (bool progress = true; progress;) {
        progress = false;
        for (int r = 0; r < pp; r++) {
            while (pos[r] < n[r]) {
                const mc_pp_action_t *a = &lists[r][pos[r]];
                if (a->type == MC_PP_COMPUTE) {
                    int k = run_compute(&s, r, pos[r], a);
                    if (k < 0)
                        goto out;
                    if (k == 0)
                        break;
                } else {
                    if (a->n_ops < 1 || a->n_ops > MC_PP_MAX_BATCH_OPS) {
                        mc_errf(err, errn, "rank %d action %d: batch of %d ops", r, pos[r], a->n_ops);
                        goto out;
                    }
                    if (!posted[r]) {
                        for (int j = 0; j < a->n_ops; j++)
                            if (post_op(&s, r, pos[r], &a->ops[j],
                                        &pend_qi[r * MC_PP_MAX_BATCH_OPS + j],
                                        &pend_q[r * MC_PP_MAX_BATCH_OPS + j]))
                                goto out;
                        posted[r] = 1;
                        progress = true;
                    }
                    if (!a->async) {
                        bool done = true;
                        for (int j = 0; j < a->n_ops; j++)
                            if (pend_q[r * MC_PP_MAX_BATCH_OPS + j]->n <=
                                pend_qi[r * MC_PP_MAX_BATCH_OPS + j])
                                done = false;
                        if (!done)
                            break;
                    }
                    posted[r] = 0;
                }
                pos[r]++;
                progress = true;
            }
        }
    }

    {
        char msg[512];
        size_t len = 0;
        for (int r = 0; r < pp; r++)
            if (pos[r] < n[r] && len < sizeof msg) {
                char act[160];
                mc_pp_format(&lists[r][pos[r]], 1, act, sizeof act);
                len += (size_t)snprintf(msg + len, sizeof msg - len, "%srank %d at action %d %s",
                                        len ? ", " : "", r, pos[r], act);
            }
        if (len) {
            mc_errf(err, errn, "deadlock: %s", msg);
            goto out;
        }
    }
    for (int a = 0; a < pp; a++)
        for (int b = 0; b < pp; b++)
            if (s.sends[a * pp + b].n != s.recvs[b * pp + a].n) {
                mc_errf(err, errn, "rank %d sends %d tensors to rank %d, which receives %d", a,
                     s.sends[a * pp + b].n, b, s.recvs[b * pp + a].n);
                goto out;
            }
    for (int r = 0; r < pp; r++)
        for (int c = 0; c < s.vpp; c++)
            if (s.next_f[r * s.vpp + c] != s.M ||
                (!cfg->forward_only && s.next_b[r * s.vpp + c] != s.M)) {
                mc_errf(err, errn, "rank %d chunk %d runs %d forwards and %d backwards of %d "
                     "microbatches", r, c, s.next_f[r * s.vpp + c], s.next_b[r * s.vpp + c], s.M);
                goto out;
            }
    for (int r = 0; r < pp; r++) {
        mc_pp_config_t rc_cfg = *cfg;
        rc_cfg.pp_rank = r;
        const int want = mc_pp_max_inflight(&rc_cfg);
        if (s.max_inflight[r] != want) {
            mc_errf(err, errn, "rank %d holds up to %d activations, expected %d", r,
                 s.max_inflight[r], want);
            goto out;
        }
        if (max_inflight)
            max_inflight[r] = s.max_inflight[r];
    }
    rc = 0;
out:
    if (s.sends)
        for (int i = 0; i < pp * pp; i++) {
            free(s.sends[i].v);
            free(s.recvs[i].v);
        }
    free(s.sends);
    free(s.recvs);
    free(s.fwd);
    free(s.bwd);
    free(s.recv_act);
    free(s.recv_grad);
    free(s.next_f);
    free(s.next_b);
    free(s.inflight);
    free(s.max_inflight);
    free(pos);
    free(posted);
    free(pend_qi);
    free(pend_q);
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

/* ------------------------------------------------------------------------------------------ */
/* Layer placement                                                                              */

int mc_pp_layers(const mc_pp_layers_cfg_t *c, int pp_rank, int chunk, int *first_layer,
                 int *n_layers, char *err, size_t errn)
{
    const int L = c->num_layers, pp = c->pp_size, vpp = c->vpp;
    const int F = c->first_stage_layers, Ls = c->last_stage_layers;
    if (err && errn)
        err[0] = '\0';
    if (L < 1 || pp < 1 || vpp < 1 || F < 0 || Ls < 0)
        return mc_errf(err, errn, "bad layer placement: %d layers, pp %d, vpp %d", L, pp, vpp);
    if (pp_rank < 0 || pp_rank >= pp || chunk < 0 || chunk >= vpp)
        return mc_errf(err, errn, "pipeline rank %d chunk %d is outside pp %d, vpp %d", pp_rank,
                    chunk, pp, vpp);
    if (!F && !Ls) {
        /* validate_args / TransformerConfig.__post_init__ */
        if (L % pp)
            return mc_errf(err, errn, "Number of layers should be divisible by the "
                                   "pipeline-model-parallel size");
        if ((L / pp) % vpp)
            return mc_errf(err, errn, "number of layers per pipeline rank (%d) must be divisible "
                                   "by the virtual pipeline size (%d)", L / pp, vpp);
        const int per_chunk = L / pp / vpp;
        *first_layer = chunk * (L / vpp) + pp_rank * per_chunk;
        *n_layers = per_chunk;
        return 0;
    }
    if (pp == 1)
        return mc_errf(err, errn, "uneven first/last pipeline stages need "
                               "pipeline-model-parallel size > 1");
    /* TransformerConfig.__post_init__ (uneven PP), in its order and wording */
    int middle_stages = pp, middle_layers = L;
    if (F) {
        if (vpp > 1 && F % vpp)
            return mc_errf(err, errn, "number of layers at first stage: %d must be divisible by "
                                   "virtual pipeline parallel degree %d", F, vpp);
        middle_layers -= F;
        middle_stages--;
    }
    if (Ls) {
        if (vpp > 1 && Ls % vpp)
            return mc_errf(err, errn, "number of layers at last stage: %d must be divisible by "
                                   "virtual pipeline parallel degree %d", Ls, vpp);
        middle_layers -= Ls;
        middle_stages--;
    }
    if (middle_layers < 0 || (!middle_stages && middle_layers))
        return mc_errf(err, errn, "decoder first/last pipeline num layers (%d, %d) do not add up to "
                               "num layers %d", F, Ls, L);
    if (middle_stages && !middle_layers)
        return mc_errf(err, errn, "Mismatch: 0 middle layers remaining but %d middle PP stages "
                               "available.", middle_stages);
    if (middle_stages && middle_layers % middle_stages)
        return mc_errf(err, errn, "number of layers at middle stage: %d must be divisible by the "
                               "middle pipeline model parallel size %d", middle_layers,
                    middle_stages);
    const int per_middle = middle_stages ? middle_layers / middle_stages : 0;
    if (middle_stages && vpp > 1 && per_middle % vpp)
        return mc_errf(err, errn, "number of layers on each middle pipeline rank: %d must be "
                               "divisible by virtual pipeline parallel degree %d", per_middle, vpp);

    /* get_num_layers_to_build */
    int on_rank = per_middle;
    if (pp_rank == 0 && F)
        on_rank = F;
    if (pp_rank == pp - 1 && Ls)
        on_rank = Ls;
    *n_layers = on_rank / vpp;

    /* get_transformer_layer_offset: a "round" of chunk v holds the first rank's, every middle
     * rank's and the last rank's share of chunk v, in rank order. */
    const int middle_rank = F ? pp_rank - 1 : pp_rank;
    const int f_chunk = F / vpp, l_chunk = Ls / vpp, m_chunk = middle_layers / vpp;
    const int round = f_chunk + m_chunk + l_chunk;
    if (pp_rank == 0)
        *first_layer = chunk * round;
    else
        *first_layer = chunk * round + f_chunk + middle_rank * (middle_stages ? m_chunk / middle_stages : 0);
    return 0;
}
