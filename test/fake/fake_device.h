/* What test/mpi/test_comm_nccl.c needs of the emulated device (test/fake/fake_cuda.c) besides
 * the CUDA and NCCL calls themselves. */
#ifndef MC_TEST_FAKE_DEVICE_H
#define MC_TEST_FAKE_DEVICE_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "kernels/backend.h"

/* Starts the emulation (MPI_Init_thread; after mc_runtime_init) and returns a "cuda" backend
 * whose compute stream is an emulated stream. */
const mc_backend_t *fake_backend(void);
void fake_finalize(void);

/* Device memory is mapped PROT_NONE: the host reads and writes it through its shadow. */
void *fake_shadow(const void *device_ptr);
void *fake_device_alloc(size_t bytes);

/* Waits until everything enqueued on the stream ran (cudaStreamSynchronize). */
void fake_stream_synchronize(cudaStream_t s);
/* Enqueues a pause of `seconds` on the stream (a slow kernel). */
void fake_stream_delay(cudaStream_t s, double seconds);
/* Enqueues a copy (any direction) on the stream. */
void fake_stream_copy(cudaStream_t s, void *dst, const void *src, size_t bytes);

/* From now on every communicator reports ncclRemoteError to ncclCommGetAsyncError. */
void fake_nccl_fail_async(void);

#endif
