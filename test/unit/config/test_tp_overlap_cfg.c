/* --tp-comm-overlap-cfg (config/tp_overlap_cfg.c): a Megatron/TE ub_cfgs YAML read where it
 * applies (method per GEMM, num_splits as the chunk count) and refused by name where not. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "config/tp_overlap_cfg.h"

static int parse(const char *y, mc_tp_overlap_cfg_t *c, char *err)
{
    return mc_tp_overlap_cfg_parse(y, strlen(y), c, err, 512);
}

static void test_sample(void **state)
{
    (void)state;
    mc_tp_overlap_cfg_t c;
    char err[512] = "";
    const char *y = "qkv_fprop:\n  method: ring_exchange\n  num_splits: 2\n  fp8_buf: true\n"
                    "proj_fprop:\n  method: pipeline\n  num_splits: 2\n  atomic_gemm: false\n"
                    "fc1_dgrad:\n  method: bulk\n  num_splits: 8\n"
                    "fc1_wgrad: {method: bulk}\n";
    assert_int_equal(parse(y, &c, err), 0);
    assert_int_equal(c.splits, 2); /* the bulk GEMM's 8 is not a chunk count */
    assert_int_equal(parse("", &c, err), 0);
    assert_int_equal(c.splits, 0);
}

static void refused(const char *y, const char *want)
{
    mc_tp_overlap_cfg_t c;
    char err[512] = "";
    assert_int_equal(parse(y, &c, err), -1);
    if (!strstr(err, want)) fail_msg("'%s' lacks '%s'", err, want);
}

static void test_refusals(void **state)
{
    (void)state;
    refused("qkv_fprop:\n  num_sm: 1\n", "qkv_fprop: num_sm does not apply");
    refused("proj_fprop:\n  set_sm_margin: true\n", "proj_fprop: set_sm_margin does not apply");
    refused("qkv_fprop:\n  method: bulk\n", "qkv_fprop: method bulk is not implemented");
    refused("qkv_dgrad:\n  method: pipeline\n", "qkv_dgrad: method pipeline is not implemented");
    refused("qkv_fprop: {num_splits: 2}\nfc2_fprop: {num_splits: 4}\n",
            "fc2_fprop: num_splits 4 differs from another GEMM's 2");
    refused("fc1_fprop: {atomic_gemm: true}\n", "fc1_fprop: atomic_gemm is not implemented");
    refused("fc2_wgrad: {method: bulk}\n", "fc2_wgrad: megatron-c has no overlap for this GEMM");
    refused("attn_fprop: {method: bulk}\n", "unknown GEMM attn_fprop");
    refused("qkv_fprop: {splits: 2}\n", "qkv_fprop: unknown setting splits");
    refused("qkv_fprop: {num_splits: zero}\n", "num_splits zero is not a positive integer");
    refused("- a\n- b\n", "must be a mapping of GEMM names");
    refused("qkv_fprop: [1, 2]\n", "its settings must be a mapping");
    refused("qkv_fprop: {method: [\n", "line ");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sample),
                                       cmocka_unit_test(test_refusals)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
