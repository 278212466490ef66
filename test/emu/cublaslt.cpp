// cuBLASLt for the emulated CUDA device of the tests: the C API that kernels/cuda/gemm.cu calls,
// linked instead of libcublasLt. It is written from NVIDIA's documentation only, checks what the
// documentation states and computes on the CPU, so that a wrong leading dimension, operand or op
// in a caller shows up as an error status or as wrong numbers, as it would on a GPU.
//
// Sources. [H]: /usr/local/cuda/include/cublasLt.h of CUDA 13.0 (each attribute's comment: type,
// default, rules). [D]: the cuBLAS documentation, chapter 3 "Using the cuBLASLt API",
// https://docs.nvidia.com/cuda/cublas/#using-the-cublaslt-api (sections numbered as there).
// Rules implemented:
//  - D = alpha * op(A) op(B) + beta * C, column-major, ld = the stride between columns
//    [D 3.4.17, 3.3.23]: op(A) is m x k, op(B) k x n, C and D m x n, so the stored A is m x k for
//    CUBLAS_OP_N and k x m for CUBLAS_OP_T (CUBLAS_OP_C is OP_T for real types).
//  - ld non-negative and >= rows [H LD, D 3.3.19, 3.4.35 "ld >= m"]; rows and cols that fit
//    int32_t [D 3.3.19]. TRANSC only CUBLAS_OP_N [H, D 3.3.9].
//  - In place: C == D with the same layout; out of place: C and D of the same type, rows, cols and
//    order, C's ld free (0: broadcast); no Cdesc means Ddesc [D 3.4.17].
//  - Types with CUBLAS_COMPUTE_32F(_PEDANTIC) and scale CUDA_R_32F [D 3.4.17, table 1]: A/B 32F ->
//    C/D 32F, 16F -> 16F or 32F, 16BF -> 16BF or 32F; the bias has D's type. Other combinations:
//    NOT_SUPPORTED (the heuristic's "no heuristic function available for current configuration").
//  - Epilogues [D 3.3.2]: BIAS adds a packed vector of D's rows to every column before the
//    activation; RELU max(x, 0); GELU 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) (note 5); the
//    *_AUX ones also store the activation's input, the bias included [D 3.1.4.1], in the aux type;
//    DGELU multiplies the matmul output by GELU'(aux). The others are refused (NOT_SUPPORTED).
//  - Bias-gradient epilogues [H cublasLtEpilogue_t, D 3.3.2]: BGRADA, "bias gradient based on the
//    input matrix A", one value per row of D, reduced over the GEMM's k dimension:
//    bias[i] = sum_q op(A)[i, q]; BGRADB, "based on the input matrix B", one value per column of
//    D, also over k: bias[j] = sum_q op(B)[q, j]; DGELU_BGRAD applies "independently GELU and
//    bias gradient to matmul output": D as DGELU, and bias[i] = the sum over D's row i of the GELU
//    gradient. D itself is computed as with DEFAULT (BGRADA/B) or DGELU. The vector goes to
//    BIAS_POINTER ("void *" in the bias-gradient case), stored, not accumulated; its elements
//    have the output's type [H BIAS_POINTER, BIAS_DATA_TYPE]: another BIAS_DATA_TYPE is
//    INVALID_VALUE (emulation: the status, as for the bias). The heuristic reads the pointer's
//    value for its alignment [H]. Neither page lists transposes the epilogues exclude: every
//    TRANSA/TRANSB is taken; only CUBLASLT_ORDER_COL layouts are emulated (NOT_SUPPORTED
//    otherwise, as for every epilogue). (emulation) The sums are in double, of the inputs as
//    stored (BGRADA/B: alpha does not scale them) and of DGELU_BGRAD's fp32 values before D's
//    rounding. DRELU(_BGRAD) and RELU_AUX(_BIAS) (a bit-mask aux) are not emulated.
//  - EPILOGUE_AUX_POINTER required by the aux epilogues, with EPILOGUE_AUX_LD divisible by 8 and
//    >= D's rows [H, D 3.3.9]; EPILOGUE_AUX_DATA_TYPE -1 (default) means D's type, another type
//    for these matrix types: INVALID_VALUE [D 3.3.9]. BIAS_POINTER required by *_BIAS.
//  - Scale and amax pointers, scale modes: narrow types only, otherwise an error (INVALID_VALUE)
//    [D 3.1.4, 3.3.9].
//  - Set/GetAttribute: INVALID_VALUE when buf is NULL or sizeInBytes is not the attribute's size;
//    Get with sizeInBytes 0 reports the size [D 3.4.28, 3.4.29, 3.4.33, 3.4.34, H].
//  - Preferences: MIN_ALIGNMENT_A/B/C/D_BYTES default 256, MAX_WORKSPACE_BYTES 0 [D 3.3.13]. The
//    heuristic reads the bias and aux pointers' values for the alignment it expects [H, D 3.3.9].
//    requestedAlgoCount <= 0: INVALID_VALUE [D 3.4.22]. The heuristic writes up to
//    requestedAlgoCount results "in the order of increasing estimated compute time", each with its
//    workspaceSize and state, and their number in returnAlgoCount [D 3.4.22]; an algorithm needing
//    more workspace than MAX_WORKSPACE_BYTES is not offered [D 3.3.13]. (emulation) Four
//    algorithms (ids 0 to 3) compute identical results, except algorithm 2 for a 16-bit D (split-K
//    below); ids 1 and 2 ask for 1 and 4 MiB of workspace. For tests of a caller: MC_EMU_CUBLASLT_SLOW_ALGO=ID[,ID...] makes each matmul with
//    one of those algorithms take 20 ms more of the emulated device's clock; MC_EMU_CUBLASLT_NO_ALGO=1
//    makes the heuristic find none (NOT_SUPPORTED), as for a problem the library does not cover.
//  - Split-K and its reduction scheme [H: cublasLtReductionScheme_t, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
//    CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK]: K split in parts computed in parallel, their
//    results reduced per CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME: NONE (no split), INPLACE (in the
//    output buffer, in the output type), COMPUTE_TYPE (partials in the compute type in the
//    workspace), OUTPUT_TYPE (partials in the output type in the workspace); the preference's mask
//    "filters heuristic result to only include algo configs that use one of the required modes"
//    (default: all). (emulation) Algorithm 1 splits K in two with COMPUTE_TYPE reduction (the
//    same results as no split here) and algorithm 2 with OUTPUT_TYPE reduction: each part's
//    alpha * sum is rounded to D's type, then they are added with beta * C and the epilogue's bias
//    and rounded again, so a 16-bit D is rounded twice. Algorithm 2 is modelled twice as fast as
//    the others (split-K pays for small M and N with a long K; the heuristic's estimated order
//    need not be the measured one), so a caller timing the candidates takes it unless its mask
//    excludes OUTPUT_TYPE.
//  - cublasLtMatmul: a handle not from cublasLtCreate: NOT_INITIALIZED; INVALID_VALUE for
//    "parameters unexpectedly NULL, in conflict", a workspace smaller than the algo needs
//    [D 3.4.17], descriptors that do not match the algo [D 3.4.19]; the workspace 256-byte
//    aligned [D 3.4.17]; algo NULL: an implicit heuristic [D 3.4.17].
// The emulation's own choices, where the documentation says nothing, are marked "(emulation)".
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <new>
#include <vector>

#include "test/emu/emu.h"

struct cublasLtContext {
    int unused;
};

namespace {

// ---- objects: every handle and descriptor is checked against the registry of live ones ----
enum ObjKind {
    OBJ_HANDLE = mc_emu::H_LT_HANDLE,
    OBJ_DESC = mc_emu::H_LT_DESC,
    OBJ_LAYOUT = mc_emu::H_LT_LAYOUT,
    OBJ_PREF = mc_emu::H_LT_PREF
};

struct Obj {
    int64_t val[64]; // attribute values by id, sign- or zero-extended as their C type
};

// the runtime's registry of live handles (emu.h)
bool is_live(const void *p, int kind) { return mc_emu::handle_live(p, (mc_emu::HandleKind)kind); }
void enlist(const void *p, int kind) { mc_emu::handle_add(p, (mc_emu::HandleKind)kind); }
bool unlist(const void *p, int kind) { return mc_emu::handle_remove(p, (mc_emu::HandleKind)kind); }

const char *status_name(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "unknown cuBLAS status";
}

// One line on stderr saying why, then the status: what a GPU run reports only as a code.
cublasStatus_t refuse(cublasStatus_t s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
cublasStatus_t refuse(cublasStatus_t s, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    mc_emu::note("%s -> %s", msg, status_name(s));
    return s;
}

// ---- attribute tables: id, C type (size, signedness), default, valid values ----
typedef bool (*ValueOk)(int64_t);
enum Use {
    USE_ANY,          // any value the check accepts
    USE_DEFAULT_ONLY, // documented for narrow types only: a non-default value is refused at use
    USE_NOT_EMULATED, // Set of a non-default value: NOT_SUPPORTED (emulation)
};
struct AttrInfo {
    int id;
    const char *name;
    uint8_t size;
    bool sgn;
    int64_t def;
    ValueOk ok;
    Use use;
};
struct Table {
    const char *what;
    const AttrInfo *attrs;
    size_t n;
};

bool ok_dtype(int64_t v) { return v >= 0 && v <= CUDA_R_4F_E2M1; }
bool ok_dtype_or_unset(int64_t v) { return v == -1 || ok_dtype(v); }
bool ok_op(int64_t v) { return v == CUBLAS_OP_N || v == CUBLAS_OP_T || v == CUBLAS_OP_C; }
bool ok_any_op(int64_t v) { return v >= CUBLAS_OP_N && v <= CUBLAS_OP_CONJG; }
bool ok_nonneg(int64_t v) { return v >= 0; }
bool ok_pointer_mode(int64_t v) { return v >= 0 && v <= CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST; }
bool ok_fill(int64_t v) { return v >= CUBLAS_FILL_MODE_LOWER && v <= CUBLAS_FILL_MODE_FULL; }
bool ok_order(int64_t v) { return v >= CUBLASLT_ORDER_COL && v <= CUBLASLT_ORDER_COL32_2R_4R4; }
bool ok_batch_mode(int64_t v) { return v == CUBLASLT_BATCH_MODE_STRIDED || v == CUBLASLT_BATCH_MODE_POINTER_ARRAY; }
bool ok_search(int64_t v) { return v >= CUBLASLT_SEARCH_BEST_FIT && v <= CUBLASLT_SEARCH_RESERVED_09; }
bool ok_reduction(int64_t v) { return v >= 0 && v <= CUBLASLT_REDUCTION_SCHEME_MASK; }

bool ok_compute(int64_t v)
{
    switch (v) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
    case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC: return true;
    }
    return false;
}

bool ok_epilogue(int64_t v)
{
    switch (v) {
    case CUBLASLT_EPILOGUE_DEFAULT:
    case CUBLASLT_EPILOGUE_RELU:
    case CUBLASLT_EPILOGUE_RELU_AUX:
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_RELU_BIAS:
    case CUBLASLT_EPILOGUE_RELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DRELU:
    case CUBLASLT_EPILOGUE_DRELU_BGRAD:
    case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_GELU_AUX:
    case CUBLASLT_EPILOGUE_GELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DGELU:
    case CUBLASLT_EPILOGUE_DGELU_BGRAD:
    case CUBLASLT_EPILOGUE_BGRADA:
    case CUBLASLT_EPILOGUE_BGRADB: return true;
    }
    return false;
}

#define D_(x) CUBLASLT_MATMUL_DESC_##x, #x
const AttrInfo DESC_ATTRS[] = {
    {D_(COMPUTE_TYPE), 4, true, CUBLAS_COMPUTE_32F, ok_compute, USE_ANY},
    {D_(SCALE_TYPE), 4, true, CUDA_R_32F, ok_dtype, USE_ANY},
    {D_(POINTER_MODE), 4, true, CUBLASLT_POINTER_MODE_HOST, ok_pointer_mode, USE_ANY},
    {D_(TRANSA), 4, true, CUBLAS_OP_N, ok_op, USE_ANY},
    {D_(TRANSB), 4, true, CUBLAS_OP_N, ok_op, USE_ANY},
    {D_(TRANSC), 4, true, CUBLAS_OP_N, ok_any_op, USE_ANY},
    {D_(FILL_MODE), 4, true, CUBLAS_FILL_MODE_FULL, ok_fill, USE_ANY},
    {D_(EPILOGUE), 4, false, CUBLASLT_EPILOGUE_DEFAULT, ok_epilogue, USE_ANY},
    {D_(BIAS_POINTER), 8, false, 0, nullptr, USE_ANY},
    {D_(BIAS_BATCH_STRIDE), 8, true, 0, nullptr, USE_ANY},
    {D_(EPILOGUE_AUX_POINTER), 8, false, 0, nullptr, USE_ANY},
    {D_(EPILOGUE_AUX_LD), 8, true, 0, nullptr, USE_ANY}, // its rule depends on the epilogue: at use
    {D_(EPILOGUE_AUX_BATCH_STRIDE), 8, true, 0, nullptr, USE_ANY},
    {D_(ALPHA_VECTOR_BATCH_STRIDE), 8, true, 0, nullptr, USE_ANY},
    {D_(SM_COUNT_TARGET), 4, true, 0, ok_nonneg, USE_ANY},
    {D_(A_SCALE_POINTER), 8, false, 0, nullptr, USE_DEFAULT_ONLY},
    {D_(B_SCALE_POINTER), 8, false, 0, nullptr, USE_DEFAULT_ONLY},
    {D_(C_SCALE_POINTER), 8, false, 0, nullptr, USE_DEFAULT_ONLY},
    {D_(D_SCALE_POINTER), 8, false, 0, nullptr, USE_DEFAULT_ONLY},
    {D_(AMAX_D_POINTER), 8, false, 0, nullptr, USE_DEFAULT_ONLY},
    {D_(EPILOGUE_AUX_DATA_TYPE), 4, true, -1, ok_dtype_or_unset, USE_ANY},
    {D_(EPILOGUE_AUX_SCALE_POINTER), 8, false, 0, nullptr, USE_DEFAULT_ONLY},
    {D_(EPILOGUE_AUX_AMAX_POINTER), 8, false, 0, nullptr, USE_DEFAULT_ONLY},
    {D_(FAST_ACCUM), 1, true, 0, nullptr, USE_ANY},
    {D_(BIAS_DATA_TYPE), 4, true, -1, ok_dtype_or_unset, USE_ANY},
    {D_(A_SCALE_MODE), 4, true, 0, nullptr, USE_DEFAULT_ONLY},
    {D_(B_SCALE_MODE), 4, true, 0, nullptr, USE_DEFAULT_ONLY},
    {D_(C_SCALE_MODE), 4, true, 0, nullptr, USE_DEFAULT_ONLY},
    {D_(D_SCALE_MODE), 4, true, 0, nullptr, USE_DEFAULT_ONLY},
    {D_(EPILOGUE_AUX_SCALE_MODE), 4, true, 0, nullptr, USE_DEFAULT_ONLY},
    {D_(D_OUT_SCALE_POINTER), 8, false, 0, nullptr, USE_DEFAULT_ONLY},
    {D_(D_OUT_SCALE_MODE), 4, true, 0, nullptr, USE_DEFAULT_ONLY},
    {D_(EMULATION_DESCRIPTOR), 8, false, 0, nullptr, USE_NOT_EMULATED},
};
#undef D_

#define L_(x) CUBLASLT_MATRIX_LAYOUT_##x, #x
const AttrInfo LAYOUT_ATTRS[] = {
    {L_(TYPE), 4, false, CUDA_R_32F, ok_dtype, USE_ANY},
    {L_(ORDER), 4, true, CUBLASLT_ORDER_COL, ok_order, USE_ANY},
    {L_(ROWS), 8, false, 0, nullptr, USE_ANY},
    {L_(COLS), 8, false, 0, nullptr, USE_ANY},
    {L_(LD), 8, true, 0, nullptr, USE_ANY}, // checked at use, against the rows
    {L_(BATCH_COUNT), 4, true, 1, nullptr, USE_ANY},
    {L_(STRIDED_BATCH_OFFSET), 8, true, 0, nullptr, USE_ANY},
    {L_(PLANE_OFFSET), 8, true, 0, nullptr, USE_ANY},
    {L_(BATCH_MODE), 4, false, CUBLASLT_BATCH_MODE_STRIDED, ok_batch_mode, USE_ANY},
};
#undef L_

#define P_(x) CUBLASLT_MATMUL_PREF_##x, #x
const AttrInfo PREF_ATTRS[] = {
    {P_(SEARCH_MODE), 4, false, CUBLASLT_SEARCH_BEST_FIT, ok_search, USE_ANY},
    {P_(MAX_WORKSPACE_BYTES), 8, false, 0, nullptr, USE_ANY},
    {P_(REDUCTION_SCHEME_MASK), 4, false, CUBLASLT_REDUCTION_SCHEME_MASK, ok_reduction, USE_ANY},
    {P_(MIN_ALIGNMENT_A_BYTES), 4, false, 256, nullptr, USE_ANY},
    {P_(MIN_ALIGNMENT_B_BYTES), 4, false, 256, nullptr, USE_ANY},
    {P_(MIN_ALIGNMENT_C_BYTES), 4, false, 256, nullptr, USE_ANY},
    {P_(MIN_ALIGNMENT_D_BYTES), 4, false, 256, nullptr, USE_ANY},
    {P_(MAX_WAVES_COUNT), 4, false, 0, nullptr, USE_ANY}, // a float, kept as its bits
    {P_(IMPL_MASK), 8, false, -1, nullptr, USE_ANY},
};
#undef P_

const Table DESC_TABLE = {"cublasLtMatmulDesc", DESC_ATTRS, sizeof(DESC_ATTRS) / sizeof(DESC_ATTRS[0])};
const Table LAYOUT_TABLE = {"cublasLtMatrixLayout", LAYOUT_ATTRS, sizeof(LAYOUT_ATTRS) / sizeof(LAYOUT_ATTRS[0])};
const Table PREF_TABLE = {"cublasLtMatmulPreference", PREF_ATTRS, sizeof(PREF_ATTRS) / sizeof(PREF_ATTRS[0])};

const AttrInfo *find_attr(const Table &t, int id)
{
    for (size_t i = 0; i < t.n; i++)
        if (t.attrs[i].id == id) return &t.attrs[i];
    return nullptr;
}

int64_t decode(const void *buf, const AttrInfo &a)
{
    if (a.size == 1) {
        int8_t v;
        memcpy(&v, buf, 1);
        return v;
    }
    if (a.size == 4) {
        uint32_t v;
        memcpy(&v, buf, 4);
        return a.sgn ? (int64_t)(int32_t)v : (int64_t)v;
    }
    int64_t v;
    memcpy(&v, buf, 8);
    return v;
}

void encode(void *buf, const AttrInfo &a, int64_t v)
{
    if (a.size == 1) {
        const int8_t x = (int8_t)v;
        memcpy(buf, &x, 1);
    } else if (a.size == 4) {
        const uint32_t x = (uint32_t)v;
        memcpy(buf, &x, 4);
    } else {
        memcpy(buf, &v, 8);
    }
}

Obj *new_obj(const Table &t, int kind)
{
    Obj *o = new (std::nothrow) Obj;
    if (!o) return nullptr;
    memset(o, 0, sizeof(*o));
    for (size_t i = 0; i < t.n; i++) o->val[t.attrs[i].id] = t.attrs[i].def;
    enlist(o, kind);
    return o;
}

cublasStatus_t destroy_obj(const char *fn, void *o, int kind)
{
    if (!o) return CUBLAS_STATUS_SUCCESS;
    if (!unlist(o, kind))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: %p was not made by its Create, or was destroyed already", fn,
                      o);
    delete static_cast<Obj *>(o);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t set_attr(const char *fn, const Table &t, void *o, int kind, int id, const void *buf, size_t size)
{
    if (!is_live(o, kind)) return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: %p is not a live %s", fn, o, t.what);
    const AttrInfo *a = find_attr(t, id);
    if (!a) return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: unknown attribute %d", fn, id);
    if (!buf || size != a->size)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: %s takes %u bytes, given %zu%s", fn, a->name, a->size, size,
                      buf ? "" : " at NULL");
    const int64_t v = decode(buf, *a);
    if (a->ok && !a->ok(v))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: %s: %lld is not one of its values", fn, a->name, (long long)v);
    if (a->use == USE_NOT_EMULATED && v != a->def)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: %s is not emulated", fn, a->name);
    static_cast<Obj *>(o)->val[id] = v;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t get_attr(const char *fn, const Table &t, const void *o, int kind, int id, void *buf, size_t size,
                        size_t *written)
{
    if (!is_live(o, kind)) return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: %p is not a live %s", fn, o, t.what);
    const AttrInfo *a = find_attr(t, id);
    if (!a) return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: unknown attribute %d", fn, id);
    if (size == 0) {
        if (!written) return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: size query without sizeWritten", fn);
        *written = a->size;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf || size != a->size)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: %s takes %u bytes, given %zu%s", fn, a->name, a->size, size,
                      buf ? "" : " at NULL");
    encode(buf, *a, static_cast<const Obj *>(o)->val[id]);
    if (written) *written = a->size;
    return CUBLAS_STATUS_SUCCESS;
}

// ---- the problem a descriptor and four layouts describe ----
struct Layout {
    int64_t type, order, batch, plane, mode, ld;
    uint64_t rows, cols;
};

Layout layout_of(cublasLtMatrixLayout_t l)
{
    const int64_t *v = reinterpret_cast<const Obj *>(l)->val;
    Layout r;
    r.type = v[CUBLASLT_MATRIX_LAYOUT_TYPE], r.order = v[CUBLASLT_MATRIX_LAYOUT_ORDER];
    r.rows = (uint64_t)v[CUBLASLT_MATRIX_LAYOUT_ROWS], r.cols = (uint64_t)v[CUBLASLT_MATRIX_LAYOUT_COLS];
    r.ld = v[CUBLASLT_MATRIX_LAYOUT_LD], r.batch = v[CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT];
    r.plane = v[CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET], r.mode = v[CUBLASLT_MATRIX_LAYOUT_BATCH_MODE];
    return r;
}

bool same_layout(const Layout &a, const Layout &b)
{
    return a.type == b.type && a.order == b.order && a.rows == b.rows && a.cols == b.cols && a.ld == b.ld &&
           a.batch == b.batch && a.plane == b.plane && a.mode == b.mode;
}

struct Epi {
    bool bias, relu, gelu, aux_out, dgelu;
    char bgrad; // 0, or the bias gradient's source: 'A', 'B', or 'D' (DGELU_BGRAD's GELU gradient)
};

struct Problem {
    uint64_t m, n, k;
    bool ta, tb;
    Layout A, B, C, D;
    int ab, cd; // A/B's and C/D's element types
    uint32_t epi;
    Epi ep;
    int bias_type, aux_type;
    int64_t aux_ld;
    int pmode;
    const void *bias;
    void *aux;
    uint64_t key; // hash of everything above but the pointers: what an algo is chosen for
    // the bias (or bias gradient) vector's length: D's rows, or its columns for BGRADB
    uint64_t bias_len() const { return ep.bgrad == 'B' ? n : m; }
    bool bias_used() const { return ep.bias || ep.bgrad; }
};

size_t elem_size(int64_t t) { return t == CUDA_R_32F ? 4 : 2; } // of the supported types only

const char *type_name(int64_t t)
{
    switch (t) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_64F: return "CUDA_R_64F";
    case CUDA_R_8I: return "CUDA_R_8I";
    case CUDA_R_32I: return "CUDA_R_32I";
    case CUDA_R_8F_E4M3: return "CUDA_R_8F_E4M3";
    case CUDA_R_8F_E5M2: return "CUDA_R_8F_E5M2";
    }
    return "another cudaDataType_t";
}

// The epilogues emulated; false for the documented ones it does not model.
bool epilogue_of(uint32_t e, Epi *ep)
{
    *ep = Epi{false, false, false, false, false, 0};
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return true;
    case CUBLASLT_EPILOGUE_RELU: ep->relu = true; return true;
    case CUBLASLT_EPILOGUE_BIAS: ep->bias = true; return true;
    case CUBLASLT_EPILOGUE_RELU_BIAS: ep->bias = ep->relu = true; return true;
    case CUBLASLT_EPILOGUE_GELU: ep->gelu = true; return true;
    case CUBLASLT_EPILOGUE_GELU_BIAS: ep->bias = ep->gelu = true; return true;
    case CUBLASLT_EPILOGUE_GELU_AUX: ep->gelu = ep->aux_out = true; return true;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: ep->bias = ep->gelu = ep->aux_out = true; return true;
    case CUBLASLT_EPILOGUE_DGELU: ep->dgelu = true; return true;
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: ep->dgelu = true, ep->bgrad = 'D'; return true;
    case CUBLASLT_EPILOGUE_BGRADA: ep->bgrad = 'A'; return true;
    case CUBLASLT_EPILOGUE_BGRADB: ep->bgrad = 'B'; return true;
    }
    return false;
}

// One matrix layout on its own: what the emulation models, and ld >= rows.
cublasStatus_t check_layout(const char *fn, const char *name, const Layout &l, bool ld0_ok)
{
    if (l.order != CUBLASLT_ORDER_COL)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: %s's order %lld: only CUBLASLT_ORDER_COL is emulated", fn, name,
                      (long long)l.order);
    if (l.batch != 1 || l.mode != CUBLASLT_BATCH_MODE_STRIDED || l.plane != 0)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: %s: batches and planar complex layouts are not emulated", fn,
                      name);
    if (l.rows > INT32_MAX || l.cols > INT32_MAX)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: %s is %llu x %llu: beyond int32_t", fn, name,
                      (unsigned long long)l.rows, (unsigned long long)l.cols);
    if (ld0_ok && l.ld == 0) return CUBLAS_STATUS_SUCCESS;
    if (l.ld < 0 || (uint64_t)l.ld < l.rows)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: %s has ld %lld < its %llu rows (column-major: ld >= rows)", fn,
                      name, (long long)l.ld, (unsigned long long)l.rows);
    return CUBLAS_STATUS_SUCCESS;
}

// The shapes: op(A) m x k, op(B) k x n, C and D m x n.
cublasStatus_t check_shapes(const char *fn, Problem *p)
{
    typedef unsigned long long ull;
    const Layout &A = p->A, &B = p->B, &C = p->C, &D = p->D;
    p->m = D.rows, p->n = D.cols;
    p->k = p->ta ? A.rows : A.cols;
    const uint64_t am = p->ta ? A.cols : A.rows;
    if (am != p->m)
        return refuse(CUBLAS_STATUS_INVALID_VALUE,
                      "%s: A's layout is %llu x %llu with TRANSA %s, so op(A) has %llu rows, but D has %llu", fn,
                      (ull)A.rows, (ull)A.cols, p->ta ? "T" : "N", (ull)am, (ull)p->m);
    const uint64_t bk = p->tb ? B.cols : B.rows, bn = p->tb ? B.rows : B.cols;
    if (bk != p->k || bn != p->n)
        return refuse(CUBLAS_STATUS_INVALID_VALUE,
                      "%s: B's layout is %llu x %llu with TRANSB %s, so op(B) is %llu x %llu; it must be k x n = "
                      "%llu x %llu (k from op(A), n from D)",
                      fn, (ull)B.rows, (ull)B.cols, p->tb ? "T" : "N", (ull)bk, (ull)bn, (ull)p->k, (ull)p->n);
    if (C.rows != D.rows || C.cols != D.cols || C.type != D.type)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: C is %llu x %llu of %s, D %llu x %llu of %s: they must match",
                      fn, (ull)C.rows, (ull)C.cols, type_name(C.type), (ull)D.rows, (ull)D.cols, type_name(D.type));
    return CUBLAS_STATUS_SUCCESS;
}

// Compute and scale types, and the matrices' types [D 3.4.17, table 1].
cublasStatus_t check_types(const char *fn, const int64_t *d, Problem *p)
{
    const int64_t compute = d[CUBLASLT_MATMUL_DESC_COMPUTE_TYPE], scale = d[CUBLASLT_MATMUL_DESC_SCALE_TYPE];
    if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                      "%s: compute type %lld: only CUBLAS_COMPUTE_32F(_PEDANTIC) is emulated", fn, (long long)compute);
    if (scale != CUDA_R_32F)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                      "%s: scale type %s with CUBLAS_COMPUTE_32F: only CUDA_R_32F is emulated", fn, type_name(scale));
    p->ab = (int)p->A.type, p->cd = (int)p->D.type;
    const bool ok = p->A.type == p->B.type && ((p->ab == CUDA_R_32F && p->cd == CUDA_R_32F) ||
                                               (p->ab == CUDA_R_16F && (p->cd == CUDA_R_16F || p->cd == CUDA_R_32F)) ||
                                               (p->ab == CUDA_R_16BF && (p->cd == CUDA_R_16BF || p->cd == CUDA_R_32F)));
    if (!ok)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                      "%s: A %s, B %s -> C/D %s with CUBLAS_COMPUTE_32F is not a supported combination "
                      "(32F->32F, 16F->16F|32F, 16BF->16BF|32F)",
                      fn, type_name(p->A.type), type_name(p->B.type), type_name(p->D.type));
    return CUBLAS_STATUS_SUCCESS;
}

// The descriptor's other attributes: what the emulation models, and the narrow-type-only ones.
cublasStatus_t check_desc_rest(const char *fn, const int64_t *d, Problem *p)
{
    if (d[CUBLASLT_MATMUL_DESC_TRANSC] != CUBLAS_OP_N)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: TRANSC must be CUBLAS_OP_N", fn);
    if (d[CUBLASLT_MATMUL_DESC_FILL_MODE] != CUBLAS_FILL_MODE_FULL)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: FILL_MODE other than FULL is not emulated", fn);
    p->pmode = (int)d[CUBLASLT_MATMUL_DESC_POINTER_MODE];
    if (p->pmode != CUBLASLT_POINTER_MODE_HOST && p->pmode != CUBLASLT_POINTER_MODE_DEVICE)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: vector pointer modes are not emulated", fn);
    for (size_t i = 0; i < DESC_TABLE.n; i++) {
        const AttrInfo &a = DESC_ATTRS[i];
        if (a.use == USE_DEFAULT_ONLY && d[a.id] != a.def)
            return refuse(CUBLAS_STATUS_INVALID_VALUE,
                          "%s: %s is set: scales and amax are for narrow (FP8/FP4) types only", fn, a.name);
    }
    return CUBLAS_STATUS_SUCCESS;
}

// The epilogue, its bias and aux attributes [D 3.3.2, 3.3.9].
cublasStatus_t check_epilogue(const char *fn, const int64_t *d, Problem *p)
{
    p->epi = (uint32_t)d[CUBLASLT_MATMUL_DESC_EPILOGUE];
    if (!epilogue_of(p->epi, &p->ep))
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: epilogue %u is not emulated", fn, p->epi);
    p->bias = reinterpret_cast<const void *>(d[CUBLASLT_MATMUL_DESC_BIAS_POINTER]);
    p->aux = reinterpret_cast<void *>(d[CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER]);
    const int64_t bt = d[CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE], at = d[CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE];
    p->bias_type = bt == -1 ? p->cd : (int)bt;
    p->aux_type = at == -1 ? p->cd : (int)at;
    p->aux_ld = d[CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD];
    // (emulation) not documented which status: INVALID_VALUE, as for the aux type
    if (p->bias_used() && p->bias_type != p->cd)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: BIAS_DATA_TYPE %s with D %s: the bias%s has D's type", fn,
                      type_name(p->bias_type), type_name(p->cd), p->ep.bgrad ? " gradient" : "");
    if (!(p->ep.aux_out || p->ep.dgelu)) return CUBLAS_STATUS_SUCCESS;
    if (p->aux_type != p->cd)
        return refuse(CUBLAS_STATUS_INVALID_VALUE,
                      "%s: EPILOGUE_AUX_DATA_TYPE %s with D %s: the GELU input has D's type", fn,
                      type_name(p->aux_type), type_name(p->cd));
    if (p->aux_ld % 8 != 0 || p->aux_ld < 0 || (uint64_t)p->aux_ld < p->m)
        return refuse(CUBLAS_STATUS_INVALID_VALUE,
                      "%s: EPILOGUE_AUX_LD %lld: it must be divisible by 8 and >= D's %llu rows", fn,
                      (long long)p->aux_ld, (unsigned long long)p->m);
    return CUBLAS_STATUS_SUCCESS;
}

uint64_t fnv(uint64_t h, int64_t v)
{
    for (int i = 0; i < 8; i++) h = (h ^ (uint8_t)(v >> (8 * i))) * 1099511628211ull;
    return h;
}

// The descriptor's and layouts' values an algo is chosen for (pointers excepted).
uint64_t problem_key(const int64_t *d, const Layout *const ls[4])
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < DESC_TABLE.n; i++) {
        const int id = DESC_ATTRS[i].id;
        if (id != CUBLASLT_MATMUL_DESC_BIAS_POINTER && id != CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER)
            h = fnv(h, d[id]);
    }
    for (int i = 0; i < 4; i++) {
        const Layout &l = *ls[i];
        const int64_t v[8] = {l.type, l.order, (int64_t)l.rows, (int64_t)l.cols, l.ld, l.batch, l.plane, l.mode};
        for (int64_t x : v) h = fnv(h, x);
    }
    return h;
}

// Everything cublasLtMatmulAlgoGetHeuristic and cublasLtMatmul check before pointers.
cublasStatus_t validate(const char *fn, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                        cublasLtMatrixLayout_t lc, cublasLtMatrixLayout_t ld, Problem *p)
{
    if (!lc) lc = ld; // "If Cdesc is omitted, this function assumes it to be equal to Ddesc" [D 3.4.17]
    if (!is_live(desc, OBJ_DESC))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: the matmul descriptor %p is not live", fn, (void *)desc);
    const cublasLtMatrixLayout_t ls[4] = {la, lb, ld, lc}; // D before C: in place, C's layout is D's
    const char *const names[4] = {"A", "B", "D", "C"};
    Layout *const out[4] = {&p->A, &p->B, &p->D, &p->C};
    for (int i = 0; i < 4; i++) {
        if (!is_live(ls[i], OBJ_LAYOUT))
            return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: %s's layout %p is not live", fn, names[i], (void *)ls[i]);
        *out[i] = layout_of(ls[i]);
        const cublasStatus_t s = check_layout(fn, names[i], *out[i], i == 3);
        if (s != CUBLAS_STATUS_SUCCESS) return s;
    }
    const int64_t *d = reinterpret_cast<const Obj *>(desc)->val;
    p->ta = d[CUBLASLT_MATMUL_DESC_TRANSA] != CUBLAS_OP_N;
    p->tb = d[CUBLASLT_MATMUL_DESC_TRANSB] != CUBLAS_OP_N;
    cublasStatus_t s = check_shapes(fn, p);
    if (s == CUBLAS_STATUS_SUCCESS) s = check_types(fn, d, p);
    if (s == CUBLAS_STATUS_SUCCESS) s = check_desc_rest(fn, d, p);
    if (s == CUBLAS_STATUS_SUCCESS) s = check_epilogue(fn, d, p);
    const Layout *const keyed[4] = {&p->A, &p->B, &p->C, &p->D};
    p->key = problem_key(d, keyed);
    return s;
}

// ---- algorithms: what cublasLtMatmulAlgo_t holds here ----
enum { ALGO_MAGIC = 0x6f676c41744c6d65 }; // "emLtAlgo"
enum { AL_A, AL_B, AL_C, AL_D, AL_BIAS, AL_AUX };
const char *const AL_NAME[6] = {"A", "B", "C", "D", "bias", "aux"};

struct AlgoData {
    uint64_t magic;
    uint64_t key; // Problem::key it was chosen for
    uint32_t m, n, k, epi;
    uint16_t align[6];  // A, B, C, D: promised by the preference; bias, aux: seen by the heuristic
    uint32_t id;        // which of the emulation's algorithms (ALGO_WORKSPACE)
    uint64_t workspace; // bytes it needs
};
static_assert(sizeof(AlgoData) <= sizeof(cublasLtMatmulAlgo_t), "the algo's data fits the header's struct");

// The largest power of two dividing p, at most 256; NULL counts as 256.
uint32_t align_of(const void *p)
{
    const uintptr_t a = (uintptr_t)p;
    uint32_t al = 1;
    while (al < 256 && (a & al) == 0) al *= 2;
    return al;
}

// The emulation's algorithms, in the heuristic's order: the workspace each needs (their results
// are identical).
const uint64_t ALGO_WORKSPACE[] = {0, 1u << 20, 4u << 20, 0};
enum { ALGOS = sizeof(ALGO_WORKSPACE) / sizeof(ALGO_WORKSPACE[0]) };
// Their split-K reduction schemes (emulation): see the header.
const uint32_t ALGO_REDUCTION[ALGOS] = {CUBLASLT_REDUCTION_SCHEME_NONE, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE,
                                        CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE, CUBLASLT_REDUCTION_SCHEME_NONE};

// The heuristic's first choice (id 0, no workspace), which works with any pointer aligned to its
// element size; it is refused when the preference promises less (no algorithm found).
cublasStatus_t choose(const char *fn, const Problem &p, const uint32_t promised[4], AlgoData *a)
{
    memset(a, 0, sizeof(*a));
    a->magic = ALGO_MAGIC, a->key = p.key, a->epi = p.epi;
    a->m = (uint32_t)p.m, a->n = (uint32_t)p.n, a->k = (uint32_t)p.k;
    const int types[6] = {p.ab, p.ab, p.cd, p.cd, p.bias_type, p.aux_type};
    for (int i = 0; i < 4; i++) {
        a->align[i] = (uint16_t)(promised[i] > 256 ? 256 : promised[i]);
        if (promised[i] == 0 || promised[i] % elem_size(types[i]) != 0)
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                          "%s: no algorithm for %s at a %u-byte alignment (MIN_ALIGNMENT_%s_BYTES), below its "
                          "%zu-byte elements",
                          fn, AL_NAME[i], promised[i], AL_NAME[i], elem_size(types[i]));
    }
    a->align[AL_BIAS] = align_of(p.bias_used() ? p.bias : nullptr);
    a->align[AL_AUX] = align_of(p.ep.aux_out || p.ep.dgelu ? p.aux : nullptr);
    for (int i = AL_BIAS; i <= AL_AUX; i++)
        if (a->align[i] < elem_size(types[i]))
            return refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                          "%s: no algorithm for a %s pointer aligned to %u bytes, below its "
                          "%zu-byte elements",
                          fn, AL_NAME[i], a->align[i], elem_size(types[i]));
    a->workspace = 0;
    return CUBLAS_STATUS_SUCCESS;
}

// ---- the computation ----
float load(const void *p, int type, size_t i)
{
    switch (type) {
    case CUDA_R_16F: return __half2float(static_cast<const __half *>(p)[i]);
    case CUDA_R_16BF: return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
    default: return static_cast<const float *>(p)[i];
    }
}

void store(void *p, int type, size_t i, float v)
{
    switch (type) {
    case CUDA_R_16F: static_cast<__half *>(p)[i] = __float2half_rn(v); break;
    case CUDA_R_16BF: static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float *>(p)[i] = v;
    }
}

const float SQRT_2_OVER_PI = 0.7978845608028654f, GELU_C = 0.044715f;

float gelu(float x) { return 0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * (x + GELU_C * x * x * x))); }

float gelu_grad(float x)
{
    const float t = tanhf(SQRT_2_OVER_PI * (x + GELU_C * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_C * x * x);
}

// ab (alpha * acc) + beta * C + bias, then the activation, in fp32; stored in D's type. Returns the
// fp32 value stored.
float finish(const Problem &p, uint64_t i, uint64_t j, float ab, float beta, const void *C, void *D)
{
    float v = ab;
    if (beta != 0.0f) v += beta * load(C, p.cd, i + j * (uint64_t)p.C.ld);
    if (p.ep.bias) v += load(p.bias, p.bias_type, i);
    const uint64_t ia = i + j * (uint64_t)p.aux_ld;
    if (p.ep.aux_out) store(p.aux, p.aux_type, ia, v);
    if (p.ep.gelu) v = gelu(v);
    if (p.ep.relu) v = fmaxf(v, 0.0f);
    if (p.ep.dgelu) v *= gelu_grad(load(p.aux, p.aux_type, ia));
    store(D, p.cd, i + j * (uint64_t)p.D.ld, v);
    return v;
}

// The bias-gradient epilogues' vector: sums over k of op(A)'s rows or op(B)'s columns (a, b as
// compute lays them out, k contiguous), or over the columns of D's values (d_rows).
void bias_gradient(const Problem &p, const std::vector<float> &a, const std::vector<float> &b,
                   const std::vector<double> &d_rows)
{
    const uint64_t k = p.k;
    for (uint64_t i = 0; i < p.bias_len(); i++) {
        double s = 0.0;
        if (p.ep.bgrad == 'D') s = d_rows[i];
        else
            for (uint64_t q = 0; q < k; q++) s += (double)(p.ep.bgrad == 'A' ? a[i * k + q] : b[i * k + q]);
        store(const_cast<void *>(p.bias), p.bias_type, i, (float)s);
    }
}

// v rounded to D's type (an output-type split-K partial).
float in_d_type(const Problem &p, float v)
{
    uint32_t buf = 0;
    store(&buf, p.cd, 0, v);
    return load(&buf, p.cd, 0);
}

// Products of fp32 values are exact in double, and summed in double; split_out: algorithm 2's two
// parts of K, each rounded to D's type (the header).
void compute(const Problem &p, float alpha, const void *A, const void *B, float beta, const void *C, void *D,
             bool split_out)
{
    const uint64_t m = p.m, n = p.n, k = p.k, lda = (uint64_t)p.A.ld, ldb = (uint64_t)p.B.ld;
    std::vector<float> a(m * k), b(n * k); // op(A) by rows and op(B) by columns, k contiguous
    for (uint64_t i = 0; i < m; i++)
        for (uint64_t q = 0; q < k; q++) a[i * k + q] = load(A, p.ab, p.ta ? q + i * lda : i + q * lda);
    for (uint64_t j = 0; j < n; j++)
        for (uint64_t q = 0; q < k; q++) b[j * k + q] = load(B, p.ab, p.tb ? j + q * ldb : q + j * ldb);
    std::vector<double> d_rows(p.ep.bgrad == 'D' ? m : 0);
    for (uint64_t j = 0; j < n; j++)
        for (uint64_t i = 0; i < m; i++) {
            const float *x = &a[i * k], *y = &b[j * k];
            double acc = 0.0, part = 0.0;
            const uint64_t half = split_out && k >= 2 ? k / 2 : 0;
            for (uint64_t q = 0; q < half; q++) part += (double)x[q] * (double)y[q];
            for (uint64_t q = half; q < k; q++) acc += (double)x[q] * (double)y[q];
            const float ab = half ? in_d_type(p, alpha * (float)part) + in_d_type(p, alpha * (float)acc)
                                  : alpha * (float)acc;
            const float v = finish(p, i, j, ab, beta, C, D);
            if (p.ep.bgrad == 'D') d_rows[i] += (double)v;
        }
    if (p.ep.bgrad) bias_gradient(p, a, b, d_rows);
}

// ---- cublasLtMatmul's checks of pointers ----
struct Span { // a column-major matrix in memory
    const char *name;
    uintptr_t p;
    uint64_t rows, cols, ld, es;
};

uint64_t span_bytes(const Span &s)
{
    if (!s.rows || !s.cols) return 0;
    return ((s.cols - 1) * s.ld + s.rows) * s.es;
}

// Whether some byte of x's elements is one of y's: each column is one interval.
bool overlaps(const Span &x, const Span &y)
{
    if (!span_bytes(x) || !span_bytes(y)) return false;
    const uint64_t xr = x.rows * x.es, yr = y.rows * y.es, ys = y.ld * y.es;
    for (uint64_t j = 0; j < x.cols; j++) {
        const uint64_t lo = x.p + j * x.ld * x.es, hi = lo + xr;
        uint64_t c = 0; // the first column of y ending after lo
        if (ys && lo >= y.p + yr) c = (lo - (y.p + yr)) / ys + 1;
        if (!ys && lo >= y.p + yr) continue;
        if (c < y.cols && y.p + c * ys < hi) return true;
    }
    return false;
}

cublasStatus_t check_alignment(const char *fn, const AlgoData &al, const void *const ptrs[6], const int types[6])
{
    for (int i = 0; i < 6; i++) {
        if (!ptrs[i]) continue;
        const uint32_t need = al.align[i] ? al.align[i] : 1;
        if ((uintptr_t)ptrs[i] % need != 0 || (uintptr_t)ptrs[i] % elem_size(types[i]) != 0)
            return refuse(CUBLAS_STATUS_INVALID_VALUE,
                          "%s: %s at %p is %u-byte aligned, but the algorithm was chosen for %u-byte alignment (%s)",
                          fn, AL_NAME[i], ptrs[i], align_of(ptrs[i]), need,
                          i < AL_BIAS ? "the preference's MIN_ALIGNMENT" : "the pointer the heuristic saw");
    }
    return CUBLAS_STATUS_SUCCESS;
}

// NULLs, the in-place rule, alignments [D 3.4.17].
cublasStatus_t check_pointers(const char *fn, const Problem &p, const AlgoData &al, const void *A, const void *B,
                              float beta, const void *C, const void *D)
{
    const bool aux_used = p.ep.aux_out || p.ep.dgelu;
    const bool a_used = p.m && p.k, b_used = p.k && p.n, d_used = p.m && p.n;
    if ((!A && a_used) || (!B && b_used) || (!D && d_used) || (!C && beta != 0.0f))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: A, B, D (and C when beta != 0) must not be NULL", fn);
    if (p.bias_used() && !p.bias)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: epilogue %u needs BIAS_POINTER", fn, p.epi);
    if (aux_used && !p.aux)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: epilogue %u needs EPILOGUE_AUX_POINTER", fn, p.epi);
    if (C == D && !same_layout(p.C, p.D))
        return refuse(CUBLAS_STATUS_INVALID_VALUE,
                      "%s: C == D (in place) needs Cdesc equal to Ddesc: C has ld %lld, D %lld", fn, (long long)p.C.ld,
                      (long long)p.D.ld);
    const Span sc = {"C", (uintptr_t)C, p.m, p.n, (uint64_t)p.C.ld, elem_size(p.cd)};
    const Span sd = {"D", (uintptr_t)D, p.m, p.n, (uint64_t)p.D.ld, elem_size(p.cd)};
    if (C != D && beta != 0.0f && overlaps(sd, sc))
        return refuse(CUBLAS_STATUS_INVALID_VALUE,
                      "%s: C and D overlap without being the same matrix (in place: C == D)", fn);
    const void *const ptrs[6] = {
        A, B, beta != 0.0f ? C : nullptr, D, p.bias_used() ? p.bias : nullptr, aux_used ? p.aux : nullptr};
    const int types[6] = {p.ab, p.ab, p.cd, p.cd, p.bias_type, p.aux_type};
    return check_alignment(fn, al, ptrs, types);
}

// Device memory for every byte read or written (the process ends otherwise), and outputs that
// alias inputs: a race on a GPU (emulation: it ends the process too).
void require_memory(const Problem &p, const void *A, const void *B, float beta, const void *C, const void *D)
{
    const uint64_t ea = elem_size(p.ab), ecd = elem_size(p.cd);
    const Span s[6] = {
        {"A", (uintptr_t)A, p.A.rows, p.A.cols, (uint64_t)p.A.ld, ea},
        {"B", (uintptr_t)B, p.B.rows, p.B.cols, (uint64_t)p.B.ld, ea},
        {"C", (uintptr_t)C, beta != 0.0f ? p.m : 0, p.n, (uint64_t)p.C.ld, ecd},
        {"D", (uintptr_t)D, p.m, p.n, (uint64_t)p.D.ld, ecd},
        {"bias", (uintptr_t)p.bias, p.bias_used() ? p.bias_len() : 0, 1, p.bias_len(), elem_size(p.bias_type)},
        {"aux", (uintptr_t)p.aux, p.ep.aux_out || p.ep.dgelu ? p.m : 0, p.n, (uint64_t)p.aux_ld, elem_size(p.aux_type)},
    };
    char what[64];
    for (const Span &x : s) {
        const uint64_t bytes = span_bytes(x);
        snprintf(what, sizeof(what), "cublasLtMatmul: %s", x.name);
        if (bytes) mc_emu::require_device((const void *)x.p, bytes, what);
    }
    const Span *outs[3] = {&s[3], p.ep.aux_out ? &s[5] : nullptr, p.ep.bgrad ? &s[4] : nullptr};
    for (const Span *o : outs)
        for (int i = 0; o && i < 6; i++) {
            if (&s[i] == o || (i == 2 && o == &s[3] && C == D)) continue;
            if (overlaps(*o, s[i]))
                mc_emu::fail("cublasLtMatmul: the output %s overlaps %s: the result would race on a GPU", o->name,
                             s[i].name);
        }
}

float read_scalar(const char *name, const void *p, int pmode)
{
    if (pmode == CUBLASLT_POINTER_MODE_DEVICE) {
        char what[48];
        snprintf(what, sizeof(what), "cublasLtMatmul: %s", name);
        mc_emu::require_device(p, sizeof(float), what);
    } else if (mc_emu::mem_kind(p, sizeof(float)) == mc_emu::MEM_DEVICE) {
        mc_emu::fail("cublasLtMatmul: %s at %p is device memory, but the pointer mode is CUBLASLT_POINTER_MODE_HOST",
                     name, p);
    }
    float v;
    memcpy(&v, p, sizeof(v));
    return v;
}

// The algo given to cublasLtMatmul, or the implicit heuristic's for NULL (emulation: it takes the
// pointers' own alignments as the preference).
cublasStatus_t algo_for(const char *fn, const Problem &p, const cublasLtMatmulAlgo_t *algo, const void *A,
                        const void *B, const void *C, const void *D, AlgoData *al)
{
    if (!algo) {
        const uint32_t promised[4] = {align_of(A), align_of(B), align_of(C), align_of(D)};
        return choose(fn, p, promised, al);
    }
    memcpy(al, algo, sizeof(*al));
    if (al->magic != ALGO_MAGIC || al->id >= ALGOS || al->workspace != ALGO_WORKSPACE[al->id])
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: the algo was not given by cublasLtMatmulAlgoGetHeuristic", fn);
    if (al->m != p.m || al->n != p.n || al->k != p.k || al->epi != p.epi)
        return refuse(CUBLAS_STATUS_INVALID_VALUE,
                      "%s: the algo was chosen for m %u n %u k %u, epilogue %u; this call has m %llu n %llu k %llu, "
                      "epilogue %u",
                      fn, al->m, al->n, al->k, al->epi, (unsigned long long)p.m, (unsigned long long)p.n,
                      (unsigned long long)p.k, p.epi);
    if (al->key != p.key)
        return refuse(CUBLAS_STATUS_INVALID_VALUE,
                      "%s: the descriptor or a layout (type, op, ld, epilogue attribute) differs from the ones the "
                      "algo was chosen for",
                      fn);
    return CUBLAS_STATUS_SUCCESS;
}

// MC_EMU_CUBLASLT_SLOW_ALGO=ID[,ID...]: the algorithms a test makes slow (read at each matmul:
// a test may change it).
bool slow_algo(uint32_t id)
{
    uint32_t mask = 0;
    const char *s = getenv("MC_EMU_CUBLASLT_SLOW_ALGO");
    for (char *end = nullptr; s && *s; s = *end ? end + 1 : end) {
        const long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v >= ALGOS || (*end && *end != ','))
            mc_emu::fail("MC_EMU_CUBLASLT_SLOW_ALGO=%s: a list of algorithm ids 0..%d",
                         getenv("MC_EMU_CUBLASLT_SLOW_ALGO"), ALGOS - 1);
        mask |= 1u << v;
    }
    return (mask >> id) & 1u;
}

// The emulated device's clock moves on by ms.
void spend_ms(double ms) { mc_emu::clock_advance_ns((uint64_t)(ms * 1e6)); }

// The launch record's name (MC_EMU_HASH, MC_EMU_PROFILE): the call and its epilogue.
const char *epilogue_name(uint32_t e)
{
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "cublasLtMatmul";
    case CUBLASLT_EPILOGUE_RELU: return "cublasLtMatmul RELU";
    case CUBLASLT_EPILOGUE_BIAS: return "cublasLtMatmul BIAS";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "cublasLtMatmul RELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU: return "cublasLtMatmul GELU";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "cublasLtMatmul GELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU_AUX: return "cublasLtMatmul GELU_AUX";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "cublasLtMatmul GELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DGELU: return "cublasLtMatmul DGELU";
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return "cublasLtMatmul DGELU_BGRAD";
    case CUBLASLT_EPILOGUE_BGRADA: return "cublasLtMatmul BGRADA";
    case CUBLASLT_EPILOGUE_BGRADB: return "cublasLtMatmul BGRADB";
    }
    return "cublasLtMatmul";
}

cublasStatus_t check_workspace(const char *fn, const AlgoData &al, void *workspace, size_t bytes)
{
    if (bytes < al.workspace)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: workspace of %zu bytes, the algo needs %llu", fn, bytes,
                      (unsigned long long)al.workspace);
    if (bytes && !workspace)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: %zu bytes of workspace at NULL", fn, bytes);
    if ((uintptr_t)workspace % 256 != 0)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: the workspace at %p is not 256-byte aligned", fn, workspace);
    if (bytes) mc_emu::require_device(workspace, bytes, "cublasLtMatmul: workspace");
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

// ---- the API ----
extern "C" {

const char *cublasLtGetStatusName(cublasStatus_t status) { return status_name(status); }

const char *cublasLtGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized (a handle not from cublasLtCreate)";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "a licensing error";
    }
    return "unknown status";
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle)
{
    if (!handle) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate: lightHandle is NULL");
    cublasLtContext *h = new (std::nothrow) cublasLtContext();
    if (!h) return CUBLAS_STATUS_ALLOC_FAILED;
    enlist(h, OBJ_HANDLE);
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle)
{
    if (!handle) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtDestroy: lightHandle is NULL");
    if (!unlist(handle, OBJ_HANDLE))
        return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy: %p is not a live handle", (void *)handle);
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType)
{
    if (!desc) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescCreate: matmulDesc is NULL");
    Obj *o = new_obj(DESC_TABLE, OBJ_DESC);
    if (!o) return CUBLAS_STATUS_ALLOC_FAILED;
    o->val[CUBLASLT_MATMUL_DESC_COMPUTE_TYPE] = computeType;
    o->val[CUBLASLT_MATMUL_DESC_SCALE_TYPE] = scaleType;
    *desc = reinterpret_cast<cublasLtMatmulDesc_t>(o);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc)
{
    return destroy_obj("cublasLtMatmulDescDestroy", desc, OBJ_DESC);
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t sizeInBytes)
{
    return set_attr("cublasLtMatmulDescSetAttribute", DESC_TABLE, desc, OBJ_DESC, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, void *buf,
                                              size_t sizeInBytes, size_t *sizeWritten)
{
    return get_attr("cublasLtMatmulDescGetAttribute", DESC_TABLE, desc, OBJ_DESC, attr, buf, sizeInBytes, sizeWritten);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld)
{
    if (!layout) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate: matLayout is NULL");
    Obj *o = new_obj(LAYOUT_TABLE, OBJ_LAYOUT);
    if (!o) return CUBLAS_STATUS_ALLOC_FAILED;
    // the documented returns are ALLOC_FAILED and SUCCESS: the values are checked where they are used
    o->val[CUBLASLT_MATRIX_LAYOUT_TYPE] = type;
    o->val[CUBLASLT_MATRIX_LAYOUT_ROWS] = (int64_t)rows;
    o->val[CUBLASLT_MATRIX_LAYOUT_COLS] = (int64_t)cols;
    o->val[CUBLASLT_MATRIX_LAYOUT_LD] = ld;
    *layout = reinterpret_cast<cublasLtMatrixLayout_t>(o);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout)
{
    return destroy_obj("cublasLtMatrixLayoutDestroy", layout, OBJ_LAYOUT);
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t sizeInBytes)
{
    return set_attr("cublasLtMatrixLayoutSetAttribute", LAYOUT_TABLE, layout, OBJ_LAYOUT, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                void *buf, size_t sizeInBytes, size_t *sizeWritten)
{
    return get_attr("cublasLtMatrixLayoutGetAttribute", LAYOUT_TABLE, layout, OBJ_LAYOUT, attr, buf, sizeInBytes,
                    sizeWritten);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    if (!pref) return refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceCreate: pref is NULL");
    Obj *o = new_obj(PREF_TABLE, OBJ_PREF);
    if (!o) return CUBLAS_STATUS_ALLOC_FAILED;
    *pref = reinterpret_cast<cublasLtMatmulPreference_t>(o);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    return destroy_obj("cublasLtMatmulPreferenceDestroy", pref, OBJ_PREF);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t sizeInBytes)
{
    return set_attr("cublasLtMatmulPreferenceSetAttribute", PREF_TABLE, pref, OBJ_PREF, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void *buf,
                                                    size_t sizeInBytes, size_t *sizeWritten)
{
    return get_attr("cublasLtMatmulPreferenceGetAttribute", PREF_TABLE, pref, OBJ_PREF, attr, buf, sizeInBytes,
                    sizeWritten);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                                              cublasLtMatrixLayout_t lc, cublasLtMatrixLayout_t ld,
                                              cublasLtMatmulPreference_t pref, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t results[], int *returnAlgoCount)
{
    const char *fn = "cublasLtMatmulAlgoGetHeuristic";
    if (!is_live(handle, OBJ_HANDLE))
        return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "%s: %p is not a handle from cublasLtCreate", fn, (void *)handle);
    if (requestedAlgoCount <= 0 || !results || !returnAlgoCount)
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: requestedAlgoCount %d, results %p, returnAlgoCount %p", fn,
                      requestedAlgoCount, (void *)results, (void *)returnAlgoCount);
    *returnAlgoCount = 0;
    if (!is_live(pref, OBJ_PREF))
        return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: the preference %p is not live", fn, (void *)pref);
    Problem p;
    cublasStatus_t s = validate(fn, desc, la, lb, lc, ld, &p);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    const int64_t *pv = reinterpret_cast<const Obj *>(pref)->val;
    const char *none = getenv("MC_EMU_CUBLASLT_NO_ALGO");
    if (none && *none == '1')
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: MC_EMU_CUBLASLT_NO_ALGO=1: no algorithm (emulation)", fn);
    if (pv[CUBLASLT_MATMUL_PREF_SEARCH_MODE] != CUBLASLT_SEARCH_BEST_FIT)
        return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "%s: only CUBLASLT_SEARCH_BEST_FIT is emulated", fn);
    const uint32_t promised[4] = {(uint32_t)pv[CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES],
                                  (uint32_t)pv[CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES],
                                  (uint32_t)pv[CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES],
                                  (uint32_t)pv[CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES]};
    AlgoData a;
    s = choose(fn, p, promised, &a);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    const uint64_t max_ws = (uint64_t)pv[CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES];
    const uint32_t schemes = (uint32_t)pv[CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK];
    int count = 0;
    for (int id = 0; id < ALGOS && count < requestedAlgoCount; id++) {
        if (ALGO_WORKSPACE[id] > max_ws) continue;
        if (ALGO_REDUCTION[id] != CUBLASLT_REDUCTION_SCHEME_NONE && !(ALGO_REDUCTION[id] & schemes)) continue;
        a.id = (uint32_t)id, a.workspace = ALGO_WORKSPACE[id];
        memset(&results[count], 0, sizeof(results[count]));
        memcpy(&results[count].algo, &a, sizeof(a));
        results[count].workspaceSize = a.workspace;
        results[count].state = CUBLAS_STATUS_SUCCESS;
        results[count].wavesCount = 1.0f;
        count++;
    }
    *returnAlgoCount = count;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t la, const void *B, cublasLtMatrixLayout_t lb, const void *beta,
                              const void *C, cublasLtMatrixLayout_t lc, void *D, cublasLtMatrixLayout_t ld,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSizeInBytes,
                              cudaStream_t stream)
{
    (void)stream; // the emulated device runs each piece of work when it is issued
    const char *fn = "cublasLtMatmul";
    if (!is_live(handle, OBJ_HANDLE))
        return refuse(CUBLAS_STATUS_NOT_INITIALIZED, "%s: %p is not a handle from cublasLtCreate", fn, (void *)handle);
    Problem p;
    cublasStatus_t s = validate(fn, desc, la, lb, lc, ld, &p);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    AlgoData al;
    s = algo_for(fn, p, algo, A, B, C, D, &al);
    if (s == CUBLAS_STATUS_SUCCESS) s = check_workspace(fn, al, workspace, workspaceSizeInBytes);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    if (!alpha || !beta) return refuse(CUBLAS_STATUS_INVALID_VALUE, "%s: alpha and beta must not be NULL", fn);
    const float a = read_scalar("alpha", alpha, p.pmode), b = read_scalar("beta", beta, p.pmode);
    s = check_pointers(fn, p, al, A, B, b, C, D);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    require_memory(p, A, B, b, C, D);
    const bool split_out = ALGO_REDUCTION[al.id] == CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
    compute(p, a, A, B, b, C, D, split_out);
    mc_emu::clock_advance_ns(p.m * p.n * p.k / (split_out ? 2000 : 1000) + 1000);
    if (slow_algo(al.id)) spend_ms(20.0);
    mc_emu::profile_record(epilogue_name(p.epi));
    mc_emu::after_launch(epilogue_name(p.epi));
    return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
