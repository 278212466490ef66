/* Megatron's tensor-parallel mappings over the model's tp group (model/tp.h). */
#include "model/tp.h"

static bool alone(const mc_tp_t *tp) { return tp->size <= 1; }

static size_t bytes(const mc_tp_t *tp, long n) { return (size_t)n * mc_dtype_size(tp->dt); }

void mc_tp_all_reduce(const mc_tp_t *tp, void *buf, long n, mc_dtype_t dt, mc_redop_t op)
{
    if (!alone(tp)) mc_all_reduce(tp->comm, tp->group, buf, (size_t)n, dt, op);
}

void mc_tp_copy_backward(const mc_tp_t *tp, void *grad, long n)
{
    mc_tp_all_reduce(tp, grad, n, tp->dt, MC_OP_SUM);
}

void mc_tp_reduce_forward(const mc_tp_t *tp, void *x, long n)
{
    mc_tp_all_reduce(tp, x, n, tp->dt, MC_OP_SUM);
}

void mc_tp_sp_gather(const mc_tp_t *tp, const void *local, void *full, long n_local)
{
    if (alone(tp)) tp->be->memcpy_d2d(tp->be, full, local, bytes(tp, n_local));
    else mc_all_gather(tp->comm, tp->group, local, full, (size_t)n_local, tp->dt);
}

void mc_tp_sp_reduce_scatter(const mc_tp_t *tp, const void *partial, void *local, long n_local)
{
    if (alone(tp)) tp->be->memcpy_d2d(tp->be, local, partial, bytes(tp, n_local));
    else mc_reduce_scatter(tp->comm, tp->group, partial, local, (size_t)n_local, tp->dt, MC_OP_SUM);
}

void mc_tp_sp_gather_backward(const mc_tp_t *tp, const void *dfull, void *dlocal, long n_local)
{
    mc_tp_sp_reduce_scatter(tp, dfull, dlocal, n_local);
}

void mc_tp_sp_scatter(const mc_tp_t *tp, const void *full, void *local, long n_local)
{
    const char *mine = (const char *)full + (size_t)tp->rank * bytes(tp, n_local);
    tp->be->memcpy_d2d(tp->be, local, mine, bytes(tp, n_local));
}

void mc_tp_gather_last(const mc_tp_t *tp, const void *local, void *full, void *work, long rows,
                       long cols)
{
    const long n = rows * cols;
    const size_t row = bytes(tp, cols);
    if (alone(tp)) {
        tp->be->memcpy_d2d(tp->be, full, local, bytes(tp, n));
        return;
    }
    /* the all-gather stacks the ranks' blocks; each row of full takes its piece from each */
    mc_all_gather(tp->comm, tp->group, local, work, (size_t)n, tp->dt);
    for (int r = 0; r < tp->size; r++)
        for (long i = 0; i < rows; i++)
            tp->be->memcpy_d2d(tp->be, (char *)full + (size_t)(i * tp->size + r) * row,
                               (const char *)work + (size_t)(r * rows + i) * row, row);
}

void mc_tp_scatter_last(const mc_tp_t *tp, const void *full, void *local, long rows, long cols)
{
    const size_t row = bytes(tp, cols);
    for (long i = 0; i < rows; i++)
        tp->be->memcpy_d2d(tp->be, (char *)local + (size_t)i * row,
                           (const char *)full + (size_t)(i * tp->size + tp->rank) * row, row);
}

const void *mc_tp_column_input(const mc_tp_t *tp, const void *local, void *full, long n_local)
{
    if (!tp->sp) return local;
    mc_tp_sp_gather(tp, local, full, n_local);
    return full;
}

void *mc_tp_column_input_grad(const mc_tp_t *tp, void *dfull, void *dlocal, long n_local)
{
    if (!tp->sp) {
        mc_tp_copy_backward(tp, dfull, n_local);
        return dfull;
    }
    mc_tp_sp_gather_backward(tp, dfull, dlocal, n_local);
    return dlocal;
}

void *mc_tp_row_output(const mc_tp_t *tp, void *partial, void *local, long n_local)
{
    if (!tp->sp) {
        mc_tp_reduce_forward(tp, partial, n_local);
        return partial;
    }
    mc_tp_sp_reduce_scatter(tp, partial, local, n_local);
    return local;
}

const void *mc_tp_row_output_grad(const mc_tp_t *tp, const void *dlocal, void *full, long n_local)
{
    return mc_tp_column_input(tp, dlocal, full, n_local);
}
