/* Weight hashes across data-parallel replicas (see train/weight_hash.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "data/sha256.h"
#include "train/weight_hash.h"

enum { DIGEST = 32 };

/* This rank's digest of each parameter tensor into out[i * DIGEST]. Megatron hashes
 * param.float(); the stored values are hashed here, which is equal exactly when those are. */
static void hash_params(const mc_trainer_t *t, uint8_t *out)
{
    const mc_gpt_t *m = &t->model;
    const size_t es = mc_dtype_size(m->cfg.dt);
    long most = 1;
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].numel > most) most = m->params[i].numel;
    uint8_t *host = malloc((size_t)most * es);
    if (!host) mc_fatal("out of host memory hashing the parameters");
    for (int i = 0; i < m->n_params; i++) {
        const mc_param_t *p = &m->params[i];
        m->be->memcpy_d2h(m->be, host, mc_elem(m->param_buf, m->cfg.dt, p->offset),
                          (size_t)p->numel * es);
        mc_sha256_t c;
        mc_sha256_init(&c);
        mc_sha256_update(&c, host, (size_t)p->numel * es);
        mc_sha256_final(&c, out + (size_t)i * DIGEST);
    }
    free(host);
}

/* The model chunk (virtual pipeline stage) holding parameter i. */
static int chunk_of(const mc_gpt_t *m, int i)
{
    for (int c = 0; c < m->cfg.n_chunks; c++) {
        int first, n;
        mc_gpt_chunk_params(m, c, &first, &n);
        if (i >= first && i < first + n) return c;
    }
    return 0;
}

void mc_check_weight_hashes(mc_trainer_t *t)
{
    const mc_gpt_t *m = &t->model;
    /* over dp x cp: Megatron's check covers the dp replicas; the cp ranks of a replica hold the
     * same weights too */
    mc_group_t *dp = t->par.dp_cp;
    const size_t bytes = (size_t)m->n_params * DIGEST;
    /* the distributed optimizer's gather of the updated parameters may still be in flight
     * (Megatron disables the forward pre-hook with param_sync for the check) */
    mc_ddp_finish_param_gather(&t->ddp);
    uint8_t *all = malloc(bytes * (size_t)dp->size + 1), *mine = malloc(bytes + 1);
    if (!all || !mine) mc_fatal("out of host memory hashing the parameters");
    hash_params(t, mine);
    mc_all_gather(t->comm, dp, mine, all, bytes / sizeof(int64_t), MC_DT_I64);
    int64_t differ = 0; /* cross_check: this rank's hashes differ from some replica's */
    for (int r = 0; r < dp->size; r++) differ |= memcmp(mine, all + bytes * (size_t)r, bytes) != 0;
    for (int i = 0; i < m->n_params; i++) /* Megatron's log names them against dp rank 0 */
        if (memcmp(mine + (size_t)i * DIGEST, all + (size_t)i * DIGEST, DIGEST) != 0)
            mc_warn("[Rank %d] Hash not matching for %s in model chunk%d", t->par.rank,
                    m->params[i].name, chunk_of(m, i));
    free(all);
    free(mine);
    mc_all_reduce(t->comm, t->comm->world, &differ, 1, MC_DT_I64, MC_OP_MAX);
    if (differ)
        mc_fatal_by(0, "Parameter hashes not matching across DP replicas (after %lld iterations)",
                    (long long)t->iteration);
    mc_barrier(t->comm, t->comm->world);
    if (t->par.rank == t->par.last_rank) {
        printf(">>> Weight hashes match after %lld iterations...\n", (long long)t->iteration);
        fflush(stdout);
    }
}
