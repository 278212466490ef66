/* What every backend's MoE ops share (kernels/moe.h). */
#include "kernels/moe.h"

#include <math.h>

const char *mc_moe_router_unsupported(const mc_moe_router_t *r)
{
    if (r->num_experts < 1 || r->num_experts > MC_MOE_MAX_EXPERTS)
        return "the number of experts is outside 1..1024";
    if (r->topk < 1 || r->topk > r->num_experts || r->topk > MC_MOE_MAX_TOPK)
        return "top-k is outside 1..min(experts, 32)";
    if (r->group_topk > 0 &&
        (r->num_groups < 1 || r->num_groups > MC_MOE_MAX_GROUPS ||
         r->num_experts % r->num_groups != 0 || r->group_topk > r->num_groups ||
         r->topk > r->group_topk * (r->num_experts / r->num_groups)))
        return "group-limited routing with groups that do not divide the experts, or too few "
               "experts in the chosen groups";
    return 0;
}

long mc_moe_expert_capacity(long tokens, int num_experts, double capacity_factor)
{
    return (long)ceil(((double)tokens / (double)num_experts) * capacity_factor);
}
