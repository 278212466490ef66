/* Megatron's FLOPs count of a GPT (model/flops.h): its closed form, hand-worked cases and
 * CPython's values for large shapes, dense and mixture-of-experts. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <string.h>

#include "model/flops.h"

/* groups: the query groups attention runs with (validation makes it the head count without
 * --group-query-attention). */
static mc_gpt_config_t gpt(int L, int h, int heads, int kvc, int groups, int ffn, int s, int vpad,
                           bool swiglu)
{
    mc_gpt_config_t c;
    memset(&c, 0, sizeof(c));
    c.num_layers = L;
    c.hidden = h;
    c.heads = heads;
    c.head_dim = kvc;
    c.groups = groups;
    c.ffn = ffn;
    c.seq = s;
    c.vocab = vpad;
    c.swiglu = swiglu;
    return c;
}

static void test_flops(void **state)
{
    (void)state;
    /* GPT-2 124M: 72BsLh^2 + 6Bs^2Lh + 6BshV */
    mc_gpt_config_t c = gpt(12, 768, 12, 64, 12, 3072, 1024, 50304, false);
    double B = 512, s = 1024, L = 12, h = 768, V = 50304;
    double closed = 72 * B * s * L * h * h + 6 * B * s * s * L * h + 6 * B * s * h * V;
    assert_true(mc_gpt_flops(&c, 512) == closed);
    assert_true(closed == 418398534107136.0);

    /* GQA + swiglu + ffn != 4h, by hand: B=3, s=32, L=2, h=64, heads=4, kv_channels=16 (q=64),
     * groups=2 (kv=32), ffn=100, e=3, V=128:
     *   6*64*100*3*2 = 230400; 6*(64*(64+64) + 64*64)*2 = 147456; 6*64*128 = 49152
     *   B*s*427008 = 40992768; B*s^2*L*6*q = 3*1024*2*6*64 = 2359296  -> 43352064 */
    c = gpt(2, 64, 4, 16, 2, 100, 32, 128, true);
    assert_true(mc_gpt_flops(&c, 3) == 43352064.0);

    /* kv_channels != h/heads (q = 128), multi-head, ffn = 200, gelu:
     *   6*64*200*2*2 = 307200; 6*(64*384 + 128*64)*2 = 393216; 49152 -> 749568 * 96 = 71958528
     *   + 3*1024*2*6*128 = 4718592 -> 76677120 */
    c = gpt(2, 64, 4, 32, 4, 200, 32, 128, false);
    assert_true(mc_gpt_flops(&c, 3) == 76677120.0);

    /* Large shapes round once, at B*s*inner, exactly as Python does (values from CPython). */
    c = gpt(96, 12288, 96, 128, 96, 49152, 2048, 51200, false);
    assert_true(mc_gpt_flops(&c, 1536) == 0x1.72e1800000000p+61);
    c = gpt(80, 8192, 64, 128, 8, 28672, 4096, 128256, true);
    assert_true(mc_gpt_flops(&c, 2048) == 0x1.935f000000000p+61);
}

/* An MoE config: E experts, top-k, moe_ffn, the shared expert's size, the MoE layers. */
static void moe(mc_gpt_config_t *c, int E, int topk, int moe_ffn, int shared, const char *layers)
{
    c->moe.num_experts = E;
    c->moe.router.topk = topk;
    c->moe.ffn = moe_ffn;
    c->moe.shared_ffn = shared;
    for (int i = 0; layers[i]; i++) c->moe.layer[i] = layers[i] == '1';
}

/* Megatron main's transformer_flops with experts (core_v0.17.0 training.py, evaluated by
 * CPython on these configs; the small ones also by hand below). */
static void test_moe_flops(void **state)
{
    (void)state;
    /* every layer MoE (--moe-layer-freq 1), swiglu, GQA: L=2, h=64, q=64, kv=32, ffn=100 (unused),
     * moe_ffn=48, topk=2, B=3, s=32, V=128:
     *   W = 48*2*3*2 = 576, 6*64*576 = 221184; attention 6*(64*128 + 64*32 + 64*64)*2 = 172032;
     *   logit 49152 -> 442368 * 96 = 42467328 */
    mc_gpt_config_t c = gpt(2, 64, 4, 16, 2, 100, 32, 128, true);
    moe(&c, 4, 2, 48, 0, "11");
    assert_true(mc_gpt_flops(&c, 3) == 42467328.0);

    /* a pattern [0,1,1,1] with a shared expert of 64: L=4, MHA q=k=v=64, ffn=256, moe_ffn=32:
     *   W = 256*3*1 + 32*2*3*3 + 64*3*3 = 1920, 6*64*1920 = 737280; attention
     *   6*(64*192 + 64*32 + 64*64)*4 = 442368; logit 49152 -> 1228800 * 64 = 78643200 */
    c = gpt(4, 64, 4, 16, 4, 256, 32, 128, true);
    moe(&c, 8, 2, 32, 64, "0111");
    assert_true(mc_gpt_flops(&c, 2) == 78643200.0);

    /* --moe-layer-freq 2 (layers 0 and 2), moe_ffn=40: W = 256*3*2 + 40*2*3*2 = 2016,
     *   6*64*2016 = 774144 -> (774144 + 442368 + 49152) * 64 = 81002496 */
    c = gpt(4, 64, 4, 16, 4, 256, 32, 128, true);
    moe(&c, 8, 2, 40, 0, "1010");
    assert_true(mc_gpt_flops(&c, 2) == 81002496.0);

    /* Mixtral 8x7B (top-2, moe_ffn = ffn) and a DeepSeek-MoE-16B-like model (first layer dense,
     * 64 experts of 1408, top-6, a shared expert of 2816), values from CPython */
    c = gpt(32, 4096, 32, 128, 8, 14336, 4096, 32000, true);
    moe(&c, 8, 2, 14336, 0, "11111111111111111111111111111111");
    assert_true(mc_gpt_flops(&c, 1024) == 0x1.28ee000000000p+58);
    c = gpt(27, 2048, 16, 128, 16, 10944, 4096, 102400, true);
    moe(&c, 64, 6, 1408, 2816, "011111111111111111111111111");
    assert_true(mc_gpt_flops(&c, 512) == 0x1.ecc6000000000p+54);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flops),
        cmocka_unit_test(test_moe_flops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
