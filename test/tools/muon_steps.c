/* Steps of megatron-c's Muon (optim/muon.h, with Adam for the other parameters) on a tiny
 * one-layer model with made-up gradients, printed for test/integration/muon_ref.py's PyTorch
 * reference:
 *   muon_steps STEPS NESTEROV(0|1) PREC(high|medium) COEFFS SCALE(spectral|...) SPLIT_QKV(0|1)
 * Lines: "P name rows cols qkv embedding_or_output no_wd" per parameter, then "H heads groups
 * head_dim", then "I <values>" (every parameter's initial values, in order), "G <values>" per step
 * (the gradients) and "F <values>" (the final values). lr 0.01, wd 0.1, momentum 0.9, Adam betas
 * (0.9, 0.95), eps 1e-8. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "optim/muon.h"

static void values(const char *tag, const float *x, long n)
{
    printf("%s", tag);
    for (long i = 0; i < n; i++) printf(" %.9g", x[i]);
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: muon_steps STEPS NESTEROV PREC COEFFS SCALE SPLIT_QKV\n");
        return 1;
    }
    mc_gpt_config_t c = {.num_layers = 1,
                         .hidden = 16,
                         .heads = 4,
                         .groups = 2,
                         .head_dim = 4,
                         .ffn = 32,
                         .seq = 8,
                         .max_batch = 1,
                         .vocab = 32,
                         .max_pos = 8,
                         .eps = 1e-5f,
                         .bias = true,
                         .act = MC_ACT_GELU_TANH,
                         .init_std = 0.2f,
                         .embedding_init_std = 0.2f,
                         .seed = 5,
                         .tp = 1,
                         .dt = MC_DT_F32,
                         .gdt = MC_DT_F32,
                         .n_chunks = 1};
    c.chunk[0] = (mc_chunk_cfg_t){.first_layer = 0, .n_layers = 1, .pre = true, .post = true};
    c.slots[0] = 1;
    static mc_gpt_t m;
    mc_gpt_build_params(&m, &c);
    if (mc_gpt_alloc(&m, mc_backend_cpu()) != 0) return 1;
    mc_gpt_init_params(&m);
    mc_optim_config_t oc = {.adam_beta1 = 0.9, .adam_beta2 = 0.95, .adam_eps = 1e-8};
    oc.muon = (mc_muon_config_t){.on = true,
                                 .momentum = 0.9,
                                 .extra_scale = 1.0,
                                 .nesterov = atoi(argv[2]) != 0,
                                 .split_qkv = atoi(argv[6]) != 0,
                                 .bf16_matmul = strcmp(argv[3], "medium") == 0,
                                 .ns_steps = 5};
    snprintf(oc.muon.coefficients, sizeof(oc.muon.coefficients), "%s", argv[4]);
    oc.muon.scale = strcmp(argv[5], "unit_rms_norm") == 0   ? MC_MUON_UNIT_RMS_NORM
                    : strcmp(argv[5], "shape_scaling") == 0 ? MC_MUON_SHAPE_SCALING
                                                            : MC_MUON_SPECTRAL;
    mc_opt_seg_t *segs;
    int n;
    long len;
    mc_opt_segments_full(&m, &segs, &n, &len);
    static mc_adam_t opt;
    if (mc_adam_init(&opt, &m, &oc, segs, n, len) != 0) return 1;
    for (int i = 0; i < m.n_params; i++) {
        const mc_param_t *p = &m.params[i];
        printf("P %s %ld %ld %d %d %d\n", p->name, (long)p->local[0],
               (long)(p->ndim == 2 ? p->local[1] : 0), p->kind == MC_PK_QKV_W,
               p->embedding_or_output, p->no_wd);
    }
    printf("H %d %d %d\n", c.heads, c.groups, c.head_dim);
    float *w = m.param_buf, *g = m.grad_buf;
    values("I", w, m.n_elems);
    for (int s = 0, steps = atoi(argv[1]); s < steps; s++) {
        for (long i = 0; i < m.n_elems; i++) g[i] = 0.1f * sinf(0.37f * (float)i + (float)s * 1.7f);
        values("G", g, m.n_elems);
        mc_adam_step(&opt, 0.01, -1, 0.1);
    }
    values("F", w, m.n_elems);
    mc_adam_free(&opt);
    mc_gpt_free(&m);
    return 0;
}
