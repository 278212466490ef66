/* Planning staged collectives (comm/staging.h). */
#include "comm/staging.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

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

/* ---- device buffers through pinned host memory ---- */

struct mc_pinned {
    void *p;
    size_t cap;
    bool busy;
};

/* A collective running on a pinned block: its regions go back to the device when it is waited. */
struct mc_staged {
    int64_t ticket;
    int block; /* index into the pool */
    mc_stage_region_t *r;
    int nr;
};

/* A free pinned block of at least `bytes`, the smallest that fits, or a new one. */
static int pool_get(mc_host_stage_t *s, const mc_devmem_t *dm, size_t bytes, const mc_coll_t *op)
{
    int best = -1;
    for (int i = 0; i < s->n_pool; i++)
        if (!s->pool[i].busy && s->pool[i].cap >= bytes &&
            (best < 0 || s->pool[i].cap < s->pool[best].cap))
            best = i;
    if (best < 0) {
        size_t cap = 4096;
        while (cap < bytes) cap *= 2;
        struct mc_pinned *p = realloc(s->pool, (size_t)(s->n_pool + 1) * sizeof(*p));
        void *block = p ? dm->host_alloc(dm->ctx, cap) : NULL;
        if (p) s->pool = p;
        if (!block)
            mc_fatal("out of pinned host memory staging a %zu-byte %s on the %s group", bytes,
                     mc_coll_name(op->kind), op->group->name);
        if (s->dm && s->dm != dm)
            mc_fatal("the communicator's device memory changed while collectives were staged");
        s->dm = dm;
        best = s->n_pool++;
        s->pool[best] = (struct mc_pinned){.p = block, .cap = cap};
    }
    s->pool[best].busy = true;
    return best;
}

/* Room for one more entry at the FIFO's end. */
static void fifo_room(mc_host_stage_t *s, const mc_coll_t *op)
{
    if (s->head + s->n < s->cap) return;
    if (s->head > 0) { /* reuse the consumed front */
        memmove(s->staged, s->staged + s->head, (size_t)s->n * sizeof(*s->staged));
        s->head = 0;
    }
    if (s->n < s->cap) return;
    int cap = s->cap ? 2 * s->cap : 16;
    struct mc_staged *p = realloc(s->staged, (size_t)cap * sizeof(*p));
    if (!p) mc_fatal("out of memory staging a %s", mc_coll_name(op->kind));
    s->staged = p, s->cap = cap;
}

bool mc_host_stage_begin(mc_host_stage_t *s, const mc_devmem_t *dm, const mc_coll_t *op,
                         mc_coll_t *on_stage, mc_p2p_t **p2p)
{
    int nr = op->kind == MC_COLL_P2P_BATCH ? op->n_p2p : 2;
    mc_stage_region_t *r = malloc((size_t)nr * sizeof(*r));
    if (!r) mc_fatal("out of memory staging a %s", mc_coll_name(op->kind));
    nr = mc_coll_regions(op, r);
    bool any = false;
    for (int k = 0; k < nr; k++) {
        r[k].staged = r[k].bytes > 0 && dm->is_device(dm->ctx, r[k].ptr);
        any |= r[k].staged;
    }
    if (!any) {
        free(r);
        return false;
    }
    int b = pool_get(s, dm, mc_stage_plan(r, nr), op);
    char *block = s->pool[b].p;
    for (int k = 0; k < nr; k++)
        if (r[k].staged && r[k].in) dm->d2h(dm->ctx, block + r[k].offset, r[k].ptr, r[k].bytes);
    *p2p = op->kind == MC_COLL_P2P_BATCH ? malloc((size_t)op->n_p2p * sizeof(**p2p)) : NULL;
    if (op->kind == MC_COLL_P2P_BATCH && !*p2p) mc_fatal("out of memory staging a p2p batch");
    mc_stage_apply(op, r, block, on_stage, *p2p);
    fifo_room(s, op);
    s->pending = &s->staged[s->head + s->n];
    *s->pending = (struct mc_staged){.block = b, .r = r, .nr = nr};
    return true;
}

void mc_host_stage_started(mc_host_stage_t *s, int64_t ticket)
{
    s->pending->ticket = ticket;
    s->pending = NULL;
    s->n++;
}

void mc_host_stage_finish(mc_host_stage_t *s, int64_t ticket)
{
    while (s->n > 0 && s->staged[s->head].ticket <= ticket) {
        struct mc_staged *e = &s->staged[s->head];
        const char *block = s->pool[e->block].p;
        for (int k = 0; k < e->nr; k++)
            if (e->r[k].staged && e->r[k].out)
                s->dm->h2d(s->dm->ctx, e->r[k].ptr, block + e->r[k].offset, e->r[k].bytes);
        s->pool[e->block].busy = false;
        free(e->r);
        s->head++, s->n--;
    }
    if (s->n == 0) s->head = 0;
}

void mc_host_stage_free(mc_host_stage_t *s)
{
    for (int i = 0; i < s->n_pool; i++) s->dm->host_free(s->dm->ctx, s->pool[i].p);
    free(s->pool);
    free(s->staged);
    memset(s, 0, sizeof(*s));
}
