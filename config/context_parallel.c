/* Context parallelism's arithmetic and rules (config/context_parallel.h). */
#include "config/context_parallel.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

mc_cp_comm_t mc_cp_comm_of_layer(const mc_args_t *a, int layer)
{
    const int n = a->n_cp_comm_type;
    if (n == 0) return MC_CP_P2P;
    const int t = mc_cp_comm_parse(a->cp_comm_type[n == 1 ? 0 : layer]);
    return t < 0 ? MC_CP_P2P : (mc_cp_comm_t)t; /* mc_cp_validate refused the others */
}

void mc_cp_levels(const mc_args_t *a, int *a2a, int *p2p)
{
    const int cp = a->context_parallel_size > 0 ? a->context_parallel_size : 1;
    if (a->n_hierarchical_context_parallel_sizes == 2) {
        *a2a = atoi(a->hierarchical_context_parallel_sizes[0]);
        *p2p = atoi(a->hierarchical_context_parallel_sizes[1]);
    } else {
        *a2a = cp;
        *p2p = 1;
    }
}

/* --hierarchical-context-parallel-sizes: Megatron asserts their product whenever they are given;
 * a2a+p2p needs them, in two levels (Transformer Engine's [a2a group, p2p group]). */
static int hierarchical(const mc_args_t *a, bool a2a_p2p, char *err, size_t n)
{
    const int cp = a->context_parallel_size, k = a->n_hierarchical_context_parallel_sizes;
    long long prod = 1;
    for (int i = 0; i < k; i++) prod *= atoi(a->hierarchical_context_parallel_sizes[i]);
    if (k > 0 && prod != cp)
        return mc_errf(err, n,
                       "the product of --hierarchical-context-parallel-sizes (%lld) must equal "
                       "--context-parallel-size (%d)",
                       prod, cp);
    if (cp > 1 && a2a_p2p && k == 0)
        return mc_errf(err, n,
                       "--hierarchical-context-parallel-sizes must be set when a2a+p2p is used in "
                       "--cp-comm-type");
    if (cp > 1 && a2a_p2p && k != 2)
        return mc_errf(err, n,
                       "--cp-comm-type a2a+p2p needs two --hierarchical-context-parallel-sizes "
                       "(the a2a and the p2p level), not %d",
                       k);
    return 0;
}

/* The heads (and query groups) this tp rank holds must split over an all-to-all of `size`
 * ranks, and Transformer Engine's a2a and all-gather want heads of a multiple of 8 channels. */
static int comm_shapes(const mc_args_t *a, mc_cp_comm_t t, char *err, size_t n)
{
    const int tp = a->tensor_model_parallel_size > 0 ? a->tensor_model_parallel_size : 1;
    const int heads = a->num_attention_heads / tp;
    const int groups =
        (a->group_query_attention ? a->num_query_groups : a->num_attention_heads) / tp;
    int size, p2p;
    mc_cp_levels(a, &size, &p2p);
    if ((t == MC_CP_A2A || t == MC_CP_ALLGATHER) && a->kv_channels % 8 != 0)
        return mc_errf(err, n,
                       "--cp-comm-type %s needs --kv-channels (%d) to be a multiple of 8 "
                       "(Transformer Engine's hidden size per attention head)",
                       mc_cp_comm_name(t), a->kv_channels);
    if (t == MC_CP_A2A) size = a->context_parallel_size;
    if ((t == MC_CP_A2A || t == MC_CP_A2A_P2P) && (heads % size != 0 || groups % size != 0))
        return mc_errf(err, n,
                       "--cp-comm-type %s scatters heads over %d ranks: the attention heads (%d) "
                       "and query groups (%d) of a tensor-parallel rank must be divisible by it",
                       mc_cp_comm_name(t), size, heads, groups);
    return 0;
}

/* The features Transformer Engine's context-parallel attention or Megatron refuse with it. */
static int features(const mc_args_t *a, char *err, size_t n)
{
    if (a->reset_attention_mask)
        return mc_errf(err, n,
                       "--reset-attention-mask is not supported with --context-parallel-size > 1 "
                       "(Transformer Engine's context-parallel attention takes no arbitrary mask)");
    if (strcmp(a->transformer_impl, "local") == 0)
        return mc_errf(err, n,
                       "--context-parallel-size > 1 needs Transformer Engine's attention "
                       "(Megatron's local attention asserts context_parallel_size == 1): drop "
                       "--transformer-impl local");
    const int tp = a->tensor_model_parallel_size > 0 ? a->tensor_model_parallel_size : 1;
    if (a->sequence_parallel && tp > 1 && (a->seq_length / a->context_parallel_size) % tp != 0)
        return mc_errf(err, n,
                       "--seq-length / --context-parallel-size (%d) must be divisible by "
                       "--tensor-model-parallel-size (%d) with --sequence-parallel",
                       a->seq_length / a->context_parallel_size, tp);
    return 0;
}

int mc_cp_validate(const mc_args_t *a, char *err, size_t n)
{
    const int cp = a->context_parallel_size, k = a->n_cp_comm_type;
    bool a2a_p2p = false;
    for (int i = 0; i < k; i++) a2a_p2p |= strcmp(a->cp_comm_type[i], "a2a+p2p") == 0;
    if (hierarchical(a, a2a_p2p, err, n)) return -1;
    if (cp <= 1) return 0;
    if (a->seq_length % (2 * cp) != 0)
        return mc_errf(err, n,
                       "--seq-length (%d) must be a multiple of 2 x --context-parallel-size (%d)",
                       a->seq_length, cp);
    if (k > 1 && k != a->num_layers)
        return mc_errf(
            err, n, "--cp-comm-type lists %d types: give one, or one per layer (--num-layers %d)",
            k, a->num_layers);
    for (int i = 0; i < k; i++) {
        const int t = mc_cp_comm_parse(a->cp_comm_type[i]);
        if (t < 0)
            return mc_errf(err, n,
                           "--cp-comm-type %s is not a communication type (p2p, a2a, all_gather "
                           "or a2a+p2p)",
                           a->cp_comm_type[i]);
        if (comm_shapes(a, (mc_cp_comm_t)t, err, n)) return -1;
    }
    return features(a, err, n);
}
