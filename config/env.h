/* The environment variables megatron-c reads (other than the launchers' own, such as PMIX_RANK
 * in comm/runtime.c): one table, read once at start-up (main calls mc_env_load), documented in
 * docs/FLAGS.md ("Environment variables", printed from the table by --flags-markdown). The
 * components get the text read at start-up instead of calling getenv, so no hot path (a GEMM, a
 * training step) reads the environment. */
#ifndef MC_CONFIG_ENV_H
#define MC_CONFIG_ENV_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MC_ENV_TEST_STRICT_DEVICE,
    MC_ENV_CUDA_GEMM,
    MC_ENV_NCCL_STAGE_BYTES,
    MC_ENV_MPI_CHUNK_ELEMS,
    MC_ENV_TEST_CKPT_WRITE_DELAY_MS,
    MC_ENV_TEST_GRAD_POISON,
    MC_ENV_COUNT
} mc_env_knob_t;

typedef struct {
    const char *name;   /* "MC_CUDA_GEMM" */
    const char *value;  /* what it takes: "1", "fallback", "N (bytes)", ... */
    const char *reader; /* the component that uses it: "kernels/cuda/gemm.cu" */
    const char *help;   /* what it does */
} mc_env_info_t;

/* Reads every variable of the table (again, for tests that change the environment). */
void mc_env_load(void);

/* The value read at start-up (the first call reads them when mc_env_load has not run), or
 * NULL when unset. */
const char *mc_env_text(mc_env_knob_t k);

const mc_env_info_t *mc_env_info(mc_env_knob_t k);

/* The table as docs/FLAGS.md shows it. */
void mc_env_print_markdown(FILE *out);

#ifdef __cplusplus
}
#endif

#endif
