/* Megatron-LM's `--ckpt-format torch_dist` (MEGATRON.md section 9;
 * ../shared/data/megatron-ref/torch_dist/FORMAT.md): the trainer's state as Megatron's sharded
 * state dict, saved as PyTorch Distributed Checkpoint files (torchfmt/dcp.h):
 *
 *   DIR/iter_{:07d}/common.pt      rank 0: args, iteration, scheduler, the optimizer's
 *                                  non-tensor part, content_metadata
 *                  /__R_{0,1}.distcp  every rank's chunks
 *                  /.metadata      rank 0: the index of every chunk
 *                  /metadata.json  rank 0, last: {"sharded_backend": "torch_dist", ...}
 *
 * Every tensor is stored whole and global (layers stacked, tensor-parallel pieces at their
 * offsets), so a checkpoint loads at any tp / pp / vpp / dp layout: each rank reads the boxes it
 * needs. The distributed optimizer's state is written in Megatron's default form,
 * dp_reshardable (its buckets), or with --dist-ckpt-optim-fully-reshardable in model space
 * (optimizer.state.{param,exp_avg,exp_avg_sq}.<key>), as the plain optimizer's is
 * (optimizer.state.{exp_avg,exp_avg_sq[,fp32_param]}.<key>). */
#ifndef MC_CKPT_DIST_H
#define MC_CKPT_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "torchfmt/dcp.h"
#include "trainer/trainer.h"

/* ---- the model's sharded tensors (ckpt/torchdist_shard.c) ---- */

/* One piece of a parameter: a box of a global tensor that is a contiguous run of the local
 * tensor (SwiGLU's fc1 has two per rank: its gate rows and its up rows). */
typedef struct {
    int param;     /* table index */
    char key[128]; /* checkpoint key: layers stacked, Transformer Engine's norm names */
    int ndim;      /* of the global tensor (a stacked layer's has a leading axis) */
    int64_t global[MC_DCP_MAX_DIMS];
    int64_t offsets[MC_DCP_MAX_DIMS];
    int64_t sizes[MC_DCP_MAX_DIMS];
    long start, numel; /* the run in the local tensor, in elements */
    bool main;         /* Megatron's replica_id is zero but for dp: this rank's copy is stored */
} mc_shard_t;

/* This rank's pieces, in parameter order. *out is malloc'ed. */
int mc_torchdist_shards(const mc_gpt_t *m, mc_shard_t **out, int *n);

/* The router's expert_bias buffer of local layer `local` (--moe-router-enable-expert-bias), as
 * a piece (param -1): fp32, [L, E] stacked or [E] per layer, replicated over tp. */
void mc_torchdist_expert_bias_shard(const mc_gpt_t *m, int local, mc_shard_t *s);

/* Megatron's index of the (tp, pp) domain of the distributed optimizer: its rank in the
 * model-parallel group. */
int mc_torchdist_domain(const mc_args_t *a, int tp, int pp);
/* The experts' optimizer's (expert parallelism): its rank in the expert tp x ep x pp group. */
int mc_torchdist_expert_domain(const mc_args_t *a, int etp, int ep, int pp);
/* "optimizer.distributed.dp_group_idx_<domain>.<what>", with "/shard_0_1" for an object (the
 * domain's ShardedObjects: optimizer, grad_scaler, per_bucket_numel[_unpadded]); chain >= 0:
 * with Megatron's chained optimizer's prefix "chained_<chain>." (expert parallelism: 0 the
 * dense parameters', 1 the experts'). */
void mc_torchdist_optim_key(char *buf, size_t n, int chain, int domain, const char *what,
                            bool object);
/* The key prefix of bucket `bucket` of buffer `chunk` (dp_reshardable), for a's types:
 * "...dp_group_idx_D.gbuf_idx_C.dtype_(torch.P, torch.G).bucket_idx_B"; ".param" etc. follow. */
void mc_torchdist_bucket_key(const mc_args_t *a, int chain, int domain, int chunk, int bucket,
                             char *buf, size_t n);

/* The ShardedObject key of rng_state. */
void mc_torchdist_rng_key(const mc_trainer_t *t, char *buf, size_t n);


/* ---- per-parameter optimizer state (ckpt/torchdist_state.c) ---- */

/* This rank's local parameters' fp32 state: v[0] the master weights, v[1] exp_avg, v[2]
 * exp_avg_sq, each p->numel floats per parameter (NULL for parameters the optimizer skips). */
typedef struct {
    int n;
    float *(*v)[3];
} mc_param_state_t;

/* Zeroed state for every parameter of m. */
void mc_param_state_alloc(mc_param_state_t *s, const mc_gpt_t *m);
void mc_param_state_free(mc_param_state_t *s);
/* Collective over dp with the distributed optimizer (a gather): the state on dp rank 0, an
 * empty one elsewhere. Without it: this rank's. */
void mc_param_state_get(mc_trainer_t *t, mc_param_state_t *s);
/* Puts s into the optimizer (each rank takes its shards) and the master weights into the
 * model. */
void mc_param_state_set(mc_trainer_t *t, const mc_param_state_t *s);

/* ---- save and load (ckpt/torchdist_save.c, ckpt/torchdist_load.c) ---- */

/* What one rank writes into the staging directory (built on the training thread). */
typedef struct mc_torchdist_job mc_torchdist_job_t;
mc_torchdist_job_t *mc_torchdist_prepare(mc_trainer_t *t, const char *staging);
/* Every object the job holds (for --async-save's snapshot). */
size_t mc_torchdist_job_objects(mc_torchdist_job_t *j, mc_pyobj_t ***objs);
/* Writes this rank's files (any thread, no communication); errors into err. */
void mc_torchdist_write(mc_torchdist_job_t *j, char *err, size_t n);
/* Collective: gathers every rank's records; rank 0 writes .metadata and metadata.json into the
 * staging directory (final: the directory it will be published as). Frees the job. Errors
 * into err (the caller agrees on them). */
void mc_torchdist_finish(mc_trainer_t *t, mc_torchdist_job_t *j, const char *final, char *err,
                         size_t n);
/* In-process saves (convert-checkpoint writes every rank's files itself): frees a written job,
 * appending its records to recs, ... */
void mc_torchdist_collect(mc_torchdist_job_t *j, mc_dcp_records_t *recs);
/* ... then .metadata (every record's index) and metadata.json (last) into staging. */
void mc_torchdist_write_index(const char *staging, const char *final, const mc_dcp_records_t *recs,
                              char *err, size_t n);
/* Rank 0's common.pt state dict, to amend before mc_torchdist_write (NULL on other ranks). */
mc_pyobj_t *mc_torchdist_job_common(mc_torchdist_job_t *j);

/* Whether DIR (an iteration directory) holds a torch_dist checkpoint (metadata.json). */
bool mc_torchdist_is_checkpoint(const char *iter_dir);
/* The checkpoint's keys and those this rank read (used[k] for keys[k]; the same keys on every
 * rank): what --dist-ckpt-strictness judges once every rank has loaded. */
typedef struct {
    size_t n;
    char **keys;
    uint8_t *used;
    bool foreign_rng; /* Megatron-LM's generator states: not usable, ignored (the caller warns) */
} mc_torchdist_usage_t;
void mc_torchdist_usage_free(mc_torchdist_usage_t *u);

/* Loads the torch_dist checkpoint in iter_dir into t (no communication: the caller agrees on
 * errors). u receives the keys it read. */
int mc_torchdist_load(mc_trainer_t *t, const char *iter_dir, bool release, mc_torchdist_usage_t *u,
                      char *err, size_t n);
/* Collective, after every rank loaded: the keys no rank read, logged or refused (err) as
 * --dist-ckpt-strictness says (assume_ok_unexpected and ignore_all: nothing). */
void mc_torchdist_strictness(mc_trainer_t *t, mc_torchdist_usage_t *u, char *err, size_t n);

#endif
