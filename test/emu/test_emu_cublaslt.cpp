// The emulated cuBLASLt (test/emu/cublaslt.cpp) against a naive column-major reference written
// from cuBLASLt's definition (D = alpha * op(A) op(B) + beta * C, then the epilogue), and its
// refusals of what the documentation forbids. TAP on stdout; exit status 1 when a test fails.
// Device memory comes from the emulator's cudaMalloc; the refusals that end the process (memory
// that is not the device's, outputs aliasing inputs) run in a child process.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "test/emu/child.h"

#include "test/emu/tap.h"

namespace {

// ---- values of the three types, as the host sees them ----
size_t esize(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

const char *tname(cudaDataType_t t) { return t == CUDA_R_32F ? "fp32" : t == CUDA_R_16F ? "fp16" : "bf16"; }

void put(void *p, cudaDataType_t t, size_t i, float v)
{
    if (t == CUDA_R_32F)
        static_cast<float *>(p)[i] = v;
    else if (t == CUDA_R_16F)
        static_cast<__half *>(p)[i] = __float2half_rn(v);
    else
        static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
}

float get(const void *p, cudaDataType_t t, size_t i)
{
    if (t == CUDA_R_32F) return static_cast<const float *>(p)[i];
    if (t == CUDA_R_16F) return __half2float(static_cast<const __half *>(p)[i]);
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
}

float rounded(cudaDataType_t t, float v)
{
    unsigned char b[4];
    put(b, t, 0, v);
    return get(b, t, 0);
}

uint32_t g_rng = 12345;
float rnd(float lo, float hi)
{
    g_rng = g_rng * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(g_rng >> 8) / 16777216.0f;
}

const float SENTINEL = -1024.0f; // exact in every type: padding that must stay as it is
enum { SLACK = 512 };            // bytes after each buffer, for shifted pointers

// A device buffer holding vals in type t (plus SLACK bytes).
void *to_device(cudaDataType_t t, const std::vector<float> &vals)
{
    std::vector<unsigned char> bytes(vals.size() * esize(t) + SLACK);
    for (size_t i = 0; i < vals.size(); i++) put(bytes.data(), t, i, vals[i]);
    void *d = nullptr;
    if (cudaMalloc(&d, bytes.size()) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        exit(2);
    }
    cudaMemcpy(d, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
    return d;
}

std::vector<float> from_device(const void *d, cudaDataType_t t, size_t n)
{
    std::vector<unsigned char> bytes(n * esize(t));
    cudaMemcpy(bytes.data(), d, bytes.size(), cudaMemcpyDeviceToHost);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = get(bytes.data(), t, i);
    return v;
}

// ---- one matmul, set up as a user of the documented API would ----
struct Spec {
    bool ta = false, tb = false; // CUBLAS_OP_T on A, B
    int64_t m = 7, n = 5, k = 6;
    int64_t pad = 0; // every ld is its matrix's rows + pad
    cudaDataType_t ab = CUDA_R_32F, cd = CUDA_R_32F;
    float alpha = 1.0f, beta = 0.0f;
    uint32_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    bool inplace = true; // C is D (same pointer, same layout object)
    bool c_ld0 = false;  // out of place: C with ld 0, one column for all
    bool nan_c = false;  // C holds NaN (beta 0: it must not be read)
};

bool has_bias(uint32_t e) { return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
bool aux_out(uint32_t e) { return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
bool dgelu(uint32_t e) { return e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD; }
bool has_aux(uint32_t e) { return aux_out(e) || dgelu(e); }
// The bias-gradient epilogues: the vector's source ('A', 'B', 'D'), 0 for the others.
char bgrad(uint32_t e)
{
    return e == CUBLASLT_EPILOGUE_BGRADA ? 'A' : e == CUBLASLT_EPILOGUE_BGRADB ? 'B' : e == CUBLASLT_EPILOGUE_DGELU_BGRAD ? 'D' : 0;
}

struct Run {
    Spec s;
    int64_t ar, ac, br, bc, lda, ldb, ldc, ldd, ldaux;
    std::vector<float> a, b, c, d0, bias, aux; // host values, as stored
    void *A = nullptr, *B = nullptr, *C = nullptr, *D = nullptr, *dbias = nullptr, *daux = nullptr;
    std::vector<void *> owned; // what setup allocated (the pointers above may be changed)
    cublasLtHandle_t h = nullptr;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulHeuristicResult_t res;
    int count = 0;
};

std::vector<float> random_values(cudaDataType_t t, size_t n, float lo, float hi)
{
    std::vector<float> v(n);
    for (float &x : v) x = rounded(t, rnd(lo, hi));
    return v;
}

// Host values of the operands, in the stored (column-major, ld-padded) form.
void make_values(Run &r)
{
    const Spec &s = r.s;
    r.ar = s.ta ? s.k : s.m, r.ac = s.ta ? s.m : s.k;
    r.br = s.tb ? s.n : s.k, r.bc = s.tb ? s.k : s.n;
    r.lda = r.ar + s.pad, r.ldb = r.br + s.pad, r.ldd = s.m + s.pad;
    r.ldc = s.inplace ? r.ldd : s.c_ld0 ? 0 : s.m + s.pad + 1;
    r.ldaux = (s.m + 7) / 8 * 8 + 8;
    r.a = random_values(s.ab, r.lda * r.ac, -1, 1);
    r.b = random_values(s.ab, r.ldb * r.bc, -1, 1);
    const float nan = nanf("");
    r.d0.assign(r.ldd * s.n, SENTINEL);
    for (int64_t j = 0; j < s.n; j++)
        for (int64_t i = 0; i < s.m; i++)
            r.d0[i + j * r.ldd] = s.inplace && !s.nan_c && s.beta != 0 ? rounded(s.cd, rnd(-1, 1)) : nan;
    if (!s.inplace) {
        r.c = random_values(s.cd, s.c_ld0 ? s.m : r.ldc * s.n, -1, 1);
        if (s.nan_c) r.c.assign(r.c.size(), nan);
    }
    r.bias = random_values(s.cd, s.m > s.n ? s.m : s.n, -1, 1); // a bias gradient has n values with BGRADB
    r.aux.assign(r.ldaux * s.n, SENTINEL);
    if (dgelu(s.epi))
        for (int64_t j = 0; j < s.n; j++)
            for (int64_t i = 0; i < s.m; i++) r.aux[i + j * r.ldaux] = rounded(s.cd, rnd(-3, 3));
}

template <typename T> void set_desc(Run &r, cublasLtMatmulDescAttributes_t a, T v)
{
    if (cublasLtMatmulDescSetAttribute(r.desc, a, &v, sizeof(v)) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "setting matmul attribute %d failed\n", (int)a);
        exit(2);
    }
}

// The device operands, the descriptor, layouts and preference of r.s.
void setup(Run &r, const Spec &s)
{
    r.s = s;
    make_values(r);
    r.A = to_device(s.ab, r.a), r.B = to_device(s.ab, r.b), r.D = to_device(s.cd, r.d0);
    r.C = s.inplace ? r.D : to_device(s.cd, r.c);
    r.dbias = to_device(s.cd, r.bias), r.daux = to_device(s.cd, r.aux);
    r.owned = {r.A, r.B, r.D, r.dbias, r.daux};
    if (!s.inplace) r.owned.push_back(r.C);
    cublasLtCreate(&r.h);
    cublasLtMatmulDescCreate(&r.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    set_desc<int32_t>(r, CUBLASLT_MATMUL_DESC_TRANSA, s.ta ? CUBLAS_OP_T : CUBLAS_OP_N);
    set_desc<int32_t>(r, CUBLASLT_MATMUL_DESC_TRANSB, s.tb ? CUBLAS_OP_T : CUBLAS_OP_N);
    if (s.epi != CUBLASLT_EPILOGUE_DEFAULT) set_desc<uint32_t>(r, CUBLASLT_MATMUL_DESC_EPILOGUE, s.epi);
    if (has_bias(s.epi) || bgrad(s.epi)) set_desc<const void *>(r, CUBLASLT_MATMUL_DESC_BIAS_POINTER, r.dbias);
    if (has_aux(s.epi)) {
        set_desc<void *>(r, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, r.daux);
        set_desc<int64_t>(r, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, r.ldaux);
    }
    cublasLtMatrixLayoutCreate(&r.la, s.ab, r.ar, r.ac, r.lda);
    cublasLtMatrixLayoutCreate(&r.lb, s.ab, r.br, r.bc, r.ldb);
    cublasLtMatrixLayoutCreate(&r.ld, s.cd, s.m, s.n, r.ldd);
    if (s.inplace)
        r.lc = r.ld;
    else
        cublasLtMatrixLayoutCreate(&r.lc, s.cd, s.m, s.n, r.ldc);
    cublasLtMatmulPreferenceCreate(&r.pref);
    const uint64_t ws = 1 << 20;
    cublasLtMatmulPreferenceSetAttribute(r.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    memset(&r.res, 0, sizeof(r.res));
}

void teardown(Run &r)
{
    if (r.lc != r.ld) cublasLtMatrixLayoutDestroy(r.lc);
    cublasLtMatrixLayoutDestroy(r.la), cublasLtMatrixLayoutDestroy(r.lb), cublasLtMatrixLayoutDestroy(r.ld);
    cublasLtMatmulDescDestroy(r.desc);
    cublasLtMatmulPreferenceDestroy(r.pref);
    cublasLtDestroy(r.h);
    for (void *p : r.owned) cudaFree(p);
}

cublasStatus_t heuristic(Run &r)
{
    return cublasLtMatmulAlgoGetHeuristic(r.h, r.desc, r.la, r.lb, r.lc, r.ld, r.pref, 1, &r.res, &r.count);
}

cublasStatus_t matmul(Run &r, bool with_algo = true)
{
    return cublasLtMatmul(r.h, r.desc, &r.s.alpha, r.A, r.la, r.B, r.lb, &r.s.beta, r.C, r.lc, r.D, r.ld,
                          with_algo ? &r.res.algo : nullptr, nullptr, 0, 0);
}

// ---- the reference, from the definition ----
double gelu(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

double gelu_grad(double x)
{
    const double s = sqrt(2.0 / M_PI), t = tanh(s * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * s * (1.0 + 3.0 * 0.044715 * x * x);
}

double op_a(const Run &r, int64_t i, int64_t q) { return r.s.ta ? r.a[q + i * r.lda] : r.a[i + q * r.lda]; }
double op_b(const Run &r, int64_t q, int64_t j) { return r.s.tb ? r.b[j + q * r.ldb] : r.b[q + j * r.ldb]; }
double c_at(const Run &r, int64_t i, int64_t j) { return r.s.inplace ? r.d0[i + j * r.ldd] : r.c[i + j * r.ldc]; }

// Relative rounding of one store in the type, with a margin.
double out_eps(cudaDataType_t t) { return t == CUDA_R_32F ? 1e-6 : t == CUDA_R_16F ? 1.0 / 1024 : 1.0 / 128; }

// alpha op(A) op(B) + beta C + bias at (i, j), and the size of its terms (for the tolerance).
double pre_activation(const Run &r, int64_t i, int64_t j, double *mag)
{
    double acc = 0, abs_acc = 0;
    for (int64_t q = 0; q < r.s.k; q++) {
        acc += op_a(r, i, q) * op_b(r, q, j);
        abs_acc += fabs(op_a(r, i, q) * op_b(r, q, j));
    }
    double v = r.s.alpha * acc;
    *mag = fabs(r.s.alpha) * abs_acc;
    if (r.s.beta != 0) v += r.s.beta * c_at(r, i, j), *mag += fabs(r.s.beta * c_at(r, i, j));
    if (has_bias(r.s.epi)) v += r.bias[i], *mag += fabs(r.bias[i]);
    return v;
}

bool near(double got, double want, double mag, cudaDataType_t t)
{
    return fabs(got - want) <= out_eps(t) * fabs(want) + 4e-6 * (mag + 1.0);
}

// The bias-gradient epilogues' vector, from the definition: over k of op(A)'s rows (BGRADA) or
// op(B)'s columns (BGRADB), over the columns of D's GELU gradient (DGELU_BGRAD); the values past
// its length untouched. Without one, the bias is left as it was.
bool check_bias_gradient(const Run &r)
{
    const Spec &s = r.s;
    const char src = bgrad(s.epi);
    const int64_t len = src == 'B' ? s.n : s.m, all = (int64_t)r.bias.size();
    const std::vector<float> got = from_device(r.dbias, s.cd, all);
    for (int64_t i = 0; i < all; i++) {
        double want = r.bias[i], mag = 0;
        if (src && i < len) {
            want = 0;
            const int64_t terms = src == 'D' ? s.n : s.k;
            for (int64_t t = 0; t < terms; t++) {
                double v = src == 'A' ? op_a(r, i, t) : src == 'B' ? op_b(r, t, i) : 0.0;
                if (src == 'D') {
                    double m1;
                    v = pre_activation(r, i, t, &m1) * gelu_grad(r.aux[i + t * r.ldaux]);
                    mag += 1.2 * m1;
                }
                want += v, mag += fabs(v);
            }
        }
        if (src ? !near(got[i], want, mag, s.cd) : got[i] != r.bias[i])
            return printf("# bias(%lld) = %.8g, expected %.8g\n", (long long)i, got[i], want), false;
    }
    return true;
}

// D (and aux) against the reference; the padding rows untouched.
bool check(const Run &r)
{
    const Spec &s = r.s;
    const std::vector<float> d = from_device(r.D, s.cd, r.ldd * s.n), aux = from_device(r.daux, s.cd, r.ldaux * s.n);
    for (int64_t j = 0; j < s.n; j++)
        for (int64_t i = 0; i < r.ldaux; i++) {
            if (i >= s.m && i < r.ldd && d[i + j * r.ldd] != SENTINEL)
                return printf("# D's padding at (%lld, %lld) was written\n", (long long)i, (long long)j), false;
            const float xa = aux[i + j * r.ldaux];
            if (i >= s.m && xa != SENTINEL) return printf("# aux's padding was written\n"), false;
            if (i >= s.m) continue;
            double mag;
            const double pre = pre_activation(r, i, j, &mag);
            double want = pre;
            if (s.epi == CUBLASLT_EPILOGUE_GELU_AUX || s.epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) want = gelu(pre);
            if (dgelu(s.epi)) want = pre * gelu_grad(r.aux[i + j * r.ldaux]), mag *= 1.2;
            if (!near(d[i + j * r.ldd], want, mag, s.cd))
                return printf("# D(%lld, %lld) = %.8g, expected %.8g\n", (long long)i, (long long)j, d[i + j * r.ldd],
                              want),
                       false;
            if (aux_out(s.epi) && !near(xa, pre, mag, s.cd))
                return printf("# aux(%lld, %lld) = %.8g, expected %.8g\n", (long long)i, (long long)j, xa, pre), false;
        }
    return check_bias_gradient(r);
}

// Heuristic and matmul of s, checked against the reference.
void numbers(const char *what, const Spec &s, bool with_algo = true)
{
    Run r;
    setup(r, s);
    const cublasStatus_t hs = with_algo ? heuristic(r) : CUBLAS_STATUS_SUCCESS;
    const cublasStatus_t ms = hs == CUBLAS_STATUS_SUCCESS ? matmul(r, with_algo) : hs;
    const bool ok = ms == CUBLAS_STATUS_SUCCESS && check(r);
    tap(ok, "%s (%s x %s -> %s, op %c%c, m %lld n %lld k %lld, pad %lld)%s%s", what, tname(s.ab), tname(s.ab),
        tname(s.cd), s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', (long long)s.m, (long long)s.n, (long long)s.k,
        (long long)s.pad, ms == CUBLAS_STATUS_SUCCESS ? "" : ": ",
        ms == CUBLAS_STATUS_SUCCESS ? "" : cublasLtGetStatusName(ms));
    teardown(r);
}

// BGRADA, BGRADB and DGELU_BGRAD under every transpose, types and beta.
void test_numbers_bias_gradient()
{
    const uint32_t epis[3] = {CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_BGRADB, CUBLASLT_EPILOGUE_DGELU_BGRAD};
    const char *names[3] = {"BGRADA", "BGRADB", "DGELU_BGRAD"};
    for (int e = 0; e < 3; e++)
        for (int t = 0; t < 4; t++) {
            Spec s;
            s.epi = epis[e], s.ta = t & 1, s.tb = t & 2, s.m = 9, s.n = 11, s.k = 13, s.pad = 2;
            s.beta = t == 3 ? 1.0f : 0.0f; // accumulating D (the weight gradient's use) as well
            char what[96];
            snprintf(what, sizeof(what), "%s, beta %g", names[e], (double)s.beta);
            numbers(what, s);
            s.ab = CUDA_R_16BF, s.cd = t & 1 ? CUDA_R_16BF : CUDA_R_32F, s.pad = 0;
            numbers(what, s);
        }
}

void test_numbers()
{
    for (int t = 0; t < 4; t++) {
        Spec s;
        s.ta = t & 1, s.tb = t & 2, s.pad = 3, s.alpha = 1.5f, s.beta = 0.5f;
        numbers("fp32 in place, padded ld, alpha 1.5 beta 0.5", s);
    }
    Spec s;
    s.nan_c = true, s.alpha = 0.75f;
    numbers("beta 0 in place: D's NaN (C) not read", s);
    s.inplace = false, s.pad = 2;
    numbers("beta 0 out of place: C full of NaN not read", s);
    s = Spec(), s.inplace = false, s.c_ld0 = true, s.beta = 1.0f, s.tb = true;
    numbers("out of place, C with ld 0 (one column broadcast)", s);
    const cudaDataType_t h16[2] = {CUDA_R_16BF, CUDA_R_16F};
    for (int t = 0; t < 2; t++) {
        s = Spec(), s.ab = h16[t], s.cd = CUDA_R_32F, s.ta = true, s.pad = 8, s.beta = 1.0f;
        numbers("16-bit inputs, fp32 output", s);
        s = Spec(), s.ab = s.cd = h16[t], s.tb = true, s.beta = 0.25f, s.m = 16, s.k = 24;
        numbers("16-bit inputs and output", s);
        s.ta = true, s.tb = false, s.beta = 0.0f, s.pad = 1;
        numbers("16-bit inputs and output, beta 0", s);
    }
    s = Spec(), s.epi = CUBLASLT_EPILOGUE_BIAS, s.pad = 1, s.beta = 1.0f;
    numbers("BIAS", s);
    s.ab = s.cd = CUDA_R_16BF, s.ta = true;
    numbers("BIAS", s);
    s = Spec(), s.epi = CUBLASLT_EPILOGUE_GELU_AUX_BIAS, s.m = 13, s.pad = 2, s.ab = s.cd = CUDA_R_16BF, s.tb = true;
    numbers("GELU_AUX_BIAS, aux ld padded", s);
    s.ab = s.cd = CUDA_R_32F, s.alpha = 2.0f, s.beta = 0.5f;
    numbers("GELU_AUX_BIAS", s);
    s = Spec(), s.epi = CUBLASLT_EPILOGUE_GELU_AUX, s.ab = s.cd = CUDA_R_16F, s.m = 9;
    numbers("GELU_AUX", s);
    s = Spec(), s.epi = CUBLASLT_EPILOGUE_DGELU, s.ab = s.cd = CUDA_R_16BF, s.ta = true, s.m = 12;
    numbers("DGELU", s);
    s.ab = s.cd = CUDA_R_32F, s.beta = 0.5f, s.pad = 4;
    numbers("DGELU, beta 0.5", s);
    test_numbers_bias_gradient();
    s = Spec(), s.pad = 2, s.beta = 1.0f;
    numbers("algo NULL (implicit heuristic)", s, false);
}

void expect(cublasStatus_t got, cublasStatus_t want, const char *what)
{
    tap(got == want, "refuses %s: %s%s%s", what, cublasLtGetStatusName(want), got == want ? "" : ", got ",
        got == want ? "" : cublasLtGetStatusName(got));
}

// requestedAlgoCount > 1: several algorithms, best first, within the workspace allowed; each one
// computes the same D with the workspace it asks for, and refuses less.
void test_algorithms()
{
    Run r;
    Spec s;
    s.beta = 0.5f, s.pad = 1;
    setup(r, s);
    cublasLtMatmulHeuristicResult_t res[8];
    int count = 0;
    const uint64_t mib = 1 << 20, none = 0;
    cublasLtMatmulPreferenceSetAttribute(r.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &mib, sizeof(mib));
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(r.h, r.desc, r.la, r.lb, r.lc, r.ld, r.pref, 8, res, &count);
    bool within = st == CUBLAS_STATUS_SUCCESS && count == 3;
    for (int i = 0; within && i < count; i++)
        within = res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= mib;
    tap(within, "8 algorithms asked with 1 MiB of workspace allowed: 3 returned, each within it (got %d)", count);
    int two = 0;
    st = cublasLtMatmulAlgoGetHeuristic(r.h, r.desc, r.la, r.lb, r.lc, r.ld, r.pref, 2, res + 4, &two);
    tap(st == CUBLAS_STATUS_SUCCESS && two == 2 && memcmp(&res[4].algo, &res[0].algo, sizeof(res[0].algo)) == 0,
        "2 asked: the first 2 of the same list");
    cublasLtMatmulPreferenceSetAttribute(r.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &none, sizeof(none));
    int without = 0;
    cublasLtMatmulAlgoGetHeuristic(r.h, r.desc, r.la, r.lb, r.lc, r.ld, r.pref, 8, res + 4, &without);
    tap(without == 2 && res[4].workspaceSize == 0 && res[5].workspaceSize == 0,
        "no workspace allowed: only the 2 algorithms needing none (got %d)", without);
    void *ws = nullptr;
    cudaMalloc(&ws, mib);
    std::vector<std::vector<float>> outs;
    bool all_ok = true;
    for (int i = 0; i < count; i++) {
        cudaMemcpy(r.D, r.d0.data(), r.d0.size() * 4, cudaMemcpyHostToDevice);
        st = cublasLtMatmul(r.h, r.desc, &r.s.alpha, r.A, r.la, r.B, r.lb, &r.s.beta, r.C, r.lc, r.D, r.ld,
                            &res[i].algo, ws, res[i].workspaceSize, 0);
        all_ok = all_ok && st == CUBLAS_STATUS_SUCCESS && check(r);
        outs.push_back(from_device(r.D, s.cd, r.ldd * s.n));
    }
    bool same = true;
    for (size_t i = 1; i < outs.size(); i++) same = same && memcmp(outs[i].data(), outs[0].data(), outs[0].size() * 4) == 0;
    tap(all_ok && same, "each algorithm returned computes D, and the same bits");
    int needs = -1;
    for (int i = 0; i < count; i++)
        if (res[i].workspaceSize > 0) needs = i;
    st = needs < 0 ? CUBLAS_STATUS_SUCCESS
                   : cublasLtMatmul(r.h, r.desc, &r.s.alpha, r.A, r.la, r.B, r.lb, &r.s.beta, r.C, r.lc, r.D, r.ld,
                                    &res[needs].algo, ws, res[needs].workspaceSize - 256, 0);
    expect(st, CUBLAS_STATUS_INVALID_VALUE, "an algorithm given less workspace than its workspaceSize");
    cudaFree(ws);
    teardown(r);
}

void test_api()
{
    Run r;
    setup(r, Spec());
    const cublasStatus_t hs = heuristic(r);
    tap(hs == CUBLAS_STATUS_SUCCESS && r.count == 1 && r.res.state == CUBLAS_STATUS_SUCCESS && r.res.workspaceSize == 0,
        "the heuristic returns one algorithm, state SUCCESS, no workspace");
    int32_t op = CUBLAS_OP_T, back = -1;
    size_t written = 0, need = 0;
    cublasLtMatmulDescSetAttribute(r.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof(op));
    const cublasStatus_t g1 =
        cublasLtMatmulDescGetAttribute(r.desc, CUBLASLT_MATMUL_DESC_TRANSA, &back, sizeof(back), &written);
    const cublasStatus_t g2 = cublasLtMatmulDescGetAttribute(r.desc, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 0, &need);
    tap(g1 == CUBLAS_STATUS_SUCCESS && back == CUBLAS_OP_T && written == 4 && g2 == CUBLAS_STATUS_SUCCESS && need == 4,
        "GetAttribute returns what was set, and its size for sizeInBytes 0");
    uint32_t al = 0;
    cublasLtMatmulPreferenceGetAttribute(r.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof(al), &written);
    int32_t bt = 0;
    cublasLtMatmulDescGetAttribute(r.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt), &written);
    tap(al == 256 && bt == -1, "defaults: MIN_ALIGNMENT_A_BYTES 256, BIAS_DATA_TYPE -1");
    teardown(r);
}

// ---- refusals ----
void relayout(cublasLtMatrixLayout_t *l, cudaDataType_t t, uint64_t rows, uint64_t cols, int64_t ld)
{
    cublasLtMatrixLayoutDestroy(*l);
    cublasLtMatrixLayoutCreate(l, t, rows, cols, ld);
}

// D's layout replaced; C's with it when C is D.
void relayout_d(Run &r, uint64_t rows, uint64_t cols, int64_t ld)
{
    const bool same = r.lc == r.ld;
    relayout(&r.ld, r.s.cd, rows, cols, ld);
    if (same) r.lc = r.ld;
}

// s set up, change(r) applied, then the heuristic's status.
cublasStatus_t heuristic_after(const Spec &s, const std::function<void(Run &)> &change)
{
    Run r;
    setup(r, s);
    change(r);
    const cublasStatus_t st = heuristic(r);
    teardown(r);
    return st;
}

// s set up and a heuristic chosen, change(r) applied, then the matmul's status.
cublasStatus_t matmul_after(const Spec &s, const std::function<void(Run &)> &change)
{
    Run r;
    setup(r, s);
    cublasStatus_t st = heuristic(r);
    if (st == CUBLAS_STATUS_SUCCESS) {
        change(r);
        st = matmul(r);
    }
    teardown(r);
    return st;
}

void test_refused_shapes()
{
    const cublasStatus_t INVALID = CUBLAS_STATUS_INVALID_VALUE;
    Spec s;
    expect(heuristic_after(s, [](Run &r) { relayout(&r.la, CUDA_R_32F, r.ar, r.ac, r.ar - 1); }), INVALID,
           "A's ld < its rows");
    expect(heuristic_after(s, [](Run &r) { relayout_d(r, r.s.m, r.s.n, r.s.m - 2); }), INVALID, "D's ld < its rows");
    expect(heuristic_after(s, [](Run &r) { relayout(&r.la, CUDA_R_32F, r.s.k, r.s.m, r.s.k); }), INVALID,
           "A given k x m where TRANSA N needs m x k");
    expect(heuristic_after(s, [](Run &r) { relayout(&r.lb, CUDA_R_32F, r.s.n, r.s.k, r.s.n); }), INVALID,
           "B given n x k where TRANSB N needs k x n");
    Spec t = s;
    t.ta = true;
    expect(heuristic_after(t, [](Run &r) { relayout(&r.la, CUDA_R_32F, r.s.m, r.s.k, r.s.m); }), INVALID,
           "A given m x k where TRANSA T needs k x m");
    expect(heuristic_after(s, [](Run &r) { relayout_d(r, r.s.n, r.s.m, r.s.n); }), INVALID, "D given n x m");
    Spec o = s;
    o.inplace = false;
    expect(heuristic_after(o, [](Run &r) { relayout(&r.lc, CUDA_R_32F, r.s.m + 1, r.s.n, r.s.m + 1); }), INVALID,
           "C with other rows than D");
    expect(matmul_after(o, [](Run &r) { r.C = r.D; }), INVALID, "C == D (in place) with C's layout not D's");
    expect(matmul_after(o, [](Run &r) { r.s.beta = 1.0f, r.C = static_cast<float *>(r.D) + 1; }), INVALID,
           "C overlapping D without being D");
}

void test_refused_types()
{
    Spec s;
    s.cd = CUDA_R_16F;
    expect(heuristic_after(s, [](Run &) {}), CUBLAS_STATUS_NOT_SUPPORTED, "fp32 inputs with an fp16 output");
    s = Spec(), s.ab = CUDA_R_16F, s.cd = CUDA_R_16F;
    expect(heuristic_after(s, [](Run &r) { relayout(&r.lb, CUDA_R_16BF, r.br, r.bc, r.ldb); }),
           CUBLAS_STATUS_NOT_SUPPORTED, "A fp16 with B bf16");
    s = Spec(), s.ab = s.cd = CUDA_R_16BF;
    s.inplace = false;
    expect(heuristic_after(s, [](Run &r) { relayout(&r.lc, CUDA_R_32F, r.s.m, r.s.n, r.ldc); }),
           CUBLAS_STATUS_INVALID_VALUE, "C fp32 with D bf16");
    s = Spec(), s.epi = CUBLASLT_EPILOGUE_BIAS, s.ab = s.cd = CUDA_R_16BF;
    expect(heuristic_after(s, [](Run &r) { set_desc<int32_t>(r, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_32F); }),
           CUBLAS_STATUS_INVALID_VALUE, "an fp32 bias with a bf16 D");
    expect(heuristic_after(Spec(),
                           [](Run &r) {
                               cublasLtMatmulDescDestroy(r.desc),
                                   cublasLtMatmulDescCreate(&r.desc, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F);
                           }),
           CUBLAS_STATUS_NOT_SUPPORTED, "compute type FAST_TF32 (not emulated)");
    expect(heuristic_after(Spec(), [](Run &r) { set_desc<int32_t>(r, CUBLASLT_MATMUL_DESC_TRANSC, CUBLAS_OP_T); }),
           CUBLAS_STATUS_NOT_SUPPORTED, "TRANSC T");
    expect(
        heuristic_after(Spec(), [](Run &r) { set_desc<const void *>(r, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, r.A); }),
        CUBLAS_STATUS_INVALID_VALUE, "a scale pointer with fp32 matrices");
}

void test_refused_bias_gradient()
{
    const cublasStatus_t INVALID = CUBLAS_STATUS_INVALID_VALUE;
    Spec s;
    s.epi = CUBLASLT_EPILOGUE_BGRADB, s.ab = s.cd = CUDA_R_16BF, s.tb = true;
    expect(heuristic_after(s, [](Run &r) { set_desc<int32_t>(r, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_32F); }),
           INVALID, "BGRADB with an fp32 bias gradient and a bf16 D (the output's type)");
    expect(matmul_after(s, [](Run &r) { set_desc<const void *>(r, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr); }),
           INVALID, "BGRADB without BIAS_POINTER");
    expect(matmul_after(s,
                        [](Run &r) {
                            set_desc<const void *>(r, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                   static_cast<char *>(r.dbias) + 2);
                        }),
           INVALID, "a bias-gradient pointer less aligned than the one the heuristic saw");
    expect(heuristic_after(s,
                           [](Run &r) {
                               const int32_t row = CUBLASLT_ORDER_ROW;
                               cublasLtMatrixLayoutSetAttribute(r.lb, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof(row));
                           }),
           CUBLAS_STATUS_NOT_SUPPORTED, "BGRADB with B in CUBLASLT_ORDER_ROW (only COL is emulated)");
    s.epi = CUBLASLT_EPILOGUE_BGRADA;
    expect(heuristic_after(s,
                           [](Run &r) {
                               set_desc<const void *>(r, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      static_cast<char *>(r.dbias) + 1);
                           }),
           CUBLAS_STATUS_NOT_SUPPORTED, "BGRADA with a bias gradient pointer below its element's alignment");
    s = Spec(), s.epi = CUBLASLT_EPILOGUE_DGELU_BGRAD, s.m = 16;
    expect(matmul_after(s, [](Run &r) { set_desc<void *>(r, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, nullptr); }),
           INVALID, "DGELU_BGRAD without EPILOGUE_AUX_POINTER");
    expect(heuristic_after(s, [](Run &r) { set_desc<int64_t>(r, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 12); }), INVALID,
           "DGELU_BGRAD with EPILOGUE_AUX_LD 12 (not divisible by 8)");
    expect(matmul_after(s, [](Run &r) { set_desc<const void *>(r, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr); }),
           INVALID, "DGELU_BGRAD without BIAS_POINTER");
}

void test_refused_epilogues()
{
    const cublasStatus_t INVALID = CUBLAS_STATUS_INVALID_VALUE;
    Spec s;
    s.epi = CUBLASLT_EPILOGUE_GELU_AUX_BIAS, s.m = 16;
    expect(heuristic_after(s, [](Run &r) { set_desc<int64_t>(r, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 17); }), INVALID,
           "EPILOGUE_AUX_LD 17: not divisible by 8");
    expect(heuristic_after(s, [](Run &r) { set_desc<int64_t>(r, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 8); }), INVALID,
           "EPILOGUE_AUX_LD 8 < D's 16 rows");
    expect(heuristic_after(
               s, [](Run &r) { set_desc<int32_t>(r, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, CUDA_R_16F); }),
           INVALID, "an fp16 aux with an fp32 D");
    expect(matmul_after(s, [](Run &r) { set_desc<void *>(r, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, nullptr); }),
           INVALID, "GELU_AUX_BIAS without EPILOGUE_AUX_POINTER");
    expect(matmul_after(s, [](Run &r) { set_desc<const void *>(r, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr); }),
           INVALID, "GELU_AUX_BIAS without BIAS_POINTER");
    s.epi = CUBLASLT_EPILOGUE_DGELU;
    expect(matmul_after(s, [](Run &r) { set_desc<void *>(r, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, nullptr); }),
           INVALID, "DGELU without EPILOGUE_AUX_POINTER");
    s.epi = CUBLASLT_EPILOGUE_BIAS;
    expect(matmul_after(s, [](Run &r) { set_desc<const void *>(r, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr); }),
           INVALID, "BIAS without BIAS_POINTER");
    s.epi = CUBLASLT_EPILOGUE_DRELU_BGRAD;
    expect(heuristic_after(s, [](Run &) {}), CUBLAS_STATUS_NOT_SUPPORTED, "DRELU_BGRAD (a bit-mask aux: not emulated)");
    test_refused_bias_gradient();
}

void test_refused_alignment()
{
    const cublasStatus_t INVALID = CUBLAS_STATUS_INVALID_VALUE;
    expect(matmul_after(Spec(), [](Run &r) { r.A = static_cast<char *>(r.A) + 16; }), INVALID,
           "A 16-byte aligned after the heuristic was promised 256 (the default)");
    expect(matmul_after(Spec(), [](Run &r) { r.D = r.C = static_cast<char *>(r.D) + 64; }), INVALID,
           "D 64-byte aligned after the heuristic was promised 256");
    Spec s;
    s.epi = CUBLASLT_EPILOGUE_BIAS;
    expect(matmul_after(s,
                        [](Run &r) {
                            set_desc<const void *>(r, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                   static_cast<float *>(r.dbias) + 1);
                        }),
           INVALID, "a bias pointer less aligned than the one the heuristic saw");
    expect(heuristic_after(Spec(),
                           [](Run &r) {
                               const uint32_t two = 2;
                               cublasLtMatmulPreferenceSetAttribute(r.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                                    &two, sizeof(two));
                           }),
           CUBLAS_STATUS_NOT_SUPPORTED, "a 2-byte alignment promised for fp32 B (no algorithm)");
    Run r;
    setup(r, Spec());
    heuristic(r);
    void *ws = static_cast<char *>(r.dbias) + 16;
    const cublasStatus_t st = cublasLtMatmul(r.h, r.desc, &r.s.alpha, r.A, r.la, r.B, r.lb, &r.s.beta, r.C, r.lc, r.D,
                                             r.ld, &r.res.algo, ws, 64, 0);
    expect(st, INVALID, "a workspace that is not 256-byte aligned");
    teardown(r);
}

void test_refused_algo()
{
    const cublasStatus_t INVALID = CUBLAS_STATUS_INVALID_VALUE;
    Spec sq;
    sq.m = sq.n = sq.k = 6;
    expect(matmul_after(sq, [](Run &r) { set_desc<int32_t>(r, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T); }), INVALID,
           "TRANSA changed after the heuristic");
    expect(matmul_after(sq,
                        [](Run &r) {
                            const int64_t ld = r.lda + 1;
                            cublasLtMatrixLayoutSetAttribute(r.la, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof(ld));
                        }),
           INVALID, "A's ld changed after the heuristic");
    expect(matmul_after(sq, [](Run &r) { r.res.algo.data[0] ^= 1; }), INVALID, "an algo not from the heuristic");
    Run r;
    setup(r, Spec());
    int fake = 0;
    cublasLtHandle_t bad = reinterpret_cast<cublasLtHandle_t>(&fake);
    expect(cublasLtMatmulAlgoGetHeuristic(bad, r.desc, r.la, r.lb, r.lc, r.ld, r.pref, 1, &r.res, &r.count),
           CUBLAS_STATUS_NOT_INITIALIZED, "a handle not from cublasLtCreate");
    expect(cublasLtMatmulAlgoGetHeuristic(r.h, r.desc, r.la, r.lb, r.lc, r.ld, r.pref, 0, &r.res, &r.count), INVALID,
           "requestedAlgoCount 0");
    cublasLtMatrixLayout_t gone = nullptr;
    cublasLtMatrixLayoutCreate(&gone, CUDA_R_32F, r.ar, r.ac, r.lda);
    cublasLtMatrixLayoutDestroy(gone);
    expect(cublasLtMatmulAlgoGetHeuristic(r.h, r.desc, gone, r.lb, r.lc, r.ld, r.pref, 1, &r.res, &r.count), INVALID,
           "a destroyed layout");
    teardown(r);
}

void test_refused_attributes()
{
    const cublasStatus_t INVALID = CUBLAS_STATUS_INVALID_VALUE;
    Run r;
    setup(r, Spec());
    const int64_t op64 = CUBLAS_OP_T;
    expect(cublasLtMatmulDescSetAttribute(r.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op64, sizeof(op64)), INVALID,
           "TRANSA given as int64_t (it is int32_t)");
    const uint64_t epi64 = CUBLASLT_EPILOGUE_BIAS;
    expect(cublasLtMatmulDescSetAttribute(r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi64, sizeof(epi64)), INVALID,
           "EPILOGUE given as uint64_t (it is uint32_t)");
    const int32_t ld32 = 64;
    expect(cublasLtMatmulDescSetAttribute(r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld32, sizeof(ld32)), INVALID,
           "EPILOGUE_AUX_LD given as int32_t (it is int64_t)");
    const uint64_t al64 = 16;
    expect(
        cublasLtMatmulPreferenceSetAttribute(r.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al64, sizeof(al64)),
        INVALID, "MIN_ALIGNMENT_A_BYTES given as uint64_t (it is uint32_t)");
    const uint32_t ws32 = 1024;
    expect(cublasLtMatmulPreferenceSetAttribute(r.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws32, sizeof(ws32)),
           INVALID, "MAX_WORKSPACE_BYTES given as uint32_t (it is uint64_t)");
    const uint32_t bad_epi = 3;
    expect(cublasLtMatmulDescSetAttribute(r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &bad_epi, sizeof(bad_epi)), INVALID,
           "epilogue 3 (not a cublasLtEpilogue_t)");
    const int32_t bad_op = 7;
    expect(cublasLtMatmulDescSetAttribute(r.desc, CUBLASLT_MATMUL_DESC_TRANSB, &bad_op, sizeof(bad_op)), INVALID,
           "TRANSB 7 (not a cublasOperation_t)");
    expect(cublasLtMatmulDescSetAttribute(r.desc, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 4), INVALID, "a NULL buffer");
    const int32_t nine = 9;
    expect(cublasLtMatmulDescSetAttribute(r.desc, (cublasLtMatmulDescAttributes_t)9, &nine, sizeof(nine)), INVALID,
           "matmul descriptor attribute 9 (not in cublasLtMatmulDescAttributes_t)");
    const cublasLtEmulationDesc_t emu = reinterpret_cast<cublasLtEmulationDesc_t>(r.A);
    expect(cublasLtMatmulDescSetAttribute(r.desc, CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR, &emu, sizeof(emu)),
           CUBLAS_STATUS_NOT_SUPPORTED, "an EMULATION_DESCRIPTOR (not emulated)");
    int32_t got = 0;
    expect(cublasLtMatmulDescGetAttribute(r.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &got, 2, nullptr), INVALID,
           "GetAttribute with a 2-byte buffer for a uint32_t");
    teardown(r);
}

// ---- refusals that end the process: run in a child (child.h), whose stderr is kept ----
void dies(const char *what, const char *message, const Spec &s, const std::function<void(Run &)> &change)
{
    std::string err;
    const int status = in_child(
        [&]() {
            Run r;
            setup(r, s);
            if (heuristic(r) != CUBLAS_STATUS_SUCCESS) _exit(0);
            change(r);
            matmul(r);
        },
        &err);
    for (size_t at = 0; at < err.size();) { // the child's stderr, as TAP comments
        const size_t nl = err.find('\n', at);
        printf("# child: %s\n", err.substr(at, nl - at).c_str());
        at = nl == std::string::npos ? err.size() : nl + 1;
    }
    tap(status != 0 && err.find(message) != std::string::npos, "ends the process: %s (exit status %d)", what, status);
}

void *host_buffer(size_t bytes)
{
    void *p = aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
    memset(p, 0, (bytes + 255) / 256 * 256 + 256);
    return p;
}

void test_process_ends()
{
    dies("A in host memory", "cublasLtMatmul: A", Spec(), [](Run &r) { r.A = host_buffer(r.lda * r.ac * 4); });
    Spec s;
    s.pad = 3, s.n = 8; // D spans (10 * 7 + 7) * 4 = 308 bytes
    dies("D's last columns past the end of its allocation", "cublasLtMatmul: D", s, [](Run &r) {
        char *buf = nullptr;
        cudaMalloc((void **)&buf, 512); // D at its second 256 bytes: 52 bytes short, whatever the rounding
        r.D = r.C = buf + 256;
    });
    s = Spec(), s.epi = CUBLASLT_EPILOGUE_BIAS;
    dies("a bias in host memory", "cublasLtMatmul: bias", s,
         [](Run &r) { set_desc<const void *>(r, CUBLASLT_MATMUL_DESC_BIAS_POINTER, host_buffer(r.s.m * 4)); });
    s = Spec(), s.m = s.k = 6;
    dies("D overlapping B", "overlaps", s, [](Run &r) { r.D = r.C = r.B; });
    s.epi = CUBLASLT_EPILOGUE_BGRADB;
    dies("a bias gradient (an output) overlapping A", "overlaps", s,
         [](Run &r) { set_desc<const void *>(r, CUBLASLT_MATMUL_DESC_BIAS_POINTER, r.A); });
    dies("alpha in device memory with POINTER_MODE_HOST", "alpha", Spec(), [](Run &r) {
        cublasLtMatmul(r.h, r.desc, r.dbias, r.A, r.la, r.B, r.lb, &r.s.beta, r.C, r.lc, r.D, r.ld, &r.res.algo,
                       nullptr, 0, 0);
    });
}

} // namespace

int main()
{
    test_numbers();
    test_api();
    test_algorithms();
    test_refused_shapes();
    test_refused_types();
    test_refused_epilogues();
    test_refused_alignment();
    test_refused_algo();
    test_refused_attributes();
    test_process_ends();
    printf("1..%d\n", g_tests);
    return g_failed ? 1 : 0;
}
