/* Force-included (-include) into comm/comm_nccl.c, test/fake/fake_cuda.c and
 * test/mpi/test_comm_nccl.c: renames the CUDA runtime and NCCL calls of comm_nccl.c to the
 * emulation in fake_cuda.c. Being first, the renames also apply to the declarations in the CUDA
 * and NCCL headers, so the fakes are declared with the real types; nothing else of the program
 * is affected (the real libraries keep their names). */
#ifndef MC_TEST_FAKE_CUDA_H
#define MC_TEST_FAKE_CUDA_H

#define cudaDeviceGetPCIBusId     fake_cudaDeviceGetPCIBusId
#define cudaEventCreateWithFlags  fake_cudaEventCreateWithFlags
#define cudaEventDestroy          fake_cudaEventDestroy
#define cudaEventQuery            fake_cudaEventQuery
#define cudaEventRecord           fake_cudaEventRecord
#define cudaFree                  fake_cudaFree
#define cudaFreeHost              fake_cudaFreeHost
#define cudaGetErrorString        fake_cudaGetErrorString
#define cudaGetLastError          fake_cudaGetLastError
#define cudaMalloc                fake_cudaMalloc
#define cudaMallocHost            fake_cudaMallocHost
#define cudaMemcpyAsync           fake_cudaMemcpyAsync
#define cudaMemset                fake_cudaMemset
#define cudaPointerGetAttributes  fake_cudaPointerGetAttributes
#define cudaSetDevice             fake_cudaSetDevice
#define cudaStreamCreateWithFlags fake_cudaStreamCreateWithFlags
#define cudaStreamDestroy         fake_cudaStreamDestroy
#define cudaStreamWaitEvent       fake_cudaStreamWaitEvent
#define ncclAllGather             fake_ncclAllGather
#define ncclAllReduce             fake_ncclAllReduce
#define ncclBroadcast             fake_ncclBroadcast
#define ncclCommAbort             fake_ncclCommAbort
#define ncclCommDestroy           fake_ncclCommDestroy
#define ncclCommGetAsyncError     fake_ncclCommGetAsyncError
#define ncclCommInitRank          fake_ncclCommInitRank
#define ncclGetErrorString        fake_ncclGetErrorString
#define ncclGetLastError          fake_ncclGetLastError
#define ncclGetUniqueId           fake_ncclGetUniqueId
#define ncclGroupEnd              fake_ncclGroupEnd
#define ncclGroupStart            fake_ncclGroupStart
#define ncclRecv                  fake_ncclRecv
#define ncclReduceScatter         fake_ncclReduceScatter
#define ncclSend                  fake_ncclSend
#define mc_cuda_backend_device    fake_mc_cuda_backend_device
#define mc_cuda_backend_stream    fake_mc_cuda_backend_stream

#endif
