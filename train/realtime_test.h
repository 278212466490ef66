/* --test-mode: Megatron's Attention.run_realtime_tests (core/transformer/attention.py), which
 * every self-attention forward runs when config.test_mode is set: with --qk-layernorm it
 * all-gathers the layer's q_layernorm and k_layernorm weight and bias over the data-parallel
 * group, then over the tensor-parallel group, and asserts each rank's equal to its own ("silent
 * hardware failures": corruption on loading or in transit). The parameters change only at the
 * optimizer step, so checking every layer once before each training step and each evaluation
 * meets every forward's check; the first failing forward is the step's first either way.
 * (test_mode's other effect, turning off Transformer Engine's fused single-QKV RoPE path, has
 * no counterpart here: megatron-c has no such fused path.) */
#ifndef MC_TRAIN_REALTIME_TEST_H
#define MC_TRAIN_REALTIME_TEST_H

#include <stddef.h>

#include "trainer/trainer.h"

/* Collective over the world when --test-mode and --qk-layernorm are set (a no-op otherwise).
 * Equal everywhere: nothing is printed. Otherwise each rank that differs prints Megatron's
 * assertion message per tensor ("Discrepancy between <name> in DP ranks i and r. Diff: <norm>")
 * and the job stops. */
void mc_realtime_tests(mc_trainer_t *t);

/* The comparison, for a gathered buffer: all holds group_size copies of `bytes` bytes (the
 * tensors n_tensors of numel[k] elements of type dt, packed in order, each copy padded to bytes);
 * this rank is `me`. Returns how many (rank, tensor) pairs differ from this rank's; each is
 * printed as Megatron's message (parallelism "DP" or "TP", names[k]). */
int mc_realtime_compare(const unsigned char *all, size_t bytes, int group_size, int me,
                        int n_tensors, const long *numel, const char *const *names, mc_dtype_t dt,
                        const char *parallelism);

#endif
