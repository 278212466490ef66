/* A training rank's start-up before its trainer (Megatron's initialize_megatron, and the device
 * it trains on): the backend (--device), the memory plan held against the memory this rank may
 * use, the communicator (--distributed-backend). What differs between backends comes from their
 * capability fields (kernels/backend.h), never from their names. */
#ifndef MC_TRAIN_SETUP_H
#define MC_TRAIN_SETUP_H

#include <stddef.h>

#include "comm/comm.h"
#include "config/args.h"
#include "kernels/backend.h"
#include "train/train.h"

/* The backend --device asks for on this rank (its local rank picks the GPU), with the attention
 * implementation chosen for the run's shapes (--attention-backend; mc_backend_attention_line
 * names it); why: the choice in words, for the start-up report. */
const mc_backend_t *mc_setup_backend(const mc_args_t *args, char *why, size_t n);

/* Ends the job with one line when the plan needs more than this rank may use: the node's physical
 * memory shared by its ranks on a backend in host memory (on the CPU an allocation beyond it may
 * "succeed" and be killed later), the GPU's free memory shared by the ranks that drive it on a
 * backend with device memory. */
void mc_setup_check_memory(const mc_args_t *args, const mc_memory_plan_t *plan,
                           const mc_backend_t *be);

/* One rank: the identity communicator. More: NCCL for a backend that has it with
 * --distributed-backend nccl, else MPI (host memory: a backend in host memory is that whichever
 * backend is asked for; device buffers are staged). mc_fatal ends the job through it from now
 * on. */
mc_comm_t *mc_setup_comm(const mc_args_t *args, const mc_backend_t *be);

/* How the collectives run, for the start-up report ("--distributed-backend mpi; device buffers
 * staged through pinned host memory"). */
const char *mc_setup_comm_note(const mc_args_t *args, const mc_backend_t *be);

#endif
