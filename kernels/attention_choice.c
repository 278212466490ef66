/* Which attention runs: kernels/attention_choice.h. */
#include "kernels/attention_choice.h"

#include <stdio.h>
#include <string.h>

static const char *const NAMES[] = {"auto", "flash", "fused", "unfused", "local"};

mc_attention_backend_t mc_attention_backend_of(const char *name)
{
    for (int i = 0; i < (int)(sizeof(NAMES) / sizeof(NAMES[0])); i++)
        if (name && strcmp(name, NAMES[i]) == 0) return (mc_attention_backend_t)i;
    return MC_ATTENTION_AUTO;
}

const char *mc_attention_backend_name(mc_attention_backend_t b)
{
    return (unsigned)b < sizeof(NAMES) / sizeof(NAMES[0]) ? NAMES[b] : "?";
}

int mc_attention_backend_megatron(mc_attention_backend_t b)
{
    return b == MC_ATTENTION_AUTO ? 5 : (int)b;
}

int mc_attention_backend_of_megatron(int value)
{
    if (value == 5) return MC_ATTENTION_AUTO;
    return value >= MC_ATTENTION_FLASH && value <= MC_ATTENTION_LOCAL ? value : -1;
}

void mc_attention_spec_from_args(const mc_args_t *a, mc_attention_spec_t *s)
{
    memset(s, 0, sizeof(*s));
    const int tp = a->tensor_model_parallel_size > 0 ? a->tensor_model_parallel_size : 1;
    const int groups = a->num_query_groups > 0 ? a->num_query_groups : a->num_attention_heads;
    s->backend = mc_attention_backend_of(a->attention_backend);
    s->dt = a->bf16 ? MC_DT_BF16 : a->fp16 ? MC_DT_F16 : MC_DT_F32; /* model/params.c's rule */
    s->S = a->seq_length;
    s->B = a->micro_batch_size;
    s->B_eval = a->eval_micro_batch_size > 0 ? a->eval_micro_batch_size : a->micro_batch_size;
    s->NH = a->num_attention_heads / tp;
    s->NG = groups / tp;
    s->HD = a->kv_channels;
    s->dropout = (float)a->attention_dropout;
    s->segments = a->reset_attention_mask;
    s->cp = a->context_parallel_size > 1 ? a->context_parallel_size : 1;
}

const char *mc_attention_cudnn_refusal(const mc_attention_spec_t *s, int cc_major, char *buf,
                                       size_t n)
{
    if (s->backend == MC_ATTENTION_LOCAL || s->backend == MC_ATTENTION_UNFUSED) {
        snprintf(buf, n, "--attention-backend %s asks for them",
                 mc_attention_backend_name(s->backend));
        return buf;
    }
    if (s->dt != MC_DT_BF16 && s->dt != MC_DT_F16) {
        snprintf(buf, n, "%s tensors (cuDNN's fused attention takes bf16 and fp16)",
                 mc_dtype_name(s->dt));
        return buf;
    }
    if (s->segments) {
        snprintf(buf, n,
                 "--reset-attention-mask's document masks (cuDNN's causal pattern has no "
                 "per-document mask)");
        return buf;
    }
    /* the frontend's support matrix: d <= 256 on Hopper and Blackwell, 128 on Ampere and Ada;
     * the Graph API's patterns: a multiple of 8 */
    const int max_hd = cc_major >= 9 ? 256 : 128;
    if (s->HD % 8 != 0 || s->HD > max_hd) {
        snprintf(buf, n,
                 "head dim %d (cuDNN takes multiples of 8 up to %d on compute capability %d)",
                 s->HD, max_hd, cc_major);
        return buf;
    }
    if (cc_major < 8) {
        snprintf(buf, n, "compute capability %d (cuDNN's fused attention needs 8.0 or newer)",
                 cc_major);
        return buf;
    }
    if (s->NG <= 0 || s->NH % s->NG != 0) {
        snprintf(buf, n, "%d heads over %d groups", s->NH, s->NG);
        return buf;
    }
    return NULL;
}

static size_t up256(size_t x) { return (x + 255) / 256 * 256; }

void mc_attention_cudnn_scratch(const mc_attention_spec_t *s, int B, size_t ws,
                                mc_attention_scratch_t *out)
{
    const size_t rows = (size_t)B * (size_t)s->NH * (size_t)s->S;
    const size_t heads = rows * (size_t)s->HD * mc_dtype_size(s->dt);
    const bool gqa = s->NG != s->NH;
    out->rng = up256(ws);
    out->sum = out->rng + 256;
    out->q = out->sum + up256(rows * sizeof(float));
    out->dq = out->q + (gqa ? up256(heads) : 0);
    out->bytes = out->dq + (gqa ? up256(heads) : 0);
}

size_t mc_attention_cudnn_workspace_model(const mc_attention_spec_t *s, int B)
{
    return (size_t)B * (size_t)s->NH * (size_t)s->S * (size_t)s->HD * sizeof(float);
}
