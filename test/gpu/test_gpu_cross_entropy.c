/* The CUDA vocab-parallel cross-entropy (ce_max, ce_sums, ce_loss, ce_backward, ce_fused) against the
 * CPU backend, fp32/bf16/fp16 logits, a whole vocabulary and a slice (targets inside and
 * outside it), vocabulary sizes that are and are not multiples of the vector width, in-place
 * backward, empty sizes. Each step is given the CPU's statistics, so each is measured alone;
 * then the GPU chain is compared with the CPU chain.
 *
 * Tolerances:
 *  - rowmax, target_logit: exact (a max and a copy).
 *  - sumexp: each term is expf(x - max); CUDA's expf and the CPU's vector exp are each within
 *    2 ulp, so terms differ by <= 4 ulp relative (4.8e-7), and the positive sums (double) by
 *    the same relative amount: rtol 1e-6.
 *  - losses from the same statistics: log and the additions in double on both sides, rounded
 *    to fp32: one fp32 ulp (rtol 2^-23, atol 1e-7 for losses near 0). Through the GPU's own
 *    statistics: + |d sumexp / sumexp| <= 1e-6: atol 2e-6.
 *  - dlogits = exp(x - max) * f (- dloss at the target): the exp's 4 ulp, relative to
 *    |exp * f| <= |dloss|, also where the target's subtraction cancels: atol 1e-6 * max|dloss|
 *    + rtol 1e-6 (16-bit outputs: + one unit in their last place).
 *  - ce_fused: bit for bit the GPU's separate ops (the same device functions in one kernel), and
 *    against the CPU's chain as above: through its own statistics, dlogits also carry sumexp's
 *    1e-6 through f: atol 2e-6 * max|dloss|, rtol 2e-6. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/gpu/gpu_test.h"

static void ce_case(const mc_backend_t *be, mc_dtype_t dt, int S, int B, int V, int vocab_start, int Vfull)
{
    const long N = (long)S * B, nl = N * V;
    void *lg = host_rand(dt, nl, -8, 8);
    int32_t *tg = calloc((size_t)N + 1, sizeof(int32_t));
    float *dloss = host_rand(MC_DT_F32, N, -0.5, 1);
    assert_non_null(tg);
    for (long i = 0; i < N; i++) tg[i] = (int32_t)(gpu_urand() * Vfull);
    void *d_lg = dev_put(be, lg, dt, nl);
    int32_t *d_tg = dev_put(be, tg, MC_DT_I32, N);
    float *d_dloss = dev_put(be, dloss, MC_DT_F32, N);
    float *mx = host_rand(MC_DT_F32, N, 0, 0), *se = host_rand(MC_DT_F32, N, 0, 0), *tl = host_rand(MC_DT_F32, N, 0, 0),
          *loss = host_rand(MC_DT_F32, N, 0, 0);
    float *d_mx = dev_put(be, mx, MC_DT_F32, N), *d_se = dev_put(be, se, MC_DT_F32, N),
          *d_tl = dev_put(be, tl, MC_DT_F32, N), *d_loss = dev_put(be, loss, MC_DT_F32, N);
    char what[128];
    snprintf(what, sizeof(what), "cross-entropy S %d B %d slice [%d, +%d) of %d", S, B, vocab_start, V, Vfull);

    cpu->ce_max(cpu, dt, mx, lg, (int)N, V);
    be->ce_max(be, dt, d_mx, d_lg, (int)N, V);
    float *got = dev_get(be, d_mx, MC_DT_F32, N);
    check_exact(what, MC_DT_F32, got, mx, N);
    free(got);

    be->memcpy_h2d(be, d_mx, mx, (size_t)N * sizeof(float));
    cpu->ce_sums(cpu, dt, se, tl, lg, mx, tg, S, B, V, vocab_start);
    be->ce_sums(be, dt, d_se, d_tl, d_lg, d_mx, d_tg, S, B, V, vocab_start);
    got = dev_get(be, d_se, MC_DT_F32, N);
    check_close(what, MC_DT_F32, got, se, N, 0.0, 1e-6);
    free(got);
    got = dev_get(be, d_tl, MC_DT_F32, N);
    check_exact(what, MC_DT_F32, got, tl, N);
    free(got);

    /* the loss from the GPU's own sums, then from the CPU's */
    cpu->ce_loss(cpu, loss, mx, se, tl, S, B);
    be->ce_loss(be, d_loss, d_mx, d_se, d_tl, S, B);
    got = dev_get(be, d_loss, MC_DT_F32, N);
    check_close(what, MC_DT_F32, got, loss, N, 2e-6, 1e-6);
    free(got);
    be->memcpy_h2d(be, d_se, se, (size_t)N * sizeof(float));
    be->memcpy_h2d(be, d_tl, tl, (size_t)N * sizeof(float));
    be->ce_loss(be, d_loss, d_mx, d_se, d_tl, S, B);
    got = dev_get(be, d_loss, MC_DT_F32, N);
    check_close(what, MC_DT_F32, got, loss, N, 1e-7, F32_EPS);
    free(got);

    /* backward into a separate buffer, then in place */
    double gmax = 0.0;
    for (long i = 0; i < N; i++) gmax = fmax(gmax, fabs(dloss[i]));
    void *dl = host_rand(dt, nl, -9, 9);
    void *d_dl = dev_put(be, dl, dt, nl);
    cpu->ce_backward(cpu, dt, dl, lg, mx, se, tg, dloss, S, B, V, vocab_start);
    be->ce_backward(be, dt, d_dl, d_lg, d_mx, d_se, d_tg, d_dloss, S, B, V, vocab_start);
    void *gotl = dev_get(be, d_dl, dt, nl);
    check_close(what, dt, gotl, dl, nl, 1e-6 * gmax, 1e-6);
    free(gotl);
    be->ce_backward(be, dt, d_lg, d_lg, d_mx, d_se, d_tg, d_dloss, S, B, V, vocab_start);
    gotl = dev_get(be, d_lg, dt, nl);
    check_close(what, dt, gotl, dl, nl, 1e-6 * gmax, 1e-6);
    free(gotl);

    be->free(be, d_lg), be->free(be, d_tg), be->free(be, d_dloss), be->free(be, d_mx), be->free(be, d_se),
        be->free(be, d_tl), be->free(be, d_loss), be->free(be, d_dl);
    free(lg), free(tg), free(dloss), free(mx), free(se), free(tl), free(loss), free(dl);
}

/* logits, targets, mask of one case, on both sides; the GPU's fused op against its separate ops
 * (exactly) and against the CPU's fused op (the reference chain); stats NULL only for a whole
 * vocabulary, else the CPU's statistics given to both. */
static void fused_case(const mc_backend_t *be, mc_dtype_t dt, int S, int B, int V, int vocab_start, int Vfull,
                       int with_mask)
{
    const long N = (long)S * B, nl = N * V;
    const float scale = 0.37f;
    void *lg = host_rand(dt, nl, -8, 8), *lg0 = host_copy(lg, dt, nl);
    int32_t *tg = calloc((size_t)N + 1, sizeof(int32_t));
    float *mask = host_rand(MC_DT_F32, N, 0, 0), *dloss = host_rand(MC_DT_F32, N, 0, 0);
    float *st = host_rand(MC_DT_F32, 3 * N, 0, 0), *loss = host_rand(MC_DT_F32, N, 0, 0);
    assert_non_null(tg);
    for (long i = 0; i < N; i++) {
        tg[i] = (int32_t)(gpu_urand() * Vfull);
        mask[i] = gpu_urand() < 0.8 ? 1.0f : 0.0f;
        dloss[i] = mask[i] * scale;
    }
    const int whole = vocab_start == 0 && V == Vfull;
    if (!whole) {
        cpu->ce_max(cpu, dt, st, lg, (int)N, V);
        cpu->ce_sums(cpu, dt, st + N, st + 2 * N, lg, st, tg, S, B, V, vocab_start);
    }
    void *d_lg = dev_put(be, lg, dt, nl), *d_sep = dev_put(be, lg, dt, nl);
    int32_t *d_tg = dev_put(be, tg, MC_DT_I32, N);
    float *d_mask = dev_put(be, mask, MC_DT_F32, N), *d_dloss = dev_put(be, dloss, MC_DT_F32, N);
    float *d_st = dev_put(be, st, MC_DT_F32, 3 * N), *d_loss = dev_put(be, loss, MC_DT_F32, N),
          *d_sloss = dev_put(be, loss, MC_DT_F32, N), *d_sst = dev_put(be, st, MC_DT_F32, 3 * N);
    char what[160];
    snprintf(what, sizeof(what), "ce_fused S %d B %d slice [%d, +%d) of %d%s", S, B, vocab_start, V, Vfull,
             with_mask ? "" : " (no mask)");
    const float *h_s[3] = {whole ? NULL : st, whole ? NULL : st + N, whole ? NULL : st + 2 * N};
    const float *d_s[3] = {whole ? NULL : d_st, whole ? NULL : d_st + N, whole ? NULL : d_st + 2 * N};
    cpu->ce_fused(cpu, dt, loss, lg, h_s[0], h_s[1], h_s[2], tg, with_mask ? mask : NULL, scale, S, B, V, vocab_start);
    be->ce_fused(be, dt, d_loss, d_lg, d_s[0], d_s[1], d_s[2], d_tg, with_mask ? d_mask : NULL, scale, S, B, V,
                 vocab_start);
    /* the GPU's separate ops on the same input */
    if (whole) {
        be->ce_max(be, dt, d_sst, d_sep, (int)N, V);
        be->ce_sums(be, dt, d_sst + N, d_sst + 2 * N, d_sep, d_sst, d_tg, S, B, V, vocab_start);
    }
    be->ce_loss(be, d_sloss, d_sst, d_sst + N, d_sst + 2 * N, S, B);
    if (with_mask) be->ce_backward(be, dt, d_sep, d_sep, d_sst, d_sst + N, d_tg, d_dloss, S, B, V, vocab_start);
    float *got = dev_get(be, d_loss, MC_DT_F32, N), *sep = dev_get(be, d_sloss, MC_DT_F32, N);
    void *gotl = dev_get(be, d_lg, dt, nl), *sepl = dev_get(be, d_sep, dt, nl);
    check_exact(what, MC_DT_F32, got, sep, N);
    check_exact(what, dt, gotl, sepl, nl);
    check_close(what, MC_DT_F32, got, loss, N, whole ? 2e-6 : 1e-7, whole ? 1e-6 : F32_EPS);
    if (with_mask) check_close(what, dt, gotl, lg, nl, 2e-6 * scale, 2e-6);
    else check_exact(what, dt, gotl, lg0, nl); /* the logits left as they were */
    be->free(be, d_lg), be->free(be, d_sep), be->free(be, d_tg), be->free(be, d_mask), be->free(be, d_dloss),
        be->free(be, d_st), be->free(be, d_loss), be->free(be, d_sloss), be->free(be, d_sst);
    free(lg), free(lg0), free(tg), free(mask), free(dloss), free(st), free(loss), free(got), free(sep), free(gotl),
        free(sepl);
}

static void test_ce_fused(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    for (int t = 0; t < 3; t++) {
        const mc_dtype_t dt = GPU_TYPES[t];
        for (int m = 0; m <= 1; m++) {
            fused_case(be, dt, 7, 3, 37, 0, 37, m);   /* whole vocabulary, odd: statistics here */
            fused_case(be, dt, 16, 4, 512, 0, 512, m); /* vector path */
            fused_case(be, dt, 9, 2, 100, 50, 300, m); /* a slice: the reduced statistics given */
        }
        fused_case(be, dt, 2, 2, 50257, 0, 50257, 1); /* GPT-2's vocabulary */
        fused_case(be, dt, 3, 1, 1, 0, 1, 1);         /* V = 1 */
        fused_case(be, dt, 0, 3, 37, 0, 37, 1);       /* no rows */
    }
}

static void test_cross_entropy(void **state)
{
    (void)state;
    const mc_backend_t *be;
    GPU_BACKEND_OR_SKIP(be);
    for (int t = 0; t < 3; t++) {
        const mc_dtype_t dt = GPU_TYPES[t];
        ce_case(be, dt, 7, 3, 37, 0, 37);        /* whole vocabulary, odd */
        ce_case(be, dt, 16, 4, 512, 0, 512);     /* vector path */
        ce_case(be, dt, 9, 2, 100, 50, 300);     /* a slice: most targets elsewhere */
        ce_case(be, dt, 4, 2, 50257, 0, 50257);  /* GPT-2's vocabulary */
        ce_case(be, dt, 3, 1, 1, 0, 1);          /* V = 1 */
        ce_case(be, dt, 0, 3, 37, 0, 37);        /* no rows */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cross_entropy), cmocka_unit_test(test_ce_fused)};
    return cmocka_run_group_tests(tests, gpu_setup, NULL);
}
