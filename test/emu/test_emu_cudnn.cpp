// The emulated cuDNN (test/emu/cudnn.cpp, cudnn_graph.cpp) against a naive attention written from
// its definition (O = softmax(scale Q K^T, causal) V, the statistics max + log(sum exp), and the
// gradients of FlashAttention's backward), and its refusals of what the documentation forbids.
// The graphs are built here from the documented fused flash attention pattern, not with the
// project's code. TAP on stdout; exit status 1 when a test fails. Device memory comes from the
// emulator's cudaMalloc; what must end the process (memory that is not the device's) runs in a
// child process.
#include <cudnn_graph.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "test/emu/child.h"

#include "test/emu/tap.h"

namespace
{

typedef std::vector<int64_t> dims_t;
typedef cudnnBackendDescriptor_t D;

// ---- a graph builder over the backend API (every call checked) ----
struct Builder {
    std::vector<D> owned;
    cudnnStatus_t last = CUDNN_STATUS_SUCCESS;
    bool failed = false;

    ~Builder()
    {
        for (D d : owned) cudnnBackendDestroyDescriptor(d);
    }
    D make(cudnnBackendDescriptorType_t t)
    {
        D d = nullptr;
        note(cudnnBackendCreateDescriptor(t, &d));
        owned.push_back(d);
        return d;
    }
    void note(cudnnStatus_t s)
    {
        if (s != CUDNN_STATUS_SUCCESS && !failed) failed = true, last = s;
    }
    void set(D d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n,
             const void *v)
    {
        note(cudnnBackendSetAttribute(d, a, t, n, v));
    }
    D fin(D d)
    {
        note(cudnnBackendFinalize(d));
        return d;
    }
    D tensor(int64_t uid, cudnnDataType_t dt, dims_t dims, dims_t strides, bool virt = false,
             bool byval = false)
    {
        D d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
        const int64_t align = 16;
        set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
        set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
        set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, (int64_t)dims.size(), dims.data());
        set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, (int64_t)strides.size(),
            strides.data());
        set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
        if (virt) set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
        if (byval) set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byval);
        return fin(d);
    }
    D pw(cudnnPointwiseMode_t m, D x, D b, D t, D y, cudnnDataType_t prec = CUDNN_DATA_FLOAT,
         int64_t axis = -1)
    {
        D p = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
        set(p, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &m);
        set(p, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
        if (axis >= 0) set(p, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
        fin(p);
        D o = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
        set(o, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p);
        set(o, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
        if (b) set(o, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
        if (t) set(o, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
        set(o, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
        return fin(o);
    }
    D red(cudnnReduceTensorOp_t r, D x, D y)
    {
        D p = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
        const cudnnDataType_t f = CUDNN_DATA_FLOAT;
        set(p, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &r);
        set(p, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
        fin(p);
        D o = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
        set(o, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p);
        set(o, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
        set(o, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
        return fin(o);
    }
    D mm(D a, D b, D c)
    {
        D p = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
        const cudnnDataType_t f = CUDNN_DATA_FLOAT;
        set(p, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
        fin(p);
        D o = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
        set(o, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p);
        set(o, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
        set(o, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
        set(o, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
        return fin(o);
    }
    D rng(D y, D seed, D offset, double prob)
    {
        D p = make(CUDNN_BACKEND_RNG_DESCRIPTOR);
        const cudnnRngDistribution_t dist = CUDNN_RNG_DISTRIBUTION_BERNOULLI;
        set(p, CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, 1, &dist);
        set(p, CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, 1, &prob);
        fin(p);
        D o = make(CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR);
        set(o, CUDNN_ATTR_OPERATION_RNG_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p);
        set(o, CUDNN_ATTR_OPERATION_RNG_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
        set(o, CUDNN_ATTR_OPERATION_RNG_SEED, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &seed);
        set(o, CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &offset);
        return fin(o);
    }
    D reshape(D x, D y)
    {
        D o = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
        set(o, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
        set(o, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
        return fin(o);
    }
    // The operation graph, the heuristic's configs and the first plan that finalizes whose
    // engine is deterministic (or any, when any_engine). Returns the plan's status.
    cudnnStatus_t plan(cudnnHandle_t h, const std::vector<D> &ops, D *plan_out, int64_t *ws,
                       bool any_engine = false)
    {
        D g = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
        set(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
        set(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, (int64_t)ops.size(),
            ops.data());
        fin(g);
        D heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
        const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
        set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g);
        set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
        fin(heur);
        if (failed) return last;
        int64_t n = 0;
        note(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, nullptr));
        if (n == 0) return CUDNN_STATUS_NOT_SUPPORTED;
        std::vector<D> cfgs;
        for (int64_t i = 0; i < n; i++) cfgs.push_back(make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
        note(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &n, cfgs.data()));
        cudnnStatus_t st = CUDNN_STATUS_NOT_SUPPORTED;
        for (D c : cfgs) {
            D e = make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
            int64_t one = 0, nn = 0;
            note(cudnnBackendGetAttribute(c, CUDNN_ATTR_ENGINECFG_ENGINE,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &one, &e));
            cudnnBackendNumericalNote_t notes[8];
            note(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                          CUDNN_TYPE_NUMERICAL_NOTE, 8, &nn, notes));
            bool nondet = false;
            for (int64_t i = 0; i < nn; i++)
                nondet |= notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
            if (nondet && !any_engine) continue;
            D p = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
            note(cudnnBackendSetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                          &h));
            note(cudnnBackendSetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c));
            st = cudnnBackendFinalize(p);
            if (st != CUDNN_STATUS_SUCCESS) continue;
            int64_t cnt = 0;
            note(cudnnBackendGetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                          CUDNN_TYPE_INT64, 1, &cnt, ws));
            *plan_out = p;
            return failed ? last : CUDNN_STATUS_SUCCESS;
        }
        return st;
    }
};

cudnnStatus_t run(cudnnHandle_t h, D plan, const std::vector<int64_t> &uids,
                  const std::vector<void *> &ptrs, void *ws)
{
    D v = nullptr;
    cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &v);
    cudnnBackendSetAttribute(v, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                             (int64_t)uids.size(), uids.data());
    cudnnBackendSetAttribute(v, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                             (int64_t)ptrs.size(), ptrs.data());
    cudnnBackendSetAttribute(v, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    cudnnStatus_t st = cudnnBackendFinalize(v);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(h, plan, v);
    cudnnBackendDestroyDescriptor(v);
    return st;
}

// ---- the case: [b, h, s, d] tensors, contiguous (BHSD), causal attention ----
struct Case {
    int b, hq, hk, s, d;
    cudnnDataType_t dt;
    double p; // dropout
};

enum {
    U_Q = 1,
    U_KT,
    U_V,
    U_O,
    U_STATS,
    U_SCALE,
    U_NINF,
    U_DSCALE,
    U_SEED,
    U_OFFSET,
    U_DO,
    U_ONE,
    U_SUM,
    U_DQ,
    U_DK,
    U_DV,
    U_VT,
};

float r16(cudnnDataType_t t, float v)
{
    return t == CUDNN_DATA_HALF ? __half2float(__float2half_rn(v))
                                : __bfloat162float(__float2bfloat16_rn(v));
}

struct Dev { // a device copy of a host array of 16-bit values
    void *p = nullptr;
    Dev(const std::vector<float> &h, cudnnDataType_t t)
    {
        cudaMalloc(&p, h.size() * 2 + 2);
        std::vector<uint16_t> raw(h.size());
        for (size_t i = 0; i < h.size(); i++) {
            if (t == CUDNN_DATA_HALF) {
                __half x = __float2half_rn(h[i]);
                memcpy(&raw[i], &x, 2);
            } else {
                __nv_bfloat16 x = __float2bfloat16_rn(h[i]);
                memcpy(&raw[i], &x, 2);
            }
        }
        cudaMemcpy(p, raw.data(), raw.size() * 2, cudaMemcpyHostToDevice);
    }
    Dev(size_t bytes) { cudaMalloc(&p, bytes); }
    ~Dev() { cudaFree(p); }
    std::vector<float> get16(size_t n, cudnnDataType_t t) const
    {
        std::vector<uint16_t> raw(n);
        cudaMemcpy(raw.data(), p, n * 2, cudaMemcpyDeviceToHost);
        std::vector<float> out(n);
        for (size_t i = 0; i < n; i++) {
            if (t == CUDNN_DATA_HALF) out[i] = __half2float(((const __half *)raw.data())[i]);
            else out[i] = __bfloat162float(((const __nv_bfloat16 *)raw.data())[i]);
        }
        return out;
    }
    std::vector<float> get32(size_t n) const
    {
        std::vector<float> out(n);
        cudaMemcpy(out.data(), p, n * 4, cudaMemcpyDeviceToHost);
        return out;
    }
};

uint32_t g_rng = 2024;
float rnd(float lo, float hi)
{
    g_rng = g_rng * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(g_rng >> 8) / 16777216.0f;
}

std::vector<float> rand16(size_t n, cudnnDataType_t t, float lo, float hi)
{
    std::vector<float> v(n);
    for (float &x : v) x = r16(t, rnd(lo, hi));
    return v;
}

dims_t bhsd(const Case &c, int h, int inner)
{
    return {(int64_t)h * c.s * inner, (int64_t)c.s * inner, inner, 1};
}

// ---- the reference, from the definition, in double ----
struct Ref {
    std::vector<double> o, stats, dq, dk, dv;
};

// keep[b][h][i][j] (1 or 0, scaled by 1/(1-p) when kept), or all 1 without dropout
Ref reference(const Case &c, const std::vector<float> &q, const std::vector<float> &k,
              const std::vector<float> &v, const std::vector<float> &dout,
              const std::vector<float> *keep)
{
    const int S = c.s, Dh = c.d, g = c.hq / c.hk;
    const double scale = 1.0 / sqrt((double)Dh), ds = c.p > 0 ? 1.0 / (1.0 - c.p) : 1.0;
    Ref r;
    r.o.assign((size_t)c.b * c.hq * S * Dh, 0), r.stats.assign((size_t)c.b * c.hq * S, 0);
    r.dq = r.o, r.dk.assign((size_t)c.b * c.hk * S * Dh, 0), r.dv = r.dk;
    std::vector<double> P((size_t)S * S), Pd((size_t)S * S), dP((size_t)S * S);
    for (int b = 0; b < c.b; b++)
        for (int h = 0; h < c.hq; h++) {
            const float *Q = &q[((size_t)b * c.hq + h) * S * Dh],
                        *dO = &dout[((size_t)b * c.hq + h) * S * Dh];
            const float *K = &k[((size_t)b * c.hk + h / g) * S * Dh],
                        *V = &v[((size_t)b * c.hk + h / g) * S * Dh];
            for (int i = 0; i < S; i++) {
                double m = -INFINITY, z = 0;
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int e = 0; e < Dh; e++) s += (double)Q[i * Dh + e] * K[j * Dh + e];
                    P[(size_t)i * S + j] = s * scale;
                    m = fmax(m, s * scale);
                }
                for (int j = 0; j <= i; j++) z += exp(P[(size_t)i * S + j] - m);
                r.stats[((size_t)b * c.hq + h) * S + i] = m + log(z);
                for (int j = 0; j < S; j++) {
                    P[(size_t)i * S + j] = j <= i ? exp(P[(size_t)i * S + j] - m) / z : 0;
                    const double kp =
                        keep ? (*keep)[(((size_t)b * c.hq + h) * S + i) * S + j] : 1.0;
                    Pd[(size_t)i * S + j] = P[(size_t)i * S + j] * kp * (keep ? ds : 1.0);
                }
                for (int e = 0; e < Dh; e++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++) o += Pd[(size_t)i * S + j] * V[j * Dh + e];
                    r.o[(((size_t)b * c.hq + h) * S + i) * Dh + e] = o;
                }
            }
            // backward: dV += Pd^T dO; dPd = dO V^T; dP = dPd * keep * ds; dS = P (dP - rowsum(dP P))
            for (int i = 0; i < S; i++) {
                double dsum = 0;
                for (int j = 0; j <= i; j++) {
                    double x = 0;
                    for (int e = 0; e < Dh; e++) x += (double)dO[i * Dh + e] * V[j * Dh + e];
                    const double kp =
                        keep ? (*keep)[(((size_t)b * c.hq + h) * S + i) * S + j] * ds : 1.0;
                    dP[(size_t)i * S + j] = x * kp;
                    dsum += dP[(size_t)i * S + j] * P[(size_t)i * S + j];
                }
                for (int j = 0; j <= i; j++) {
                    const double dS = P[(size_t)i * S + j] * (dP[(size_t)i * S + j] - dsum) * scale;
                    for (int e = 0; e < Dh; e++) {
                        r.dq[(((size_t)b * c.hq + h) * S + i) * Dh + e] += dS * K[j * Dh + e];
                        r.dk[(((size_t)b * c.hk + h / g) * S + j) * Dh + e] += dS * Q[i * Dh + e];
                        r.dv[(((size_t)b * c.hk + h / g) * S + j) * Dh + e] +=
                            Pd[(size_t)i * S + j] * dO[i * Dh + e];
                    }
                }
            }
        }
    return r;
}

// got vs want: |got - want| <= atol + rtol |want|; the worst ratio in *worst
bool close(const std::vector<float> &got, const std::vector<double> &want, double atol, double rtol,
           double *worst)
{
    bool ok = got.size() == want.size();
    *worst = 0;
    for (size_t i = 0; ok && i < got.size(); i++) {
        const double err = fabs(got[i] - want[i]) / (atol + rtol * fabs(want[i]));
        if (!(err <= 1.0)) ok = false;
        if (err > *worst || err != err) *worst = err;
    }
    return ok;
}

// ---- the documented patterns, built from [G] ----
struct Graphs {
    const Case &c;
    Builder &bl;
    D q, kt, v, o, stats, scale, ninf, dscale, seed, offset;
    int64_t next = 1000;
    Graphs(const Case &cs, Builder &b) : c(cs), bl(b)
    {
        q = bl.tensor(U_Q, c.dt, {c.b, c.hq, c.s, c.d}, bhsd(c, c.hq, c.d));
        // K stored [b, hk, s, d]; its transpose as the matmul's B: [b, hk, d, s]
        kt = bl.tensor(U_KT, c.dt, {c.b, c.hk, c.d, c.s},
                       {(int64_t)c.hk * c.s * c.d, (int64_t)c.s * c.d, 1, c.d});
        v = bl.tensor(U_V, c.dt, {c.b, c.hk, c.s, c.d}, bhsd(c, c.hk, c.d));
        o = bl.tensor(U_O, c.dt, {c.b, c.hq, c.s, c.d}, bhsd(c, c.hq, c.d));
        stats = bl.tensor(U_STATS, CUDNN_DATA_FLOAT, {c.b, c.hq, c.s, 1}, bhsd(c, c.hq, 1));
        scale = scalar(U_SCALE, CUDNN_DATA_FLOAT);
        ninf = scalar(U_NINF, CUDNN_DATA_FLOAT);
        dscale = scalar(U_DSCALE, CUDNN_DATA_FLOAT);
        seed = bl.tensor(U_SEED, CUDNN_DATA_INT64, {1, 1, 1, 1}, {1, 1, 1, 1});
        offset = bl.tensor(U_OFFSET, CUDNN_DATA_INT64, {1, 1, 1, 1}, {1, 1, 1, 1});
    }
    D scalar(int64_t uid, cudnnDataType_t t)
    {
        return bl.tensor(uid, t, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
    }
    D virt(dims_t dims, cudnnDataType_t t = CUDNN_DATA_FLOAT)
    {
        dims_t st(dims.size(), 1);
        for (size_t i = dims.size() - 1; i-- > 0;) st[i] = st[i + 1] * dims[i + 1];
        return bl.tensor(next++, t, dims, st, true);
    }
    dims_t ss() const { return {c.b, c.hq, c.s, c.s}; }
    dims_t rows() const { return {c.b, c.hq, c.s, 1}; }
    // scores scaled and causally masked: (the ops into ops)
    D masked(std::vector<D> &ops, D s)
    {
        D row = virt(ss(), CUDNN_DATA_INT32), col = virt(ss(), CUDNN_DATA_INT32),
          m = virt(ss(), CUDNN_DATA_BOOLEAN);
        D y = virt(ss());
        ops.push_back(
            bl.pw(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, row, CUDNN_DATA_FLOAT, 2));
        ops.push_back(
            bl.pw(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, col, CUDNN_DATA_FLOAT, 3));
        ops.push_back(bl.pw(CUDNN_POINTWISE_CMP_GE, row, col, nullptr, m, CUDNN_DATA_BOOLEAN));
        ops.push_back(bl.pw(CUDNN_POINTWISE_BINARY_SELECT, s, ninf, m, y));
        return y;
    }
    D dropout(std::vector<D> &ops, D p, cudnnDataType_t out_dt)
    {
        D r = virt(ss()), p2 = virt(ss()), p3 = virt(ss(), out_dt);
        ops.push_back(bl.rng(r, seed, offset, 1.0 - c.p));
        ops.push_back(bl.pw(CUDNN_POINTWISE_MUL, p, r, nullptr, p2));
        ops.push_back(bl.pw(CUDNN_POINTWISE_MUL, p2, dscale, nullptr, p3));
        return p3;
    }
    std::vector<D> forward()
    {
        std::vector<D> ops;
        D s = virt(ss()), s2 = virt(ss());
        ops.push_back(bl.mm(q, kt, s));
        ops.push_back(bl.pw(CUDNN_POINTWISE_MUL, s, scale, nullptr, s2));
        D s3 = masked(ops, s2);
        D mx = virt(rows()), d = virt(ss()), e = virt(ss()), z = virt(rows()), l = virt(rows());
        D p = virt(ss(), c.p > 0 ? CUDNN_DATA_FLOAT : c.dt);
        ops.push_back(bl.red(CUDNN_REDUCE_TENSOR_MAX, s3, mx));
        ops.push_back(bl.pw(CUDNN_POINTWISE_SUB, s3, mx, nullptr, d));
        ops.push_back(bl.pw(CUDNN_POINTWISE_EXP, d, nullptr, nullptr, e));
        ops.push_back(bl.red(CUDNN_REDUCE_TENSOR_ADD, e, z));
        ops.push_back(bl.pw(CUDNN_POINTWISE_LOG, z, nullptr, nullptr, l));
        ops.push_back(bl.pw(CUDNN_POINTWISE_ADD, mx, l, nullptr, stats));
        ops.push_back(bl.pw(CUDNN_POINTWISE_DIV, e, z, nullptr, p));
        if (c.p > 0) p = dropout(ops, p, c.dt);
        ops.push_back(bl.mm(p, v, o));
        return ops;
    }
    // the backward: dO, the softmax sum tensor and dQ, dK, dV in memory (BHSD)
    std::vector<D> backward()
    {
        std::vector<D> ops;
        D vt = bl.tensor(U_VT, c.dt, {c.b, c.hk, c.d, c.s},
                         {(int64_t)c.hk * c.s * c.d, (int64_t)c.s * c.d, 1, c.d});
        D dO = bl.tensor(U_DO, c.dt, {c.b, c.hq, c.s, c.d}, bhsd(c, c.hq, c.d));
        D one = scalar(U_ONE, CUDNN_DATA_FLOAT);
        D sum = bl.tensor(U_SUM, CUDNN_DATA_FLOAT, {c.b, c.hq, c.s, 1}, bhsd(c, c.hq, 1));
        D dq = bl.tensor(U_DQ, c.dt, {c.b, c.hq, c.s, c.d}, bhsd(c, c.hq, c.d));
        D dk = bl.tensor(U_DK, c.dt, {c.b, c.hk, c.s, c.d}, bhsd(c, c.hk, c.d));
        D dv = bl.tensor(U_DV, c.dt, {c.b, c.hk, c.s, c.d}, bhsd(c, c.hk, c.d));
        D doo = virt({c.b, c.hq, c.s, c.d}), dsum = virt(rows());
        ops.push_back(bl.pw(CUDNN_POINTWISE_MUL, dO, o, nullptr, doo));
        ops.push_back(bl.red(CUDNN_REDUCE_TENSOR_ADD, doo, dsum));
        ops.push_back(
            bl.pw(CUDNN_POINTWISE_MUL, dsum, one, nullptr, sum)); // one: 1 - p with dropout
        D s = virt(ss()), s2 = virt(ss()), s3 = virt(ss()), e = virt(ss());
        ops.push_back(bl.mm(q, kt, s));
        ops.push_back(bl.pw(CUDNN_POINTWISE_MUL, s, scale, nullptr, s2));
        ops.push_back(bl.pw(CUDNN_POINTWISE_SUB, s2, stats, nullptr, s3));
        D s4 = masked(ops, s3);
        ops.push_back(bl.pw(CUDNN_POINTWISE_EXP, s4, nullptr, nullptr, e));
        D pd = c.p > 0 ? dropout(ops, e, CUDNN_DATA_FLOAT) : e;
        dims_t tr = {(int64_t)c.hq * c.s * c.s, (int64_t)c.s * c.s, 1, c.s};
        D pt = bl.tensor(next++, c.dt, ss(), tr, true);
        ops.push_back(bl.reshape(pd, pt));
        grouped(ops, pt, dO, dv);
        D dp = virt(ss()), dp2 = virt(ss()), ds = virt(ss()), ds2 = virt(ss());
        ops.push_back(bl.mm(dO, vt, dp));
        if (c.p > 0) { // the same mask: an RNG op of the same seed, offset and shape
            D r = virt(ss()), m = virt(ss());
            ops.push_back(bl.rng(r, seed, offset, 1.0 - c.p));
            ops.push_back(bl.pw(CUDNN_POINTWISE_MUL, dp, r, nullptr, m));
            dp = m;
        }
        ops.push_back(bl.pw(CUDNN_POINTWISE_SUB, dp, sum, nullptr, dp2));
        ops.push_back(bl.pw(CUDNN_POINTWISE_MUL, dp2, e, nullptr, ds));
        if (c.p > 0) {
            D m = virt(ss());
            ops.push_back(bl.pw(CUDNN_POINTWISE_MUL, ds, dscale, nullptr, m));
            ds = m;
        }
        ops.push_back(bl.pw(CUDNN_POINTWISE_MUL, ds, scale, nullptr, ds2));
        D dst = bl.tensor(next++, c.dt, ss(), tr, true);
        ops.push_back(bl.reshape(ds2, dst));
        grouped(ops, dst, q, dk);
        D kn = bl.tensor(next++, c.dt, {c.b, c.hk, c.s, c.d}, bhsd(c, c.hk, c.d), true);
        ops.push_back(bl.reshape(kt, kn));
        ops.push_back(bl.mm(ds2, kn, dq));
        return ops;
    }
    // out = a b, summed over each group's query heads when the key heads are fewer
    void grouped(std::vector<D> &ops, D a, D b, D out)
    {
        if (c.hq == c.hk) {
            ops.push_back(bl.mm(a, b, out));
            return;
        }
        D full = virt({c.b, c.hq, c.s, c.d}, c.dt);
        ops.push_back(bl.mm(a, b, full));
        ops.push_back(bl.red(CUDNN_REDUCE_TENSOR_ADD, full, out));
    }
};

// Device buffers and the variant pack of a case.
struct Run {
    const Case &c;
    std::vector<float> q, k, v, dout;
    Dev dq_, dk_, dv_, dout_, o_, stats_, sum_, seed_, offset_, ws_;
    Dev *qd, *kd, *vd;
    float scale, ninf = -INFINITY, dscale, one = 1.0f;
    Run(const Case &cs, int64_t ws_bytes)
        : c(cs), q(rand16((size_t)c.b * c.hq * c.s * c.d, c.dt, -1, 1)),
          k(rand16((size_t)c.b * c.hk * c.s * c.d, c.dt, -1, 1)),
          v(rand16((size_t)c.b * c.hk * c.s * c.d, c.dt, -1, 1)),
          dout(rand16((size_t)c.b * c.hq * c.s * c.d, c.dt, -1, 1)), dq_(q.size() * 2),
          dk_(k.size() * 2), dv_(v.size() * 2), dout_(dout, c.dt), o_(q.size() * 2),
          stats_((size_t)c.b * c.hq * c.s * 4), sum_((size_t)c.b * c.hq * c.s * 4), seed_(8),
          offset_(8), ws_(ws_bytes > 0 ? (size_t)ws_bytes : 1)
    {
        qd = new Dev(q, c.dt), kd = new Dev(k, c.dt), vd = new Dev(v, c.dt);
        scale = (float)(1.0 / sqrt((double)c.d));
        dscale = c.p > 0 ? (float)(1.0 / (1.0 - c.p)) : 1.0f;
        one =
            (float)(1.0 -
                    c.p); // sum(dO*O) = sum over the kept (dO V^T)/(1-p) P: the row sums scale by 1-p
        const int64_t seed = 1234, off = 77;
        cudaMemcpy(seed_.p, &seed, 8, cudaMemcpyHostToDevice);
        cudaMemcpy(offset_.p, &off, 8, cudaMemcpyHostToDevice);
    }
    ~Run() { delete qd, delete kd, delete vd; }
    std::vector<int64_t> fwd_uids() const
    {
        std::vector<int64_t> u = {U_Q, U_KT, U_V, U_O, U_STATS, U_SCALE, U_NINF};
        if (c.p > 0) u.insert(u.end(), {U_DSCALE, U_SEED, U_OFFSET});
        return u;
    }
    std::vector<void *> fwd_ptrs()
    {
        std::vector<void *> p = {qd->p, kd->p, vd->p, o_.p, stats_.p, &scale, &ninf};
        if (c.p > 0) p.insert(p.end(), {&dscale, seed_.p, offset_.p});
        return p;
    }
    std::vector<int64_t> bwd_uids() const
    {
        std::vector<int64_t> u = fwd_uids();
        u.insert(u.end(), {U_VT, U_DO, U_SUM, U_DQ, U_DK, U_DV, U_ONE});
        return u;
    }
    std::vector<void *> bwd_ptrs()
    {
        std::vector<void *> p = fwd_ptrs();
        p.insert(p.end(), {vd->p, dout_.p, sum_.p, dq_.p, dk_.p, dv_.p, &one});
        return p;
    }
};

// The forward and backward of a case against the reference.
void check_case(cudnnHandle_t h, const Case &c)
{
    const char *t = c.dt == CUDNN_DATA_HALF ? "fp16" : "bf16";
    Builder bf, bb;
    Graphs gf(c, bf), gb(c, bb);
    D pf = nullptr, pb = nullptr;
    int64_t wf = 0, wb = 0;
    const cudnnStatus_t sf = bf.plan(h, gf.forward(), &pf, &wf),
                        sb = bb.plan(h, gb.backward(), &pb, &wb);
    tap(sf == CUDNN_STATUS_SUCCESS && sb == CUDNN_STATUS_SUCCESS,
        "b %d, %d/%d heads, s %d, d %d, %s: the forward and backward patterns give plans (%s, %s), workspace %lld and %lld bytes",
        c.b, c.hq, c.hk, c.s, c.d, t, cudnnGetErrorString(sf), cudnnGetErrorString(sb),
        (long long)wf, (long long)wb);
    if (sf != CUDNN_STATUS_SUCCESS || sb != CUDNN_STATUS_SUCCESS) return;
    Run r(c, wf > wb ? wf : wb);
    const cudnnStatus_t ef = run(h, pf, r.fwd_uids(), r.fwd_ptrs(), r.ws_.p);
    const cudnnStatus_t eb = run(h, pb, r.bwd_uids(), r.bwd_ptrs(), r.ws_.p);
    const Ref ref = reference(c, r.q, r.k, r.v, r.dout, nullptr);
    const size_t nq = r.q.size(), nk = r.k.size();
    double w1, w2, w3, w4, w5;
    const double tol = c.dt == CUDNN_DATA_HALF ? 2e-3 : 1.6e-2; // P and dS are rounded to the type
    const bool o = close(r.o_.get16(nq, c.dt), ref.o, tol, tol, &w1);
    const bool st = close(r.stats_.get32((size_t)c.b * c.hq * c.s), ref.stats, 1e-5, 1e-5, &w2);
    const bool dq = close(r.dq_.get16(nq, c.dt), ref.dq, 2 * tol, 2 * tol, &w3);
    const bool dk = close(r.dk_.get16(nk, c.dt), ref.dk, 2 * tol, 2 * tol, &w4);
    const bool dv = close(r.dv_.get16(nk, c.dt), ref.dv, 2 * tol, 2 * tol, &w5);
    tap(ef == CUDNN_STATUS_SUCCESS && eb == CUDNN_STATUS_SUCCESS && o && st && dq && dk && dv,
        "b %d, %d/%d heads, s %d, d %d, %s: O, Stats, dQ, dK, dV match the definition (worst error/tolerance %.2f %.2f %.2f %.2f %.2f)",
        c.b, c.hq, c.hk, c.s, c.d, t, w1, w2, w3, w4, w5);
    std::vector<unsigned char> ws((size_t)(wf > wb ? wf : wb));
    cudaMemcpy(ws.data(), r.ws_.p, ws.size(), cudaMemcpyDeviceToHost);
    bool poisoned = true;
    for (unsigned char x : ws) poisoned &= x == 0xff;
    tap(poisoned, "the workspace holds nothing afterwards (filled with 0xff)");
}

void test_numbers(cudnnHandle_t h)
{
    check_case(h, {2, 4, 4, 37, 64, CUDNN_DATA_BFLOAT16, 0});
    check_case(h, {1, 4, 2, 33, 64, CUDNN_DATA_HALF, 0});      // grouped-query attention
    check_case(h, {1, 2, 1, 20, 128, CUDNN_DATA_BFLOAT16, 0}); // multi-query, head dim 128
    check_case(h, {1, 3, 3, 16, 80, CUDNN_DATA_HALF, 0});
}

// Dropout through the RNG op: with V's rows one-hot (s <= d), O is the dropped probabilities, so
// the mask shows: its keep rate, its scaling by 1/(1-p), and the backward's mask (the same seed,
// offset and shape) matching the forward's; another offset gives another mask.
void test_dropout(cudnnHandle_t h)
{
    const Case c = {1, 2, 2, 48, 64, CUDNN_DATA_BFLOAT16, 0.25};
    Builder bf, bb;
    Graphs gf(c, bf), gb(c, bb);
    D pf = nullptr, pb = nullptr;
    int64_t wf = 0, wb = 0;
    const bool planned = bf.plan(h, gf.forward(), &pf, &wf) == CUDNN_STATUS_SUCCESS &&
                         bb.plan(h, gb.backward(), &pb, &wb) == CUDNN_STATUS_SUCCESS;
    tap(planned, "dropout %.2f: the forward and backward patterns with the RNG op give plans", c.p);
    if (!planned) return;
    Run r(c, wf > wb ? wf : wb);
    for (size_t i = 0; i < r.v.size(); i++) r.v[i] = (i / c.d) % c.s == i % c.d ? 1.0f : 0.0f;
    delete r.vd;
    r.vd = new Dev(r.v, c.dt);
    run(h, pf, r.fwd_uids(), r.fwd_ptrs(), r.ws_.p);
    const std::vector<float> o = r.o_.get16(r.q.size(), c.dt);
    const Ref plain =
        reference({c.b, c.hq, c.hk, c.s, c.d, c.dt, 0}, r.q, r.k, r.v, r.dout, nullptr);
    std::vector<float> keep((size_t)c.b * c.hq * c.s * c.s, 0.0f);
    long kept = 0, total = 0, bad_scale = 0;
    for (int hh = 0; hh < c.hq; hh++)
        for (int i = 0; i < c.s; i++)
            for (int j = 0; j <= i; j++) {
                const size_t at = ((size_t)hh * c.s + i) * c.d + j;
                const bool k = o[at] != 0.0f;
                keep[((size_t)hh * c.s + i) * c.s + j] = k;
                kept += k, total++;
                const double want = plain.o[at] / (1 - c.p);
                if (k && fabs(o[at] - want) > 1.6e-2 * (1e-3 + fabs(want))) bad_scale++;
            }
    const double rate = (double)kept / total, sigma = sqrt(c.p * (1 - c.p) / total);
    tap(fabs(rate - (1 - c.p)) < 4 * sigma,
        "dropout %.2f: %ld of %ld probabilities kept (%.4f, expected %.2f within 4 sigma = %.4f)",
        c.p, kept, total, rate, 1 - c.p, 4 * sigma);
    tap(bad_scale == 0, "dropout: every kept probability is scaled by 1/(1-p) (%ld are not)",
        bad_scale);
    run(h, pb, r.bwd_uids(), r.bwd_ptrs(), r.ws_.p);
    const Ref ref = reference(c, r.q, r.k, r.v, r.dout, &keep);
    double w1, w2, w3;
    const bool ok = close(r.dq_.get16(r.q.size(), c.dt), ref.dq, 3.2e-2, 3.2e-2, &w1) &&
                    close(r.dk_.get16(r.k.size(), c.dt), ref.dk, 3.2e-2, 3.2e-2, &w2) &&
                    close(r.dv_.get16(r.k.size(), c.dt), ref.dv, 3.2e-2, 3.2e-2, &w3);
    tap(ok,
        "dropout: the backward's gradients are those of the forward's mask (worst %.2f %.2f %.2f)",
        w1, w2, w3);
    const int64_t other = 78;
    cudaMemcpy(r.offset_.p, &other, 8, cudaMemcpyHostToDevice);
    run(h, pf, r.fwd_uids(), r.fwd_ptrs(), r.ws_.p);
    const std::vector<float> o2 = r.o_.get16(r.q.size(), c.dt);
    long differ = 0;
    for (size_t i = 0; i < o.size(); i++) differ += (o[i] != 0.0f) != (o2[i] != 0.0f);
    tap(differ > total / 10,
        "dropout: another offset gives another mask (%ld of %ld elements differ)", differ, total);
}

// The causal mask aligned bottom-right ([F]: with s_q queries and s_kv keys, query i sees key j
// iff j <= i + s_kv - s_q; the frontend builds it as the top-left mask's row index plus s_kv
// minus s_q, by-value INT32 scalars): with V's rows one-hot (s_kv <= d), O is the probabilities,
// so the mask shows. [F]'s example s_q 2, s_kv 5 (row 0 sees keys 0..3, row 1 all five) and a
// query chunk against its prefix (12 against 36); the probabilities match the definition.
void check_bottom_right(cudnnHandle_t h, int sq, int skv)
{
    const cudnnDataType_t dt = CUDNN_DATA_BFLOAT16;
    const int d = 64;
    Builder bl;
    int64_t next = 2000;
    auto virt = [&](dims_t dims, cudnnDataType_t t) {
        dims_t st(dims.size(), 1);
        for (size_t i = dims.size() - 1; i-- > 0;) st[i] = st[i + 1] * dims[i + 1];
        return bl.tensor(next++, t, dims, st, true);
    };
    auto byval = [&](int64_t uid, cudnnDataType_t t) {
        return bl.tensor(uid, t, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
    };
    const dims_t ss = {1, 1, sq, skv}, rows = {1, 1, sq, 1};
    D q = bl.tensor(U_Q, dt, {1, 1, sq, d}, {(int64_t)sq * d, (int64_t)sq * d, d, 1});
    D kt = bl.tensor(U_KT, dt, {1, 1, d, skv}, {(int64_t)skv * d, (int64_t)skv * d, 1, d});
    D v = bl.tensor(U_V, dt, {1, 1, skv, d}, {(int64_t)skv * d, (int64_t)skv * d, d, 1});
    D o = bl.tensor(U_O, dt, {1, 1, sq, d}, {(int64_t)sq * d, (int64_t)sq * d, d, 1});
    D stats = bl.tensor(U_STATS, CUDNN_DATA_FLOAT, rows, {sq, sq, 1, 1});
    D scale = byval(U_SCALE, CUDNN_DATA_FLOAT), ninf = byval(U_NINF, CUDNN_DATA_FLOAT);
    enum { U_SKV = 50, U_SQ }; // s_kv and s_q
    D n_kv = byval(U_SKV, CUDNN_DATA_INT32), n_q = byval(U_SQ, CUDNN_DATA_INT32);
    std::vector<D> ops;
    D sc = virt(ss, CUDNN_DATA_FLOAT), s2 = virt(ss, CUDNN_DATA_FLOAT);
    ops.push_back(bl.mm(q, kt, sc));
    ops.push_back(bl.pw(CUDNN_POINTWISE_MUL, sc, scale, nullptr, s2));
    D row = virt(ss, CUDNN_DATA_INT32), r2 = virt(ss, CUDNN_DATA_INT32), r3 = virt(ss, CUDNN_DATA_INT32);
    D col = virt(ss, CUDNN_DATA_INT32), vis = virt(ss, CUDNN_DATA_BOOLEAN), s3 = virt(ss, CUDNN_DATA_FLOAT);
    ops.push_back(bl.pw(CUDNN_POINTWISE_GEN_INDEX, s2, nullptr, nullptr, row, CUDNN_DATA_INT32, 2));
    ops.push_back(bl.pw(CUDNN_POINTWISE_ADD, row, n_kv, nullptr, r2, CUDNN_DATA_INT32));
    ops.push_back(bl.pw(CUDNN_POINTWISE_SUB, r2, n_q, nullptr, r3, CUDNN_DATA_INT32));
    ops.push_back(bl.pw(CUDNN_POINTWISE_GEN_INDEX, s2, nullptr, nullptr, col, CUDNN_DATA_INT32, 3));
    ops.push_back(bl.pw(CUDNN_POINTWISE_CMP_GE, r3, col, nullptr, vis, CUDNN_DATA_BOOLEAN));
    ops.push_back(bl.pw(CUDNN_POINTWISE_BINARY_SELECT, s2, ninf, vis, s3));
    D mx = virt(rows, CUDNN_DATA_FLOAT), df = virt(ss, CUDNN_DATA_FLOAT), e = virt(ss, CUDNN_DATA_FLOAT);
    D z = virt(rows, CUDNN_DATA_FLOAT), lz = virt(rows, CUDNN_DATA_FLOAT), p = virt(ss, dt);
    ops.push_back(bl.red(CUDNN_REDUCE_TENSOR_MAX, s3, mx));
    ops.push_back(bl.pw(CUDNN_POINTWISE_SUB, s3, mx, nullptr, df));
    ops.push_back(bl.pw(CUDNN_POINTWISE_EXP, df, nullptr, nullptr, e));
    ops.push_back(bl.red(CUDNN_REDUCE_TENSOR_ADD, e, z));
    ops.push_back(bl.pw(CUDNN_POINTWISE_LOG, z, nullptr, nullptr, lz));
    ops.push_back(bl.pw(CUDNN_POINTWISE_ADD, mx, lz, nullptr, stats));
    ops.push_back(bl.pw(CUDNN_POINTWISE_DIV, e, z, nullptr, p));
    ops.push_back(bl.mm(p, v, o));
    D plan = nullptr;
    int64_t ws = 0;
    const cudnnStatus_t sp = bl.plan(h, ops, &plan, &ws);
    tap(sp == CUDNN_STATUS_SUCCESS, "bottom-right causal mask, s_q %d, s_kv %d: the forward gives a plan (%s)",
        sq, skv, cudnnGetErrorString(sp));
    if (sp != CUDNN_STATUS_SUCCESS) return;
    std::vector<float> hq = rand16((size_t)sq * d, dt, -1, 1), hk = rand16((size_t)skv * d, dt, -1, 1);
    std::vector<float> hv((size_t)skv * d, 0.0f);
    for (int j = 0; j < skv; j++) hv[(size_t)j * d + j] = 1.0f;
    Dev dq(hq, dt), dk(hk, dt), dv(hv, dt), dout((size_t)sq * d * 2), dst((size_t)sq * 4), dws((size_t)(ws > 0 ? ws : 1));
    float fscale = 0.125f, fninf = -INFINITY;
    int32_t lens[2] = {skv, sq};
    const cudnnStatus_t er = run(h, plan, {U_Q, U_KT, U_V, U_O, U_STATS, U_SCALE, U_NINF, U_SKV, U_SQ},
                                 {dq.p, dk.p, dv.p, dout.p, dst.p, &fscale, &fninf, &lens[0], &lens[1]}, dws.p);
    const std::vector<float> got = dout.get16((size_t)sq * d, dt);
    long wrong_mask = 0;
    double worst = 0;
    for (int i = 0; i < sq; i++) {
        const int last = i + skv - sq; // the last key row i sees
        double m = -INFINITY, z = 0;
        std::vector<double> sc_ij(skv);
        for (int j = 0; j <= last; j++) {
            double x = 0;
            for (int k = 0; k < d; k++) x += (double)hq[(size_t)i * d + k] * hk[(size_t)j * d + k];
            sc_ij[j] = x * fscale, m = fmax(m, sc_ij[j]);
        }
        for (int j = 0; j <= last; j++) z += exp(sc_ij[j] - m);
        for (int j = 0; j < skv; j++) {
            const float g = got[(size_t)i * d + j];
            wrong_mask += (j <= last) != (g != 0.0f);
            if (j <= last) worst = fmax(worst, fabs(g - exp(sc_ij[j] - m) / z) / 1.6e-2);
        }
    }
    tap(er == CUDNN_STATUS_SUCCESS && wrong_mask == 0 && worst <= 1.0,
        "bottom-right causal mask, s_q %d, s_kv %d: query i sees keys j <= i + %d (%ld probabilities on "
        "the wrong side; worst error/tolerance %.2f)",
        sq, skv, skv - sq, wrong_mask, worst);
}

void test_bottom_right(cudnnHandle_t h)
{
    check_bottom_right(h, 2, 5);
    check_bottom_right(h, 12, 36);
}

// Engine 0 of the backward is nondeterministic (its numerical note says so); engine 1 is not.
void test_determinism(cudnnHandle_t h)
{
    const Case c = {1, 2, 2, 24, 64, CUDNN_DATA_BFLOAT16, 0};
    for (int any = 0; any < 2; any++) {
        Builder bf, bb;
        Graphs gf(c, bf), gb(c, bb);
        D pf = nullptr, pb = nullptr;
        int64_t wf = 0, wb = 0;
        bf.plan(h, gf.forward(), &pf, &wf);
        bb.plan(h, gb.backward(), &pb, &wb, any == 1);
        Run r(c, wf > wb ? wf : wb);
        run(h, pf, r.fwd_uids(), r.fwd_ptrs(), r.ws_.p);
        run(h, pb, r.bwd_uids(), r.bwd_ptrs(), r.ws_.p);
        const std::vector<float> a = r.dq_.get16(r.q.size(), c.dt);
        run(h, pb, r.bwd_uids(), r.bwd_ptrs(), r.ws_.p);
        const std::vector<float> b = r.dq_.get16(r.q.size(), c.dt);
        const bool same = memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
        tap(any ? !same : same,
            any ? "the backward's engine 0 (numerical note NONDETERMINISTIC) varies from run to run"
                : "the first deterministic engine's backward gives the same bits twice");
    }
}

// A status and what cudnnGetLastErrorString says of it.
std::string last_error()
{
    char buf[512];
    cudnnGetLastErrorString(buf, sizeof(buf));
    return buf;
}

void expect(const char *what, cudnnStatus_t got, cudnnStatus_t want)
{
    const std::string why = last_error();
    tap(got == want, "%s: %s (%s)", what, cudnnGetErrorString(got), why.c_str());
}

// A forward plan's status for a case whose Q is described by q_dims/q_strides and whose O and
// Stats have types o_dt and stats_dt.
cudnnStatus_t forward_status(cudnnHandle_t h, Case c, cudnnDataType_t io_dt,
                             cudnnDataType_t stats_dt, bool q_bhds)
{
    Builder bl;
    c.dt = io_dt;
    Graphs g(c, bl);
    if (q_bhds)
        g.q = bl.tensor(U_Q, c.dt, {c.b, c.hq, c.s, c.d},
                        {(int64_t)c.hq * c.s * c.d, (int64_t)c.s * c.d, 1, c.s});
    g.stats = bl.tensor(U_STATS, stats_dt, {c.b, c.hq, c.s, 1}, bhsd(c, c.hq, 1));
    D p = nullptr;
    int64_t ws = 0;
    return bl.plan(h, g.forward(), &p, &ws);
}

void test_refused_graphs(cudnnHandle_t h)
{
    const Case c = {1, 2, 2, 16, 64, CUDNN_DATA_BFLOAT16, 0};
    expect("fp32 Q, K, V and O (the engines take fp16 and bf16)",
           forward_status(h, c, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, false),
           CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE);
    Case odd = c;
    odd.d = 20;
    expect("head dim 20 (not a multiple of 8)",
           forward_status(h, odd, CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, false),
           CUDNN_STATUS_NOT_SUPPORTED_SHAPE);
    odd.d = 264;
    expect("head dim 264 (over 256)",
           forward_status(h, odd, CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, false),
           CUDNN_STATUS_NOT_SUPPORTED_SHAPE);
    expect("Q with the head dim strided (b, h, d, s storage)",
           forward_status(h, c, CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, true),
           CUDNN_STATUS_NOT_SUPPORTED_LAYOUT);
    expect("fp16 statistics (they are fp32)",
           forward_status(h, c, CUDNN_DATA_BFLOAT16, CUDNN_DATA_HALF, false),
           CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE);
    Case gqa = c;
    gqa.hq = 3, gqa.hk = 2;
    expect("3 query heads over 2 key heads (no grouping of one onto the other)",
           forward_status(h, gqa, CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, false),
           CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH);
    { // one matmul: no engine
        Builder bl;
        Graphs g(c, bl);
        D s = g.virt(g.ss());
        D p = nullptr;
        int64_t ws = 0;
        const cudnnStatus_t st = bl.plan(h, {bl.mm(g.q, g.kt, s)}, &p, &ws);
        tap(st == CUDNN_STATUS_NOT_SUPPORTED, "a lone matmul: the heuristic offers no engine (%s)",
            cudnnGetErrorString(st));
    }
    { // a pointwise input that does not broadcast
        Builder bl;
        Graphs g(c, bl);
        std::vector<D> ops = g.forward();
        D wrong = bl.tensor(999, CUDNN_DATA_FLOAT, {c.b, c.hq, 3, c.s},
                            {(int64_t)c.hq * 3 * c.s, 3 * c.s, c.s, 1});
        D y = g.virt(g.ss());
        ops.push_back(bl.pw(CUDNN_POINTWISE_ADD, wrong, g.scale, nullptr, y));
        D p = nullptr;
        int64_t ws = 0;
        expect("a pointwise input of 3 rows for 16", bl.plan(h, ops, &p, &ws),
               CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH);
    }
}

void test_refused_api(cudnnHandle_t h)
{
    D t = nullptr;
    cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t);
    const double uid_d = 1;
    expect("a tensor's unique id given as a DOUBLE",
           cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_DOUBLE, 1, &uid_d),
           CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE);
    const int64_t dims9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    expect("nine dimensions (CUDNN_DIM_MAX is 8)",
           cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 9, dims9),
           CUDNN_STATUS_BAD_PARAM);
    expect("a tensor finalized without its attributes", cudnnBackendFinalize(t),
           CUDNN_STATUS_BAD_PARAM);
    int64_t n = 0, v = 0;
    expect("an attribute read before finalization",
           cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &n, &v),
           CUDNN_STATUS_NOT_INITIALIZED);
    cudnnBackendDestroyDescriptor(t);
    {
        Builder bl;
        D s = bl.tensor(5, CUDNN_DATA_FLOAT, {1, 1, 2, 2}, {4, 4, 2, 1});
        const int64_t uid = 6;
        expect("an attribute set after finalization",
               cudnnBackendSetAttribute(s, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid),
               CUDNN_STATUS_NOT_INITIALIZED);
        D byval = bl.make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
        const cudnnDataType_t f = CUDNN_DATA_FLOAT;
        const int64_t dims[4] = {2, 1, 1, 1}, st[4] = {1, 1, 1, 1}, al = 4;
        const bool yes = true;
        bl.set(byval, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
        bl.set(byval, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f);
        bl.set(byval, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
        bl.set(byval, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, st);
        bl.set(byval, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &al);
        bl.set(byval, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes);
        expect("a by-value tensor of two elements", cudnnBackendFinalize(byval),
               CUDNN_STATUS_BAD_PARAM);
        D raw = bl.make(CUDNN_BACKEND_TENSOR_DESCRIPTOR),
          op = bl.make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
        expect("a tensor not finalized given to an operation",
               cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw),
               CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED);
        D pw = bl.make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
        const cudnnPointwiseMode_t gi = CUDNN_POINTWISE_GEN_INDEX;
        bl.set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &gi);
        bl.set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f);
        expect("GEN_INDEX without an axis", cudnnBackendFinalize(pw), CUDNN_STATUS_BAD_PARAM);
        // two tensors under one unique id in a graph
        D a = bl.tensor(7, CUDNN_DATA_FLOAT, {1, 1, 2, 2}, {4, 4, 2, 1}),
          b = bl.tensor(7, CUDNN_DATA_HALF, {1, 1, 2, 2}, {4, 4, 2, 1});
        D y = bl.tensor(8, CUDNN_DATA_FLOAT, {1, 1, 2, 2}, {4, 4, 2, 1}, true);
        D op2 = bl.pw(CUDNN_POINTWISE_ADD, a, b, nullptr, y);
        D g = bl.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
        bl.set(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op2);
        expect("two different tensors under one unique id", cudnnBackendFinalize(g),
               CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES);
    }
    // execution: a missing pointer, no workspace, a misaligned pointer
    const Case c = {1, 2, 2, 16, 64, CUDNN_DATA_BFLOAT16, 0};
    Builder bl;
    Graphs g(c, bl);
    D plan = nullptr;
    int64_t ws = 0;
    bl.plan(h, g.forward(), &plan, &ws);
    Run r(c, ws);
    std::vector<int64_t> u = r.fwd_uids();
    std::vector<void *> p = r.fwd_ptrs();
    u.pop_back(), p.pop_back();
    expect("a variant pack without the -inf scalar", run(h, plan, u, p, r.ws_.p),
           CUDNN_STATUS_BAD_PARAM);
    expect("no workspace for a plan that needs some",
           run(h, plan, r.fwd_uids(), r.fwd_ptrs(), nullptr), CUDNN_STATUS_BAD_PARAM);
    p = r.fwd_ptrs();
    p[0] = (char *)p[0] + 2; // Q two bytes on: aligned to its elements, not to the 16 promised
    expect("Q's pointer not aligned to its declared 16 bytes",
           run(h, plan, r.fwd_uids(), p, r.ws_.p), CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER);
    expect("a stream that is not one", cudnnSetStream(h, (cudaStream_t)&r), CUDNN_STATUS_BAD_PARAM);
}

// Refusals a GPU would meet as a crash or garbage end the emulated process, naming them.
void test_process_ends(cudnnHandle_t h)
{
    const Case c = {1, 2, 2, 16, 64, CUDNN_DATA_BFLOAT16, 0};
    std::string err;
    const int rc = in_child(
        [&] {
            Builder bl;
            Graphs g(c, bl);
            D plan = nullptr;
            int64_t ws = 0;
            bl.plan(h, g.forward(), &plan, &ws);
            Run r(c, ws);
            std::vector<void *> p = r.fwd_ptrs();
            static std::vector<uint16_t> host(4096);
            p[3] = host.data(); // O in host memory
            run(h, plan, r.fwd_uids(), p, r.ws_.p);
        },
        &err);
    tap(rc == 86 && err.find("is not device memory") != std::string::npos,
        "O in host memory ends the process (exit %d: %s)", rc,
        err.substr(0, err.find('\n')).c_str());
}

} // namespace

int main()
{
    cudnnHandle_t h = nullptr;
    cudaStream_t st = nullptr;
    cudaStreamCreate(&st);
    tap(cudnnCreate(&h) == CUDNN_STATUS_SUCCESS && cudnnSetStream(h, st) == CUDNN_STATUS_SUCCESS,
        "cudnnCreate and cudnnSetStream (cuDNN %zu)", cudnnGetVersion());
    test_numbers(h);
    test_dropout(h);
    test_bottom_right(h);
    test_determinism(h);
    test_refused_graphs(h);
    test_refused_api(h);
    test_process_ends(h);
    tap(cudnnDestroy(h) == CUDNN_STATUS_SUCCESS && cudnnDestroy(h) == CUDNN_STATUS_BAD_PARAM,
        "cudnnDestroy, once");
    cudaStreamDestroy(st);
    printf("1..%d\n", g_tests);
    return g_failed ? 1 : 0;
}
