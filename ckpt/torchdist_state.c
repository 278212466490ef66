/* Each local parameter's fp32 optimizer state as whole tensors (ckpt/torchdist.h): what the
 * model-space forms of torch_dist hold. The distributed optimizer's shards go through the
 * dp_zero world tensors of ckpt/distrib_optim.c, so one routine lays out Megatron's buffers. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "ckpt/torchdist.h"
#include "ckpt/state.h"

void mc_param_state_free(mc_param_state_t *s)
{
    for (int i = 0; i < s->n; i++)
        for (int k = 0; k < 3; k++) free(s->v[i][k]);
    free(s->v);
    memset(s, 0, sizeof(*s));
}

void mc_param_state_alloc(mc_param_state_t *s, const mc_gpt_t *m)
{
    s->n = m->n_params;
    s->v = calloc((size_t)(s->n ? s->n : 1), sizeof(*s->v));
    if (!s->v) mc_fatal("out of host memory");
    for (int i = 0; i < s->n; i++)
        for (int k = 0; k < 3; k++)
            if (!(s->v[i][k] =
                      calloc((size_t)(m->params[i].numel ? m->params[i].numel : 1), sizeof(float))))
                mc_fatal("out of host memory");
}

static int order_of(const mc_trainer_t *t, mc_ckpt_order_t *o)
{
    if (mc_ckpt_order_spec(&t->model, mc_ckpt_names_of(t->args), o) != 0)
        mc_fatal("out of host memory");
    return 0;
}

void mc_param_state_get(mc_trainer_t *t, mc_param_state_t *s)
{
    const mc_gpt_t *m = &t->model;
    const mc_backend_t *be = m->be;
    memset(s, 0, sizeof(*s));
    if (t->ddp.dist_opt) {
        mc_ckpt_order_t o;
        order_of(t, &o);
        mc_pyobj_t *d = mc_ckpt_distopt_gather(t, &o); /* NULL on dp ranks > 0 */
        if (d) {
            mc_ckpt_buffers_t b;
            mc_ckpt_buffers(t, &o, &b);
            mc_param_state_alloc(s, m);
            for (int i = 0; i < m->n_params; i++)
                for (int k = 0; k < 3; k++) {
                    const float *w = mc_py_tensor_data(mc_ckpt_distopt_world(d, b.chunk[i], k));
                    memcpy(s->v[i][k], w + b.pos[i], (size_t)m->params[i].numel * sizeof(float));
                }
            mc_ckpt_buffers_free(&b);
            mc_py_decref(d);
        }
        mc_ckpt_order_free(&o);
        return;
    }
    mc_param_state_alloc(s, m);
    for (int i = 0; i < m->n_params; i++) {
        const mc_opt_seg_t *g = &t->opt.segs[i]; /* whole parameter i */
        const size_t bytes = (size_t)m->params[i].numel * sizeof(float);
        be->memcpy_d2h(be, s->v[i][0], mc_opt_param(&t->opt, g), bytes);
        be->memcpy_d2h(be, s->v[i][1], t->opt.exp_avg + g->state_off, bytes);
        be->memcpy_d2h(be, s->v[i][2], t->opt.exp_avg_sq + g->state_off, bytes);
    }
}

/* A dp_zero dict of this rank's buffers holding s (what distrib_optim.pt would). */
static mc_pyobj_t *dp_zero_of(const mc_trainer_t *t, const mc_ckpt_buffers_t *b,
                              const mc_param_state_t *s)
{
    const mc_gpt_t *m = &t->model;
    mc_pyobj_t *d = mc_py_dict();
    int rc = mc_py_dict_set_str(d, "buckets_coalesced", mc_py_bool(true));
    for (int c = 0; c < b->n_chunks; c++) {
        mc_pyobj_t *state = mc_py_dict(), *by_dtype = mc_py_dict();
        for (int k = 0; k < 3; k++) {
            const int64_t shape[1] = {b->unpadded[c]};
            mc_pyobj_t *w = mc_py_tensor_new(MC_TORCH_FLOAT32, 1, shape);
            for (int i = 0; w && i < m->n_params; i++)
                if (b->chunk[i] == c)
                    memcpy((float *)mc_py_tensor_data(w) + b->pos[i], s->v[i][k],
                           (size_t)m->params[i].numel * sizeof(float));
            rc |= mc_py_dict_set_str(state, mc_ckpt_state_keys[k], w);
        }
        rc |= mc_py_dict_set_str(state, "numel_unpadded", mc_py_int(b->unpadded[c]));
        rc |= mc_py_dict_set(by_dtype, mc_ckpt_buffer_dtype_key(t->args), state);
        rc |= mc_py_dict_set_int(d, c, by_dtype);
    }
    if (rc) mc_fatal("out of host memory");
    return d;
}

void mc_param_state_set(mc_trainer_t *t, const mc_param_state_t *s)
{
    mc_gpt_t *m = &t->model;
    const mc_backend_t *be = m->be;
    if (t->ddp.dist_opt) {
        mc_ckpt_order_t o;
        order_of(t, &o);
        mc_ckpt_buffers_t b;
        mc_ckpt_buffers(t, &o, &b);
        mc_pyobj_t *d = dp_zero_of(t, &b, s);
        char err[256];
        if (mc_ckpt_distopt_load(t, d, &o, err, sizeof(err)) != 0)
            mc_fatal("internal error: %s", err); /* built from this run's own layout */
        mc_py_decref(d);
        mc_ckpt_buffers_free(&b);
        mc_ckpt_order_free(&o);
        return;
    }
    for (int i = 0; i < m->n_params; i++) {
        const mc_opt_seg_t *g = &t->opt.segs[i];
        const size_t bytes = (size_t)m->params[i].numel * sizeof(float);
        be->memcpy_h2d(be, mc_opt_param(&t->opt, g), s->v[i][0], bytes);
        be->memcpy_h2d(be, t->opt.exp_avg + g->state_off, s->v[i][1], bytes);
        be->memcpy_h2d(be, t->opt.exp_avg_sq + g->state_off, s->v[i][2], bytes);
    }
}
