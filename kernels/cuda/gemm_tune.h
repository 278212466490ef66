/* The CUDA backend's choices of cuBLASLt algorithms (kernels/cuda/gemm.cu), per GEMM plan: how
 * many candidates the heuristic offered, how many were timed at the plan's first use and which
 * one is in use. Plain C, for the tests (test/gpu/test_gpu_gemm.c) and reports. */
#ifndef MC_KERNELS_CUDA_GEMM_TUNE_H
#define MC_KERNELS_CUDA_GEMM_TUNE_H

#ifdef __cplusplus
extern "C" {
#endif

enum { MC_GEMM_TUNE_MAX = 8 };

typedef struct {
    int m, n, k;    /* the product in cuBLAS's column-major terms */
    int candidates; /* algorithms the heuristic offered (at most MC_GEMM_TUNE_MAX); 0: none */
    int timed;      /* of them timed: 0 when there was one, or no room to time an accumulation */
    int chosen;     /* the one in use, by the heuristic's order (0: its first) */
    float ms[MC_GEMM_TUNE_MAX]; /* each timed one's time of one run, milliseconds */
    int tuned;                  /* 1 once the plan was used */
} mc_cuda_gemm_choice_t;

/* The plans of the GEMMs run so far, up to max of them into out: returns how many there are. */
int mc_cuda_gemm_choices(mc_cuda_gemm_choice_t *out, int max);
/* Forgets every plan (a test's next GEMM plans, and times, again). */
void mc_cuda_gemm_forget(void);

#ifdef __cplusplus
}
#endif

#endif
