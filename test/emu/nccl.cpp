// NCCL on the emulated device: not emulated. Every communication call fails with
// ncclInvalidUsage and a message saying what to do instead (the emulated training runs use
// --distributed-backend mpi, which stages device buffers through host memory; the NCCL
// communicator's own logic is tested by test_comm_nccl over test/fake/fake_cuda.c).
#include <nccl.h>

namespace {
const char *const WHY = "NCCL is not emulated on the emulated CUDA device (test/emu): run with --distributed-backend mpi";
ncclResult_t refuse() { return ncclInvalidUsage; }
} // namespace

extern "C" {
const char *ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "no error" : WHY; }
const char *ncclGetLastError(ncclComm_t) { return WHY; }
ncclResult_t ncclGetVersion(int *version)
{
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *) { return refuse(); }
ncclResult_t ncclCommInitRank(ncclComm_t *, int, ncclUniqueId, int) { return refuse(); }
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t *) { return refuse(); }
ncclResult_t ncclCommDestroy(ncclComm_t) { return refuse(); }
ncclResult_t ncclCommAbort(ncclComm_t) { return refuse(); }
ncclResult_t ncclGroupStart() { return refuse(); }
ncclResult_t ncclGroupEnd() { return refuse(); }
ncclResult_t ncclAllReduce(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t)
{
    return refuse();
}
ncclResult_t ncclReduceScatter(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t)
{
    return refuse();
}
ncclResult_t ncclAllGather(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) { return refuse(); }
ncclResult_t ncclBroadcast(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) { return refuse(); }
ncclResult_t ncclSend(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) { return refuse(); }
ncclResult_t ncclRecv(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) { return refuse(); }
}
