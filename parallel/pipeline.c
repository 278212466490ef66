/* Pipeline executor: runs mc_pp_schedule's action list on the model (see pipeline.h). */
#include "parallel/pipeline.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

/* ------------------------------------------------------------------ slot accounting */

/* The slot rules of the executor on an action list, calling take/give for each slot event in
 * the order the executor meets them: inside a batch, receives take their slots before the
 * batch starts and sends give theirs back after it started. */
typedef struct {
    bool forward_only;
    bool *post; /* [vpp]: chunk c holds the loss */
    bool *pre;  /* [vpp]: chunk c holds the embedding */
} slot_rules_t;

/* Whether the action gives back (mb, chunk)'s slot: a compute that leaves nothing to send. */
static bool compute_gives(const slot_rules_t *r, const mc_pp_action_t *x)
{
    if (r->forward_only) return x->kind == MC_PP_FORWARD && r->post[x->chunk];
    return x->kind == MC_PP_BACKWARD && r->pre[x->chunk];
}

/* Whether a p2p op sends a slot's last tensor. */
static bool op_gives(const slot_rules_t *r, const mc_p2p_op_t *o)
{
    return r->forward_only ? o->dir == MC_P2P_SEND_NEXT : o->dir == MC_P2P_SEND_PREV;
}

int mc_pipeline_slots(const mc_pp_config_t *cfg, int *slots, char *err, size_t errn)
{
    mc_pp_action_t *acts;
    int n;
    if (mc_pp_schedule(cfg, &acts, &n, err, errn) != 0) return -1;
    const int vpp = cfg->vpp, M = cfg->num_microbatches;
    bool pre[MC_MAX_CHUNKS], post[MC_MAX_CHUNKS];
    for (int c = 0; c < vpp; c++) {
        pre[c] = mc_pp_is_pre_process(cfg->pp_rank, c);
        post[c] = mc_pp_is_post_process(cfg->pp_size, vpp, cfg->pp_rank, c);
    }
    slot_rules_t r = {cfg->forward_only, post, pre};
    int live[MC_SLOT_GROUPS] = {0};
    char *held = calloc((size_t)M * (size_t)vpp, 1);
    if (!held) {
        free(acts);
        return mc_errf(err, errn, "out of host memory counting pipeline slots");
    }
    for (int g = 0; g < MC_SLOT_GROUPS; g++) slots[g] = 0;
#define TAKE(mb, c)                                                                                \
    do {                                                                                           \
        if (!held[(mb)*vpp + (c)]) {                                                               \
            held[(mb)*vpp + (c)] = 1;                                                              \
            if (++live[post[c]] > slots[post[c]]) slots[post[c]] = live[post[c]];                  \
        }                                                                                          \
    } while (0)
#define GIVE(mb, c) (live[post[c]]--)
    for (int i = 0; i < n; i++) {
        const mc_pp_action_t *x = &acts[i];
        if (x->type == MC_PP_COMPUTE) {
            if (x->kind == MC_PP_FORWARD) TAKE(x->mb, x->chunk);
            if (compute_gives(&r, x)) GIVE(x->mb, x->chunk);
            continue;
        }
        for (int k = 0; k < x->n_ops; k++)
            if (x->ops[k].dir == MC_P2P_RECV_PREV) TAKE(x->ops[k].mb, x->ops[k].chunk);
        for (int k = 0; k < x->n_ops; k++)
            if (op_gives(&r, &x->ops[k])) GIVE(x->ops[k].mb, x->ops[k].chunk);
    }
#undef TAKE
#undef GIVE
    free(held);
    free(acts);
    return 0;
}

int mc_pipeline_chunks(mc_gpt_config_t *cfg, const mc_pp_plan_t *plan, int pp_rank, char *err,
                       size_t errn)
{
    const int vpp = plan->layers.vpp, pp = plan->layers.pp_size;
    if (vpp > MC_MAX_CHUNKS)
        return mc_errf(err, errn,
                       "%d model chunks per pipeline rank is more than megatron-c supports "
                       "(%d; use fewer virtual stages)",
                       vpp, MC_MAX_CHUNKS);
    cfg->n_chunks = vpp;
    for (int c = 0; c < vpp; c++) {
        mc_chunk_cfg_t *ch = &cfg->chunk[c];
        if (mc_pp_layers(&plan->layers, pp_rank, c, &ch->first_layer, &ch->n_layers, err, errn) !=
            0)
            return -1;
        ch->pre = mc_pp_is_pre_process(pp_rank, c);
        ch->post = mc_pp_is_post_process(pp, vpp, pp_rank, c);
    }
    return 0;
}

/* With --rampup-batch-size the iterations of the ramp run fewer microbatches than the final
 * batch: the slots are the most any of them needs. A batch size the ramp may reach but that is
 * not a whole number of microbatches, or that the schedule refuses, is left out: validation
 * refuses those that training reaches. */
static void batch_slots(const mc_pp_plan_t *p, int pp_rank, int64_t gbs, int *slots)
{
    const int per = p->batch_per_microbatch;
    if (gbs < per || gbs % per != 0) return;
    const mc_pp_config_t c = mc_pp_plan_schedule(p, pp_rank, (int)(gbs / per), false);
    int s[MC_SLOT_GROUPS];
    char err[256];
    if (mc_pipeline_slots(&c, s, err, sizeof(err)) != 0) return;
    for (int g = 0; g < MC_SLOT_GROUPS; g++)
        if (s[g] > slots[g]) slots[g] = s[g];
}

/* The same for the entries of a step batch size schedule. */
static void rampup_slots(const mc_pp_plan_t *p, int pp_rank, int *slots)
{
    for (int64_t gbs = p->ramp_start; p->ramp_start && gbs < p->global_batch_size;
         gbs += p->ramp_increment)
        batch_slots(p, pp_rank, gbs, slots);
    for (int i = 0; i < p->n_step_sizes; i++) batch_slots(p, pp_rank, p->step_sizes[i], slots);
}

int mc_pipeline_configure(mc_gpt_config_t *cfg, const mc_pp_plan_t *plan, int pp_rank, char *err,
                          size_t errn)
{
    const mc_pp_config_t train = mc_pp_plan_schedule(plan, pp_rank, plan->num_microbatches, false);
    int train_slots[MC_SLOT_GROUPS], eval_slots[MC_SLOT_GROUPS] = {0};
    if (train.vpp > MC_MAX_CHUNKS)
        return mc_pipeline_chunks(cfg, plan, pp_rank, err, errn); /* the error */
    if (mc_pipeline_slots(&train, train_slots, err, errn) != 0) return -1;
    rampup_slots(plan, pp_rank, train_slots);
    if (plan->eval_microbatches > 0) {
        const mc_pp_config_t ev = mc_pp_plan_schedule(plan, pp_rank, plan->eval_microbatches, true);
        if (mc_pipeline_slots(&ev, eval_slots, err, errn) != 0) return -1;
    }
    if (mc_pipeline_chunks(cfg, plan, pp_rank, err, errn) != 0) return -1;
    for (int g = 0; g < MC_SLOT_GROUPS; g++)
        cfg->slots[g] = train_slots[g] > eval_slots[g] ? train_slots[g] : eval_slots[g];
    return 0;
}

/* ------------------------------------------------------------------ executor */

/* (Re)builds *s for M microbatches. Returns 0, or -1 with one line in err. */
static int build_schedule(const mc_pipeline_t *p, mc_pipe_schedule_t *s, int M, bool forward_only,
                          char *err, size_t errn)
{
    free(s->acts);
    *s = (mc_pipe_schedule_t){0};
    const mc_pp_config_t cfg = mc_pp_plan_schedule(&p->plan, p->pp_rank, M, forward_only);
    if (cfg.vpp != p->model->cfg.n_chunks)
        return mc_errf(err, errn, "internal error: the model has %d chunks, the schedule %d",
                       p->model->cfg.n_chunks, cfg.vpp);
    if (mc_pp_schedule(&cfg, &s->acts, &s->n, err, errn) != 0) return -1;
    s->M = M;
    return 0;
}

/* The step's action list: the one built at init unless M changed. */
static const mc_pipe_schedule_t *schedule_for(mc_pipeline_t *p, int M, bool forward_only)
{
    mc_pipe_schedule_t *s = &p->sched[forward_only];
    char err[256];
    if (s->M != M && build_schedule(p, s, M, forward_only, err, sizeof(err)) != 0)
        mc_fatal("%s", err);
    return s;
}

void mc_pipeline_init(mc_pipeline_t *p, mc_gpt_t *model, mc_comm_t *comm, mc_group_t *pp_group,
                      const mc_pp_plan_t *plan, int pp_rank, mc_timers_t *timers)
{
    memset(p, 0, sizeof(*p));
    p->model = model;
    p->comm = comm;
    p->pp_group = pp_group;
    p->plan = *plan;
    p->pp_rank = pp_rank;
    p->timers = timers;
    for (int g = 0; g < MC_SLOT_GROUPS; g++) {
        const int n = model->cfg.slots[g];
        p->slots[g] = malloc((size_t)(n ? n : 1) * sizeof(mc_pipe_slot_t));
        if (!p->slots[g]) mc_fatal("out of host memory");
        for (int k = 0; k < n; k++) p->slots[g][k] = (mc_pipe_slot_t){.mb = -1, .req = MC_REQ_DONE};
    }
    /* The schedules once (a failure is reported by the first step that needs it) */
    char err[256];
    if (plan->num_microbatches > 0)
        build_schedule(p, &p->sched[0], plan->num_microbatches, false, err, sizeof(err));
    if (plan->eval_microbatches > 0)
        build_schedule(p, &p->sched[1], plan->eval_microbatches, true, err, sizeof(err));
}

void mc_pipeline_free(mc_pipeline_t *p)
{
    for (int g = 0; g < MC_SLOT_GROUPS; g++) free(p->slots[g]);
    free(p->slot_of);
    free(p->weight);
    for (int i = 0; i < 2; i++) free(p->sched[i].acts);
    memset(p, 0, sizeof(*p));
}

static void timer_start(mc_pipeline_t *p, int id)
{
    if (p->timers) mc_timer_start(p->timers, (mc_timer_id_t)id);
}

static void timer_stop(mc_pipeline_t *p, int id)
{
    if (p->timers) mc_timer_stop(p->timers, (mc_timer_id_t)id);
}

/* Waits for the last batch on a slot (timed under that batch's name: pipeline idle time). */
static void settle(mc_pipeline_t *p, mc_pipe_slot_t *s)
{
    if (s->req == MC_REQ_DONE) return;
    timer_start(p, s->timer);
    p->comm->wait(p->comm, s->req);
    timer_stop(p, s->timer);
    s->req = MC_REQ_DONE;
}

static int *slot_ref(mc_pipeline_t *p, int mb, int c)
{
    return &p->slot_of[mb * p->model->cfg.n_chunks + c];
}

/* The bookkeeping of slot k of chunk c's group. */
static mc_pipe_slot_t *pslot(mc_pipeline_t *p, int c, int k)
{
    return &p->slots[mc_gpt_slot_group(&p->model->cfg, c)][k];
}

/* The slot of (mb, c), taken from the chunk's group if it has none yet: a free one, preferably
 * one whose last batch is complete. */
static int take_slot(mc_pipeline_t *p, int mb, int c)
{
    int *ref = slot_ref(p, mb, c);
    if (*ref >= 0) return *ref;
    const int g = mc_gpt_slot_group(&p->model->cfg, c), n = p->model->cfg.slots[g];
    int k = -1;
    for (int i = 0; i < n && (k < 0 || p->slots[g][k].req != MC_REQ_DONE); i++)
        if (p->slots[g][i].mb < 0 && (k < 0 || p->slots[g][i].req == MC_REQ_DONE)) k = i;
    if (k < 0)
        mc_fatal(
            "internal error: no free activation slot for microbatch %d of chunk %d (%d planned)",
            mb, c, n);
    mc_pipe_slot_t *s = &p->slots[g][k];
    settle(p, s); /* a send may still read its buffers */
    s->mb = mb;
    *ref = k;
    return k;
}

static void give_slot(mc_pipeline_t *p, int mb, int c)
{
    const int k = *slot_ref(p, mb, c);
    if (k < 0) mc_fatal("internal error: microbatch %d of chunk %d has no pipeline slot", mb, c);
    pslot(p, c, k)->mb = -1;
}

/* Megatron's p2p_communication call a batch corresponds to, for its timer. */
static int batch_timer(const mc_pp_action_t *x)
{
    bool sp = false, rp = false, sn = false, rn = false;
    for (int k = 0; k < x->n_ops; k++) {
        switch (x->ops[k].dir) {
        case MC_P2P_SEND_PREV: sp = true; break;
        case MC_P2P_RECV_PREV: rp = true; break;
        case MC_P2P_SEND_NEXT: sn = true; break;
        case MC_P2P_RECV_NEXT: rn = true; break;
        }
    }
    const int n = sp + rp + sn + rn;
    if (n > 2 || (sp && sn) || (rp && rn)) return MC_T_FWD_BWD_SEND_FWD_BWD_RECV;
    if (n == 1)
        return rp   ? MC_T_FORWARD_RECV
               : sn ? MC_T_FORWARD_SEND
               : rn ? MC_T_BACKWARD_RECV
                    : MC_T_BACKWARD_SEND;
    if (sn && rn) return MC_T_FWD_SEND_BWD_RECV;
    if (sp && rp) return MC_T_BWD_SEND_FWD_RECV;
    if (sn && rp) return MC_T_FWD_SEND_FWD_RECV;
    return MC_T_BWD_SEND_BWD_RECV;
}

static void run_batch(mc_pipeline_t *p, const mc_pipeline_step_t *st, const mc_pp_action_t *x,
                      const slot_rules_t *r)
{
    mc_gpt_t *m = p->model;
    mc_p2p_t ops[MC_PP_MAX_BATCH_OPS];
    int touched[MC_PP_MAX_BATCH_OPS][2];
    for (int k = 0; k < x->n_ops; k++) {
        const mc_p2p_op_t *o = &x->ops[k];
        if (o->mb < 0 || o->mb >= st->M) mc_fatal("internal error: p2p of microbatch %d", o->mb);
        const int slot = o->dir == MC_P2P_RECV_PREV ? take_slot(p, o->mb, o->chunk)
                                                    : *slot_ref(p, o->mb, o->chunk);
        if (slot < 0)
            mc_fatal("internal error: p2p of microbatch %d chunk %d before its forward", o->mb,
                     o->chunk);
        const mc_gpt_slot_t *gs = &m->slots[mc_gpt_slot_group(&m->cfg, o->chunk)][slot];
        void *buf = o->dir == MC_P2P_SEND_PREV   ? gs->in
                    : o->dir == MC_P2P_RECV_PREV ? gs->in
                    : o->dir == MC_P2P_SEND_NEXT ? gs->out
                                                 : gs->dout;
        ops[k] = (mc_p2p_t){.is_send = o->dir == MC_P2P_SEND_PREV || o->dir == MC_P2P_SEND_NEXT,
                            .peer = o->peer,
                            .buf = buf,
                            .count = (size_t)mc_gpt_boundary_elems(m, st->mbs[o->mb].b),
                            .dt = m->cfg.dt};
        touched[k][0] = o->chunk;
        touched[k][1] = slot;
    }
    const int timer = batch_timer(x);
    mc_coll_t op = {.kind = MC_COLL_P2P_BATCH, .group = p->pp_group, .p2p = ops, .n_p2p = x->n_ops};
    timer_start(p, timer);
    mc_req_t req = p->comm->start(p->comm, &op);
    if (!x->async) {
        p->comm->wait(p->comm, req);
        req = MC_REQ_DONE;
    }
    timer_stop(p, timer);
    for (int k = 0; k < x->n_ops; k++) {
        mc_pipe_slot_t *ps = pslot(p, touched[k][0], touched[k][1]);
        ps->req = req;
        ps->timer = timer;
    }
    for (int k = 0; k < x->n_ops; k++)
        if (op_gives(r, &x->ops[k])) give_slot(p, x->ops[k].mb, x->ops[k].chunk);
}

static void run_compute(mc_pipeline_t *p, const mc_pipeline_step_t *st, const mc_pp_action_t *x,
                        const slot_rules_t *r)
{
    mc_gpt_t *m = p->model;
    const int c = x->chunk, mb = x->mb;
    if (mb < 0 || mb >= st->M) mc_fatal("internal error: compute of microbatch %d", mb);
    if (x->kind == MC_PP_FORWARD) {
        const int k = take_slot(p, mb, c);
        settle(p, pslot(p, c, k)); /* its input may still be arriving */
        double sum = 0, cnt = 0;
        timer_start(p, MC_T_FORWARD_COMPUTE);
        mc_gpt_forward_chunk(m, c, k, &st->mbs[mb], st->iteration, !st->forward_only, &sum, &cnt);
        timer_stop(p, MC_T_FORWARD_COMPUTE);
        if (m->cfg.chunk[c].post) p->weight[mb] = st->on_loss(st->ctx, mb, sum, cnt);
    } else {
        const int k = *slot_ref(p, mb, c);
        if (k < 0)
            mc_fatal("internal error: backward of microbatch %d chunk %d before its forward", mb,
                     c);
        settle(p, pslot(p, c, k)); /* its output gradient may still be arriving */
        if (st->before_backward) st->before_backward(st->ctx, mb, c);
        timer_start(p, MC_T_BACKWARD_COMPUTE);
        mc_gpt_backward_chunk(m, c, k, st->iteration, m->cfg.chunk[c].post ? p->weight[mb] : 0.0f);
        timer_stop(p, MC_T_BACKWARD_COMPUTE);
    }
    if (compute_gives(r, x)) give_slot(p, mb, c);
}

void mc_pipeline_run(mc_pipeline_t *p, const mc_pipeline_step_t *st)
{
    mc_gpt_t *m = p->model;
    const int vpp = m->cfg.n_chunks;
    const mc_pipe_schedule_t *sched = schedule_for(p, st->M, st->forward_only);
    const mc_pp_action_t *acts = sched->acts;
    const int n = sched->n;
    if (st->M > p->cap_m) {
        free(p->slot_of);
        free(p->weight);
        p->slot_of = malloc((size_t)st->M * (size_t)vpp * sizeof(int));
        p->weight = malloc((size_t)st->M * sizeof(float));
        if (!p->slot_of || !p->weight) mc_fatal("out of host memory");
        p->cap_m = st->M;
    }
    for (int i = 0; i < st->M * vpp; i++) p->slot_of[i] = -1;
    for (int i = 0; i < st->M; i++) p->weight[i] = 0;
    bool pre[MC_MAX_CHUNKS], post[MC_MAX_CHUNKS];
    for (int c = 0; c < vpp; c++) {
        pre[c] = m->cfg.chunk[c].pre;
        post[c] = m->cfg.chunk[c].post;
    }
    const slot_rules_t r = {st->forward_only, post, pre};

    for (int i = 0; i < n; i++) {
        if (acts[i].type == MC_PP_COMPUTE) run_compute(p, st, &acts[i], &r);
        else run_batch(p, st, &acts[i], &r);
    }
    /* every batch complete, every slot free for the next run */
    for (int g = 0; g < MC_SLOT_GROUPS; g++)
        for (int k = 0; k < m->cfg.slots[g]; k++) {
            settle(p, &p->slots[g][k]);
            if (p->slots[g][k].mb >= 0)
                mc_fatal("internal error: activation slot %d of group %d still holds microbatch %d "
                         "after the schedule",
                         k, g, p->slots[g][k].mb);
        }
    /* finish_embedding_wgrad_compute: the deferred output-layer weight gradients, at the flush */
    if (!st->forward_only) mc_gpt_drain_output_wgrad(m);
}
