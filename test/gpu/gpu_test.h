/* Support for the GPU op tests (test/gpu/test_gpu_*.c): the CUDA backend or the reason to skip,
 * host tensors of any type, device copies, and the comparison of a CUDA result with the CPU
 * backend's (kernels/cpu, the reference) under a stated tolerance.
 *
 * Header-only (static inline) so every test binary is built from its one .c file. Each test
 * calls GPU_BACKEND_OR_SKIP first: without a CUDA build, or with no visible GPU, the test is
 * reported skipped with the reason. A GPU that is visible but where the backend cannot start is
 * a failure, not a skip.
 *
 * Tolerances: `atol + rtol * |want|` per element (plus an optional per-element bound), and for a
 * 16-bit type one more unit in the last place of that type: when the GPU's and the CPU's fp32
 * values differ slightly (summation order, a libm function's last bit) their one rounding to
 * bf16/fp16 can fall on the two sides of a rounding boundary. */
#ifndef MC_TEST_GPU_TEST_H
#define MC_TEST_GPU_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/device.h"
#include "kernels/dtype.h"
#include "test/gpu/sampled.h"

static const mc_dtype_t GPU_TYPES[3] = {MC_DT_F32, MC_DT_BF16, MC_DT_F16};

/* The reference: the CPU backend (set by gpu_setup, each file's group setup). */
static const mc_backend_t *cpu;
static inline int gpu_setup(void **state)
{
    (void)state;
    cpu = mc_backend_cpu();
    return 0;
}

/* The CUDA backend on device 0, or NULL with the reason in *why. */
static inline const mc_backend_t *gpu_backend(const char **why)
{
#ifndef MC_WITH_CUDA
    *why = "built without CUDA (no nvcc, or CUDA=0, or SANITIZE=1)";
    return NULL;
#else
    static const mc_backend_t *be;
    static char err[256];
    if (be) return be;
    if (mc_cuda_device_count() == 0) {
        *why = "no CUDA device visible";
        return NULL;
    }
    be = mc_backend_cuda(0, err, sizeof(err));
    if (!be) fail_msg("a GPU is visible but the CUDA backend cannot start: %s", err);
    return be;
#endif
}

#define GPU_BACKEND_OR_SKIP(be)                                                                     \
    do {                                                                                           \
        const char *why_ = "";                                                                     \
        (be) = gpu_backend(&why_);                                                                 \
        if (!(be)) {                                                                               \
            print_message("# skipped: %s\n", why_);                                                \
            skip();                                                                                \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* ---- host tensors ---- */

static uint64_t g_gpu_rng = 0x243F6A8885A308D3ull;
static inline double gpu_urand(void) /* [0, 1) */
{
    g_gpu_rng ^= g_gpu_rng << 13;
    g_gpu_rng ^= g_gpu_rng >> 7;
    g_gpu_rng ^= g_gpu_rng << 17;
    return (double)(g_gpu_rng >> 11) * (1.0 / 9007199254740992.0);
}

/* n elements of type dt (one spare element, so n = 0 is a valid buffer), uniform in [lo, hi)
 * rounded to dt. Free with free(). */
static inline void *host_rand(mc_dtype_t dt, long n, double lo, double hi)
{
    void *h = calloc((size_t)n + 1, mc_dtype_size(dt));
    assert_non_null(h);
    for (long i = 0; i < n; i++) mc_store_f32(h, dt, i, (float)(lo + (hi - lo) * gpu_urand()));
    return h;
}

static inline void *host_copy(const void *src, mc_dtype_t dt, long n)
{
    void *h = calloc((size_t)n + 1, mc_dtype_size(dt));
    assert_non_null(h);
    if (n > 0) memcpy(h, src, (size_t)n * mc_dtype_size(dt));
    return h;
}

/* A device buffer holding n elements of dt copied from host (one spare element). */
static inline void *dev_put(const mc_backend_t *be, const void *host, mc_dtype_t dt, long n)
{
    const size_t bytes = ((size_t)n + 1) * mc_dtype_size(dt);
    void *d = be->alloc(be, bytes);
    assert_non_null(d);
    if (n > 0) be->memcpy_h2d(be, d, host, (size_t)n * mc_dtype_size(dt));
    return d;
}

/* Host copy of n elements of dt from device buffer d (waits for the stream). */
static inline void *dev_get(const mc_backend_t *be, const void *d, mc_dtype_t dt, long n)
{
    void *h = calloc((size_t)n + 1, mc_dtype_size(dt));
    assert_non_null(h);
    if (n > 0) be->memcpy_d2h(be, h, d, (size_t)n * mc_dtype_size(dt));
    return h;
}

/* One unit in the last place of dt at |x| (the spacing of dt's values in x's binade). */
static inline double ulp_of(mc_dtype_t dt, double x)
{
    const int mant = dt == MC_DT_BF16 ? 7 : dt == MC_DT_F16 ? 10 : 23;
    const int emin = dt == MC_DT_F16 ? -14 : -126; /* subnormal spacing below */
    int e;
    x = fabs(x);
    if (x == 0.0 || !isfinite(x)) return ldexp(1.0, emin - mant);
    (void)frexp(x, &e); /* x = f * 2^e, f in [0.5, 1) */
    e -= 1;
    if (e < emin) e = emin;
    return ldexp(1.0, e - mant);
}

/* got vs want, n elements of dt: |got - want| <= atol + rtol * |want| (+ bound[i] when bound is
 * not NULL) (+ one dt ulp of the larger of the two when dt is 16-bit). NaN must meet NaN, an
 * infinity the same infinity. Fails naming the op and the first bad element, with the largest
 * error seen. */
static inline void check_close_b(const char *what, mc_dtype_t dt, const void *got, const void *want, long n,
                                 double atol, double rtol, const double *bound)
{
    long bad = -1;
    double worst = 0.0;
    for (long i = 0; i < n; i++) {
        const double g = mc_load_f32(got, dt, i), w = mc_load_f32(want, dt, i);
        if (isnan(w) || isnan(g) || isinf(w) || isinf(g)) {
            if (!((isnan(w) && isnan(g)) || g == w) && bad < 0) bad = i;
            continue;
        }
        double tol = atol + rtol * fabs(w) + (bound ? bound[i] : 0.0);
        if (mc_dtype_is_16bit(dt)) tol += ulp_of(dt, fabs(g) > fabs(w) ? g : w);
        const double err = fabs(g - w);
        if (err > worst) worst = err;
        if (err > tol && bad < 0) bad = i;
    }
    if (bad >= 0)
        fail_msg("%s (%s): element %ld of %ld: got %.9g, want %.9g (atol %g, rtol %g%s); largest error %.3g", what,
                 mc_dtype_name(dt), bad, n, (double)mc_load_f32(got, dt, bad), (double)mc_load_f32(want, dt, bad),
                 atol, rtol, bound ? ", per-element bound" : "", worst);
}

static inline void check_close(const char *what, mc_dtype_t dt, const void *got, const void *want, long n, double atol,
                               double rtol)
{
    check_close_b(what, dt, got, want, n, atol, rtol, NULL);
}

/* Bitwise-equal values (NaN payloads aside): for ops whose arithmetic is the CPU's exactly. */
static inline void check_exact(const char *what, mc_dtype_t dt, const void *got, const void *want, long n)
{
    for (long i = 0; i < n; i++) {
        const float g = mc_load_f32(got, dt, i), w = mc_load_f32(want, dt, i);
        if (isnan(g) && isnan(w)) continue;
        if (memcmp(&g, &w, sizeof(g)) != 0)
            fail_msg("%s (%s): element %ld of %ld: got %.9g, want %.9g (bitwise equality expected)", what,
                     mc_dtype_name(dt), i, n, (double)g, (double)w);
    }
}

/* fp32 relative spacing: 2^-23. */
#define F32_EPS 1.1920928955078125e-7

#endif
