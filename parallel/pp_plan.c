/* The pipeline plan: see pp_plan.h. Checks and messages follow Megatron's
 * (arguments.py:validate_args, schedules.py, TransformerConfig.__post_init__). */
#include "parallel/pp_plan.h"

#include "base/error.h"

int mc_pp_group_size(const mc_pp_config_t *cfg)
{
    return cfg->group_size > 0 ? cfg->group_size : cfg->pp_size;
}

int mc_pp_validate(const mc_pp_config_t *cfg, char *err, size_t errn)
{
    const int pp = cfg->pp_size, vpp = cfg->vpp, M = cfg->num_microbatches;
    if (err && errn) err[0] = '\0';
    if (pp < 1)
        return mc_errf(err, errn, "pipeline-model-parallel size (%d) must be at least 1", pp);
    if (cfg->pp_rank < 0 || cfg->pp_rank >= pp)
        return mc_errf(err, errn, "pipeline rank %d is outside [0, %d)", cfg->pp_rank, pp);
    if (vpp < 1) return mc_errf(err, errn, "number of model chunks (%d) must be at least 1", vpp);
    if (M < 1) return mc_errf(err, errn, "number of microbatches (%d) must be at least 1", M);
    /* ModelParallelConfig.__post_init__ (batch_p2p_comm = not overlap_p2p_comm) */
    if (cfg->overlap_warmup_flush && !cfg->overlap_p2p_comm)
        return mc_errf(err, errn,
                       "Pipeline parallel communication overlapping in warmup and flush is only "
                       "compatible with overlap_p2p_comm but not batch_p2p_comm.");
    if (vpp > 1) {
        /* arguments.py:validate_args */
        if (cfg->overlap_p2p_comm && pp <= 1)
            return mc_errf(err, errn,
                           "When interleaved schedule is used, pipeline-model-parallel "
                           "size should be greater than 1");
        if (!cfg->overlap_p2p_comm && pp <= 2)
            return mc_errf(
                err, errn,
                "When interleaved schedule is used and p2p communication overlap is "
                "disabled, pipeline-model-parallel size should be greater than 2 to avoid "
                "having multiple p2p sends and recvs between same 2 ranks per "
                "communication batch");
        /* forward_backward_pipelining_with_interleaving (ValueError, then RuntimeError) */
        const int G = mc_pp_group_size(cfg);
        if (G > M || G < pp)
            return mc_errf(err, errn,
                           "The number of contiguous micro-batches in a virtual pipeline "
                           "stage should range in [PP=%d , M=%d]",
                           pp, M);
        const int rem = M % G;
        if (rem > 0 && rem < pp)
            return mc_errf(
                err, errn,
                "The remainder of M (the total micro-batches) divided by N (number of "
                "contiguous micro-batches in a virtual pipeline stage) should be 0, or "
                "larger than or equal to the pipeline-parallel size, but it is %d. "
                "Otherwise, it introduces dependency bubbles in the pipeline and reduces "
                "throughput.",
                rem);
    } else if (pp > 1 && cfg->overlap_p2p_comm) {
        /* forward_backward_pipelining_without_interleaving; validate_args turns the flag off
         * without VPP before it gets here. */
        return mc_errf(err, errn,
                       "Non-interleaved pipeline parallelism does not support overlapping "
                       "p2p communication");
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Layer placement (Megatron-LM main, transformer_block.py get_num_layers_to_build and
 * transformer_layer.py get_transformer_layer_offset; test/fixtures/megatron_pp_split.txt
 * records what they give)                                                                      */

/* The names of the account-for flags c sets, for messages ("" when none). */
static const char *accounted_flags(const mc_pp_layers_cfg_t *c)
{
    if (c->account_embedding && c->account_loss)
        return "--account-for-embedding-in-pipeline-split and "
               "--account-for-loss-in-pipeline-split";
    if (c->account_embedding) return "--account-for-embedding-in-pipeline-split";
    if (c->account_loss) return "--account-for-loss-in-pipeline-split";
    return "";
}

/* The standard split (get_num_layers_to_build's and get_transformer_layer_offset's else
 * branches, Megatron-LM main): with the account-for flags the embedding (loss) counts as one
 * more layer, which the first chunk of the first rank (the last chunk of the last rank) holds in
 * place of a transformer layer. */
static int standard_split(const mc_pp_layers_cfg_t *c, int pp_rank, int chunk, int *first_layer,
                          int *n_layers, char *err, size_t errn)
{
    const int pp = c->pp_size, vpp = c->vpp;
    const int L = c->num_layers + c->account_embedding + c->account_loss;
    const bool accounted = c->account_embedding || c->account_loss;
    if (L % pp) {
        if (!accounted)
            return mc_errf(err, errn,
                           "Number of layers should be divisible by the "
                           "pipeline-model-parallel size");
        return mc_errf(err, errn,
                       "number of layers (%d, the embedding or loss counted as a layer by %s) "
                       "must be divisible by the pipeline-model-parallel size",
                       L, accounted_flags(c));
    }
    if ((L / pp) % vpp) {
        if (!accounted)
            return mc_errf(err, errn,
                           "number of layers per pipeline rank (%d) must be divisible "
                           "by the virtual pipeline size (%d)",
                           L / pp, vpp);
        return mc_errf(err, errn,
                       "number of layers on each pipeline rank (%d, after %s) must be divisible "
                       "by the virtual pipeline size (%d)",
                       L / pp, accounted_flags(c), vpp);
    }
    const int per_chunk = L / pp / vpp;
    const bool holds_embedding = c->account_embedding && pp_rank == 0 && chunk == 0;
    const bool holds_loss = c->account_loss && pp_rank == pp - 1 && chunk == vpp - 1;
    /* per_chunk >= 1; only with pp = vpp = 1 does one chunk hold both (L + 2 counted, L built) */
    *n_layers = per_chunk - holds_embedding - holds_loss;
    *first_layer =
        chunk * (L / vpp) + pp_rank * per_chunk - (c->account_embedding && !holds_embedding);
    return 0;
}

/* --decoder-first/last-pipeline-num-layers: TransformerConfig.__post_init__'s uneven-PP checks
 * in their order and wording, get_num_layers_to_build and get_transformer_layer_offset. */
static int uneven_split(const mc_pp_layers_cfg_t *c, int pp_rank, int chunk, int *first_layer,
                        int *n_layers, char *err, size_t errn)
{
    const int L = c->num_layers, pp = c->pp_size, vpp = c->vpp;
    const int F = c->first_stage_layers, Ls = c->last_stage_layers;
    if (pp == 1)
        return mc_errf(err, errn,
                       "uneven first/last pipeline stages need "
                       "pipeline-model-parallel size > 1");
    int middle_stages = pp, middle_layers = L;
    if (F) {
        if (vpp > 1 && F % vpp)
            return mc_errf(err, errn,
                           "number of layers at first stage: %d must be divisible by "
                           "virtual pipeline parallel degree %d",
                           F, vpp);
        middle_layers -= F;
        middle_stages--;
    }
    if (Ls) {
        if (vpp > 1 && Ls % vpp)
            return mc_errf(err, errn,
                           "number of layers at last stage: %d must be divisible by "
                           "virtual pipeline parallel degree %d",
                           Ls, vpp);
        middle_layers -= Ls;
        middle_stages--;
    }
    if (middle_layers < 0 || (!middle_stages && middle_layers))
        return mc_errf(err, errn,
                       "decoder first/last pipeline num layers (%d, %d) do not add up to "
                       "num layers %d",
                       F, Ls, L);
    if (middle_stages && !middle_layers)
        return mc_errf(err, errn,
                       "Mismatch: 0 middle layers remaining but %d middle PP stages "
                       "available.",
                       middle_stages);
    if (middle_stages && middle_layers % middle_stages)
        return mc_errf(err, errn,
                       "number of layers at middle stage: %d must be divisible by the "
                       "middle pipeline model parallel size %d",
                       middle_layers, middle_stages);
    const int per_middle = middle_stages ? middle_layers / middle_stages : 0;
    if (middle_stages && vpp > 1 && per_middle % vpp)
        return mc_errf(err, errn,
                       "number of layers on each middle pipeline rank: %d must be "
                       "divisible by virtual pipeline parallel degree %d",
                       per_middle, vpp);

    int on_rank = per_middle;
    if (pp_rank == 0 && F) on_rank = F;
    if (pp_rank == pp - 1 && Ls) on_rank = Ls;
    *n_layers = on_rank / vpp;

    /* a "round" of chunk v holds the first rank's, every middle rank's and the last rank's
     * share of chunk v, in rank order. Without middle stages (pp 2, both counts) Megatron
     * divides by their number here under interleaving (a ZeroDivisionError); megatron-c runs
     * that split, each rank's layers in its chunks. */
    const int middle_rank = F ? pp_rank - 1 : pp_rank;
    const int f_chunk = F / vpp, l_chunk = Ls / vpp, m_chunk = middle_layers / vpp;
    const int round = f_chunk + m_chunk + l_chunk;
    if (pp_rank == 0) *first_layer = chunk * round;
    else
        *first_layer =
            chunk * round + f_chunk + middle_rank * (middle_stages ? m_chunk / middle_stages : 0);
    return 0;
}

int mc_pp_layers(const mc_pp_layers_cfg_t *c, int pp_rank, int chunk, int *first_layer,
                 int *n_layers, char *err, size_t errn)
{
    const int L = c->num_layers, pp = c->pp_size, vpp = c->vpp;
    if (err && errn) err[0] = '\0';
    if (L < 1 || pp < 1 || vpp < 1 || c->first_stage_layers < 0 || c->last_stage_layers < 0)
        return mc_errf(err, errn, "bad layer placement: %d layers, pp %d, vpp %d", L, pp, vpp);
    if (pp_rank < 0 || pp_rank >= pp || chunk < 0 || chunk >= vpp)
        return mc_errf(err, errn, "pipeline rank %d chunk %d is outside pp %d, vpp %d", pp_rank,
                       chunk, pp, vpp);
    const bool uneven = c->first_stage_layers || c->last_stage_layers;
    /* TransformerConfig.__post_init__ raises this before any other split check */
    if (uneven && (c->account_embedding || c->account_loss))
        return mc_errf(err, errn,
                       "--decoder-first/last-pipeline-num-layers cannot be set at the same time "
                       "with %s",
                       accounted_flags(c));
    return uneven ? uneven_split(c, pp_rank, chunk, first_layer, n_layers, err, errn)
                  : standard_split(c, pp_rank, chunk, first_layer, n_layers, err, errn);
}

mc_pp_config_t mc_pp_plan_schedule(const mc_pp_plan_t *p, int pp_rank, int num_microbatches,
                                   bool forward_only)
{
    const mc_pp_config_t c = {
        .pp_rank = pp_rank,
        .pp_size = p->layers.pp_size,
        .vpp = p->layers.vpp,
        .num_microbatches = num_microbatches,
        .group_size = p->group_size,
        .overlap_p2p_comm = p->layers.vpp > 1 && p->overlap_p2p_comm,
        .overlap_warmup_flush = p->layers.vpp > 1 && p->overlap_p2p_comm && p->overlap_warmup_flush,
        .forward_only = forward_only,
    };
    return c;
}
