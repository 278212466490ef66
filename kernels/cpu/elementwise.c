/* Elementwise ops and reductions. */
#include <string.h>

#include "kernels/cpu/cpu.h"

void mc_cpu_add_f32(const mc_backend_t *be, float *out, const float *a, const float *b, long n)
{
    (void)be;
    for (long i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void mc_cpu_add_inplace_f32(const mc_backend_t *be, float *acc, const float *x, long n)
{
    (void)be;
    for (long i = 0; i < n; i++) acc[i] += x[i];
}

void mc_cpu_scale_f32(const mc_backend_t *be, float *x, float s, long n)
{
    (void)be;
    for (long i = 0; i < n; i++) x[i] *= s;
}

/* Eight independent double accumulators: the order is fixed (deterministic) and the loop is not
 * bound by one add's latency. */
double mc_cpu_sumsq_f32(const mc_backend_t *be, const float *x, long n)
{
    (void)be;
    double s[8] = {0};
    long i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += (double)x[i + k] * (double)x[i + k];
    for (; i < n; i++) s[0] += (double)x[i] * (double)x[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

long mc_cpu_count_zeros_f32(const mc_backend_t *be, const float *x, long n)
{
    (void)be;
    long z = 0;
    for (long i = 0; i < n; i++) z += x[i] == 0.0f;
    return z;
}

/* Exponent bits all ones = inf or nan; checked on the bits so no floating compare is involved. */
int mc_cpu_has_nonfinite_f32(const mc_backend_t *be, const float *x, long n)
{
    (void)be;
    const long CH = 4096;
    for (long i0 = 0; i0 < n; i0 += CH) {
        long i1 = i0 + CH < n ? i0 + CH : n;
        uint32_t bad = 0;
        for (long i = i0; i < i1; i++) {
            uint32_t u;
            memcpy(&u, x + i, sizeof(u));
            bad |= (uint32_t)((u & 0x7f800000u) == 0x7f800000u);
        }
        if (bad) return 1;
    }
    return 0;
}

float mc_cpu_row_max(const float *x, long n)
{
    long i = 0;
    float m = x[0];
    if (n >= 4) {
        mc_v4f m4 = mc_v4_load(x);
        for (i = 4; i + 4 <= n; i += 4) m4 = mc_v4_max(m4, mc_v4_load(x + i));
        m = mc_v4_hmax(m4);
    }
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

double mc_cpu_exp_shift_sum(float *out, const float *x, long n, float m)
{
    typedef double v4d __attribute__((vector_size(32)));
    v4d acc = {0.0, 0.0, 0.0, 0.0};
    const mc_v4f mv = mc_v4_splat(m);
    long i = 0;
    for (; i + 4 <= n; i += 4) {
        const mc_v4f e = mc_v4_exp(mc_v4_load(x + i) - mv);
        if (out) mc_v4_store(out + i, e);
        acc += __builtin_convertvector(e, v4d);
    }
    double s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    if (i < n) {
        const int r = (int)(n - i);
        const mc_v4f e = mc_v4_exp(mc_v4_load_part(x + i, r) - mv);
        if (out) mc_v4_store_part(out + i, e, r);
        for (int k = 0; k < r; k++) s += (double)e[k];
    }
    return s;
}
