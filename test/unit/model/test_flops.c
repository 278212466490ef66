/* Megatron's FLOPs count of a dense GPT (model/flops.h): its closed form, hand-worked cases and
 * CPython's values for large shapes. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
