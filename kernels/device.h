/* Choosing the backend at start-up (DESIGN decision 2) and describing the build. */
#ifndef MC_KERNELS_DEVICE_H
#define MC_KERNELS_DEVICE_H

#include <stddef.h>

#include "kernels/backend.h"

/* device: "auto", "cpu" or "cuda". Writes a one-line reason for the choice into why.
 * An impossible request (cuda without a GPU or without a CUDA build) is a user error.
 * cpu_threads > 0 sets the CPU backend's OpenBLAS thread count (--cpu-threads). */
const mc_backend_t *mc_backend_select(const char *device, int cpu_threads, char *why, size_t n);

/* OpenBLAS threads for the CPU backend. The data subcommands do no matrix work and set 1, so
 * OpenBLAS's idle thread pool does not spin on the cores their own workers need. */
void mc_cpu_set_threads(int n);

/* Number of usable CUDA devices; 0 when not built with CUDA or when the driver reports any
 * error (a CUDA build on a machine without a GPU). */
int mc_cuda_device_count(void);

/* "CPU only" or "CUDA <runtime version>, sm_90a/sm_80". */
const char *mc_build_description(void);

#endif
