/* --async-save: checkpoint files written by a background thread while training continues.
 *
 * A save (ckpt/checkpoint.c) builds its state dicts on the training thread as a synchronous
 * save does. On the CPU backend those dicts point into the live parameters and Adam moments;
 * mc_ckpt_async_snapshot copies every such tensor into a host snapshot buffer allocated once at
 * start-up (the memory plan's "async checkpoint snapshot" line), so the next optimizer step can
 * change the originals. That copy is all the training loop waits for. A writer thread then
 * writes this rank's files and fsyncs them.
 *
 * Publishing (renaming the tree into place, then the tracker) needs every rank's files to be
 * durable, and collectives belong to the training thread. So, as Megatron's
 * maybe_finalize_async_save does, the training thread asks at the start of each iteration, in
 * one all-reduce, whether every rank's writer has finished (non-blocking finalize); when all
 * have, the save is published there. The next save and the end of training wait for the writer
 * instead (blocking finalize). Until it is published a checkpoint stays in its temporary tree,
 * so a job killed during an asynchronous save still leaves the previous one loadable.
 *
 * Megatron offers --async-save only for its distributed formats (torch_dist); megatron-c offers
 * it for the legacy torch layout it writes. One save is in flight at a time. */
#ifndef MC_CKPT_ASYNC_H
#define MC_CKPT_ASYNC_H

#include <stdbool.h>
#include <stddef.h>

#include "torchfmt/pyobj.h"
#include "comm/comm.h"

typedef struct mc_ckpt_async mc_ckpt_async_t;

/* The bytes of obj that live in memory it does not own (storages made by mc_py_storage_wrap):
 * what a snapshot of it copies. */
size_t mc_ckpt_borrowed_bytes(const mc_pyobj_t *obj);

/* A writer with a snapshot buffer of snapshot_bytes (0: none). NULL when out of memory. */
mc_ckpt_async_t *mc_ckpt_async_new(size_t snapshot_bytes);
/* Waits for a write in flight (its job is dropped), then frees. NULL is fine. */
void mc_ckpt_async_free(mc_ckpt_async_t *a);

/* Makes objs[0..n) independent of training memory: every borrowed storage's bytes are copied
 * into the snapshot buffer (from its start: the previous write must have finished) and the
 * storage points there. Returns 0, or -1 with err when the buffer is too small. */
int mc_ckpt_async_snapshot(mc_ckpt_async_t *a, mc_pyobj_t *const *objs, int n, char *err,
                           size_t errn);

/* Runs write(job) on a new thread. The job, and the objects it holds, then belong to that
 * thread until mc_ckpt_async_finish hands the job back. Returns 0, or -1 with err. */
int mc_ckpt_async_start(mc_ckpt_async_t *a, void (*write)(void *job), void *job, char *err,
                        size_t errn);

/* Whether a write was started and not yet handed back. */
bool mc_ckpt_async_pending(const mc_ckpt_async_t *a);

/* With a write pending (on every rank, as saves are collective): non-blocking, one all-reduce
 * over the world tells whether every rank's writer has finished; blocking, waits for this
 * rank's writer (no collective). Returns the job once its writer is joined, else NULL. */
void *mc_ckpt_async_finish(mc_ckpt_async_t *a, mc_comm_t *comm, bool blocking);

#endif
