/* Device memory statistics: a table from pointer to size, so a free knows what it returns. */
#include "kernels/memstats.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/error.h"

typedef struct {
    const void *p;
    size_t bytes;
} block_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static block_t *g_blocks; /* unordered: allocations are few (the plan's buffers) */
static size_t g_n, g_cap;
static mc_memstats_t g_stats;

void mc_memstats_alloc(const void *p, size_t bytes)
{
    if (!p) return;
    pthread_mutex_lock(&g_mu);
    if (g_n == g_cap) {
        size_t cap = g_cap ? 2 * g_cap : 256;
        block_t *b = realloc(g_blocks, cap * sizeof(*b));
        if (!b) mc_fatal("out of host memory");
        g_blocks = b, g_cap = cap;
    }
    g_blocks[g_n++] = (block_t){p, bytes};
    g_stats.allocated_bytes += bytes;
    g_stats.allocations++;
    if (g_stats.allocated_bytes > g_stats.peak_allocated_bytes)
        g_stats.peak_allocated_bytes = g_stats.allocated_bytes;
    pthread_mutex_unlock(&g_mu);
}

void mc_memstats_free(const void *p)
{
    if (!p) return;
    pthread_mutex_lock(&g_mu);
    for (size_t i = g_n; i-- > 0;) /* the newest first: buffers are freed in reverse */
        if (g_blocks[i].p == p) {
            g_stats.allocated_bytes -= g_blocks[i].bytes;
            g_stats.allocations--;
            g_blocks[i] = g_blocks[--g_n];
            break;
        }
    pthread_mutex_unlock(&g_mu);
}

void mc_memstats_get(mc_memstats_t *out)
{
    pthread_mutex_lock(&g_mu);
    *out = g_stats;
    pthread_mutex_unlock(&g_mu);
}
