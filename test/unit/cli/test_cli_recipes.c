/* Command lines as recipes write them: the flags Megatron removed that old recipes still pass
 * (taken as today's, one warning each; conflicts refused), the SC21 paper's scripts unchanged,
 * every problem of a line told in one run, and "did you mean" only for plausible typos. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "config/args.h"
#include "config/flags.h"
#include "test/unit/cli_run.h"

/* A valid single-rank line (the example) the old flags are added to. */
#define LINE                                                                                       \
    "--device cpu --mock-data --num-layers 4 --hidden-size 64 --num-attention-heads 4 "            \
    "--seq-length 64 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 8 "     \
    "--train-iters 50 --lr 1e-3 --vocab-size 512"

/* Parses LINE + extra in a child (it must pass, printing only warnings), then here. */
static void parse_ok(mc_args_t *a, const char *extra, int warnings)
{
    static mc_run_t r;
    char line[4096];
    snprintf(line, sizeof(line), "%s %s", LINE, extra);
    mc_run_parse(&r, line, 1);
    if (r.status != 0 || mc_run_lines(r.err) != warnings)
        fail_msg("for '%s': status %d, stderr '%s', expected %d warnings", extra, r.status, r.err,
                 warnings);
    for (const char *p = r.err; *p; p = strchr(p, '\n') + 1)
        assert_int_equal(strncmp(p, "megatron-c: warning: ", 21), 0);
    mc_run_parse_here(a, line, 1);
}

static void expect_problem(const char *extra, const char *what)
{
    char line[4096];
    snprintf(line, sizeof(line), "%s %s", LINE, extra);
    mc_expect_error(line, what);
}

/* ---- the flags Megatron removed ---- */

/* --checkpoint-activations: full recomputation, uniform chunks of one layer, as Megatron took it
 * from c1e0689d92 (2021-08) until 3e71ad9c62 (2023-04); the old num-layers flags size the
 * chunks and have no effect without a method, as then. */
static void test_old_recompute_flags(void **state)
{
    (void)state;
    static mc_args_t a;
    parse_ok(&a, "--checkpoint-activations", 1);
    assert_string_equal(a.recompute_granularity, "full");
    assert_string_equal(a.recompute_method, "uniform");
    assert_int_equal(a.recompute_num_layers, 1);
    mc_args_free(&a);
    parse_ok(&a, "--checkpoint-activations --checkpoint-num-layers 2", 2);
    assert_string_equal(a.recompute_method, "uniform");
    assert_int_equal(a.recompute_num_layers, 2);
    mc_args_free(&a);
    parse_ok(&a, "--activations-checkpoint-num-layers 2 --activations-checkpoint-method block", 2);
    assert_string_equal(a.recompute_granularity, "full");
    assert_string_equal(a.recompute_method, "block");
    assert_int_equal(a.recompute_num_layers, 2);
    mc_args_free(&a);
    parse_ok(&a, "--activations-checkpoint-num-layers 2", 1); /* alone: no effect */
    assert_string_equal(a.recompute_granularity, "");
    assert_int_equal(a.recompute_num_layers, 0);
    mc_args_free(&a);
    /* the same meaning in both spellings agrees; an old default yields to a given value */
    parse_ok(&a, "--checkpoint-activations --recompute-granularity full --recompute-method uniform "
                 "--recompute-num-layers 2 --activations-checkpoint-method uniform",
             2);
    assert_string_equal(a.recompute_method, "uniform");
    assert_int_equal(a.recompute_num_layers, 2);
    mc_args_free(&a);
}

/* The warning names what the old flag was taken as, once per flag, and nothing else. */
static void test_old_flag_warning_text(void **state)
{
    (void)state;
    static mc_run_t r;
    mc_run_parse(&r, LINE " --activations-checkpoint-method uniform --DDP-impl local", 1);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "");
    assert_int_equal(mc_run_lines(r.err), 2);
    assert_non_null(strstr(r.err, "megatron-c: warning: --activations-checkpoint-method uniform is "
                                  "an old Megatron flag, taken as --recompute-granularity full "
                                  "--recompute-method uniform --recompute-num-layers 1 (renamed "
                                  "--recompute-method in bbab79f869"));
    assert_non_null(strstr(r.err, "megatron-c: warning: --DDP-impl local is an old Megatron flag, "
                                  "accepted: Megatron dropped torch's DistributedDataParallel in "
                                  "3fb3e95ec6"));
    mc_run_parse(&r, LINE " --activations-checkpoint-num-layers 3", 1);
    assert_non_null(strstr(r.err, "without --recompute-granularity full it has no effect"));
}

static void test_old_flags_accepted(void **state)
{
    (void)state;
    static mc_args_t a;
    parse_ok(&a, "--DDP-impl local --DDP-impl torch --data-impl mmap --data-impl=infer "
                 "--use-gpu-initialization --align-param-gather --log-batch-size-to-tensorboard "
                 "--use-cpu-initialization",
             5); /* --use-cpu-initialization is a flag of today's Megatron too: no warning */
    mc_args_free(&a);
    parse_ok(&a, "--DDP-impl torch --fp16", 1);
    mc_args_free(&a);
}

/* Where an old flag and a flag given too disagree, the run stops naming both. */
static void test_old_flag_conflicts(void **state)
{
    (void)state;
    expect_problem("--checkpoint-activations --recompute-method block",
                   "--checkpoint-activations conflicts with --recompute-method block (the old flag "
                   "means --recompute-method uniform; give one of them)");
    expect_problem("--recompute-activations --checkpoint-activations",
                   "--checkpoint-activations conflicts with --recompute-activations (the old flag "
                   "means --recompute-granularity full");
    expect_problem("--checkpoint-activations --activations-checkpoint-method block",
                   "--activations-checkpoint-method block conflicts with --checkpoint-activations");
    expect_problem("--activations-checkpoint-method uniform --activations-checkpoint-num-layers 2 "
                   "--recompute-num-layers 3",
                   "--activations-checkpoint-num-layers 2 conflicts with --recompute-num-layers 3");
    expect_problem("--activations-checkpoint-method uniform --activations-checkpoint-num-layers 0",
                   "--activations-checkpoint-num-layers 0 (now --recompute-num-layers 0): argument "
                   "--recompute-num-layers: invalid value '0' (must be >= 1)");
    expect_problem("--activations-checkpoint-method chunk",
                   "argument --activations-checkpoint-method: invalid choice: 'chunk'");
    /* Megatron asserted local DDP for these until it dropped --DDP-impl */
    expect_problem("--DDP-impl torch --bf16", "--DDP-impl torch conflicts with --bf16");
    expect_problem("--DDP-impl torch --use-distributed-optimizer",
                   "--DDP-impl torch conflicts with --use-distributed-optimizer");
    expect_problem("--data-impl lazy", "--data-impl lazy is not supported (supported: mmap, infer)");
    expect_problem("--data-impl cached", "Megatron removed lazy and cached in d1a36e5334");
    /* renamed to flags megatron-c refuses: the refusal names the old spelling */
    expect_problem("--distribute-checkpointed-activations",
                   "--distribute-checkpointed-activations (now --distribute-saved-activations): "
                   "--distribute-saved-activations is recognised but not implemented yet");
    expect_problem("--use-custom-fsdp", "--use-custom-fsdp (now --use-megatron-fsdp): "
                                        "--use-megatron-fsdp is recognised but not implemented yet");
}

/* The table's old flags stand for flags that exist, in the shape cli/legacy.c reads. */
static void test_old_flag_table(void **state)
{
    (void)state;
    size_t n = 0;
    for (size_t i = 0; i < mc_flag_count(); i++) {
        const mc_flag_t *f = mc_flag_at(i);
        if (f->status != MC_FLAG_LEGACY) {
            assert_null(f->modern);
            assert_null(f->modern_default);
            assert_null(f->only_with);
            continue;
        }
        n++;
        assert_true(f->modern || (!f->modern_default && !f->only_with));
        const char *texts[] = {f->modern, f->modern_default, f->only_with};
        for (int k = 0; k < 3; k++) {
            if (!texts[k]) continue;
            char buf[256];
            snprintf(buf, sizeof(buf), "%s", texts[k]);
            for (char *save, *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
                if (strncmp(t, "--", 2) != 0) continue;
                const mc_flag_t *m = mc_flag_find(t);
                if (!m || m->status == MC_FLAG_LEGACY)
                    fail_msg("%s stands for %s, which is not a flag of today", f->name, t);
                if (k == 2 && m->type != MC_FLAG_CHOICE)
                    fail_msg("%s: only_with needs a choice flag", f->name);
            }
        }
        /* a valued old flag passes its value on */
        bool valued = f->type != MC_FLAG_STORE_TRUE && f->type != MC_FLAG_STORE_FALSE;
        if (f->modern && valued && !strstr(f->modern, "%s"))
            fail_msg("%s drops its value", f->name);
    }
    assert_true(n >= 10);
}

/* ---- the SC21 paper's scripts ----
 *
 * Megatron-LM's examples/sc21/ (NVIDIA/Megatron-LM at e70f83123f31cb432fcecb50848126bd245f3005,
 * the parent of f2e72c8a16124dc98af19a2cfe36ba8fac5758df, which moved them to
 * examples/academic_paper_scripts/ in 2024; their README pins Megatron commit 6985e589): SRUN.sh
 * runs `pretrain_gpt.py ${MEGATRON_PARAMS}` with 8 tasks per node, CONFIG.sh builds
 * MEGATRON_PARAMS (below, verbatim but for ${...}, which become the %s and %d), and each run_*.sh
 * sets its variables (the table). The data and tokenizer paths are CONFIG.sh's
 * "<path to ...>" placeholders, filled with plain paths (nothing is read). Each line is parsed
 * unchanged, for the world size of its script (NNODES x 8 GPUs), through validation, as
 * megatron-c would on that cluster: sizes cannot be shrunk without changing the line, and a
 * run here could only start one rank. */
#define SC21_PARAMS                                                                                \
    " %s "                                                                                         \
    "--tensor-model-parallel-size %d "                                                             \
    "--pipeline-model-parallel-size %d "                                                           \
    "--micro-batch-size %d "                                                                       \
    "--global-batch-size %d "                                                                      \
    "--num-layers %d "                                                                             \
    "--hidden-size %d "                                                                            \
    "--num-attention-heads %d "                                                                    \
    "--DDP-impl %s "                                                                               \
    "--data-path /data/sc21/my-gpt2_text_document "                                                \
    "--vocab-file /data/sc21/gpt2-vocab.json "                                                     \
    "--merge-file /data/sc21/gpt2-merges.txt "                                                     \
    "--log-interval 5 "                                                                            \
    "--seq-length 2048 "                                                                           \
    "--max-position-embeddings 2048 "                                                              \
    "--train-iters 500 "                                                                           \
    "--lr-decay-iters 320 "                                                                        \
    "--lr 0.0001 "                                                                                 \
    "--min-lr 0.00001 "                                                                            \
    "--lr-decay-style cosine "                                                                     \
    "--lr-warmup-fraction 0.01 "                                                                   \
    "--split 969,30,1 "                                                                            \
    "--eval-iters 100 "                                                                            \
    "--eval-interval 1000 "                                                                        \
    "--clip-grad 1.0 "                                                                             \
    "--fp16 "                                                                                      \
    "--loss-scale 8192 "

#define CKPT_UNIFORM "--activations-checkpoint-method uniform "
#define VP(n) "--activations-checkpoint-method uniform --num-layers-per-virtual-pipeline-stage " #n

typedef struct {
    const char *script; /* and the case it sets */
    int tp, pp, mbs, gbs, nls, hs, nah;
    const char *ddp;
    int nnodes;
    const char *extra; /* MEGATRON_EXTRA_PARAMS */
    int vp_stage;      /* its --num-layers-per-virtual-pipeline-stage, 0 if none */
} sc21_case_t;

static const sc21_case_t SC21[] = {
    /* run_table_1.sh, every MODEL_SIZE */
    {"run_table_1.sh 1.7B", 1, 1, 16, 512, 24, 2304, 24, "torch", 4, CKPT_UNIFORM, 0},
    {"run_table_1.sh 3.6B", 2, 1, 16, 512, 30, 3072, 32, "torch", 8, CKPT_UNIFORM, 0},
    {"run_table_1.sh 7.5B", 4, 1, 16, 512, 36, 4096, 32, "torch", 16, CKPT_UNIFORM, 0},
    {"run_table_1.sh 18B", 8, 1, 8, 1024, 40, 6144, 48, "torch", 32, CKPT_UNIFORM, 0},
    {"run_table_1.sh 39B", 8, 2, 4, 1536, 48, 8192, 64, "local", 64, CKPT_UNIFORM, 0},
    {"run_table_1.sh 76B", 8, 4, 2, 1792, 60, 10240, 80, "local", 128, VP(5), 5},
    {"run_table_1.sh 145B", 8, 8, 2, 2304, 80, 12288, 96, "local", 192, VP(5) " ", 5},
    {"run_table_1.sh 310B", 8, 16, 1, 2160, 96, 16384, 128, "local", 240, VP(3) " ", 3},
    {"run_table_1.sh 530B", 8, 35, 1, 2520, 105, 20480, 128, "local", 315, VP(1) " ", 1},
    {"run_table_1.sh 1T", 8, 64, 1, 3072, 128, 25600, 160, "local", 384, CKPT_UNIFORM, 0},
    /* the figures, each as committed (and the other branch where a script has two) */
    {"run_figure_11.sh PP=1 GBS=8", 8, 1, 1, 8, 3, 20480, 128, "local", 1, CKPT_UNIFORM, 0},
    {"run_figure_12.sh INTERLEAVED=YES", 8, 12, 1, 12, 96, 12288, 96, "local", 12, VP(2) " ", 2},
    {"run_figure_12.sh INTERLEAVED=NO", 8, 12, 1, 12, 96, 12288, 96, "local", 12, CKPT_UNIFORM, 0},
    {"run_figure_13.sh PP=2", 32, 2, 1, 32, 32, 20480, 128, "local", 8, CKPT_UNIFORM, 0},
    {"run_figure_14.sh PP=2", 1, 2, 1, 32, 32, 3840, 32, "local", 8, CKPT_UNIFORM, 0},
    {"run_figure_15.sh TP=2", 2, 1, 1, 32, 32, 3840, 32, "local", 8, CKPT_UNIFORM, 0},
    {"run_figure_16.sh MBS=1", 8, 8, 1, 128, 32, 15360, 128, "local", 8, CKPT_UNIFORM, 0},
    {"run_figure_17.sh RECOMPUTATION=YES", 8, 16, 1, 1, 80, 12288, 96, "local", 16, CKPT_UNIFORM, 0},
    {"run_figure_17.sh RECOMPUTATION=NO", 8, 16, 1, 1, 80, 12288, 96, "local", 16, "", 0},
    {"run_figure_18.sh SCATTER_GATHER=YES", 8, 12, 1, 12, 96, 12288, 96, "local", 12, VP(2) " ", 2},
    {"run_figure_18.sh SCATTER_GATHER=NO", 8, 12, 1, 12, 96, 12288, 96, "local", 12,
     VP(2) " --no-scatter-gather-tensors-in-pipeline ", 2},
};

static void test_sc21_scripts_parse_unchanged(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof(SC21) / sizeof(SC21[0]); k++) {
        const sc21_case_t *c = &SC21[k];
        char line[4096];
        snprintf(line, sizeof(line), SC21_PARAMS, c->extra, c->tp, c->pp, c->mbs, c->gbs, c->nls,
                 c->hs, c->nah, c->ddp);
        const int world = c->nnodes * 8;
        static mc_run_t r;
        mc_run_parse(&r, line, world);
        /* one warning per old flag: --DDP-impl, and --activations-checkpoint-method if given */
        const int old = 1 + (strstr(c->extra, "--activations-checkpoint-method") != NULL);
        if (r.status != 0 || mc_run_lines(r.err) != old || strstr(r.err, "error"))
            fail_msg("%s: status %d, stderr '%s'", c->script, r.status, r.err);
        static mc_args_t a;
        mc_run_parse_here(&a, line, world);
        assert_int_equal(a.data_parallel_size, world / (c->tp * c->pp));
        assert_int_equal(a.num_microbatches, c->gbs / (c->mbs * a.data_parallel_size));
        assert_int_equal(a.virtual_pipeline_model_parallel_size,
                         c->vp_stage ? c->nls / c->pp / c->vp_stage : 1);
        assert_string_equal(a.recompute_granularity, old == 2 ? "full" : "");
        assert_string_equal(a.recompute_method, old == 2 ? "uniform" : "");
        assert_int_equal(a.recompute_num_layers, old == 2 ? 1 : 0);
        assert_true(a.fp16 && a.loss_scale == 8192);
        mc_args_free(&a);
    }
}

/* ---- every problem in one run ---- */

static void test_all_problems_in_one_run(void **state)
{
    (void)state;
    static const char *const what[] = {
        "unrecognized argument --frobnicate-level (see megatron-c --help)",
        "unrecognized argument --hiden-size (did you mean --hidden-size?)",
        "argument --lr: invalid float value: 'fast'",
        "argument --seq-length: expected one argument",
        "unrecognized argument 'stray' (megatron-c takes only --flags",
        "argument --optimizer: invalid choice: 'lamb' (choose from adam, sgd, muon, dist_muon, "
        "lion, soap, adaptive_muon)",
        "--fp32-residual-connection is recognised but not implemented yet in megatron-c (an fp32 "
        "residual stream in 16-bit training; see docs/FLAGS.md)",
        "--check-for-large-grads is recognised but not implemented yet",
        "--lr-decay-style WSD is recognised but not implemented yet in megatron-c (supported: "
        "constant, linear, cosine, inverse-square-root",
        "--checkpoint-activations conflicts with --recompute-method block",
    };
    /* values after an unknown flag are its own; the same problem twice is told once */
    mc_expect_errors(LINE " --frobnicate-level 512 --hiden-size 64 --lr fast --seq-length --fp16 stray "
                          "--optimizer lamb --fp32-residual-connection --check-for-large-grads "
                          "--frobnicate-level 512 --lr-decay-style WSD --checkpoint-activations "
                          "--recompute-granularity full --recompute-method block",
                     sizeof(what) / sizeof(what[0]), what);
    /* a refused value is one problem, not also a support problem */
    static const char *const bad_choice[] = {"argument --ckpt-format: invalid choice: 'zarr'"};
    mc_expect_errors(LINE " --ckpt-format zarr", 1, bad_choice);
}

/* ---- did you mean ---- */

/* Real typos of Megatron flags, and what they suggest. */
static void test_suggest_typos(void **state)
{
    (void)state;
    static const char *const typos[][2] = {
        {"--hiden-size", "--hidden-size"},                  /* a letter left out */
        {"--seq-lenght", "--seq-length"},                   /* two letters swapped */
        {"--wieght-decay", "--weight-decay"},
        {"--lr-warmup-fration", "--lr-warmup-fraction"},
        {"--init-method-sdt", "--init-method-std"},
        {"--eval-intervall", "--eval-interval"},            /* a letter too many */
        {"--micro-batch", "--micro-batch-size"},            /* cut off */
        {"--data-cache", "--data-cache-path"},
        {"--num-layer", "--num-layers"},                    /* plural */
        {"--num-attention-head", "--num-attention-heads"},
        {"--lr-decay-iter", "--lr-decay-iters"},
        {"--clip-grads", "--clip-grad"},
        {"--use-mcore-model", "--use-mcore-models"},
        {"--micro_batch_size", "--micro-batch-size"},       /* underscores */
        {"--local_rank", "--local-rank"},
        {"--Train-Iters", "--train-iters"},                 /* case */
        {"--global-batchsize", "--global-batch-size"},      /* words run together */
        {"--vocabfile", "--vocab-file"},
        {"--fp-16", "--fp16"},
        {"--adam-beta-1", "--adam-beta1"},
        {"--tensor-parallel-size", "--tensor-model-parallel-size"}, /* a word left out */
        {"--pipeline-parallel-size", "--pipeline-model-parallel-size"},
        {"--num-heads", "--num-attention-heads"},
        {"--use-distributed-optimiser", "--use-distributed-optimizer"}, /* British spelling */
        {"--sequence-paralel", "--sequence-parallel"},
        {"--recompute-granulrity", "--recompute-granularity"},
    };
    for (size_t i = 0; i < sizeof(typos) / sizeof(typos[0]); i++) {
        const char *s = mc_flag_suggest(typos[i][0]);
        if (!s || strcmp(s, typos[i][1]) != 0)
            fail_msg("%s suggests %s, expected %s", typos[i][0], s ? s : "nothing", typos[i][1]);
    }
}

/* Megatron flags megatron-c may not know: none suggests another flag (each may be in the table
 * itself, when it is recognised). --q-lora-rank used to suggest --local-rank. */
static void test_suggest_nothing_unrelated(void **state)
{
    (void)state;
    static const char *const unrelated[] = {
        "--q-lora-rank", "--kv-lora-rank", "--qk-head-dim", "--v-head-dim", "--qk-pos-emb-head-dim",
        "--moe-router-topk", "--moe-ffn-hidden-size", "--moe-grouped-gemm",
        "--moe-token-dispatcher-type", "--moe-aux-loss-coeff", "--moe-router-load-balancing-type",
        "--moe-shared-expert-intermediate-size", "--moe-router-score-function",
        "--moe-router-topk-scaling-factor", "--moe-router-pre-softmax", "--moe-router-dtype",
        "--moe-permute-fusion", "--moe-layer-freq", "--moe-expert-capacity-factor",
        "--fp8-amax-history-len", "--fp8-amax-compute-algo", "--tiktoken-pattern",
        "--cuda-graph-impl", "--enable-cuda-graph", "--te-rng-tracker",
        "--use-persistent-ckpt-worker", "--rerun-mode", "--rotary-scaling-factor",
        "--mamba-num-heads", "--hybrid-attention-ratio", "--decoder-num-layers", "--log-straggler",
        "--disable-straggler-on-startup", "--ckpt-assume-constant-structure",
        "--dist-ckpt-strictness", "--completely-unrelated-thing"};
    for (size_t i = 0; i < sizeof(unrelated) / sizeof(unrelated[0]); i++) {
        const char *s = mc_flag_suggest(unrelated[i]);
        if (s && strcmp(s, unrelated[i]) != 0) fail_msg("%s suggests %s", unrelated[i], s);
    }
    /* against explicit neighbours, whatever the table holds */
    static const char *const near[] = {"--local-rank", "--ffn-hidden-size", "--expert-tensor-parallel-size",
                                       "--tensor-model-parallel-size", "--moe-router-topk"};
    static const char *const cases[][2] = {
        {"--q-lora-rank", NULL},         {"--kv-lora-rank", NULL},
        {"--moe-ffn-hidden-size", NULL}, /* an extra leading word names another thing */
        {"--moe-router-top-k", "--moe-router-topk"},
        {"--tensor-parallel-size", "--tensor-model-parallel-size"}, /* not the expert one */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *s = mc_flag_closest(cases[i][0], near, sizeof(near) / sizeof(near[0]));
        if (cases[i][1] ? !s || strcmp(s, cases[i][1]) != 0 : s != NULL)
            fail_msg("%s: closest %s, expected %s", cases[i][0], s ? s : "none",
                     cases[i][1] ? cases[i][1] : "none");
    }
    /* values are judged alike (preprocess-data's --tokenizer-type) */
    static const char *const tokenizers[] = {"GPT2BPETokenizer", "NullTokenizer"};
    assert_string_equal(mc_flag_closest("GPT2BPE", tokenizers, 2), "GPT2BPETokenizer");
    assert_string_equal(mc_flag_closest("GPT2BPETokenzier", tokenizers, 2), "GPT2BPETokenizer");
    assert_null(mc_flag_closest("SentencePieceTokenizer", tokenizers, 2));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_old_recompute_flags),
        cmocka_unit_test(test_old_flag_warning_text),
        cmocka_unit_test(test_old_flags_accepted),
        cmocka_unit_test(test_old_flag_conflicts),
        cmocka_unit_test(test_old_flag_table),
        cmocka_unit_test(test_sc21_scripts_parse_unchanged),
        cmocka_unit_test(test_all_problems_in_one_run),
        cmocka_unit_test(test_suggest_typos),
        cmocka_unit_test(test_suggest_nothing_unrelated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
