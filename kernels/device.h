/* Choosing the backend at start-up (DESIGN decision 2) and describing the build. */
#ifndef MC_KERNELS_DEVICE_H
#define MC_KERNELS_DEVICE_H

#include <stddef.h>

#include "kernels/attention_choice.h"
#include "kernels/backend.h"

/* device: "auto", "cpu" or "cuda". A rank drives the GPU numbered local_rank modulo the number
 * of visible GPUs (mc_gpu_for_rank). Writes a one-line reason for the choice into why.
 * "cuda" when it cannot be had (a build without CUDA, no visible GPU, a device that fails to
 * start, or a CUDA backend whose op table is incomplete) is a user error; "auto" then falls back
 * to the CPU and says why. cpu_threads > 0 sets the CPU backend's OpenBLAS thread count
 * (--cpu-threads). */
const mc_backend_t *mc_backend_select(const char *device, int cpu_threads, int local_rank,
                                      char *why, size_t n);

/* A backend for sizing only (`megatron-c plan`): the name, capability fields, attention_sizes
 * and attention_block_sizes of device's backend ("cpu" or "cuda"), every other op NULL; it
 * touches no device and exists in every build. NULL for another name. */
const mc_backend_t *mc_backend_sizing(const char *device);
/* The CUDA context-parallel attention blocks' scratch (backend.h's attention_block_sizes). */
void mc_cuda_attention_block_sizes(const mc_backend_t *be, mc_dtype_t dt, int Sq, int Sk, int B,
                                   int NH, int HD, size_t *fwd_scratch, size_t *bwd_scratch);
/* The project's fused attention kernels' sizes (kernels/cuda/attention.cu; the CUDA backend's
 * attention_sizes when cuDNN does not run the shapes, and never less): the softmax row
 * statistics (max, sum) as state and one float per row (rowsum(dout * out)) as scratch. */
void mc_flash_attention_sizes(const mc_backend_t *be, mc_dtype_t dt, int S, int B, int NH, int HD,
                              size_t *state_bytes, size_t *scratch_bytes);

/* Chooses how be runs a run's attention (issue 29): on the cuda backend cuDNN's fused flash
 * attention where --attention-backend asks for it (auto, flash, fused), cuDNN's documented support
 * matrix takes the shapes and cuDNN builds their plans (built once here, for the training and the
 * evaluation micro-batch), else the project's kernels; on the cpu and strict backends the CPU's
 * reference op; on the sizing backends what the cuda backend would choose on a GPU of compute
 * capability 9 (`megatron-c plan` loads no cuDNN: its workspace is
 * mc_attention_cudnn_workspace_model's). Writes one line for the start-up log into line: the
 * implementation, and the reason when it is not the library asked for. Call it before planning
 * memory: attention_sizes answers for the choice. Calling it again replaces the choice. */
void mc_backend_attention_setup(const mc_backend_t *be, const mc_attention_spec_t *s, char *line,
                                size_t n);
/* The line of be's last setup ("" before any). */
const char *mc_backend_attention_line(const mc_backend_t *be);

/* The strict backend (kernels/strict.c), a test double for a GPU: the CPU's ops on memory the
 * host cannot access. mc_backend_select returns it for "cpu" (and "auto" without a GPU) when
 * the environment has MC_TEST_STRICT_DEVICE=1. mc_strict_owns: p lies in its memory. */
const mc_backend_t *mc_backend_strict(void);
int mc_strict_owns(const void *p);
/* The host-writable view of the strict device's pointer p (NULL stays NULL); host memory there is
 * fatal, naming op. For the strict backend's ops in other files (kernels/strict_moe.c). */
void *mc_strict_view(const void *p, const char *op);

/* The name of the first op of be's table that is NULL ("attention_forward"), or NULL when every
 * op is there. The ops are listed in mc_backend_op_name's table, in the struct's order. */
const char *mc_backend_missing_op(const mc_backend_t *be);
/* Op i (0 <= i < mc_backend_op_count()) of the table: its name and offset in mc_backend_t. */
int mc_backend_op_count(void);
const char *mc_backend_op_name(int i, size_t *offset);

/* The GPU a rank drives, local_rank modulo the visible count, and how many of the node's
 * local_size ranks drive that same GPU (they share its memory). */
int mc_gpu_for_rank(int local_rank, int gpus);
int mc_ranks_per_gpu(int local_rank, int local_size, int gpus);

/* Memory of the backend's device in bytes: free and total (CUDA: cudaMemGetInfo; CPU: physical
 * memory, both). Returns 0, or -1 when unknown. */
int mc_backend_memory(const mc_backend_t *be, double *free_bytes, double *total_bytes);

/* OpenBLAS threads for the CPU backend. The data subcommands do no matrix work and set 1, so
 * OpenBLAS's idle thread pool does not spin on the cores their own workers need. */
void mc_cpu_set_threads(int n);

/* Number of usable CUDA devices; 0 when not built with CUDA or when the driver reports any
 * error (a CUDA build on a machine without a GPU). */
int mc_cuda_device_count(void);

/* "CPU only" or "CUDA <runtime version>, sm_90a/sm_80, NCCL <version>". */
const char *mc_build_description(void);

#ifdef MC_WITH_CUDA
/* The CUDA backend's device and compute stream (a cudaStream_t), kernels/cuda/handles.cu. */
int mc_cuda_backend_device(const mc_backend_t *be);
void *mc_cuda_backend_stream(const mc_backend_t *be);
/* kernels/cuda/attention_select.cu: mc_backend_attention_setup on the cuda backend. */
void mc_cuda_attention_setup(const mc_backend_t *be, const mc_attention_spec_t *s, char *line,
                             size_t n);
#endif

#endif
