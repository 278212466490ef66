#include "optim/distopt.h"

#include <stdlib.h>

#include "base/error.h"

/* Expert buckets are sharded over edp (edp_rank), the others over dp. */
static void segments(const mc_gpt_t *m, const mc_grad_layout_t *l, int dp, int dp_rank, int edp,
                     int edp_rank, mc_opt_seg_t **segs, int *n, long *state_len)
{
    /* each parameter meets at most one shard per bucket it lies in: n_params + n_buckets bounds it */
    int cap = m->n_params + l->n_buckets + 1;
    *segs = calloc((size_t)cap, sizeof(mc_opt_seg_t));
    if (!*segs) mc_fatal("out of host memory");
    int k = 0;
    long state = 0;
    for (int b = 0; b < l->n_buckets; b++) {
        const mc_bucket_t *bk = &l->buckets[b];
        long lo, hi;
        if (bk->expert) mc_bucket_shard(bk, edp, edp_rank, &lo, &hi);
        else mc_bucket_shard(bk, dp, dp_rank, &lo, &hi);
        /* parameters in buffer order: the bucket holds table indices hi-1 down to lo */
        for (int i = bk->param_hi - 1; i >= bk->param_lo; i--) {
            const mc_param_t *p = &m->params[i];
            long a = p->offset > lo ? p->offset : lo;
            long e = p->offset + p->numel < hi ? p->offset + p->numel : hi;
            if (a >= e) continue;
            if (k == cap) mc_fatal("internal error: too many optimizer segments");
            (*segs)[k++] =
                (mc_opt_seg_t){.off = a, .state_off = state + (a - lo), .len = e - a, .param = i};
        }
        state += hi - lo;
    }
    *n = k;
    *state_len = state;
}

void mc_distopt_segments(const mc_gpt_t *m, const mc_grad_layout_t *l, int dp, int dp_rank,
                         mc_opt_seg_t **segs, int *n, long *state_len)
{
    segments(m, l, dp, dp_rank, dp, dp_rank, segs, n, state_len);
}

void mc_distopt_segments_ddp(const mc_gpt_t *m, const mc_ddp_t *d, mc_opt_seg_t **segs, int *n,
                             long *state_len)
{
    segments(m, &d->layout, d->dp, d->dp_rank, d->edp, d->edp_rank, segs, n, state_len);
}
