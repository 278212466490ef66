/* A layer's parallel linears (Megatron-core's ColumnParallelLinear and RowParallelLinear as
 * attention and the MLP use them): the GEMMs around the tensor-parallel mappings, with
 * --tp-comm-overlap's chunked and bulk overlaps of the sequence-parallel collectives
 * (model/tp_overlap.c). Without the overlap each is the plain mapping and one GEMM. */
#include "model/block.h"

typedef struct {
    const mc_layer_run_t *r;
    void *out, *pre; /* column forward: out, and pre with the activation fused */
    const void *in, *W, *bias, *act;
    int in_f, out_f;
} rows_ctx_t;

static void column_rows(void *p, const void *in, void *unused, long row0, long rows)
{
    const rows_ctx_t *x = p;
    const mc_backend_t *be = x->r->be;
    const mc_dtype_t dt = x->r->c->dt;
    void *out = mc_elem(x->out, dt, row0 * x->out_f);
    if (x->pre)
        be->linear_gelu_forward(be, dt, out, mc_elem(x->pre, dt, row0 * x->out_f), in, x->W,
                                x->bias, (int)rows, x->in_f, x->out_f, x->r->c->act);
    else be->linear_forward(be, dt, out, in, x->W, x->bias, (int)rows, x->in_f, x->out_f);
}

void mc_linear_column_forward(const mc_layer_run_t *r, void *out, void *pre, const void *in,
                              const void *W, const void *bias, int in_f, int out_f)
{
    rows_ctx_t x = {
        .r = r, .out = out, .pre = pre, .W = W, .bias = bias, .in_f = in_f, .out_f = out_f};
    mc_tp_gather_rows(&r->tp, in, r->m->gath, r->NL, r->c->hidden, column_rows, &x);
}

static void row_rows(void *p, const void *unused, void *out, long row0, long rows)
{
    const rows_ctx_t *x = p;
    const mc_dtype_t dt = x->r->c->dt;
    x->r->be->linear_forward(x->r->be, dt, out, mc_celem(x->in, dt, row0 * x->in_f), x->W, x->bias,
                             (int)rows, x->in_f, x->out_f);
}

void *mc_linear_row_forward(const mc_layer_run_t *r, const void *in, const void *W,
                            const void *bias, int in_f)
{
    rows_ctx_t x = {.r = r, .in = in, .W = W, .bias = bias, .in_f = in_f, .out_f = r->c->hidden};
    /* m->dtmp_h is free in the forward */
    return mc_tp_rows_reduce_scatter(&r->tp, r->m->tmp_h, r->m->dtmp_h, r->NL, r->c->hidden,
                                     row_rows, &x);
}

/* The input gradient's rows (through the activation with pre), no weight gradient. */
static void dgrad_rows(void *p, const void *dy, void *unused, long row0, long rows)
{
    const rows_ctx_t *x = p;
    const mc_backend_t *be = x->r->be;
    const mc_dtype_t dt = x->r->c->dt, gdt = x->r->c->gdt;
    void *din = mc_elem(x->out, dt, row0 * x->in_f);
    if (x->pre)
        be->linear_backward_gelu(
            be, dt, gdt, din, NULL, NULL, dy, mc_celem(x->act, dt, row0 * x->in_f), x->W,
            mc_elem(x->pre, dt, row0 * x->in_f), (int)rows, x->in_f, x->out_f, x->r->c->act);
    else
        be->linear_backward(be, dt, gdt, din, NULL, NULL, dy, NULL, x->W, (int)rows, x->in_f,
                            x->out_f);
}

void mc_linear_row_backward(const mc_layer_run_t *r, void *din, void *dW, void *db, const void *dy,
                            const void *in, const void *W, void *pre, int in_f)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    const int N = r->N, H = c->hidden;
    if (!mc_tp_overlaps(&r->tp, r->tp.ov.ag)) {
        const void *dy_full = mc_tp_row_output_grad(&r->tp, dy, r->m->gath, r->NL);
        if (pre)
            be->linear_backward_gelu(be, c->dt, c->gdt, din, dW, db, dy_full, in, W, pre, N, in_f,
                                     H, c->act);
        else be->linear_backward(be, c->dt, c->gdt, din, dW, db, dy_full, in, W, N, in_f, H);
        return;
    }
    /* the output gradient gathers chunk by chunk beside the input-gradient GEMM; the weight
     * gradient then reads the whole sequence (one GEMM, as without the overlap) */
    rows_ctx_t x = {.r = r, .out = din, .pre = pre, .act = in, .W = W, .in_f = in_f, .out_f = H};
    const void *dy_full = mc_tp_gather_rows(&r->tp, dy, r->m->gath, r->NL, H, dgrad_rows, &x);
    be->linear_backward(be, c->dt, c->gdt, NULL, dW, db, dy_full, in, W, N, in_f, H);
}

void mc_linear_column_backward(const mc_layer_run_t *r, void *din, void *dW, void *db,
                               const void *dout, const void *in, const void *W, int in_f, int out_f)
{
    const mc_backend_t *be = r->be;
    const mc_gpt_config_t *c = r->c;
    const mc_tp_t *tp = &r->tp;
    mc_gpt_t *m = r->m;
    const int N = r->N;
    /* the input gradient over the whole sequence, before its sum over tp (m->tmp_h is free) */
    void *dfull = tp->sp ? m->tmp_h : din;
    const bool bulk_ag = mc_tp_overlaps(tp, tp->ov.bulk_dgrad),
               bulk_rs = mc_tp_overlaps(tp, tp->ov.bulk_wgrad);
    if (!bulk_ag && !bulk_rs) {
        be->linear_backward(be, c->dt, c->gdt, dfull, dW, db, dout,
                            mc_tp_column_input(tp, in, m->gath, r->NL), W, N, in_f, out_f);
        mc_tp_column_input_grad(tp, dfull, din, r->NL);
        return;
    }
    /* Megatron's bulk overlaps: the input's all-gather (the weight gradient reads it) beside the
     * input-gradient GEMM, then that gradient's reduce-scatter beside the weight-gradient GEMM */
    const mc_req_t ag = bulk_ag ? mc_tp_sp_gather_start(tp, in, m->gath, r->NL) : MC_REQ_DONE;
    be->linear_backward(be, c->dt, c->gdt, dfull, NULL, NULL, dout, NULL, W, N, in_f, out_f);
    if (bulk_ag) mc_tp_wait(tp, ag, MC_COLL_ALL_GATHER);
    else mc_tp_sp_gather(tp, in, m->gath, r->NL);
    const mc_req_t rs =
        bulk_rs ? mc_tp_sp_reduce_scatter_start(tp, dfull, din, r->NL) : MC_REQ_DONE;
    be->linear_backward(be, c->dt, c->gdt, NULL, dW, db, dout, m->gath, W, N, in_f, out_f);
    if (bulk_rs) mc_tp_wait(tp, rs, MC_COLL_REDUCE_SCATTER);
    else mc_tp_sp_reduce_scatter(tp, dfull, din, r->NL);
}
