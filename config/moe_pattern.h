/* Megatron's --moe-layer-freq: which layers are MoE layers (arguments.moe_freq_type,
 * gpt_layer_specs.get_gpt_decoder_block_spec). */
#ifndef MC_CONFIG_MOE_PATTERN_H
#define MC_CONFIG_MOE_PATTERN_H

#include <stdbool.h>
#include <stddef.h>

/* freq is an int N (layer i, 0-based, is an MoE layer iff i % N == 0) or, when it holds a '[',
 * a Python list expression of Megatron's alphabet (digits , [ ] ( ) + *: list literals of ints,
 * '+' concatenation, '*' repetition by an int, ints added and multiplied) that evaluates to one
 * 0 (dense) or 1 (MoE) per layer. Writes is_moe[0..num_layers); returns the number of MoE
 * layers, or -1 with one line in err (naming the flag) when the text is neither, a value is not
 * 0 or 1, or the length is not num_layers. num_layers < 0: the text alone is checked (Megatron's
 * parser evaluates it with or without experts; its length matters to MoE models only). */
int mc_moe_layer_pattern(const char *freq, int num_layers, bool *is_moe, char *err, size_t n);

#endif
