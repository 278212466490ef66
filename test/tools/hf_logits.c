/* megatron-c's forward on given tokens, for test/integration/test_hf.sh's comparison with
 * transformers:
 *   hf_logits CKPT OUT VOCAB TOKEN...
 * loads CKPT (any layout, gathered whole as export-hf does), runs the model on the tokens (one
 * sequence, no dropout) on the CPU and writes the logits of the first VOCAB columns, [tokens,
 * VOCAB] float32 little-endian, to OUT. Exit status 0, or 2 with one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "ckpt/convert_int.h"
#include "comm/comm.h"
#include "kernels/device.h"
#include "model/gpt.h"
#include "train/train.h"

int main(int argc, char **argv)
{
    if (argc < 5) mc_user_error("usage: hf_logits CKPT OUT VOCAB TOKEN...");
    static mc_args_t a, r;
    mc_trainer_t whole, t;
    mc_cv_load_whole(argv[1], 0, &a, &whole);
    const int V = atoi(argv[3]), S = argc - 4;
    if (V < 1 || V > a.padded_vocab_size) mc_user_error("VOCAB %d: not in the model", V);
    r = a;
    r.seq_length = S;
    r.micro_batch_size = r.eval_micro_batch_size = r.global_batch_size = 1;
    r.num_microbatches = 1;
    r.hidden_dropout = r.attention_dropout = 0;
    mc_run_config_t cfg;
    mc_run_config(&cfg, &r);
    if (mc_trainer_init(&t, &r, &cfg, mc_backend_cpu(), mc_comm_single()) != 0)
        mc_user_error("cannot build the model");
    mc_gpt_t *m = &t.model;
    for (int i = 0; i < m->n_params; i++) {
        const mc_param_t *p = &m->params[i];
        const mc_param_t *q = mc_gpt_find_param(&whole.model, p->name);
        if (!q || q->numel != p->numel) mc_user_error("%s: not in the checkpoint", p->name);
        for (long e = 0; e < p->numel; e++)
            mc_store_f32(mc_gpt_param_at(m, p->offset), m->cfg.dt, e,
                         ((const float *)whole.model.param_buf)[q->offset + e]);
    }
    int32_t *tok = calloc((size_t)S, sizeof(int32_t)), *pos = calloc((size_t)S, sizeof(int32_t));
    float *mask = calloc((size_t)S, sizeof(float));
    for (int i = 0; i < S; i++) {
        tok[i] = atoi(argv[4 + i]);
        pos[i] = i;
        mask[i] = 1;
    }
    mc_microbatch_t mb = {.b = 1, .s = S, .tokens = tok, .labels = tok, .loss_mask = mask,
                          .positions = pos};
    double sum, cnt;
    mc_gpt_forward(m, &mb, 1, false, &sum, &cnt);
    const int PV = a.padded_vocab_size;
    float *out = malloc((size_t)S * V * sizeof(float));
    for (int s = 0; s < S; s++) /* [s, b, v] with b = 1 */
        for (int v = 0; v < V; v++)
            out[s * V + v] = mc_load_f32(m->slots[1][0].logits, m->cfg.dt, (long)s * PV + v);
    FILE *f = fopen(argv[2], "wb");
    if (!f || fwrite(out, sizeof(float), (size_t)S * V, f) != (size_t)S * V || fclose(f) != 0)
        mc_user_error("%s: cannot write", argv[2]);
    printf("loss %.6f over %d tokens\n", sum / cnt, S);
    free(out);
    free(tok);
    free(pos);
    free(mask);
    mc_trainer_free(&t);
    mc_trainer_free(&whole);
    mc_args_free(&a);
    return 0;
}
