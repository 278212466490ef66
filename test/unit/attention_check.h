/* Attention cases for checking a fused attention against the CPU backend's: shared by
 * test_attention_tiled (the host model of the CUDA kernels) and test/gpu/test_gpu_attention
 * (the kernels), so both are held to the same inputs and the same tolerances. */
#ifndef MC_TEST_ATTENTION_CHECK_H
#define MC_TEST_ATTENTION_CHECK_H

#include <stdint.h>

#include "kernels/backend.h"

typedef struct {
    mc_dtype_t dt;
    int S, B, NH, HD;
    int NG;                   /* query groups (grouped-query attention); 0: NH */
    int head_offset, NH_full; /* this rank's heads among NH_full (tensor parallelism) */
    int dropout;              /* dropout on the probabilities (att_dropout) */
    int segments;             /* 0: none, 1: random documents (--reset-attention-mask), 2: all equal */
    int masked_dominant;      /* every visible score far below -10000: the masked keys carry the
                               * probability (scale 0.5 then, not 1/sqrt(HD)) */
    float qk_range;           /* q and k uniform in [-r, r] (scores up to about r^2 sqrt(HD)) */
} att_case_t;

/* A case's inputs and the CPU backend's results. 16-bit tensors are host buffers of dt; every
 * tensor also comes as fp32 values (x32). */
typedef struct {
    att_case_t c;
    float scale;
    mc_dropout_t d;   /* p = 0 without dropout */
    int32_t *seg;     /* [B, S] or NULL */
    long nqkv, nout;
    void *qkv, *dout; /* inputs of type dt */
    float *qkv32, *dout32;
    void *out, *dqkv; /* the CPU backend's results, type dt */
    float *out32, *dqkv32;
    double *dqkv_bound; /* masked-dominant cases: [nqkv], the cancellation bound of each dQ and
                         * dK element (0 for dV), see att_tolerance; else NULL */
} att_ref_t;

/* The dropout of every case with dropout: p = 0.25, site ATTN_PROBS. */
extern const mc_dropout_t att_dropout;

/* The seed of a case's inputs, from all its fields: the host model and the GPU test give the
 * same case the same inputs. MC_ATT_SEED=n (default 0) moves every case to other inputs, to
 * try the tolerances there. */
uint64_t att_case_seed(const att_case_t *c);

/* The cases of the GPU test, by group; the host model runs them all too. */
enum {
    ATT_LENGTHS,         /* S around every kernel's tiles, and S = 1024 (640 emulated) */
    ATT_HEAD_DIMS,       /* the GPT head dims and dims padded to them, at a head offset */
    ATT_DROPOUT,         /* more heads and batch rows; odd S */
    ATT_SEGMENTS,        /* --reset-attention-mask */
    ATT_PEAKED,          /* scores up to about +-50 */
    ATT_MASKED_DOMINANT, /* the masked keys carry the probability */
    ATT_BITWISE,         /* all-equal segments (the GPU test also compares them with none) */
    ATT_GQA,             /* grouped-query attention: NG in {1 (MQA), 2} */
    ATT_GROUPS
};
#define ATT_CASES_MAX 48
/* Fills cases[ATT_CASES_MAX] with a group's cases; returns how many. */
int att_cases(int group, att_case_t *cases);

/* The case's query groups (NG, or NH when 0). */
static inline int att_ng(const att_case_t *c) { return c->NG ? c->NG : c->NH; }

/* Makes the inputs (deterministic in seed) and runs the CPU backend's forward and backward. */
void att_ref_make(att_ref_t *r, const att_case_t *c, uint64_t seed);
void att_ref_free(att_ref_t *r);
/* "bf16 S=130 B=2 NH=2 HD=80 h0=1/4 drop seg=1" for messages. */
const char *att_case_name(const att_case_t *c);

/* Tolerances against the CPU backend, for outputs (grad 0: out) or gradients (grad 1: dqkv):
 * |got - want| <= rtol |want| + max(atol max|want|, bound) with bound NULL (0) or
 * r->dqkv_bound. See attention_check.c for why these values. */
void att_tolerance(mc_dtype_t dt, int grad, double *rtol, double *atol);
/* Fails the test (naming the case, the tensor and the worst element) unless got is within the
 * tolerance of want; returns the worst err / allowed (<= 1 when it passes). */
double att_check(const char *what, const att_case_t *c, const float *got, const float *want, long n, int grad,
                 const double *bound);

#endif
