/* The CUDA rotary position embedding against the CPU backend, fp32/bf16/fp16: multi-head
 * (QPG 1), grouped-query and multi-query attention layouts, rotary percent < 1 (rot_dim < HD),
 * interleaved pairs, the inverse (the backward), rows of more pairs than a block's threads, and
 * the value heads, the elements past rot_dim and the element past the tensor left as they are.
 *
 * Tolerance: none. Both backends turn each pair in fp32 with the same operations in the same
 * order, the CUDA kernel without FMA contraction (__f*_rn), and round a 16-bit result once to
 * nearest even: the results must be equal bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/gpu/gpu_test.h"

typedef struct {
    int S, B, NG, QPG, HD, rot;
} rope_case_t;

static void rope_case(const mc_backend_t *be, mc_dtype_t dt, const rope_case_t *c, int interleaved, int inverse)
{
    const long n = (long)c->S * c->B * c->NG * (c->QPG + 2) * c->HD, nt = (long)c->S * (c->rot / 2);
    void *x = host_rand(dt, n, -4, 4);
    float *ct = host_rand(MC_DT_F32, nt, 0, 0), *st = host_rand(MC_DT_F32, nt, 0, 0);
    for (long k = 0; k < nt; k++) { /* angles of either sign, beyond one turn */
        const double a = (gpu_urand() - 0.5) * 20.0;
        ct[k] = (float)cos(a), st[k] = (float)sin(a);
    }
    void *d_x = dev_put(be, x, dt, n);
    float *d_ct = dev_put(be, ct, MC_DT_F32, nt), *d_st = dev_put(be, st, MC_DT_F32, nt);
    be->memset0(be, (char *)d_x + n * mc_dtype_size(dt), mc_dtype_size(dt)); /* the spare, as on the host */
    char what[160];
    snprintf(what, sizeof(what), "rope S %d B %d NG %d QPG %d HD %d rot %d%s%s", c->S, c->B, c->NG, c->QPG, c->HD,
             c->rot, interleaved ? " interleaved" : "", inverse ? " inverse" : "");
    cpu->rope(cpu, dt, x, ct, st, c->S, c->B, c->NG, c->QPG, c->HD, c->rot, interleaved, inverse);
    be->rope(be, dt, d_x, d_ct, d_st, c->S, c->B, c->NG, c->QPG, c->HD, c->rot, interleaved, inverse);
    void *got = dev_get(be, d_x, dt, n + 1);
    check_exact(what, dt, got, x, n + 1);
    be->free(be, d_x), be->free(be, d_ct), be->free(be, d_st);
    free(x), free(ct), free(st), free(got);
}

static void test_rope(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    static const rope_case_t cases[] = {
        {.S = 7, .B = 2, .NG = 4, .QPG = 1, .HD = 16, .rot = 16},   /* multi-head */
        {.S = 9, .B = 3, .NG = 2, .QPG = 4, .HD = 64, .rot = 64},   /* grouped-query */
        {.S = 5, .B = 1, .NG = 1, .QPG = 6, .HD = 40, .rot = 40},   /* multi-query */
        {.S = 6, .B = 2, .NG = 2, .QPG = 3, .HD = 32, .rot = 16},   /* rotary percent 0.5 */
        {.S = 3, .B = 2, .NG = 3, .QPG = 2, .HD = 24, .rot = 6},    /* rot not a multiple of 4 */
        {.S = 17, .B = 2, .NG = 4, .QPG = 3, .HD = 128, .rot = 128} /* 1024 pairs a row: a block loops */
    };
    for (int t = 0; t < 3; t++)
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
            for (int il = 0; il <= 1; il++)
                for (int inv = 0; inv <= 1; inv++) rope_case(be, GPU_TYPES[t], &cases[k], il, inv);
}

/* No rows or nothing to rotate: nothing is touched (and nothing launched). */
static void test_rope_empty(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    float x[3 * 8], t[4] = {0.5f, 0.5f, 0.5f, 0.5f}; /* one row: a query, a key and a value head */
    for (int i = 0; i < 24; i++) x[i] = (float)i;
    float *d_x = dev_put(be, x, MC_DT_F32, 24), *d_t = dev_put(be, t, MC_DT_F32, 4);
    be->rope(be, MC_DT_F32, d_x, d_t, d_t, 0, 1, 1, 1, 8, 8, 0, 0);
    be->rope(be, MC_DT_F32, d_x, d_t, d_t, 1, 1, 1, 1, 8, 0, 0, 0);
    float *got = dev_get(be, d_x, MC_DT_F32, 24);
    check_exact("rope S 0 / rot 0", MC_DT_F32, got, x, 24);
    be->free(be, d_x), be->free(be, d_t);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_rope), cmocka_unit_test(test_rope_empty)};
    return cmocka_run_group_tests(tests, gpu_setup, NULL);
}
