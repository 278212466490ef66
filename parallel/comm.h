/* Collectives behind one interface (DESIGN decision 3). This issue ships the single-rank
 * implementation; MPI and NCCL implementations fill the same table. Buffers are the backend's
 * device pointers (host memory on the CPU backend). */
#ifndef MC_PARALLEL_COMM_H
#define MC_PARALLEL_COMM_H

#include <stddef.h>

typedef enum { MC_DT_F32, MC_DT_F64, MC_DT_I64 } mc_dtype_t;
typedef enum { MC_OP_SUM, MC_OP_MAX } mc_redop_t;

typedef struct mc_group mc_group_t; /* a communicator over a subset of ranks */

typedef struct mc_comm {
    const char *name;
    int rank, size;
    mc_group_t *world;
    /* In place. */
    void (*all_reduce)(struct mc_comm *c, mc_group_t *g, void *buf, size_t count, mc_dtype_t dt,
                       mc_redop_t op);
    void (*barrier)(struct mc_comm *c, mc_group_t *g);
    void (*abort)(struct mc_comm *c, int code);
    void (*finalize)(struct mc_comm *c);
    void *impl;
} mc_comm_t;

/* The single-rank communicator: every collective is the identity. */
mc_comm_t *mc_comm_single(void);

#endif
