/* Which attention runs (kernels/attention_choice.c, issue 29), on the CPU: --attention-backend's
 * names, the run's attention from arguments (tp's share of heads and groups, the evaluation's
 * rows), cuDNN's documented support and its refusals' reasons, the scratch layout of a cuDNN
 * call, and the sizing backend's choice for `megatron-c plan` (kernels/device.c) with the
 * scratch it then plans. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "kernels/attention_choice.h"
#include "kernels/device.h"

static mc_attention_spec_t gpt(void)
{
    mc_attention_spec_t s = {.backend = MC_ATTENTION_AUTO, .dt = MC_DT_BF16, .S = 2048, .B = 8,
                             .B_eval = 8, .NH = 16, .NG = 16, .HD = 128};
    return s;
}

static void test_names(void **state)
{
    (void)state;
    const char *names[] = {"auto", "flash", "fused", "unfused", "local"};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(mc_attention_backend_of(names[i]), i);
        assert_string_equal(mc_attention_backend_name((mc_attention_backend_t)i), names[i]);
    }
    assert_int_equal(mc_attention_backend_of(""), MC_ATTENTION_AUTO);
}

static void test_spec_from_args(void **state)
{
    (void)state;
    mc_args_t a;
    memset(&a, 0, sizeof(a));
    strcpy(a.attention_backend, "fused");
    a.bf16 = true, a.seq_length = 1024, a.micro_batch_size = 4, a.eval_micro_batch_size = 2;
    a.num_attention_heads = 32, a.num_query_groups = 8, a.tensor_model_parallel_size = 4;
    a.kv_channels = 96, a.attention_dropout = 0.1, a.reset_attention_mask = true;
    mc_attention_spec_t s;
    mc_attention_spec_from_args(&a, &s);
    assert_int_equal(s.backend, MC_ATTENTION_FUSED);
    assert_int_equal(s.dt, MC_DT_BF16);
    assert_int_equal(s.S, 1024);
    assert_int_equal(s.B, 4);
    assert_int_equal(s.B_eval, 2);
    assert_int_equal(s.NH, 8); /* this tp rank's */
    assert_int_equal(s.NG, 2);
    assert_int_equal(s.HD, 96);
    assert_true(s.dropout > 0.099f && s.dropout < 0.101f);
    assert_true(s.segments);
}

/* The support matrix: what cuDNN takes, and each refusal's reason. */
static void test_refusals(void **state)
{
    (void)state;
    char buf[256];
    mc_attention_spec_t s = gpt();
    assert_null(mc_attention_cudnn_refusal(&s, 9, buf, sizeof(buf)));
    const int hds[] = {64, 80, 96, 128, 256};
    for (int i = 0; i < 5; i++) {
        s.HD = hds[i];
        assert_null(mc_attention_cudnn_refusal(&s, 9, buf, sizeof(buf)));
    }
    s = gpt(), s.HD = 256;
    assert_non_null(mc_attention_cudnn_refusal(&s, 8, buf, sizeof(buf))); /* Ampere: up to 128 */
    assert_non_null(strstr(buf, "head dim 256"));
    s = gpt(), s.HD = 72;
    assert_null(mc_attention_cudnn_refusal(&s, 9, buf, sizeof(buf)));
    s.HD = 20;
    assert_non_null(strstr(mc_attention_cudnn_refusal(&s, 9, buf, sizeof(buf)), "head dim 20"));
    s = gpt(), s.dt = MC_DT_F32;
    assert_non_null(strstr(mc_attention_cudnn_refusal(&s, 9, buf, sizeof(buf)), "fp32 tensors"));
    s = gpt(), s.dt = MC_DT_F16;
    assert_null(mc_attention_cudnn_refusal(&s, 9, buf, sizeof(buf)));
    s = gpt(), s.segments = true;
    assert_non_null(strstr(mc_attention_cudnn_refusal(&s, 9, buf, sizeof(buf)), "--reset-attention-mask"));
    s = gpt(), s.backend = MC_ATTENTION_LOCAL;
    assert_non_null(strstr(mc_attention_cudnn_refusal(&s, 9, buf, sizeof(buf)), "--attention-backend local"));
    s.backend = MC_ATTENTION_UNFUSED;
    assert_non_null(strstr(mc_attention_cudnn_refusal(&s, 9, buf, sizeof(buf)), "--attention-backend unfused"));
    s = gpt(), s.NG = 3;
    assert_non_null(mc_attention_cudnn_refusal(&s, 9, buf, sizeof(buf)));
    s = gpt();
    assert_non_null(strstr(mc_attention_cudnn_refusal(&s, 7, buf, sizeof(buf)), "compute capability 7"));
}

/* The scratch: the workspace, the RNG words, the row sums, and with GQA the Q and dQ copies, each
 * 256-aligned. */
static void test_scratch(void **state)
{
    (void)state;
    mc_attention_spec_t s = gpt();
    mc_attention_scratch_t sc;
    mc_attention_cudnn_scratch(&s, 8, 1000, &sc);
    const size_t rows = 8 * 16 * 2048;
    assert_int_equal(sc.rng, 1024);
    assert_int_equal(sc.sum, 1024 + 256);
    assert_int_equal(sc.q, sc.sum + rows * 4);
    assert_int_equal(sc.dq, sc.q); /* multi-head: no copies */
    assert_int_equal(sc.bytes, sc.q);
    s.NG = 4;
    mc_attention_cudnn_scratch(&s, 8, 0, &sc);
    assert_int_equal(sc.rng, 0);
    assert_int_equal(sc.dq - sc.q, rows * 128 * 2);
    assert_int_equal(sc.bytes - sc.dq, rows * 128 * 2);
    assert_int_equal(mc_attention_cudnn_workspace_model(&s, 8), rows * 128 * 4);
}

/* `megatron-c plan`'s sizing backend chooses as a Hopper run would, and plans cuDNN's scratch. */
static void test_sizing_backend(void **state)
{
    (void)state;
    const mc_backend_t *be = mc_backend_sizing("cuda");
    mc_attention_spec_t s = gpt();
    char line[512];
    size_t st, sc, st_local, sc_local;
    mc_backend_attention_setup(be, &s, line, sizeof(line));
    assert_non_null(strstr(line, "cuDNN fused flash attention, assumed"));
    assert_string_equal(line, mc_backend_attention_line(be));
    be->attention_sizes(be, s.dt, s.S, s.B, s.NH, s.HD, &st, &sc);
    s.backend = MC_ATTENTION_LOCAL;
    mc_backend_attention_setup(be, &s, line, sizeof(line));
    assert_non_null(strstr(line, "the project's kernels: --attention-backend local"));
    be->attention_sizes(be, s.dt, s.S, s.B, s.NH, s.HD, &st_local, &sc_local);
    mc_attention_scratch_t want;
    mc_attention_cudnn_scratch(&s, s.B, mc_attention_cudnn_workspace_model(&s, s.B), &want);
    assert_int_equal(st, st_local); /* the state is the project's kernels' either way */
    assert_int_equal(sc, want.bytes);
    assert_int_equal(sc_local, (size_t)8 * 16 * 2048 * 4);
    s = gpt(), s.dt = MC_DT_F32;
    mc_backend_attention_setup(be, &s, line, sizeof(line));
    assert_non_null(strstr(line, "the project's kernels: fp32 tensors"));
    mc_backend_attention_setup(mc_backend_sizing("cpu"), &s, line, sizeof(line));
    assert_non_null(strstr(line, "the CPU reference op"));
    s.backend = MC_ATTENTION_FLASH;
    mc_backend_attention_setup(mc_backend_cpu(), &s, line, sizeof(line));
    assert_non_null(strstr(line, "no fused attention library; --attention-backend flash"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),   cmocka_unit_test(test_spec_from_args), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_scratch), cmocka_unit_test(test_sizing_backend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
