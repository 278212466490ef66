/* Layout-invariant initialisation (DESIGN decision 6): element i of a parameter's full,
 * unsharded tensor is a function of (seed, parameter name, i) only, so every tp/pp/dp layout
 * initialises the same model and a rank can fill just its shard. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "kernels/philox.h"
#include "model/gpt.h"

static uint32_t fnv1a32(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* Box-Muller on the four words of one Philox block: words (0,1) give normals 0 and 1,
 * words (2,3) give normals 2 and 3. Computed in double so the result does not depend on the
 * compiler's float contraction choices. */
static void normals4(uint64_t block, uint32_t k0, uint32_t k1, double out[4])
{
    mc_philox_ctr_t c = {{(uint32_t)block, (uint32_t)(block >> 32), MC_PHILOX_TAG_INIT, 0}};
    mc_philox_ctr_t r = mc_philox4x32_10(c, k0, k1);
    for (int i = 0; i < 4; i += 2) {
        double u1 = ((double)r.v[i] + 0.5) * (1.0 / 4294967296.0); /* (0, 1): log is finite */
        double u2 = (double)r.v[i + 1] * (1.0 / 4294967296.0);
        double rad = sqrt(-2.0 * log(u1));
        out[i] = rad * cos(2.0 * M_PI * u2);
        out[i + 1] = rad * sin(2.0 * M_PI * u2);
    }
}

void mc_init_normal(float *dst, uint64_t seed, const char *name, long start, long count, float std)
{
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32) ^ fnv1a32(name);
    double z[4];
    uint64_t cached = UINT64_MAX;
    for (long i = 0; i < count; i++) {
        uint64_t e = (uint64_t)(start + i);
        if (e >> 2 != cached) {
            cached = e >> 2;
            normals4(cached, k0, k1, z);
        }
        dst[i] = (float)(z[e & 3] * (double)std);
    }
}

void mc_gpt_init_params(mc_gpt_t *m)
{
    float *host = malloc((size_t)m->n_elems * sizeof(float));
    if (!host) mc_fatal("out of host memory initialising parameters");
    memset(host, 0, (size_t)m->n_elems * sizeof(float));
    for (int i = 0; i < m->n_params; i++) {
        const mc_param_t *p = &m->params[i];
        float *d = host + p->offset;
        if (p->init_std <= 0) {
            for (long j = 0; j < p->numel; j++) d[j] = p->init_value;
            continue;
        }
        /* this rank's slice of the full tensor: whole, a block of rows, or a block of columns
         * of every row */
        const long cols = p->ndim == 2 ? (long)p->shape[1] : 1;
        const int r = p->shard_rank;
        if (p->split == MC_SPLIT_COLS) {
            const long lc = (long)p->local[1];
            for (long i = 0; i < p->local[0]; i++)
                mc_init_normal(d + i * lc, m->cfg.seed, p->name, i * cols + r * lc, lc,
                               p->init_std);
        } else if (p->split == MC_SPLIT_ROWS_GLU) { /* its rows of each half */
            for (long i = 0; i < p->local[0]; i++)
                mc_init_normal(d + i * cols, m->cfg.seed, p->name,
                               (long)mc_param_full_row(p, r, i) * cols, cols, p->init_std);
        } else {
            long start = p->split == MC_SPLIT_ROWS ? r * (long)p->local[0] * cols : 0;
            mc_init_normal(d, m->cfg.seed, p->name, start, p->numel, p->init_std);
        }
    }
    /* 16-bit models hold the init rounded to their type, as Megatron initialises params_dtype
     * tensors (the fp32 master copies are made from these values) */
    if (m->cfg.dt != MC_DT_F32) mc_convert(host, m->cfg.dt, host, MC_DT_F32, m->n_elems);
    m->be->memcpy_h2d(m->be, m->param_buf, host, (size_t)m->n_elems * mc_dtype_size(m->cfg.dt));
    free(host);
}
