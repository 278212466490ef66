/* validate_args' optimizer rules: the learning rate and weight-decay schedule's flags, and
 * --optimizer muon's (what megatron-c's Muon does not do yet refused by name). Called by
 * cli/validate.c's rule table. */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "base/error.h"
#include "cli/validate_optim.h"

void mc_validate_optimizer(mc_args_t *a)
{
    if (a->min_lr > a->lr)
        mc_user_error("--min-lr (%g) must not exceed --lr (%g)", a->min_lr, a->lr);
    if (strcmp(a->weight_decay_incr_style, "constant") == 0) {
        if (a->start_weight_decay_set || a->end_weight_decay_set)
            mc_user_error(
                "--start-weight-decay and --end-weight-decay need "
                "--weight-decay-incr-style linear or cosine (constant uses --weight-decay)");
        a->start_weight_decay = a->end_weight_decay = a->weight_decay;
        return;
    }
    if (!a->start_weight_decay_set || !a->end_weight_decay_set)
        mc_user_error("--weight-decay-incr-style %s needs both --start-weight-decay and "
                      "--end-weight-decay",
                      a->weight_decay_incr_style);
    if (a->end_weight_decay < a->start_weight_decay)
        mc_user_error("--end-weight-decay (%g) must not be smaller than --start-weight-decay (%g)",
                      a->end_weight_decay, a->start_weight_decay);
}

/* --optimizer muon: emerging_optimizers' coefficient sets (muon_utils.NSCoeffT less "custom",
 * which Megatron cannot pass sets for), and what megatron-c's Muon does not do yet. */
void mc_validate_muon(const mc_args_t *a)
{
    if (strcmp(a->optimizer, "muon") != 0) return;
    static const char *const types[] = {"simple", "quintic",    "polar_express", "cans",
                                        "aol",    "deepseekv4", "cubic5"};
    bool known = false;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        known |= strcmp(a->muon_coefficient_type, types[i]) == 0;
    if (!known)
        mc_user_error("--muon-coefficient-type %s is not a Newton-Schulz coefficient type (use "
                      "simple, quintic, polar_express, cans, aol, deepseekv4 or cubic5)",
                      a->muon_coefficient_type);
    if (a->muon_num_ns_steps < 1)
        mc_user_error("--muon-num-ns-steps must be at least 1, got %" PRId64, a->muon_num_ns_steps);
    if (strcmp(a->muon_coefficient_type, "cubic5") == 0 && a->muon_num_ns_steps != 5)
        mc_user_error("--muon-coefficient-type cubic5 is a fixed 5-step schedule (use "
                      "--muon-num-ns-steps 5)");
    if (a->fp16)
        mc_user_error("--optimizer muon does not support --fp16 (use --bf16, as Megatron)");
    if (a->use_distributed_optimizer)
        mc_user_error("--optimizer muon with --use-distributed-optimizer (Megatron's layer-wise "
                      "distributed optimizer) is not implemented yet (leave it out)");
    if (a->tensor_model_parallel_size > 1 || a->expert_tensor_parallel_size > 1)
        mc_user_error("--optimizer muon with tensor parallelism (--muon-tp-mode) is not "
                      "implemented yet (use --tensor-model-parallel-size 1)");
    if (a->use_mup)
        mc_user_error("--optimizer muon with --use-mup (its Muon-managed matrix groups) is not "
                      "implemented yet (leave --use-mup out)");
    if (a->save[0] || a->load[0])
        mc_user_error("--optimizer muon with --save or --load (the momentum buffers in Megatron's "
                      "checkpoint) is not implemented yet (leave them out)");
}
