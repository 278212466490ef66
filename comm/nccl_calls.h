/* The NCCL calls of one collective (comm/comm_nccl.c's communication stream). */
#ifndef MC_COMM_NCCL_CALLS_H
#define MC_COMM_NCCL_CALLS_H
#ifdef MC_WITH_CUDA

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdint.h>

#include "comm/comm.h"

/* Enqueues o on stream s of comm (o's buffers are device memory; a barrier all-reduces
 * barrier_word, a device int that stays 0). Returns ncclSuccess, or the first error with the
 * call that made it in *call (an open NCCL group is closed first). */
ncclResult_t mc_nccl_calls(ncclComm_t comm, cudaStream_t s, int32_t *barrier_word,
                           const mc_coll_t *o, const char **call);

#endif
#endif
