// GEMMs through cuBLASLt: the table's fp32 gemm, and mc_cuda_matmul, the one entry the linear
// layer uses for every precision (fp32, bf16, fp16 operands; fp32, bf16 or fp16 output).
//
// Precision: the compute type is always CUBLAS_COMPUTE_32F: exact fp32 arithmetic for fp32
// operands (no TF32: the table's fp32 results are compared with OpenBLAS to fp32 summation
// error), fp32 accumulation for 16-bit operands, one rounding of the output (alpha * acc +
// beta * C + bias is formed in fp32, then stored in D's type; split-K algorithms only with fp32
// partial sums, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE).
//
// Plans: descriptors, layouts and the algorithm are kept per shape, type, epilogue and pointer
// alignment (a small cache; the shapes of a training run repeat every micro-batch).
// Algorithm: the heuristic's first GEMM_CANDIDATES (8) are timed at a plan's first use, each run
// once to warm up and once under CUDA events, until GEMM_TUNE_MS (50 ms) of device time is spent
// on the shape; the fastest is kept (gemm_tune.h reports the choices). The runs write the call's
// own outputs when the call overwrites them (beta = 0); an accumulating call (beta != 0) is timed
// with beta = 0 into the backend's scratch when its output fits there, else keeps the
// heuristic's first. When cuBLASLt offers no algorithm for a shape, a plain kernel of this file
// computes it (correct, slow: a warning names the shape, once; the environment variable
// MC_CUDA_GEMM=fallback forces it, to compare the two on a GPU). MC_CUDA_GEMM=untimed keeps the
// heuristic's first algorithm (the op tests of many shapes, on the emulated device).
#include <cublasLt.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm_map.h"
#include "kernels/cuda/gemm_tune.h"

extern "C" {
#include "base/error.h"
#include "config/env.h"
}

#define MC_CUBLAS_CHECK(call, what_fmt, ...)                                                       \
    do {                                                                                           \
        cublasStatus_t mc_s_ = (call);                                                             \
        if (mc_s_ != CUBLAS_STATUS_SUCCESS)                                                        \
            mc_fatal("cuBLASLt error in %s (%s:%d): %s; " what_fmt, #call, __FILE__, __LINE__,     \
                     cublasLtGetStatusString(mc_s_), __VA_ARGS__);                                 \
    } while (0)

// 32 MiB: what cuBLAS documents for Hopper's kernels (split-K and stream-K use it).
enum { GEMM_WORKSPACE_BYTES = 32 << 20 };

int mc_cuda_gemm_init(mc_cuda_t *c, char *err, size_t n)
{
    cublasLtHandle_t h;
    cublasStatus_t s = cublasLtCreate(&h);
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, n, "CUDA device %d: cannot start cuBLASLt: %s", c->device,
                 cublasLtGetStatusString(s));
        return -1;
    }
    cudaError_t e = cudaMalloc(&c->gemm_workspace, GEMM_WORKSPACE_BYTES);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        cublasLtDestroy(h);
        snprintf(err, n, "CUDA device %d: cannot allocate the cuBLASLt workspace: %s", c->device,
                 cudaGetErrorString(e));
        return -1;
    }
    c->cublaslt = (void *)h;
    c->gemm_workspace_bytes = GEMM_WORKSPACE_BYTES;
    return 0;
}

static cudaDataType_t cuda_type(mc_dtype_t dt)
{
    switch (dt) {
    case MC_DT_F32: return CUDA_R_32F;
    case MC_DT_BF16: return CUDA_R_16BF;
    case MC_DT_F16: return CUDA_R_16F;
    default: mc_cuda_bad_dtype("matmul", dt);
    }
    return CUDA_R_32F;
}

// The largest power of two (at most 256) dividing the address: what cuBLASLt's alignment
// preferences ask for. NULL counts as fully aligned.
static uint32_t align_of(const void *p)
{
    const uintptr_t a = (uintptr_t)p;
    if (!a) return 256;
    uint32_t al = 1;
    while (al < 256 && (a & (2 * al - 1)) == 0) al *= 2;
    return al;
}

// ---- plan cache ----
typedef struct {
    int opa, opb, m, n, k, lda, ldb, ldd;
    int ab, d, bias, gelu, ldaux, bgrad;
    uint32_t al_a, al_b, al_d, al_bias, al_aux;
} plan_key_t;

enum { GEMM_CANDIDATES = 8 };
#define GEMM_TUNE_MS 50.0f

typedef struct {
    plan_key_t key;
    int used;
    int has_algo; // 0: cuBLASLt offered none, use the fallback kernel
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo; // the one in use
    cublasLtMatmulAlgo_t cand[GEMM_CANDIDATES];
    mc_cuda_gemm_choice_t choice; // shape, candidates, timed, chosen, times (tuned: done)
    int tuned, warned;
} plan_t;

enum { PLANS = 128 };
static plan_t g_plans[PLANS];
static int g_next_evict;

static void plan_destroy(plan_t *p)
{
    if (!p->used) return;
    cublasLtMatrixLayoutDestroy(p->la);
    cublasLtMatrixLayoutDestroy(p->lb);
    cublasLtMatrixLayoutDestroy(p->ld);
    cublasLtMatmulDescDestroy(p->desc);
    p->used = 0;
}

#define SHAPE_FMT "m %d n %d k %d, ops %d/%d, ld %d/%d/%d, %s x %s -> %s%s%s"
#define SHAPE_ARGS(g)                                                                              \
    (g)->m, (g)->n, (g)->k, (g)->opa, (g)->opb, (g)->lda, (g)->ldb, (g)->ldd,                      \
        mc_dtype_name((g)->ab), mc_dtype_name((g)->ab), mc_dtype_name((g)->d),                     \
        (g)->bias ? " + bias" : "",                                                                \
        (g)->gelu == MC_GEMM_GELU    ? ", GeLU epilogue"                                           \
        : (g)->gelu == MC_GEMM_DGELU ? ", GeLU-gradient epilogue"                                  \
        : (g)->bgradb                ? ", bias-gradient epilogue"                                  \
                                     : ""

// The heuristic's candidates for the plan p of g (up to GEMM_CANDIDATES, best first), under the
// workspace and the alignments of g's pointers; none: the plan has no algorithm.
static void plan_candidates(const mc_cuda_t *c, plan_t *p, const mc_cuda_matmul_t *g)
{
    const plan_key_t k = p->key;
    cublasLtMatmulPreference_t pref;
    MC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref), SHAPE_FMT, SHAPE_ARGS(g));
    const uint64_t ws = c->gemm_workspace_bytes;
    MC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
                        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
                    SHAPE_FMT, SHAPE_ARGS(g));
    const cublasLtMatmulPreferenceAttributes_t al_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const uint32_t al_val[4] = {k.al_a, k.al_b, k.al_d, k.al_d};
    for (int i = 0; i < 4; i++)
        MC_CUBLAS_CHECK(
            cublasLtMatmulPreferenceSetAttribute(pref, al_attr[i], &al_val[i], sizeof(al_val[i])),
            SHAPE_FMT, SHAPE_ARGS(g));
    // Split-K only with its partial sums kept in the compute type (fp32): INPLACE and OUTPUT_TYPE
    // reduce them in D's type, rounding a 16-bit output more than once (cublasLt.h,
    // cublasLtReductionScheme_t), more than the one rounding this file promises. The probable
    // cause of the H200's 2-ulp bf16 linear (docs/PERF.md, "After the first run"); unsplit
    // algorithms (NONE) are not filtered by the mask.
    const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    MC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref,
                                                         CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                         &schemes, sizeof(schemes)),
                    SHAPE_FMT, SHAPE_ARGS(g));
    cublasLtMatmulHeuristicResult_t res[GEMM_CANDIDATES];
    int count = 0;
    memset(res, 0, sizeof(res));
    const cublasStatus_t hs =
        cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)c->cublaslt, p->desc, p->la, p->lb, p->ld,
                                       p->ld, pref, GEMM_CANDIDATES, res, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    p->choice.m = g->m, p->choice.n = g->n, p->choice.k = g->k, p->choice.chosen = 0;
    for (int i = 0; hs == CUBLAS_STATUS_SUCCESS && i < count; i++)
        if (res[i].state == CUBLAS_STATUS_SUCCESS) p->cand[p->choice.candidates++] = res[i].algo;
    if (p->choice.candidates > 0) {
        p->algo = p->cand[0];
        p->has_algo = 1;
    } else if (hs != CUBLAS_STATUS_SUCCESS && hs != CUBLAS_STATUS_NOT_SUPPORTED && !g->gelu &&
               !g->bgradb) {
        // (a GeLU or bias-gradient epilogue that cuBLASLt refuses for this type combination, with
        // whatever status, is only a missing algorithm: the caller runs the unfused ops)
        mc_fatal("cuBLASLt error in cublasLtMatmulAlgoGetHeuristic (%s:%d): %s; " SHAPE_FMT,
                 __FILE__, __LINE__, cublasLtGetStatusString(hs), SHAPE_ARGS(g));
    }
}

static plan_t *plan_get(const mc_cuda_t *c, const mc_cuda_matmul_t *g)
{
    plan_key_t k;
    memset(&k, 0, sizeof(k)); // padding too: keys are compared with memcmp
    k.opa = g->opa, k.opb = g->opb, k.m = g->m, k.n = g->n, k.k = g->k;
    k.lda = g->lda, k.ldb = g->ldb, k.ldd = g->ldd;
    k.ab = (int)g->ab, k.d = (int)g->d, k.bias = g->bias != NULL, k.gelu = g->gelu,
    k.ldaux = g->gelu ? g->ldaux : 0, k.bgrad = g->bgradb != NULL;
    k.al_a = align_of(g->A), k.al_b = align_of(g->B), k.al_d = align_of(g->D),
    k.al_bias = align_of(g->bias ? g->bias : g->bgradb);
    k.al_aux = align_of(g->aux);
    for (int i = 0; i < PLANS; i++)
        if (g_plans[i].used && memcmp(&g_plans[i].key, &k, sizeof(k)) == 0) return &g_plans[i];

    int slot = -1;
    for (int i = 0; i < PLANS && slot < 0; i++)
        if (!g_plans[i].used) slot = i;
    if (slot < 0) { // full: evict round-robin (a run uses far fewer shapes than PLANS)
        slot = g_next_evict;
        g_next_evict = (g_next_evict + 1) % PLANS;
        plan_destroy(&g_plans[slot]);
    }
    plan_t *p = &g_plans[slot];
    memset(p, 0, sizeof(*p));
    p->key = k;

    const cudaDataType_t tab = cuda_type(g->ab), td = cuda_type(g->d);
    MC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), SHAPE_FMT,
                    SHAPE_ARGS(g));
    const int32_t opa = g->opa ? CUBLAS_OP_T : CUBLAS_OP_N,
                  opb = g->opb ? CUBLAS_OP_T : CUBLAS_OP_N;
    MC_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)),
        SHAPE_FMT, SHAPE_ARGS(g));
    MC_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)),
        SHAPE_FMT, SHAPE_ARGS(g));
    // the epilogue: bias, GeLU with its input kept in aux (and bias), the GeLU gradient, or the
    // bias gradient over B's columns
    const uint32_t epi = g->gelu == MC_GEMM_DGELU  ? CUBLASLT_EPILOGUE_DGELU
                         : g->gelu == MC_GEMM_GELU ? (g->bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                              : CUBLASLT_EPILOGUE_GELU_AUX)
                         : g->bias                 ? CUBLASLT_EPILOGUE_BIAS
                         : g->bgradb               ? CUBLASLT_EPILOGUE_BGRADB
                                                   : CUBLASLT_EPILOGUE_DEFAULT;
    if (epi != CUBLASLT_EPILOGUE_DEFAULT)
        MC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                       sizeof(epi)),
                        SHAPE_FMT, SHAPE_ARGS(g));
    if (g->gelu) {
        const int64_t ldaux = g->ldaux;
        MC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
                            p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ldaux, sizeof(ldaux)),
                        SHAPE_FMT, SHAPE_ARGS(g));
        MC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc,
                                                       CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                       &g->aux, sizeof(g->aux)),
                        SHAPE_FMT, SHAPE_ARGS(g));
    }
    if (g->bias || g->bgradb) { // a bias, or a bias gradient: both of D's type
        const int32_t bt = td;
        const void *bp = g->bias ? g->bias : g->bgradb;
        MC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                       &bt, sizeof(bt)),
                        SHAPE_FMT, SHAPE_ARGS(g));
        // the heuristic reads the pointer's alignment; each call sets its own pointer again
        MC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &bp, sizeof(bp)),
                        SHAPE_FMT, SHAPE_ARGS(g));
    }
    // stored matrices, column-major: A is (opa ? k x m : m x k), B is (opb ? n x k : k x n)
    const uint64_t a_rows = g->opa ? g->k : g->m, a_cols = g->opa ? g->m : g->k;
    const uint64_t b_rows = g->opb ? g->n : g->k, b_cols = g->opb ? g->k : g->n;
    MC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->la, tab, a_rows, a_cols, g->lda), SHAPE_FMT,
                    SHAPE_ARGS(g));
    MC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lb, tab, b_rows, b_cols, g->ldb), SHAPE_FMT,
                    SHAPE_ARGS(g));
    MC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->ld, td, (uint64_t)g->m, (uint64_t)g->n, g->ldd),
                    SHAPE_FMT, SHAPE_ARGS(g));
    p->used = 1;

    plan_candidates(c, p, g);
    return p;
}

// ---- fallback: one thread per output element, fp32 accumulation in k order ----
// Column-major, cuBLAS's definition: op(A)[i,p] = opa ? A[p + i*lda] : A[i + p*lda],
// op(B)[p,j] = opb ? B[j + p*ldb] : B[p + j*ldb], D[i + j*ldd]. beta == 0 never reads D.
template <typename TAB, typename TD>
static __global__ void k_gemm_fallback(int opa, int opb, int m, int n, int k, float alpha,
                                       const TAB *A, int lda, const TAB *B, int ldb, float beta,
                                       TD *D, int ldd, const TD *bias)
{
    for (long j = blockIdx.y * (long)blockDim.y + threadIdx.y; j < n;
         j += (long)gridDim.y * blockDim.y)
        for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < m;
             i += (long)gridDim.x * blockDim.x) {
            float acc = 0.0f;
            for (long p = 0; p < k; p++) {
                const float a = mc_to_f32(opa ? A[p + i * lda] : A[i + p * lda]);
                const float b = mc_to_f32(opb ? B[j + p * ldb] : B[p + j * ldb]);
                acc += a * b;
            }
            float v = alpha * acc;
            if (beta != 0.0f) v += beta * mc_to_f32(D[i + j * ldd]);
            if (bias) v += mc_to_f32(bias[i]);
            D[i + j * ldd] = mc_from_f32<TD>(v);
        }
}

static void matmul_fallback(const mc_backend_t *be, const mc_cuda_matmul_t *g)
{
    const dim3 threads(16, 16);
    const dim3 blocks((unsigned)((g->m + 15) / 16 < 65535 ? (g->m + 15) / 16 : 65535),
                      (unsigned)((g->n + 15) / 16 < 65535 ? (g->n + 15) / 16 : 65535));
    MC_CUDA_DISPATCH(
        g->ab, TAB, "matmul",
        MC_CUDA_DISPATCH(
            g->d, TD, "matmul",
            MC_LAUNCH(blocks, threads, 0, mc_cuda_stream(be), k_gemm_fallback<TAB, TD>)(
                g->opa, g->opb, g->m, g->n, g->k, g->alpha, (const TAB *)g->A, g->lda,
                (const TAB *)g->B, g->ldb, g->beta, (TD *)g->D, g->ldd, (const TD *)g->bias)))
    MC_CUDA_LAUNCHED();
}

static bool fallback_forced(void)
{
    const char *s = mc_env_text(MC_ENV_CUDA_GEMM);
    return s && strcmp(s, "fallback") == 0;
}

static bool timing_off(void)
{
    const char *s = mc_env_text(MC_ENV_CUDA_GEMM);
    return s && strcmp(s, "untimed") == 0;
}

// ---- timing the candidates ----
static void run_algo(const mc_backend_t *be, plan_t *p, const mc_cuda_matmul_t *g, int i, void *D,
                     float beta)
{
    const mc_cuda_t *c = mc_cuda(be);
    MC_CUBLAS_CHECK(cublasLtMatmul((cublasLtHandle_t)c->cublaslt, p->desc, &g->alpha, g->A, p->la,
                                   g->B, p->lb, &beta, D, p->ld, D, p->ld, &p->cand[i],
                                   c->gemm_workspace, c->gemm_workspace_bytes, mc_cuda_stream(be)),
                    SHAPE_FMT, SHAPE_ARGS(g));
}

// Where the candidates may write D: the call's own D when it overwrites it (its aux and bias
// gradient too), else a scratch matrix of D's layout after the bias gradient's room (beta 0 there:
// the algorithm does not depend on beta); NULL when that does not fit.
static void *tuning_output(const mc_backend_t *be, const mc_cuda_matmul_t *g)
{
    if (g->beta == 0.0f) return g->D;
    const mc_cuda_t *c = mc_cuda(be);
    const size_t off = g->bgradb ? ((size_t)g->n * sizeof(float) + 255) / 256 * 256 : 0;
    const size_t bytes = ((size_t)g->ldd * (size_t)(g->n - 1) + (size_t)g->m) * mc_dtype_size(g->d);
    return off + bytes <= c->scratch_bytes ? (char *)c->scratch + off : NULL;
}

// The plan's first use: each candidate run once to warm up, then once between two events, in the
// heuristic's order until GEMM_TUNE_MS of device time is spent; the fastest is kept.
static void tune(const mc_backend_t *be, plan_t *p, const mc_cuda_matmul_t *g)
{
    p->tuned = p->choice.tuned = 1;
    void *D = tuning_output(be, g);
    if (p->choice.candidates < 2 || !D || timing_off()) return;
    const cudaStream_t st = mc_cuda_stream(be);
    cudaEvent_t e0, e1;
    MC_CUDA_CHECK(cudaEventCreate(&e0));
    MC_CUDA_CHECK(cudaEventCreate(&e1));
    float spent = 0.0f, best = 0.0f;
    for (int i = 0; i < p->choice.candidates && spent < GEMM_TUNE_MS; i++) {
        run_algo(be, p, g, i, D, 0.0f);
        MC_CUDA_CHECK(cudaEventRecord(e0, st));
        run_algo(be, p, g, i, D, 0.0f);
        MC_CUDA_CHECK(cudaEventRecord(e1, st));
        MC_CUDA_CHECK(cudaEventSynchronize(e1));
        float ms = 0.0f;
        MC_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        p->choice.ms[p->choice.timed++] = ms;
        spent += 2.0f * ms; // the warm-up run took about as long
        if (i == 0 || ms < best) best = ms, p->choice.chosen = i;
    }
    MC_CUDA_CHECK(cudaEventDestroy(e0));
    MC_CUDA_CHECK(cudaEventDestroy(e1));
    p->algo = p->cand[p->choice.chosen];
}

extern "C" int mc_cuda_gemm_choices(mc_cuda_gemm_choice_t *out, int max)
{
    int n = 0;
    for (int i = 0; i < PLANS; i++)
        if (g_plans[i].used) {
            if (n < max) out[n] = g_plans[i].choice;
            n++;
        }
    return n;
}

extern "C" void mc_cuda_gemm_forget(void)
{
    for (int i = 0; i < PLANS; i++) plan_destroy(&g_plans[i]);
    g_next_evict = 0;
}

// Runs g with cuBLASLt when it has an algorithm for it: false otherwise (nothing computed).
static bool matmul_cublaslt(const mc_backend_t *be, const mc_cuda_matmul_t *g)
{
    if (g->m <= 0 || g->n <= 0 || g->k <= 0)
        mc_fatal("internal error: matmul with an empty dimension (m %d n %d k %d) reached cuBLASLt",
                 g->m, g->n, g->k);
    if (fallback_forced()) return false;
    const mc_cuda_t *c = mc_cuda(be);
    plan_t *p = plan_get(c, g);
    if (!p->has_algo) return false;
    if (g->bias || g->bgradb) {
        const void *bp = g->bias ? g->bias : g->bgradb;
        MC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &bp, sizeof(bp)),
                        SHAPE_FMT, SHAPE_ARGS(g));
    }
    if (g->gelu)
        MC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc,
                                                       CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                       &g->aux, sizeof(g->aux)),
                        SHAPE_FMT, SHAPE_ARGS(g));
    if (!p->tuned) tune(be, p, g);
    MC_CUBLAS_CHECK(cublasLtMatmul((cublasLtHandle_t)c->cublaslt, p->desc, &g->alpha, g->A, p->la,
                                   g->B, p->lb, &g->beta, g->D, p->ld, g->D, p->ld, &p->algo,
                                   c->gemm_workspace, c->gemm_workspace_bytes, mc_cuda_stream(be)),
                    SHAPE_FMT, SHAPE_ARGS(g));
    return true;
}

// Once per plan: the shape that cuBLASLt has no algorithm for, and what it costs.
static void warn_fallback(const mc_cuda_t *c, const mc_cuda_matmul_t *g)
{
    plan_t *p = plan_get(c, g);
    if (p->warned) return;
    p->warned = 1;
    mc_warn("cuBLASLt has no algorithm for the GEMM (" SHAPE_FMT
            "): a plain kernel computes it, far slower",
            SHAPE_ARGS(g));
}

void mc_cuda_matmul(const mc_backend_t *be, const mc_cuda_matmul_t *g)
{
    if (g->gelu || g->bgradb)
        mc_fatal("internal error: a matmul with a GeLU or bias-gradient epilogue must go through "
                 "mc_cuda_matmul_fused");
    if (matmul_cublaslt(be, g)) return;
    if (!fallback_forced()) warn_fallback(mc_cuda(be), g);
    matmul_fallback(be, g);
}

bool mc_cuda_matmul_fused(const mc_backend_t *be, const mc_cuda_matmul_t *g)
{
    if (g->gelu && (g->ldaux % 8 != 0 || g->ldaux < g->m || align_of(g->aux) < 16))
        mc_fatal("internal error: GeLU epilogue with aux ld %d (rows %d) at alignment %u", g->ldaux,
                 g->m, align_of(g->aux));
    if (g->bgradb && (g->gelu || g->bias || align_of(g->bgradb) < 16))
        mc_fatal(
            "internal error: a bias-gradient epilogue with another epilogue, or at alignment %u",
            align_of(g->bgradb));
    return matmul_cublaslt(be, g);
}

mc_cuda_matmul_t mc_cuda_matmul_of(mc_rowmajor_gemm_t r, const void *A, const void *B, void *C,
                                   mc_dtype_t ab, mc_dtype_t c, float alpha, float beta,
                                   const void *bias)
{
    const mc_colmajor_gemm_t cm = mc_gemm_to_colmajor(r);
    mc_cuda_matmul_t g;
    memset(&g, 0, sizeof(g));
    g.opa = cm.opa, g.opb = cm.opb, g.m = cm.m, g.n = cm.n, g.k = cm.k;
    g.A = B, g.lda = cm.lda; // cuBLAS's first operand is our B, its second our A (gemm_map.h)
    g.B = A, g.ldb = cm.ldb;
    g.D = C, g.ldd = cm.ldd;
    g.bias = bias; // one value per row of the column-major D = per column of our C
    g.alpha = alpha, g.beta = beta;
    g.ab = ab, g.d = c;
    return g;
}

void mc_cuda_matmul_rowmajor(const mc_backend_t *be, mc_rowmajor_gemm_t r, const void *A,
                             const void *B, void *C, mc_dtype_t ab, mc_dtype_t c, float alpha,
                             float beta, const void *bias)
{
    const mc_cuda_matmul_t g = mc_cuda_matmul_of(r, A, B, C, ab, c, alpha, beta, bias);
    mc_cuda_matmul(be, &g);
}

// C = beta * C on an M x N row-major block (the K = 0 product); beta == 0 writes zeros without
// reading C, as BLAS does.
static __global__ void k_scale_rows(float *C, int M, int N, int ldc, float beta)
{
    const long total = (long)M * N;
    for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < total;
         t += (long)gridDim.x * blockDim.x) {
        float *c = C + (t / N) * ldc + t % N;
        *c = beta == 0.0f ? 0.0f : beta * *c;
    }
}

void mc_cuda_gemm(const mc_backend_t *be, int transa, int transb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        MC_LAUNCH(mc_cuda_ew_blocks((long)M * N), MC_EW_THREADS, 0, mc_cuda_stream(be),
                  k_scale_rows)
        (C, M, N, ldc, beta);
        MC_CUDA_LAUNCHED();
        return;
    }
    const mc_rowmajor_gemm_t r = {transa, transb, M, N, K, lda, ldb, ldc};
    mc_cuda_matmul_rowmajor(be, r, A, B, C, MC_DT_F32, MC_DT_F32, alpha, beta, NULL);
}
