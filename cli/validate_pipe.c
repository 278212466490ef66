/* The pipeline's optional overlaps: see validate_pipe.h. */
#include "cli/validate_pipe.h"

#include <string.h>

#include "base/error.h"

/* arguments.validate_args, in its order */
static void param_gather_with_step(const mc_args_t *a)
{
    if (!a->overlap_param_gather_with_optimizer_step) return;
    if (!a->use_distributed_optimizer)
        mc_user_error("--overlap-param-gather-with-optimizer-step only supported with distributed "
                      "optimizer (add --use-distributed-optimizer)");
    if (!a->overlap_param_gather)
        mc_user_error("Must use --overlap-param-gather-with-optimizer-step with "
                      "--overlap-param-gather");
    if (a->virtual_pipeline_model_parallel_size <= 1)
        mc_user_error("--overlap-param-gather-with-optimizer-step only supported with interleaved "
                      "pipeline parallelism (give --num-layers-per-virtual-pipeline-stage or "
                      "--num-virtual-stages-per-pipeline-rank)");
    if (strcmp(a->ckpt_format, "torch") != 0)
        mc_user_error("--overlap-param-gather-with-optimizer-step not supported with distributed "
                      "checkpointing yet (use --ckpt-format torch)");
}

void mc_validate_pipeline_overlaps(mc_args_t *a)
{
    param_gather_with_step(a);
    /* ModelParallelConfig.__post_init__, in its order */
    if (a->defer_embedding_wgrad_compute && a->pipeline_model_parallel_size == 1)
        mc_user_error("--defer-embedding-wgrad-compute: Cannot defer embedding wgrad compute when "
                      "pipeline model parallel is not used (give --pipeline-model-parallel-size > "
                      "1, or drop the flag)");
    if (a->defer_embedding_wgrad_compute && !a->gradient_accumulation_fusion)
        mc_user_error("--defer-embedding-wgrad-compute: Cannot defer embedding wgrad compute when "
                      "gradient accumulation fusion is not used (drop "
                      "--no-gradient-accumulation-fusion, or the flag)");
    if (a->defer_embedding_wgrad_compute && a->wgrad_deferral_limit < 0)
        mc_user_error("--wgrad-deferral-limit: Wgrad deferral limit should be greater than or "
                      "equal to 0 when it is enabled! (got %d; 0 defers every microbatch)",
                      a->wgrad_deferral_limit);
    /* batch_p2p_comm = not overlap_p2p_comm, which validate_args turned off without virtual
     * pipeline stages */
    if (a->overlap_p2p_comm_warmup_flush && !a->overlap_p2p_comm)
        mc_user_error("--overlap-p2p-communication-warmup-flush: Pipeline parallel communication "
                      "overlapping in warmup and flush is only compatible with overlap_p2p_comm "
                      "but not batch_p2p_comm (it needs the interleaved schedule, "
                      "--num-layers-per-virtual-pipeline-stage or "
                      "--num-virtual-stages-per-pipeline-rank, without "
                      "--no-overlap-p2p-communication)");
}
