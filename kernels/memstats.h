/* Device memory statistics for --log-memory-to-tensorboard: what torch.cuda.memory_stats()
 * reports to Megatron, counted over the backends' alloc and free (every backend's table calls
 * these). megatron-c has no caching allocator: every buffer is one allocation made at start-up
 * (DESIGN decision 1), so the bytes reserved are the bytes allocated. */
#ifndef MC_KERNELS_MEMSTATS_H
#define MC_KERNELS_MEMSTATS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t allocated_bytes;      /* "allocated_bytes.all.current" (and reserved_bytes) */
    uint64_t peak_allocated_bytes; /* "allocated_bytes.all.peak" */
    uint64_t allocations;          /* "allocation.all.current" */
} mc_memstats_t;

/* Thread-safe; p NULL is ignored. */
void mc_memstats_alloc(const void *p, size_t bytes);
void mc_memstats_free(const void *p);
void mc_memstats_get(mc_memstats_t *out);

#endif
