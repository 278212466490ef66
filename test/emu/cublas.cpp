// cuBLAS's classic API for the emulated CUDA device: the calls kernels/cuda/moe_gemm.cu makes
// (cublasCreate, cublasDestroy, cublasSetStream, cublasGetStatusString and the grouped GEMM
// cublasGemmGroupedBatchedEx, and cublasGemmEx, its fallback for the types the grouped call does
// not take), linked instead of libcublas. Written from NVIDIA's documentation,
// never from the project's use of it, checking what it states and computing on the CPU, so a
// wrong operand, leading dimension or op in the caller is an error status or wrong numbers, as
// on a GPU.
//
// Sources. [H]: /usr/local/cuda/include/cublas_api.h of CUDA 13.0 (the declarations: which
// arrays are device memory, the int-sized and _64 forms). [D]: the cuBLAS documentation,
// "cublasGemmGroupedBatchedEx" and "cublas<t>gemmGroupedBatched" (cuBLAS 12.5 and later), and
// the "cuBLAS Datatypes Reference" for handles and streams. Rules implemented:
//  - For problem j of group i: C[j] = alpha[i] op(A[j]) op(B[j]) + beta[i] C[j], column-major;
//    op(A) is m x k, op(B) k x n, C m x n; group i holds group_size[i] problems sharing transa,
//    transb, m, n, k, lda, ldb, ldc, alpha and beta; the problems are numbered group by group
//    (problem_count = the sum of group_size) [D].
//  - transa_array, transb_array, m/n/k_array, lda/ldb/ldc_array, alpha_array, beta_array,
//    group_size: host arrays of group_count entries; Aarray, Barray, Carray: device arrays of
//    problem_count device pointers [D, H].
//  - CUBLAS_STATUS_INVALID_VALUE: group_count < 0, a group_size < 0, m, n or k < 0, transa or
//    transb not N, T or C, lda < max(1, m) for op N (max(1, k) otherwise), ldb < max(1, k) for op
//    N (max(1, n) otherwise), ldc < max(1, m) [D].
//  - Types of the grouped call [D, cublasGemmGroupedBatchedEx's table of Compute Type, Scale
//    Type, Atype/Btype and Ctype; R: the CUDA toolkit release notes, cuBLAS 12.5, "grouped batched
//    GEMMs with FP16 or BF16 inputs/outputs with the FP32 compute type"]: CUBLAS_COMPUTE_32F with A and B of CUDA_R_16BF and C of
//    CUDA_R_16BF, A and B of CUDA_R_16F and C of CUDA_R_16F, or all CUDA_R_32F;
//    CUBLAS_COMPUTE_32F_FAST_TF32 with all CUDA_R_32F; CUBLAS_COMPUTE_64F with all CUDA_R_64F;
//    alpha and beta float (double for 64F). The grouped call has no 16-bit A/B with a CUDA_R_32F
//    C (cublasGemmEx has): anything else is CUBLAS_STATUS_NOT_SUPPORTED, as the H200's cuBLAS
//    answered a bf16 x bf16 -> fp32 grouped call (docs/PERF.md, "First run on a GPU").
//  - cublasGemmEx [D, its table], the real types: CUBLAS_COMPUTE_32F (and _PEDANTIC) with A and B
//    of CUDA_R_16BF and C of CUDA_R_16BF or CUDA_R_32F, A and B of CUDA_R_16F and C of CUDA_R_16F
//    or CUDA_R_32F, or all CUDA_R_32F; CUBLAS_COMPUTE_32F_FAST_16F, _FAST_16BF and _FAST_TF32 with
//    all CUDA_R_32F; CUBLAS_COMPUTE_64F (and _PEDANTIC) with all CUDA_R_64F; alpha and beta float
//    (double for 64F). Else CUBLAS_STATUS_NOT_SUPPORTED; the documented rows this emulation does
//    not model (CUBLAS_COMPUTE_16F with half scalars, 8-bit integer A/B, complex types) are
//    NOT_SUPPORTED here too (emulation). algo: CUBLAS_GEMM_DEFAULT, CUBLAS_GEMM_ALGO0..23 or the
//    _TENSOR_OP ones [H]; the same results here.
//  - MC_EMU_CUBLAS_NO_GROUPED=1 makes the grouped call answer CUBLAS_STATUS_NOT_SUPPORTED for
//    every type, as a cuBLAS without it for a GPU would, so that a caller's fallback at run time
//    is tested (emulation).
//  - The FAST_* compute types are computed as CUBLAS_COMPUTE_32F here, more exactly than a GPU's
//    reduced-precision inputs (emulation).
//  - alpha and beta are host values here: the handle's pointer mode is host (the default) and the
//    emulation does not offer device mode (cublasSetPointerMode is not emulated) (emulation).
//  - A handle not from cublasCreate: CUBLAS_STATUS_NOT_INITIALIZED [D].
//  - The work runs on the handle's stream (cublasSetStream; the default stream until set) [D].
// The emulation computes in fp32 (double for 64F) with one rounding of each C element; every
// matrix must lie inside one device allocation (the pointers cuBLAS dereferences on the GPU).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <set>

#include "test/emu/emu.h"

struct cublasContext {
    cudaStream_t stream;
};

namespace {

std::set<const void *> g_live; // handles from cublasCreate, not destroyed

cublasStatus_t refuse(cublasStatus_t s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cublasStatus_t refuse(cublasStatus_t s, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    mc_emu::note("cuBLAS: %s (%s)", line, cublasGetStatusString(s));
    return s;
}

size_t type_size(cudaDataType_t t)
{
    switch (t) {
    case CUDA_R_64F: return 8;
    case CUDA_R_32F: return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    default: return 0;
    }
}

double load(cudaDataType_t t, const void *p, size_t i)
{
    switch (t) {
    case CUDA_R_64F: return ((const double *)p)[i];
    case CUDA_R_32F: return ((const float *)p)[i];
    case CUDA_R_16F: return __half2float(((const __half *)p)[i]);
    default: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    }
}

void store(cudaDataType_t t, void *p, size_t i, double v)
{
    switch (t) {
    case CUDA_R_64F: ((double *)p)[i] = v; break;
    case CUDA_R_32F: ((float *)p)[i] = (float)v; break;
    case CUDA_R_16F: ((__half *)p)[i] = __float2half_rn((float)v); break;
    default: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn((float)v); break;
    }
}

bool wide_compute(cublasComputeType_t ct) { return ct == CUBLAS_COMPUTE_64F || ct == CUBLAS_COMPUTE_64F_PEDANTIC; }

// The grouped call's table [D]: 16-bit A/B only with C of the same type.
bool grouped_types_ok(cudaDataType_t a, cudaDataType_t b, cudaDataType_t c, cublasComputeType_t ct)
{
    if (a != b) return false;
    if (ct == CUBLAS_COMPUTE_64F) return a == CUDA_R_64F && c == CUDA_R_64F;
    if (ct == CUBLAS_COMPUTE_32F_FAST_TF32) return a == CUDA_R_32F && c == CUDA_R_32F;
    if (ct != CUBLAS_COMPUTE_32F) return false;
    return (a == CUDA_R_32F || a == CUDA_R_16F || a == CUDA_R_16BF) && c == a;
}

// cublasGemmEx's table [D], its real-type rows with float or double scalars.
bool gemmex_types_ok(cudaDataType_t a, cudaDataType_t b, cudaDataType_t c, cublasComputeType_t ct)
{
    if (a != b) return false;
    if (wide_compute(ct)) return a == CUDA_R_64F && c == CUDA_R_64F;
    if (ct == CUBLAS_COMPUTE_32F_FAST_16F || ct == CUBLAS_COMPUTE_32F_FAST_16BF || ct == CUBLAS_COMPUTE_32F_FAST_TF32)
        return a == CUDA_R_32F && c == CUDA_R_32F;
    if (ct != CUBLAS_COMPUTE_32F && ct != CUBLAS_COMPUTE_32F_PEDANTIC) return false;
    if (a == CUDA_R_32F) return c == CUDA_R_32F;
    return (a == CUDA_R_16F || a == CUDA_R_16BF) && (c == a || c == CUDA_R_32F);
}

bool op_ok(cublasOperation_t o) { return o == CUBLAS_OP_N || o == CUBLAS_OP_T || o == CUBLAS_OP_C; }

// Elements a column-major rows x cols matrix with leading dimension ld spans.
size_t span(int rows, int cols, int ld) { return rows && cols ? (size_t)ld * (cols - 1) + rows : 0; }

// One problem, after the checks: C = alpha op(A) op(B) + beta C.
void gemm_one(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, double alpha,
              const void *A, cudaDataType_t at, int lda, const void *B, int ldb, double beta, void *C,
              cudaDataType_t ct, int ldc, bool wide)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double acc = 0;
            for (int l = 0; l < k; l++) {
                const double a = load(at, A, ta == CUBLAS_OP_N ? (size_t)l * lda + i : (size_t)i * lda + l);
                const double b = load(at, B, tb == CUBLAS_OP_N ? (size_t)j * ldb + l : (size_t)l * ldb + j);
                acc = wide ? acc + a * b : (double)(float)(acc + (double)(float)(a * b));
            }
            const size_t ci = (size_t)j * ldc + i;
            const double c = beta != 0 ? load(ct, C, ci) : 0.0;
            const double v = wide ? alpha * acc + beta * c : (double)(float)(alpha * acc + beta * c);
            store(ct, C, ci, v);
        }
}

} // namespace

extern "C" {

const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    if (!handle) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate: handle is NULL");
    cublasHandle_t h = new cublasContext{nullptr};
    g_live.insert(h);
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    if (!g_live.erase(handle)) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy: not a live handle");
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
    if (!g_live.count(handle)) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream: not a live handle");
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

// The host arrays' and the problem's values [D]: INVALID_VALUE as documented.
static cublasStatus_t check_group(const char *fn, int i, const cublasOperation_t ta[], const cublasOperation_t tb[], const int m[],
                                  const int n[], const int k[], const int lda[], const int ldb[], const int ldc[],
                                  const int group_size[])
{
    if (group_size[i] < 0) return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: group_size[%d] = %d", fn, i, group_size[i]);
    if (!op_ok(ta[i]) || !op_ok(tb[i]))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: group %d: transa %d transb %d", fn, i, ta[i], tb[i]);
    if (m[i] < 0 || n[i] < 0 || k[i] < 0)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: group %d: m %d n %d k %d", fn, i, m[i], n[i], k[i]);
    const int arows = ta[i] == CUBLAS_OP_N ? m[i] : k[i], brows = tb[i] == CUBLAS_OP_N ? k[i] : n[i];
    if (lda[i] < (arows > 1 ? arows : 1) || ldb[i] < (brows > 1 ? brows : 1) || ldc[i] < (m[i] > 1 ? m[i] : 1))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: group %d: lda %d ldb %d ldc %d for A %d rows, B %d, C %d", fn, i,
                      lda[i], ldb[i], ldc[i], arows, brows, m[i]);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmGroupedBatchedEx(cublasHandle_t handle, const cublasOperation_t transa_array[],
                                          const cublasOperation_t transb_array[], const int m_array[],
                                          const int n_array[], const int k_array[], const void *alpha_array,
                                          const void *const Aarray[], cudaDataType_t Atype, const int lda_array[],
                                          const void *const Barray[], cudaDataType_t Btype, const int ldb_array[],
                                          const void *beta_array, void *const Carray[], cudaDataType_t Ctype,
                                          const int ldc_array[], int group_count, const int group_size[],
                                          cublasComputeType_t computeType)
{
    const char *fn = "cublasGemmGroupedBatchedEx";
    if (!g_live.count(handle)) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "%s: not a live handle", fn);
    if (group_count < 0) return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: group_count %d", fn, group_count);
    const char *none = getenv("MC_EMU_CUBLAS_NO_GROUPED");
    if (none && strcmp(none, "1") == 0)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: MC_EMU_CUBLAS_NO_GROUPED=1 (emulation)", fn);
    if (!grouped_types_ok(Atype, Btype, Ctype, computeType))
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: A %d B %d C %d compute %d", fn, Atype, Btype, Ctype,
                      computeType);
    long problems = 0;
    for (int i = 0; i < group_count; i++) {
        cublasStatus_t s = check_group(fn, i, transa_array, transb_array, m_array, n_array, k_array, lda_array,
                                       ldb_array, ldc_array, group_size);
        if (s != CUBLAS_STATUS_SUCCESS) return s;
        problems += group_size[i];
    }
    if (problems == 0) return CUBLAS_STATUS_SUCCESS;
    // the pointer arrays are read on the device
    mc_emu::require_device(Aarray, (size_t)problems * sizeof(void *), "cublasGemmGroupedBatchedEx: Aarray");
    mc_emu::require_device(Barray, (size_t)problems * sizeof(void *), "cublasGemmGroupedBatchedEx: Barray");
    mc_emu::require_device(Carray, (size_t)problems * sizeof(void *), "cublasGemmGroupedBatchedEx: Carray");
    const bool wide = wide_compute(computeType);
    long p = 0;
    for (int i = 0; i < group_count; i++) {
        const double alpha = wide ? ((const double *)alpha_array)[i] : ((const float *)alpha_array)[i];
        const double beta = wide ? ((const double *)beta_array)[i] : ((const float *)beta_array)[i];
        const int m = m_array[i], n = n_array[i], k = k_array[i];
        const bool an = transa_array[i] == CUBLAS_OP_N, bn = transb_array[i] == CUBLAS_OP_N;
        for (int j = 0; j < group_size[i]; j++, p++) {
            const size_t as = span(an ? m : k, an ? k : m, lda_array[i]) * type_size(Atype);
            const size_t bs = span(bn ? k : n, bn ? n : k, ldb_array[i]) * type_size(Btype);
            const size_t cs = span(m, n, ldc_array[i]) * type_size(Ctype);
            if (as && k) mc_emu::require_device(Aarray[p], as, "cublasGemmGroupedBatchedEx: A");
            if (bs && k) mc_emu::require_device(Barray[p], bs, "cublasGemmGroupedBatchedEx: B");
            if (cs) mc_emu::require_device(Carray[p], cs, "cublasGemmGroupedBatchedEx: C");
            gemm_one(transa_array[i], transb_array[i], m, n, k, alpha, Aarray[p], Atype, lda_array[i], Barray[p],
                     ldb_array[i], beta, Carray[p], Ctype, ldc_array[i], wide);
        }
    }
    mc_emu::after_launch("cublasGemmGroupedBatchedEx");
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    const char *fn = "cublasGemmEx";
    if (!g_live.count(handle)) return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "%s: not a live handle", fn);
    if (!gemmex_types_ok(Atype, Btype, Ctype, computeType))
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: A %d B %d C %d compute %d", fn, Atype, Btype, Ctype,
                      computeType);
    const bool algo_ok = (algo >= CUBLAS_GEMM_DEFAULT && algo <= CUBLAS_GEMM_ALGO23) ||
                         (algo >= CUBLAS_GEMM_DEFAULT_TENSOR_OP && algo <= CUBLAS_GEMM_ALGO15_TENSOR_OP);
    if (!algo_ok) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: algo %d", fn, algo);
    if (!alpha || !beta) return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: alpha or beta is NULL", fn);
    const int one = 1;
    cublasStatus_t s = check_group(fn, 0, &transa, &transb, &m, &n, &k, &lda, &ldb, &ldc, &one);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    const bool wide = wide_compute(computeType), an = transa == CUBLAS_OP_N, bn = transb == CUBLAS_OP_N;
    const size_t as = span(an ? m : k, an ? k : m, lda) * type_size(Atype);
    const size_t bs = span(bn ? k : n, bn ? n : k, ldb) * type_size(Btype);
    if (as && k) mc_emu::require_device(A, as, "cublasGemmEx: A");
    if (bs && k) mc_emu::require_device(B, bs, "cublasGemmEx: B");
    mc_emu::require_device(C, span(m, n, ldc) * type_size(Ctype), "cublasGemmEx: C");
    const double al = wide ? *(const double *)alpha : *(const float *)alpha;
    const double be = wide ? *(const double *)beta : *(const float *)beta;
    gemm_one(transa, transb, m, n, k, al, A, Atype, lda, B, ldb, be, C, Ctype, ldc, wide);
    mc_emu::after_launch("cublasGemmEx");
    return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
