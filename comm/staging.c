/* Planning staged collectives (comm/staging.h). */
#include "comm/staging.h"

#include <stdint.h>
#include <string.h>

static mc_stage_region_t region(const void *p, size_t bytes, bool in, bool out)
{
    return (mc_stage_region_t){.ptr = (void *)p, .bytes = p ? bytes : 0, .in = in, .out = out};
}

int mc_coll_regions(const mc_coll_t *o, mc_stage_region_t *r)
{
    if (o->kind == MC_COLL_P2P_BATCH) {
        for (int k = 0; k < o->n_p2p; k++) {
            const mc_p2p_t *p = &o->p2p[k];
            r[k] = region(p->buf, p->count * mc_dtype_size(p->dt), p->is_send, !p->is_send);
        }
        return o->n_p2p > 0 ? o->n_p2p : 0;
    }
    size_t bytes = o->count * mc_dtype_size(o->dt),
           all = bytes * (size_t)(o->group ? o->group->size : 1);
    switch (o->kind) {
    case MC_COLL_ALL_REDUCE:
        if (o->send && o->send != o->recv) {
            r[0] = region(o->send, bytes, true, false);
            r[1] = region(o->recv, bytes, false, true);
        } else {
            r[0] = region(NULL, 0, false, false);
            r[1] = region(o->recv, bytes, true, true);
        }
        break;
    case MC_COLL_REDUCE_SCATTER:
        r[0] = region(o->send, all, true, false);
        r[1] = region(o->recv, bytes, false, true);
        break;
    case MC_COLL_ALL_GATHER:
        r[0] = region(o->send, bytes, true, false);
        r[1] = region(o->recv, all, false, true);
        break;
    case MC_COLL_ALL_TO_ALL_V: {
        int n = o->group ? o->group->size : 1;
        size_t es = mc_dtype_size(o->dt);
        r[0] = region(o->send, mc_a2av_extent(o->send_counts, o->send_displs, n) * es, true, false);
        /* with displacements the gaps between blocks keep what they held: copied in too */
        r[1] = region(o->recv, mc_a2av_extent(o->recv_counts, o->recv_displs, n) * es,
                      o->recv_displs != NULL, true);
        break;
    }
    case MC_COLL_BROADCAST: /* the root's data goes in, everyone's comes out */
        r[0] = region(NULL, 0, false, false);
        r[1] = region(o->recv, bytes, true, true);
        break;
    default:
        r[0] = region(NULL, 0, false, false);
        r[1] = region(NULL, 0, false, false);
        break;
    }
    return 2;
}

static size_t align_up(size_t x)
{
    return (x + MC_STAGE_ALIGN - 1) / MC_STAGE_ALIGN * MC_STAGE_ALIGN;
}

size_t mc_stage_plan(mc_stage_region_t *r, int n)
{
    /* the staged regions by address (insertion sort: a handful of regions) */
    int idx[n > 0 ? n : 1], m = 0;
    for (int k = 0; k < n; k++) {
        r[k].offset = 0;
        if (!r[k].staged || !r[k].bytes) continue;
        int j = m++;
        while (j > 0 && (uintptr_t)r[idx[j - 1]].ptr > (uintptr_t)r[k].ptr)
            idx[j] = idx[j - 1], j--;
        idx[j] = k;
    }
    size_t total = 0;
    uintptr_t lo = 0, hi = 0; /* the current cluster of overlapping regions */
    size_t base = 0;
    for (int j = 0; j < m; j++) {
        mc_stage_region_t *x = &r[idx[j]];
        uintptr_t a = (uintptr_t)x->ptr, b = a + x->bytes;
        if (j == 0 || a >= hi) { /* a new cluster after the last one */
            if (j > 0) total = base + (size_t)(hi - lo);
            base = align_up(total);
            lo = a, hi = b;
        } else if (b > hi) {
            hi = b;
        }
        x->offset = base + (size_t)(a - lo);
    }
    if (m > 0) total = base + (size_t)(hi - lo);
    return total;
}

static void *on_stage(const mc_stage_region_t *x, void *block, void *orig)
{
    return x->staged && x->bytes ? (char *)block + x->offset : orig;
}

void mc_stage_apply(const mc_coll_t *op, const mc_stage_region_t *r, void *block, mc_coll_t *out,
                    mc_p2p_t *p2p)
{
    *out = *op;
    if (op->kind == MC_COLL_P2P_BATCH) {
        for (int k = 0; k < op->n_p2p; k++) {
            p2p[k] = op->p2p[k];
            p2p[k].buf = on_stage(&r[k], block, op->p2p[k].buf);
        }
        out->p2p = op->n_p2p > 0 ? p2p : op->p2p;
        return;
    }
    out->recv = on_stage(&r[1], block, op->recv);
    if (op->kind == MC_COLL_ALL_REDUCE && op->send == op->recv)
        out->send = op->send ? out->recv : NULL;
    else out->send = on_stage(&r[0], block, (void *)op->send);
}
