/* Staging: running a collective on copies of its buffers in another memory. comm_mpi.c stages
 * the cuda backend's device buffers through pinned host memory (DESIGN decision 3: several
 * ranks can then share one GPU). This file only plans; the communicator copies.
 *
 * A collective's buffers are regions: [send, recv] for a collective, one per operation for a p2p
 * batch. Regions that overlap (an in-place reduce-scatter's shard inside its send buffer, an
 * in-place all-gather's send block inside its receive buffer) keep their relative position in
 * the stage, so a collective in place stays in place on the stage. */
#ifndef MC_DIST_STAGING_H
#define MC_DIST_STAGING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"

typedef struct {
    void *ptr;    /* the caller's buffer */
    size_t bytes; /* 0: absent or unused */
    bool in,
        out; /* read by the collective (copied to the stage before), written (copied back after) */
    bool staged;   /* lives in memory the transport cannot use (the caller decides) */
    size_t offset; /* mc_stage_plan: where it lies in the stage */
} mc_stage_region_t;

enum { MC_STAGE_ALIGN = 256 };

/* The regions of op into r (room for 2 + op->n_p2p), in the order above; returns their number.
 * An all-reduce in place (send NULL or equal to recv) has an empty send region. */
int mc_coll_regions(const mc_coll_t *op, mc_stage_region_t *r);

/* Assigns offsets to the staged regions of nonzero size: separate ones start at multiples of
 * MC_STAGE_ALIGN, overlapping ones keep their relative position. Returns the stage's size in
 * bytes (0: nothing to stage). */
size_t mc_stage_plan(mc_stage_region_t *r, int n);

/* out = op on the stage `block`: every staged region's pointer replaced by block + offset (an
 * all-reduce in place stays in place). A p2p batch's operations are written to p2p (room for
 * op->n_p2p) and out->p2p points there. */
void mc_stage_apply(const mc_coll_t *op, const mc_stage_region_t *r, void *block, mc_coll_t *out,
                    mc_p2p_t *p2p);

/* Device buffers staged through pinned host memory (comm_mpi.c), caller's thread only: pinned
 * blocks, reused until mc_host_stage_free (pinning memory is slow), and the staged collectives
 * whose results go back to the device once they complete, oldest first. Zero-initialised. */
typedef struct {
    const mc_devmem_t *dm; /* the devmem that allocated the pool (frees it) */
    struct mc_pinned *pool;
    int n_pool;
    struct mc_staged *staged; /* FIFO: staged[head .. head + n) */
    int head, n, cap;
    struct mc_staged *pending; /* begun, its ticket not yet known */
} mc_host_stage_t;

/* When some of op's buffers are device memory of dm: copies them to a pinned block (after the
 * backend's compute so far: dm's d2h orders itself), writes op on the block into on_stage (a p2p
 * batch's operations into *p2p, malloc'ed: free it once on_stage is started) and returns true; the
 * caller starts on_stage and passes its ticket to mc_host_stage_started. False: nothing to stage. */
bool mc_host_stage_begin(mc_host_stage_t *s, const mc_devmem_t *dm, const mc_coll_t *op,
                         mc_coll_t *on_stage, mc_p2p_t **p2p);
void mc_host_stage_started(mc_host_stage_t *s, int64_t ticket);
/* Collectives up to ticket are complete: their staged results go back to the device, in the
 * order they were started. */
void mc_host_stage_finish(mc_host_stage_t *s, int64_t ticket);
void mc_host_stage_free(mc_host_stage_t *s);

#endif
