/* Megatron's FLOPs count of a GPT, dense or mixture-of-experts (model/flops.h). */
#include "model/flops.h"

/* The MLP term's bracket, Python ints: dense layers' ffn*e, MoE layers' routed experts
 * (moe_ffn*topk*e) and shared experts (shared*e), each times its layer count. A dense model's
 * is ffn*e*L. */
static int64_t mlp_widths(const mc_gpt_config_t *c, int64_t e)
{
    const int64_t L = c->num_layers, ffn = c->ffn > 0 ? c->ffn : 4 * (int64_t)c->hidden;
    if (!c->moe.num_experts) return ffn * e * L;
    int64_t n_moe = 0;
    for (int64_t i = 0; i < L && i < MC_MOE_MAX_LAYERS; i++) n_moe += c->moe.layer[i];
    const int64_t moe_ffn = c->moe.ffn > 0 ? c->moe.ffn : ffn;
    return ffn * e * (L - n_moe) + moe_ffn * c->moe.router.topk * e * n_moe +
           (int64_t)c->moe.shared_ffn * e * n_moe;
}

double mc_gpt_flops(const mc_gpt_config_t *c, int64_t batch_size)
{
    /* the whole sequence (args.seq_length), not a context-parallel rank's share of it */
    const int64_t h = c->hidden, L = c->num_layers, heads = c->heads;
    const int64_t s = c->seq_full > 0 ? c->seq_full : c->seq;
    const int64_t kv_ch = c->head_dim > 0 ? c->head_dim : h / heads;
    const int64_t groups = c->groups > 0 ? c->groups : heads;
    const int64_t V = c->vocab;
    const int64_t e = c->swiglu ? 3 : 2;
    const int64_t q = kv_ch * heads, k = kv_ch * groups, v = kv_ch * groups;

    /* Python ints are exact; the first float appears at the causal "/ 2". */
    const int64_t mlp = 3 * 2 * h * mlp_widths(c, e);
    const double attn =
        (double)(3 * 2) * ((double)(h * (q + k + v)) + (double)(q * s) / 2 * 2 + (double)(q * h));
    const double self_attn = attn * (double)L;
    const int64_t logit = 3 * 2 * h * V * 1;
    const double inner = (double)mlp + self_attn + (double)logit;
    return (double)(batch_size * s) * inner;
}
