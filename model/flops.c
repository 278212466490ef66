/* Megatron's FLOPs count of a dense GPT (model/flops.h). */
#include "model/flops.h"

double mc_gpt_flops(const mc_gpt_config_t *c, int64_t batch_size)
{
    const int64_t h = c->hidden, L = c->num_layers, s = c->seq, heads = c->heads;
    const int64_t kv_ch = c->head_dim > 0 ? c->head_dim : h / heads;
    const int64_t groups = c->groups > 0 ? c->groups : heads;
    const int64_t ffn = c->ffn > 0 ? c->ffn : 4 * h;
    const int64_t V = c->vocab;
    const int64_t e = c->swiglu ? 3 : 2;
    const int64_t q = kv_ch * heads, k = kv_ch * groups, v = kv_ch * groups;

    /* Python ints are exact; the first float appears at the causal "/ 2". */
    const int64_t mlp = 3 * 2 * h * (ffn * e * L);
    const double attn =
        (double)(3 * 2) * ((double)(h * (q + k + v)) + (double)(q * s) / 2 * 2 + (double)(q * h));
    const double self_attn = attn * (double)L;
    const int64_t logit = 3 * 2 * h * V * 1;
    const double inner = (double)mlp + self_attn + (double)logit;
    return (double)(batch_size * s) * inner;
}
