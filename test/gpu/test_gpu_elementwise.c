/* The CUDA convert, add, add_inplace and scale against the CPU backend. Each is one fp32
 * operation (or none) and one rounding per element on both backends, so results must be bitwise
 * equal (NaN payloads aside): every type pair of convert including specials (inf, NaN, values
 * that overflow fp16, fp16 subnormals, ties), in-place conversion between the 16-bit types,
 * aliasing of add's output with either input, lengths that leave a tail after the 16-byte
 * vectors, buffers at odd offsets (the unvectorised path), n = 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/gpu/gpu_test.h"

static const long LENS[] = {1, 7, 8, 9, 1000, 100003};

/* Values that exercise rounding: random over a wide range, plus specials. */
static float *special_f32(long n)
{
    float *x = host_rand(MC_DT_F32, n, -70000, 70000);
    static const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65520.0f, 65519.99f, -1e9f,
                               5.9604645e-8f, 2.9802322e-8f, 1e-7f, 3.0e-39f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 512,
                               3.3895314e38f};
    for (long i = 0; i < n && i < (long)(sizeof(sp) / sizeof(sp[0])); i++) x[i * 7 % n] = sp[i];
    for (long i = 0; i < n; i += 5) x[i] *= 1e-6f; /* small magnitudes too (fp16 subnormals) */
    return x;
}

static void test_convert(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    for (size_t li = 0; li < sizeof(LENS) / sizeof(LENS[0]); li++) {
        const long n = LENS[li];
        float *f = special_f32(n);
        for (int s = 0; s < 3; s++)
            for (int d = 0; d < 3; d++) {
                const mc_dtype_t sdt = GPU_TYPES[s], ddt = GPU_TYPES[d];
                void *src = calloc((size_t)n + 1, 4), *want = calloc((size_t)n + 1, 4);
                assert_non_null(src), assert_non_null(want);
                mc_convert(src, sdt, f, MC_DT_F32, n);
                cpu->convert(cpu, want, ddt, src, sdt, n);
                void *d_src = dev_put(be, src, sdt, n), *d_dst = be->alloc(be, ((size_t)n + 1) * 4);
                assert_non_null(d_dst);
                char what[96];
                snprintf(what, sizeof(what), "convert %s -> %s, n %ld", mc_dtype_name(sdt), mc_dtype_name(ddt), n);
                be->convert(be, d_dst, ddt, d_src, sdt, n);
                void *got = dev_get(be, d_dst, ddt, n);
                check_exact(what, ddt, got, want, n);
                free(got);
                /* in place between same-size types; at an odd offset (the scalar path) */
                if (mc_dtype_size(sdt) == mc_dtype_size(ddt) && n > 1) {
                    be->convert(be, d_src, ddt, d_src, sdt, n);
                    got = dev_get(be, d_src, ddt, n);
                    check_exact(what, ddt, got, want, n);
                    free(got);
                }
                be->memcpy_h2d(be, d_src, src, (size_t)n * mc_dtype_size(sdt));
                if (n > 1) {
                    be->convert(be, (char *)d_dst + mc_dtype_size(ddt), ddt, (const char *)d_src + mc_dtype_size(sdt),
                                sdt, n - 1);
                    got = dev_get(be, (char *)d_dst + mc_dtype_size(ddt), ddt, n - 1);
                    check_exact(what, ddt, got, (char *)want + mc_dtype_size(ddt), n - 1);
                    free(got);
                }
                be->free(be, d_src), be->free(be, d_dst);
                free(src), free(want);
            }
        free(f);
    }
}

static void test_add_scale(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    for (int t = 0; t < 3; t++) {
        const mc_dtype_t dt = GPU_TYPES[t];
        const size_t es = mc_dtype_size(dt);
        for (size_t li = 0; li < sizeof(LENS) / sizeof(LENS[0]); li++)
            for (int off = 0; off <= 1; off++) { /* off: every pointer one element in (unaligned) */
                const long n = LENS[li];
                void *a = host_rand(dt, n + 1, -3, 3), *b = host_rand(dt, n + 1, -3, 3), *o = host_rand(dt, n + 1, -9, 9);
                void *d_a = dev_put(be, a, dt, n + 1), *d_b = dev_put(be, b, dt, n + 1), *d_o = dev_put(be, o, dt, n + 1);
                char *pa = (char *)a + off * es, *pb = (char *)b + off * es, *po = (char *)o + off * es;
                char *qa = (char *)d_a + off * es, *qb = (char *)d_b + off * es, *qo = (char *)d_o + off * es;
                /* out = a + b */
                cpu->add(cpu, dt, po, pa, pb, n);
                be->add(be, dt, qo, qa, qb, n);
                void *got = dev_get(be, d_o, dt, n + 1);
                check_exact("add", dt, got, o, n + 1);
                free(got);
                /* out aliasing a, then b: a = a + b; b = a + b */
                cpu->add(cpu, dt, pa, pa, pb, n);
                be->add(be, dt, qa, qa, qb, n);
                cpu->add(cpu, dt, pb, pa, pb, n);
                be->add(be, dt, qb, qa, qb, n);
                got = dev_get(be, d_b, dt, n + 1);
                check_exact("add aliased", dt, got, b, n + 1);
                free(got);
                /* acc += x, and acc += acc */
                cpu->add_inplace(cpu, dt, po, pb, n);
                be->add_inplace(be, dt, qo, qb, n);
                cpu->add_inplace(cpu, dt, pa, pa, n);
                be->add_inplace(be, dt, qa, qa, n);
                got = dev_get(be, d_o, dt, n + 1);
                check_exact("add_inplace", dt, got, o, n + 1);
                free(got);
                got = dev_get(be, d_a, dt, n + 1);
                check_exact("add_inplace acc += acc", dt, got, a, n + 1);
                free(got);
                /* scale, including a factor that overflows fp16 and one that makes subnormals */
                const float factors[] = {0.37f, -3.0f, 3e4f, 1e-6f, 0.0f};
                for (size_t k = 0; k < sizeof(factors) / sizeof(factors[0]); k++) {
                    cpu->scale(cpu, dt, po, factors[k], n);
                    be->scale(be, dt, qo, factors[k], n);
                    got = dev_get(be, d_o, dt, n + 1);
                    check_exact("scale", dt, got, o, n + 1);
                    free(got);
                }
                be->free(be, d_a), be->free(be, d_b), be->free(be, d_o);
                free(a), free(b), free(o);
            }
        /* n = 0 touches nothing */
        void *h = host_rand(dt, 8, -1, 1);
        void *d = dev_put(be, h, dt, 8);
        be->add(be, dt, d, d, d, 0);
        be->add_inplace(be, dt, d, d, 0);
        be->scale(be, dt, d, 2.0f, 0);
        be->convert(be, d, MC_DT_F32, d, dt, 0);
        void *got = dev_get(be, d, dt, 8);
        check_exact("n = 0", dt, got, h, 8);
        be->free(be, d);
        free(h), free(got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_convert),
        cmocka_unit_test(test_add_scale),
    };
    return cmocka_run_group_tests(tests, gpu_setup, NULL);
}
