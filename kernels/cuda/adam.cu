// Adam with decoupled weight decay and bias correction on fp32 master params, the formula and
// operation order of kernels/cpu/adam.c (Apex/TE FusedAdam, adam_w_mode):
//   m = b1 m + (1-b1) g;  v = b2 v + ((1-b2) g) g
//   p = p - lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * p)
// bc1 = 1 - b1^step and bc2 = 1 - b2^step in double on the host, rounded to fp32 (as the CPU).
// Every operation is an explicit IEEE fp32 intrinsic (__f*_rn: no FMA contraction; division
// and sqrt correctly rounded), so each element gets the CPU's result bit for bit wherever the
// CPU build does not contract either (x86-64's default). 16-byte accesses when aligned.
#include <math.h>

#include "kernels/cuda/common.cuh"

extern "C" {
#include "base/error.h"
}

typedef struct {
    float lr, b1, b2, omb1, omb2, bc1, bc2, eps, wd;
} adam_k;

static __device__ __forceinline__ void adam1(const adam_k &k, float &p, float g, float &m, float &v)
{
    const float mi = __fadd_rn(__fmul_rn(k.b1, m), __fmul_rn(k.omb1, g));
    const float vi = __fadd_rn(__fmul_rn(k.b2, v), __fmul_rn(__fmul_rn(k.omb2, g), g));
    const float denom = __fadd_rn(__fsqrt_rn(__fdiv_rn(vi, k.bc2)), k.eps);
    const float upd = __fadd_rn(__fdiv_rn(__fdiv_rn(mi, k.bc1), denom), __fmul_rn(k.wd, p));
    m = mi;
    v = vi;
    p = __fsub_rn(p, __fmul_rn(k.lr, upd));
}

// Multi-tensor apply (Apex's scheme): a launch takes up to MAX_T tensors in its arguments, each
// cut into chunks of CHUNK elements; blocks stride over the chunks of all of them, so a model's
// few hundred parameters cost a handful of launches instead of two per parameter. The model's
// copy of each updated element is written in the same pass (no second read of the master).
enum { MAX_T = 32, CHUNK = 16384, THREADS = 256, VEC = 4 };

typedef struct {
    float *p[MAX_T];
    const float *g[MAX_T];
    float *m[MAX_T], *v[MAX_T];
    void *model[MAX_T];
    long n[MAX_T];
    float wd[MAX_T];
    int chunk0[MAX_T + 1];    // first chunk of each tensor; chunk0[count] = all chunks
    unsigned char vec[MAX_T]; // every pointer 16-byte aligned: 4-element accesses
    int count;
} adam_list;

template <typename TM, int V>
static __device__ __forceinline__ void adam_span(const adam_k &k, float *p, const float *g,
                                                 float *m, float *v, TM *model, long i0, long n)
{
    float pv[V], gv[V], mv[V], vv[V];
    mc_load_vec<float, V>(pv, p, i0, n);
    mc_load_vec<float, V>(gv, g, i0, n);
    mc_load_vec<float, V>(mv, m, i0, n);
    mc_load_vec<float, V>(vv, v, i0, n);
#pragma unroll
    for (int i = 0; i < V; i++) adam1(k, pv[i], gv[i], mv[i], vv[i]);
    mc_store_vec<float, V>(p, i0, n, pv);
    mc_store_vec<float, V>(m, i0, n, mv);
    mc_store_vec<float, V>(v, i0, n, vv);
    if (model) mc_store_vec<TM, V>(model, i0, n, pv);
}

template <typename TM>
static __global__ void __launch_bounds__(THREADS) k_adam_multi(adam_list l, adam_k k)
{
    const int total = l.chunk0[l.count];
    for (int c = blockIdx.x; c < total; c += gridDim.x) {
        int t = 0;
        while (c >= l.chunk0[t + 1]) t++;
        const long n = l.n[t];
        const long lo = (long)(c - l.chunk0[t]) * CHUNK;
        const long hi = lo + CHUNK < n ? lo + CHUNK : n;
        adam_k kt = k;
        kt.wd = l.wd[t];
        TM *model = (TM *)l.model[t];
        if (l.vec[t]) {
            for (long i = lo + (long)threadIdx.x * VEC; i < hi; i += (long)THREADS * VEC)
                adam_span<TM, VEC>(kt, l.p[t], l.g[t], l.m[t], l.v[t], model, i, hi);
        } else {
            for (long i = lo + threadIdx.x; i < hi; i += THREADS)
                adam_span<TM, 1>(kt, l.p[t], l.g[t], l.m[t], l.v[t], model, i, hi);
        }
    }
}

void mc_cuda_adam_step(const mc_backend_t *be, const mc_adam_tensor_t *t, int count,
                       mc_dtype_t model_dt, float lr, float beta1, float beta2, float eps, int step)
{
    adam_k k;
    k.lr = lr, k.b1 = beta1, k.b2 = beta2, k.omb1 = 1.0f - beta1, k.omb2 = 1.0f - beta2;
    k.bc1 = (float)(1.0 - pow((double)beta1, (double)step));
    k.bc2 = (float)(1.0 - pow((double)beta2, (double)step));
    k.eps = eps, k.wd = 0.0f;
    int i = 0;
    while (i < count) {
        adam_list l;
        l.count = 0;
        l.chunk0[0] = 0;
        // a launch ends at MAX_T tensors, or before its chunk count could overflow an int
        for (; i < count && l.count < MAX_T; i++) {
            const long chunks = (t[i].n + CHUNK - 1) / CHUNK;
            if (t[i].n <= 0) continue;
            if (l.count > 0 && (long)l.chunk0[l.count] + chunks > 0x7fffffffL) break;
            if (chunks > 0x7fffffffL)
                mc_fatal("adam_step: a tensor of %ld elements is too large", t[i].n);
            const int j = l.count++;
            l.p[j] = t[i].p, l.g[j] = t[i].g, l.m[j] = t[i].m, l.v[j] = t[i].v,
            l.model[j] = t[i].model;
            l.n[j] = t[i].n, l.wd[j] = t[i].wd;
            l.vec[j] = mc_cuda_vec_ok(t[i].p, t[i].g, t[i].m, t[i].v) && mc_cuda_vec_ok(t[i].model);
            l.chunk0[j + 1] = l.chunk0[j] + (int)chunks;
        }
        if (l.count == 0) continue;
        const unsigned blocks = mc_cuda_blocks(l.chunk0[l.count], 1);
        MC_CUDA_DISPATCH(model_dt, TM, "adam_step",
                         MC_LAUNCH(blocks, THREADS, 0, mc_cuda_stream(be), k_adam_multi<TM>)(l, k))
        MC_CUDA_LAUNCHED();
    }
}
