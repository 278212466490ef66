/* The environment variables' table and their values read once (config/env.h). */
#include "config/env.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const mc_env_info_t INFO[MC_ENV_COUNT] = {
    [MC_ENV_TEST_STRICT_DEVICE] = {"MC_TEST_STRICT_DEVICE", "1", "kernels/device.c",
                                   "Tests: the strict backend instead of the cpu one (the cpu's "
                                   "arithmetic on memory the host cannot touch), so that any host "
                                   "access to device memory fails."},
    [MC_ENV_CUDA_GEMM] = {"MC_CUDA_GEMM", "fallback | untimed", "kernels/cuda/gemm.cu",
                          "fallback: runs every GEMM with megatron-c's own kernel instead of "
                          "cuBLASLt (correct, slow), to compare the two; untimed: keeps the "
                          "cuBLASLt heuristic's first algorithm for each shape instead of timing "
                          "its candidates at first use."},
    [MC_ENV_NCCL_STAGE_BYTES] = {"MC_NCCL_STAGE_BYTES", "N > 0 (bytes)", "comm/comm_nccl.c",
                                 "Tests: the smallest staging piece of the NCCL backend's host "
                                 "transfers, to exercise transfers in several pieces."},
    [MC_ENV_MPI_CHUNK_ELEMS] = {"MC_MPI_CHUNK_ELEMS", "N > 0 (elements)", "comm/comm_mpi.c",
                                "Tests: the MPI backend's largest message, lowered to exercise "
                                "chunked collectives with small buffers."},
    [MC_ENV_TEST_CKPT_WRITE_DELAY_MS] = {"MC_TEST_CKPT_WRITE_DELAY_MS", "N (milliseconds)",
                                         "ckpt/checkpoint.c",
                                         "Tests: holds a checkpoint's writer this long after "
                                         "writing its files, before publishing them."},
    [MC_ENV_TEST_GRAD_POISON] = {"MC_TEST_GRAD_POISON", "ITERATION:{nan,inf}[:RANK]",
                                 "train/step.c",
                                 "Tests: turns the gradients (of every rank, or of RANK) into NaN, "
                                 "or the non-zero ones into Inf, at that iteration, to reach the "
                                 "gradient-norm check."},
};

static char *g_value[MC_ENV_COUNT];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void read_all(void)
{
    for (int k = 0; k < MC_ENV_COUNT; k++) {
        free(g_value[k]);
        const char *v = getenv(INFO[k].name);
        g_value[k] = v ? strdup(v) : NULL; /* NULL on failure too: as if unset */
    }
}

void mc_env_load(void)
{
    static bool first = true;
    pthread_once(&g_once, read_all);
    if (!first) read_all();
    first = false;
}

const char *mc_env_text(mc_env_knob_t k)
{
    pthread_once(&g_once, read_all);
    return k < MC_ENV_COUNT ? g_value[k] : NULL;
}

const mc_env_info_t *mc_env_info(mc_env_knob_t k) { return k < MC_ENV_COUNT ? &INFO[k] : NULL; }

void mc_env_print_markdown(FILE *out)
{
    fputs("\n## Environment variables\n\n"
          "Read once at start-up (config/env.c); the components get the values from there. "
          "Most exist for the tests.\n\n"
          "| Variable | Value | Read by | Effect |\n|---|---|---|---|\n",
          out);
    for (int k = 0; k < MC_ENV_COUNT; k++)
        fprintf(out, "| `%s` | `%s` | %s | %s |\n", INFO[k].name, INFO[k].value, INFO[k].reader,
                INFO[k].help);
}
