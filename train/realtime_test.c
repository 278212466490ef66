/* --test-mode's real-time test (see train/realtime_test.h). */
#include "train/realtime_test.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

int mc_realtime_compare(const unsigned char *all, size_t bytes, int group_size, int me,
                        int n_tensors, const long *numel, const char *const *names, mc_dtype_t dt,
                        const char *parallelism)
{
    const size_t es = mc_dtype_size(dt);
    const unsigned char *mine = all + bytes * (size_t)me;
    int differ = 0;
    for (int i = 0; i < group_size; i++) {
        size_t off = 0;
        for (int k = 0; k < n_tensors; off += (size_t)numel[k] * es, k++) {
            const unsigned char *src = all + bytes * (size_t)i + off, *tgt = mine + off;
            if (memcmp(src, tgt, (size_t)numel[k] * es) == 0) continue;
            double sum = 0; /* torch.norm(src - tgt) */
            for (long e = 0; e < numel[k]; e++) {
                const double d = (double)mc_load_f32(src, dt, e) - (double)mc_load_f32(tgt, dt, e);
                sum += d * d;
            }
            mc_warn("Discrepancy between %s in %s ranks %d and %d. Diff: %g", names[k], parallelism,
                    i, me, sqrt(sum));
            differ++;
        }
    }
    return differ;
}

/* The q/k layernorm parameters this rank holds, in the parameter table's order. */
static int qk_norm_params(const mc_gpt_t *m, int *idx)
{
    int n = 0;
    for (int i = 0; i < m->n_params; i++)
        if (strstr(m->params[i].name, ".q_layernorm.") ||
            strstr(m->params[i].name, ".k_layernorm."))
            idx[n++] = i;
    return n;
}

/* All-gathers the packed tensors over g and compares them; returns the pairs that differ. */
static int check_group(mc_trainer_t *t, mc_group_t *g, const unsigned char *mine, size_t bytes,
                       int n, const long *numel, const char *const *names, const char *par)
{
    if (g->size == 1) return 0;
    unsigned char *all = malloc(bytes * (size_t)g->size);
    if (!all) mc_fatal("out of host memory for --test-mode's check");
    mc_all_gather(t->comm, g, mine, all, bytes / sizeof(int64_t), MC_DT_I64);
    const int d =
        mc_realtime_compare(all, bytes, g->size, g->rank, n, numel, names, t->model.cfg.dt, par);
    free(all);
    return d;
}

void mc_realtime_tests(mc_trainer_t *t)
{
    const mc_args_t *a = t->args;
    if (!a->test_mode || !a->qk_layernorm) return;
    const mc_gpt_t *m = &t->model;
    const size_t es = mc_dtype_size(m->cfg.dt);
    int *idx = malloc(sizeof(int) * (size_t)(m->n_params + 1));
    long *numel = malloc(sizeof(long) * (size_t)(m->n_params + 1));
    const char **names = malloc(sizeof(char *) * (size_t)(m->n_params + 1));
    if (!idx || !numel || !names) mc_fatal("out of host memory for --test-mode's check");
    const int n = qk_norm_params(m, idx);
    size_t bytes = 0;
    for (int k = 0; k < n; k++) {
        numel[k] = m->params[idx[k]].numel;
        names[k] = m->params[idx[k]].name;
        bytes += (size_t)numel[k] * es;
    }
    bytes = (bytes + 7) / 8 * 8; /* gathered as int64 words */
    unsigned char *mine = calloc(bytes + 8, 1);
    if (!mine) mc_fatal("out of host memory for --test-mode's check");
    mc_ddp_finish_param_gather(&t->ddp); /* the forward's pre-hook waits for it too */
    for (size_t k = 0, off = 0; k < (size_t)n; off += (size_t)numel[k] * es, k++)
        m->be->memcpy_d2h(m->be, mine + off,
                          mc_elem(m->param_buf, m->cfg.dt, m->params[idx[k]].offset),
                          (size_t)numel[k] * es);
    int64_t differ = 0;
    if (n > 0) {
        differ += check_group(t, t->par.dp, mine, bytes, n, numel, names, "DP");
        differ += check_group(t, t->par.tp, mine, bytes, n, numel, names, "TP");
    }
    free(mine);
    free(idx);
    free(numel);
    free(names);
    mc_all_reduce(t->comm, t->comm->world, &differ, 1, MC_DT_I64, MC_OP_MAX);
    if (differ)
        mc_fatal_by(0,
                    "--test-mode: the q/k layernorm parameters differ across data- or "
                    "tensor-parallel ranks at iteration %lld (Megatron's real-time test)",
                    (long long)t->iteration);
}
