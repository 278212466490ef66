/* megatron-c: subcommand dispatch, nothing else. */
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "ckpt/args.h"
#include "cli/cli.h"
#include "config/env.h"
#include "comm/runtime.h"
#include "kernels/device.h"
#include "train/train.h"

static int print_version(void)
{
    printf("megatron-c %s (%s)\n", MC_VERSION, MC_GIT_REV);
    printf("built with: %s; CPU GEMM: OpenBLAS\n", mc_build_description());
    return 0;
}

int main(int argc, char **argv)
{
    mc_env_load(); /* the environment knobs (config/env.h), once, before any component starts */
    mc_args_set_hook(mc_ckpt_args_use, NULL); /* --use-checkpoint-args */
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) return print_version();
    if (argc >= 2 && strcmp(argv[1], "preprocess-data") == 0) {
        mc_cpu_set_threads(1);
        return mc_cli_preprocess(argc - 1, argv + 1);
    }
    if (argc >= 2 && strcmp(argv[1], "inspect-data") == 0) {
        mc_cpu_set_threads(1);
        mc_ckpt_args_install(false); /* its output is the data: no "Setting ..." lines */
        return mc_cli_inspect(argc - 1, argv + 1);
    }
    if (argc >= 2 && strcmp(argv[1], "plan") == 0) {
        mc_ckpt_args_install(false); /* --use-checkpoint-args without "Setting ..." lines */
        return mc_cli_plan(argc - 1, argv + 1);
    }
    if (argc >= 2 && strcmp(argv[1], "convert-checkpoint") == 0)
        return mc_cli_convert(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "export-hf") == 0) return mc_cli_export_hf(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "import-hf") == 0) return mc_cli_import_hf(argc - 1, argv + 1);
    int first = argc >= 2 && strcmp(argv[1], "train") == 0 ? 2 : 1;

    /* Who we are comes first: the world size enters validation (dp), and errors name the rank. */
    static mc_runtime_t rt;
    char err[512];
    if (mc_runtime_init(&rt, err, sizeof(err)) != 0) mc_user_error("%s", err);
    mc_error_set_rank(rt.rank, rt.size);
    static mc_args_t args;
    mc_ckpt_args_install(rt.rank == rt.size - 1); /* which rank prints "Setting ..." */
    mc_args_parse(&args, argc - first, argv + first, rt.size);
    /* after the flags: the start-up exchange waits no longer than --distributed-timeout-minutes */
    if (mc_runtime_connect(&rt, 60.0 * args.distributed_timeout_minutes, err, sizeof(err)) != 0)
        mc_fatal("%s", err);
    const double job_start = mc_wall_s(); /* Megatron's _TRAIN_START_TIME */
    static mc_data_source_t data;
    mc_args_open_data(&args, &data); /* the tokenizer fixes the padded vocabulary */
    int rc = mc_pretrain(&args, &data, job_start);
    mc_args_free(&args);
    mc_runtime_finalize(&rt);
    return rc;
}
