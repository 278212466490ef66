/* Attention cases against the CPU backend (attention_check.h). */
#include "test/unit/attention_check.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const mc_dropout_t att_dropout = {.seed = 77, .iteration = 5, .layer = 2, .site = MC_DROPOUT_SITE_ATTN_PROBS,
                                  .sample0 = 40, .p = 0.25f};

static uint64_t g_state;
static double urand(void)
{
    g_state ^= g_state << 13;
    g_state ^= g_state >> 7;
    g_state ^= g_state << 17;
    return (double)(g_state >> 11) * (1.0 / 9007199254740992.0);
}

static void *xcalloc(long n, size_t size)
{
    void *p = calloc((size_t)(n > 0 ? n : 1), size);
    assert_non_null(p);
    return p;
}

/* Document numbers of batch row b: several random documents, one document, or many short ones
 * (1 to 3 tokens), by b % 3 (numbers need not be ordered). */
static void make_segments(int32_t *seg, int S, int B, int all_equal)
{
    for (int b = 0; b < B; b++) {
        int32_t *r = seg + (long)b * S;
        const int kind = all_equal ? 1 : b % 3;
        int doc = 5 * b + 1, left = 0;
        for (int s = 0; s < S; s++) {
            if (kind == 1) {
                r[s] = 42;
                continue;
            }
            if (left == 0) {
                doc = kind == 0 ? (int)(urand() * 1000) : doc + 1;
                left = kind == 0 ? 1 + (int)(urand() * (S / 3 + 1)) : 1 + (int)(urand() * 3);
            }
            r[s] = doc;
            left--;
        }
    }
}

void att_ref_make(att_ref_t *r, const att_case_t *c, uint64_t seed)
{
    memset(r, 0, sizeof(*r));
    r->c = *c;
    g_state = seed * 0x9E3779B97F4A7C15ull + 1;
    const int S = c->S, B = c->B, NH = c->NH, HD = c->HD;
    const size_t es = mc_dtype_size(c->dt);
    r->nqkv = (long)S * B * NH * 3 * HD;
    r->nout = (long)S * B * NH * HD;
    r->scale = c->masked_dominant ? 0.5f : 1.0f / sqrtf((float)HD);
    r->d = att_dropout;
    if (!c->dropout) r->d.p = 0.0f;
    if (c->segments) {
        r->seg = xcalloc((long)B * S, sizeof(int32_t));
        make_segments(r->seg, S, B, c->segments == 2);
    }
    r->qkv32 = xcalloc(r->nqkv, sizeof(float));
    r->dout32 = xcalloc(r->nout, sizeof(float));
    const double qr = c->qk_range > 0.0f ? c->qk_range : 1.5;
    for (long i = 0; i < r->nqkv; i++) {
        const long col = i % (3L * HD); /* q, k or v of a head */
        const double range = col < 2L * HD ? qr : 1.0;
        r->qkv32[i] = mc_round_to(c->dt, (float)(-range + 2.0 * range * urand()));
    }
    if (c->masked_dominant) /* integer q and k: scores near -20000 * HD / 4, exact in fp32 */
        for (long row = 0; row < (long)S * B * NH; row++) {
            const int s = (int)(row / ((long)B * NH));
            float *q = r->qkv32 + row * 3 * HD, *k = q + HD;
            for (int e = 0; e < HD; e++) {
                q[e] = 100.0f + (float)((s + e) % 3);
                k[e] = -100.0f - (float)((s * e) % 4);
            }
        }
    for (long i = 0; i < r->nout; i++) r->dout32[i] = mc_round_to(c->dt, (float)(-1.0 + 2.0 * urand()));
    r->qkv = xcalloc(r->nqkv, es);
    r->dout = xcalloc(r->nout, es);
    mc_convert(r->qkv, c->dt, r->qkv32, MC_DT_F32, r->nqkv);
    mc_convert(r->dout, c->dt, r->dout32, MC_DT_F32, r->nout);

    const mc_backend_t *be = mc_backend_cpu();
    size_t state_bytes = 0, scratch_bytes = 0;
    be->attention_sizes(be, c->dt, S, B, NH, HD, &state_bytes, &scratch_bytes);
    void *state = xcalloc((long)state_bytes, 1), *scratch = xcalloc((long)scratch_bytes, 1);
    r->out = xcalloc(r->nout, es);
    r->dqkv = xcalloc(r->nqkv, es);
    be->attention_forward(be, c->dt, r->out, state, r->qkv, S, B, NH, HD, r->seg, r->scale, &r->d, c->head_offset,
                          c->NH_full);
    be->attention_backward(be, c->dt, r->dqkv, scratch, r->dout, r->qkv, r->out, state, S, B, NH, HD, r->seg,
                           r->scale, &r->d, c->head_offset, c->NH_full);
    free(state);
    free(scratch);
    r->out32 = xcalloc(r->nout, sizeof(float));
    r->dqkv32 = xcalloc(r->nqkv, sizeof(float));
    mc_convert(r->out32, MC_DT_F32, r->out, c->dt, r->nout);
    mc_convert(r->dqkv32, MC_DT_F32, r->dqkv, c->dt, r->nqkv);
}

void att_ref_free(att_ref_t *r)
{
    free(r->seg);
    free(r->qkv);
    free(r->dout);
    free(r->qkv32);
    free(r->dout32);
    free(r->out);
    free(r->dqkv);
    free(r->out32);
    free(r->dqkv32);
    memset(r, 0, sizeof(*r));
}

const char *att_case_name(const att_case_t *c)
{
    static char buf[160];
    snprintf(buf, sizeof(buf), "%s S=%d B=%d NH=%d HD=%d heads %d/%d%s seg=%d%s qk=%.1f", mc_dtype_name(c->dt), c->S,
             c->B, c->NH, c->HD, c->head_offset, c->NH_full, c->dropout ? " dropout" : "", c->segments,
             c->masked_dominant ? " masked-dominant" : "", (double)(c->qk_range > 0.0f ? c->qk_range : 1.5f));
    return buf;
}

/* Why these tolerances (err <= rtol |want| + atol max|want|):
 * fp32: the same fp32 math in another order (online softmax rescaling, tile-wise sums, expf vs
 *   the CPU's vector exp, fp32 vs the CPU's double row sums): a few ulp per term. The host model
 *   of the kernels stays below 0.16 of 1e-5 (out) and 0.02 of 3e-5 (dqkv); the margin is for the
 *   GPU's FMA order. Any indexing or masking error is O(1), 10^4 times larger.
 * bf16/fp16: both sides round their output once (0.5 ulp each, so up to 1 ulp apart after
 *   double rounding: 2^-8 bf16, 2^-11 fp16 relative), and the fused kernels round p to dt before
 *   P V, and p keep/(1-p) and dS before the gradient products, where the CPU multiplies fp32
 *   values by probabilities it saved in dt; those differences are random, about 1 ulp of dt per
 *   term, and sum to a few ulp of the tensor's scale. So: 2 ulp relative plus 2 ulp (of the
 *   largest value) absolute for out, twice that for dqkv, which goes through two rounded
 *   products. The host model (same roundings as the kernels; mma sums in another order only)
 *   reaches at most 0.43 of these for out and 0.64 for dqkv over every case of
 *   test_attention_tiled (MC_ATT_VERBOSE=1 prints the ratios). A shifted index or a wrong mask
 *   moves elements by O(1) of their scale, 30 (bf16) to 250 (fp16) times the tolerance. */
void att_tolerance(mc_dtype_t dt, int grad, double *rtol, double *atol)
{
    if (dt == MC_DT_BF16) {
        *rtol = grad ? 1.6e-2 : 7.9e-3;
        *atol = grad ? 1.6e-2 : 7.9e-3;
    } else if (dt == MC_DT_F16) {
        *rtol = grad ? 2e-3 : 1e-3;
        *atol = grad ? 2e-3 : 1e-3;
    } else {
        *rtol = grad ? 3e-5 : 1e-5;
        *atol = grad ? 3e-5 : 1e-5;
    }
}

double att_check(const char *what, const att_case_t *c, const float *got, const float *want, long n, int grad)
{
    double rtol, atol, scale = 0.0, worst = 0.0;
    long wi = 0;
    att_tolerance(c->dt, grad, &rtol, &atol);
    for (long i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
    for (long i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - (double)want[i]);
        const double allowed = rtol * fabs((double)want[i]) + atol * scale;
        const double ratio = allowed > 0.0 ? err / allowed : (err > 0.0 ? INFINITY : 0.0);
        if (!(ratio <= worst)) { /* also catches NaN */
            worst = isnan(ratio) ? INFINITY : ratio;
            wi = i;
        }
    }
    if (getenv("MC_ATT_VERBOSE"))
        fprintf(stderr, "# %-5s %s: worst err/allowed %.3f at %ld (got %.8g want %.8g, max|want| %.4g)\n", what,
                att_case_name(c), worst, wi, n ? (double)got[wi] : 0.0, n ? (double)want[wi] : 0.0, scale);
    if (worst > 1.0)
        fail_msg("%s (%s): element %ld is %.8g, the CPU backend has %.8g (err %.3g, %.2fx the tolerance)", what,
                 att_case_name(c), wi, (double)got[wi], (double)want[wi], fabs((double)got[wi] - (double)want[wi]),
                 worst);
    return worst;
}
