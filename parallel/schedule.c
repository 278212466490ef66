/* Pipeline schedules as pure functions: see schedule.h. The generators below follow
 * megatron/core/pipeline_parallel/schedules.py step by step; the comments name the Megatron
 * call each batch stands for. */
#include "parallel/schedule.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

/* ------------------------------------------------------------------------------------------ */
/* Counts and tables                                                                           */

int mc_pp_total(const mc_pp_config_t *cfg) { return cfg->num_microbatches * cfg->vpp; }

int mc_pp_warmup(const mc_pp_config_t *cfg)
{
    const int pp = cfg->pp_size, r = cfg->pp_rank, total = mc_pp_total(cfg);
    int w;
    if (pp == 1) return 0; /* forward_backward_no_pipelining has no warmup */
    if (cfg->vpp == 1) {
        /* forward_backward_pipelining_without_interleaving: also when forward_only */
        w = pp - r - 1;
        return w < cfg->num_microbatches ? w : cfg->num_microbatches;
    }
    /* get_pp_rank_microbatches (overlap_moe_expert_parallel_comm is not modelled) */
    if (cfg->forward_only) return total;
    w = (pp - r - 1) * 2 + (cfg->vpp - 1) * mc_pp_group_size(cfg);
    return w >= total ? total : w;
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

/* ------------------------------------------------------------------------------------------ */
/* Building a list                                                                              */

typedef struct {
    int mb, chunk;
} tensor_t; /* mb < 0: None (nothing to send) */
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
    if (b->oom) return NULL;
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
    if (!x) return;
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
    if (send_prev.mb < 0 && recv_prev < 0 && send_next.mb < 0 && recv_next < 0) return;
    mc_pp_action_t *x = push(b);
    if (!x) return;
    const int prev = (b->rank - 1 + b->pp) % b->pp, next = (b->rank + 1) % b->pp;
    x->type = MC_PP_P2P;
    x->async = async;
    if (send_prev.mb >= 0) add_op(x, MC_P2P_SEND_PREV, send_prev.mb, send_prev.chunk, prev);
    if (recv_prev >= 0) add_op(x, MC_P2P_RECV_PREV, b->n_recv_act[recv_prev]++, recv_prev, prev);
    if (send_next.mb >= 0) add_op(x, MC_P2P_SEND_NEXT, send_next.mb, send_next.chunk, next);
    if (recv_next >= 0) add_op(x, MC_P2P_RECV_NEXT, b->n_recv_grad[recv_next]++, recv_next, next);
}

static tensor_t T(int mb, int chunk) { return (tensor_t){mb, chunk}; }

/* forward_backward_no_pipelining */
static void gen_no_pipelining(builder_t *b, const mc_pp_config_t *cfg)
{
    for (int i = 0; i < cfg->num_microbatches; i++) {
        compute(b, MC_PP_FORWARD, i, 0);
        if (!cfg->forward_only) compute(b, MC_PP_BACKWARD, i, 0);
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
        if (!first) batch(b, false, NONE, 0, NONE, -1); /* recv_forward */
        compute(b, MC_PP_FORWARD, i, 0);
        if (!last) batch(b, false, NONE, -1, T(i, 0), -1); /* send_forward */
    }
    /* Before 1F1B, the first steady forward's input (skipped when everything was warmup). */
    if (R > 0 && !first) batch(b, false, NONE, 0, NONE, -1); /* recv_forward */

    for (int i = 0; i < R; i++) {
        const bool last_it = i == R - 1;
        compute(b, MC_PP_FORWARD, W + i, 0);
        if (cfg->forward_only) {
            if (!last) batch(b, false, NONE, -1, T(W + i, 0), -1);      /* send_forward */
            if (!last_it && !first) batch(b, false, NONE, 0, NONE, -1); /* recv_forward */
            continue;
        }
        if (!last) batch(b, false, NONE, -1, T(W + i, 0), 0); /* send_forward_recv_backward */
        compute(b, MC_PP_BACKWARD, i, 0);                     /* pops the oldest: microbatch i */
        if (!first) {
            if (last_it) batch(b, false, T(i, 0), -1, NONE, -1); /* send_backward */
            else batch(b, false, T(i, 0), 0, NONE, -1);          /* send_backward_recv_forward */
        }
    }
    if (cfg->forward_only) return;
    for (int i = 0; i < W; i++) {
        const int mb = R + i;
        if (!last) batch(b, false, NONE, -1, NONE, 0); /* recv_backward */
        compute(b, MC_PP_BACKWARD, mb, 0);
        if (!first) batch(b, false, T(mb, 0), -1, NONE, -1); /* send_backward */
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
        if (next == last_chunk) recv = false;
        next += forward ? 1 : -1;
    } else {
        next = chunk_of(s, k + 1, forward);
    }
    *next_chunk = next;
    return recv;
}

/* The interleaved schedule's constants for one rank. */
typedef struct {
    ileave_t s;
    int vpp, total, W, R;
    bool first, last, all_warmup, overlap, flush, fwd_only;
} ilv_t;

/* Warmup forwards. With overlap_p2p_comm_warmup_flush every batch is asynchronous: a rank that
 * receives (not the first) posts the receive of the next forward's input before this forward,
 * then sends its output after it; the first rank receives and sends after the forward. */
static void ilv_warmup(builder_t *b, const ilv_t *v, const int *mbt)
{
    int nf;
    for (int k = 0; k < v->W; k++) {
        const int c = chunk_of(&v->s, k, true), mb = mbt[k];
        bool recv_prev = recv_from_prev(&v->s, k, true, &nf);
        if (k == v->total - 1) recv_prev = false;
        const int rp = recv_prev ? nf : -1;
        if (v->flush && !v->first) batch(b, true, NONE, rp, NONE, -1); /* prefetch for k+1 */
        compute(b, MC_PP_FORWARD, mb, c);
        /* The loss output of the last virtual stage is not sent. */
        const tensor_t out = c == v->vpp - 1 && v->last ? NONE : T(mb, c);
        const bool grad_next = k == v->W - 1 && !v->fwd_only && !v->all_warmup;
        if (v->flush) {
            batch(b, true, NONE, v->first ? rp : -1, out, -1); /* send_forward_recv_forward */
        } else if (grad_next && !v->overlap) {
            /* send_forward_backward_recv_forward_backward: also receives the gradient the first
             * steady backward (chunk vpp-1) needs */
            batch(b, false, NONE, rp, out, v->last ? -1 : v->vpp - 1);
        } else {
            batch(b, false, NONE, rp, out, -1); /* send_forward_recv_forward */
        }
        if (grad_next && v->overlap)
            batch(b, true, NONE, -1, NONE,
                  v->last ? -1 : v->vpp - 1); /* send_backward_recv_backward */
    }
}

/* Steady 1F1B steps. */
static void ilv_steady(builder_t *b, const ilv_t *v, const int *mbt)
{
    int nf, nb;
    for (int k = 0; k < v->R; k++) {
        const int fk = k + v->W, bk = k;
        const int fc = chunk_of(&v->s, fk, true), fmb = mbt[fk];
        const int bc = chunk_of(&v->s, bk, false), bmb = mbt[bk];
        const tensor_t out = fc == v->vpp - 1 && v->last ? NONE : T(fmb, fc);
        const tensor_t grad = bc == 0 && v->first ? NONE : T(bmb, bc);
        if (v->overlap) {
            compute(b, MC_PP_FORWARD, fmb, fc);
            /* pp_post_forward; the last step's forward input was already received */
            bool recv_prev = recv_from_prev(&v->s, fk, true, &nf);
            if (k == v->R - 1) recv_prev = false;
            batch(b, true, NONE, recv_prev ? nf : -1, out, -1);
            compute(b, MC_PP_BACKWARD, bmb, bc);
            /* pp_post_backward */
            bool recv_next = recv_from_prev(&v->s, bk, false, &nb);
            batch(b, true, grad, -1, NONE, recv_next ? nb : -1);
        } else {
            compute(b, MC_PP_FORWARD, fmb, fc);
            compute(b, MC_PP_BACKWARD, bmb, bc);
            bool recv_prev = recv_from_prev(&v->s, fk, true, &nf);
            bool recv_next = recv_from_prev(&v->s, bk, false, &nb);
            if (k == v->R - 1) recv_prev = false;
            /* send_forward_backward_recv_forward_backward */
            batch(b, false, grad, recv_prev ? nf : -1, out, recv_next ? nb : -1);
        }
    }
}

/* Cooldown backwards (the flush), the warmup's mirror with the last rank leading. */
static void ilv_cooldown(builder_t *b, const ilv_t *v, const int *mbt)
{
    int nb;
    /* Everything was warmup: the first gradient (of the last chunk) is received here. */
    if (v->all_warmup && !v->last) batch(b, false, NONE, -1, NONE, v->vpp - 1); /* recv_backward */
    for (int k = v->R; k < v->total; k++) {
        const int c = chunk_of(&v->s, k, false), mb = mbt[k];
        bool recv_next = recv_from_prev(&v->s, k, false, &nb);
        if (k == v->total - 1) recv_next = false;
        const int rn = recv_next ? nb : -1;
        if (v->flush && !v->last) batch(b, true, NONE, -1, NONE, rn); /* prefetch for k+1 */
        compute(b, MC_PP_BACKWARD, mb, c);
        /* Virtual stage 0 sends no gradient. */
        const tensor_t grad = c == 0 && v->first ? NONE : T(mb, c);
        if (v->flush) batch(b, true, grad, -1, NONE, v->last ? rn : -1);
        else batch(b, false, grad, -1, NONE, rn); /* send_backward_recv_backward */
    }
}

/* forward_backward_pipelining_with_interleaving */
static void gen_interleaved(builder_t *b, const mc_pp_config_t *cfg, const int *mbt, const int *cht)
{
    const int total = mc_pp_total(cfg), W = mc_pp_warmup(cfg);
    const ilv_t v = {.s = {cfg->pp_size, cfg->pp_rank, cfg->vpp, total, mbt, cht},
                     .vpp = cfg->vpp,
                     .total = total,
                     .W = W,
                     .R = total - W,
                     .first = cfg->pp_rank == 0,
                     .last = cfg->pp_rank == cfg->pp_size - 1,
                     .all_warmup = W == total,
                     .overlap = cfg->overlap_p2p_comm,
                     .flush = cfg->overlap_p2p_comm && cfg->overlap_warmup_flush,
                     .fwd_only = cfg->forward_only};

    /* input_tensors[0].append(recv_forward(...)): nothing on virtual stage 0 */
    if (!v.first) batch(b, false, NONE, 0, NONE, -1);
    ilv_warmup(b, &v, mbt);
    ilv_steady(b, &v, mbt);
    if (!v.fwd_only) ilv_cooldown(b, &v, mbt);
}

int mc_pp_schedule(const mc_pp_config_t *cfg, mc_pp_action_t **out, int *n_out, char *err,
                   size_t errn)
{
    *out = NULL;
    *n_out = 0;
    if (mc_pp_validate(cfg, err, errn)) return -1;
    builder_t b = {.rank = cfg->pp_rank, .pp = cfg->pp_size};
    int *mbt = NULL, *cht = NULL;
    const int total = mc_pp_total(cfg);
    b.n_recv_act = calloc((size_t)cfg->vpp, sizeof(int));
    b.n_recv_grad = calloc((size_t)cfg->vpp, sizeof(int));
    if (!b.n_recv_act || !b.n_recv_grad) b.oom = 1;
    else if (cfg->pp_size == 1) gen_no_pipelining(&b, cfg);
    else if (cfg->vpp == 1) gen_1f1b(&b, cfg);
    else {
        mbt = malloc((size_t)total * sizeof(int));
        cht = malloc((size_t)total * sizeof(int));
        if (!mbt || !cht) b.oom = 1;
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
