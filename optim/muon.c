#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "optim/muon.h"

/* emerging_optimizers' muon_utils._COEFFICIENT_SETS; polar_express, cans and deepseekv4 repeat
 * their last set past the list, the others cycle. */
typedef struct {
    const char *name;
    int n;
    bool repeat_last;
    float abc[10][3];
} coeffs_t;

static const coeffs_t COEFFS[] = {
    {"simple", 1, false, {{3.4445f, -4.7750f, 2.0315f}}},
    {"quintic",
     5,
     false,
     {{4.0848f, -6.8946f, 2.9270f},
      {3.9505f, -6.3029f, 2.6377f},
      {3.7418f, -5.5913f, 2.3037f},
      {2.8769f, -3.1427f, 1.2046f},
      {2.8366f, -3.0525f, 1.2012f}}},
    {"polar_express",
     8,
     true,
     {{8.2051f, -22.9019f, 16.4607f},
      {4.0664f, -2.8612f, 0.5184f},
      {3.9096f, -2.8234f, 0.5250f},
      {3.2856f, -2.4153f, 0.4853f},
      {2.2779f, -1.6198f, 0.3985f},
      {1.8726f, -1.2307f, 0.3585f},
      {1.8564f, -1.2132f, 0.3568f},
      {1.8750f, -1.2500f, 0.3750f}}},
    {"cans",
     5,
     true,
     {{8.4703f, -25.1081f, 18.6293f},
      {4.1828f, -3.1087f, 0.5806f},
      {3.9619f, -2.9541f, 0.5630f},
      {3.2866f, -2.4647f, 0.5074f},
      {2.2737f, -1.6447f, 0.4162f}}},
    {"aol",
     4,
     false,
     {{4.0098f, -7.0585f, 2.4635f},
      {3.4585f, -5.5479f, 2.5959f},
      {2.7573f, -3.2939f, 1.4254f},
      {2.7215f, -3.0494f, 1.3169f}}},
    {"deepseekv4",
     10,
     true,
     {{3.4445f, -4.7750f, 2.0315f},
      {3.4445f, -4.7750f, 2.0315f},
      {3.4445f, -4.7750f, 2.0315f},
      {3.4445f, -4.7750f, 2.0315f},
      {3.4445f, -4.7750f, 2.0315f},
      {3.4445f, -4.7750f, 2.0315f},
      {3.4445f, -4.7750f, 2.0315f},
      {3.4445f, -4.7750f, 2.0315f},
      {2.0f, -1.5f, 0.5f},
      {2.0f, -1.5f, 0.5f}}},
    {"cubic5",
     5,
     false,
     {{3.3656576f, -3.3420992f, 0.0f},
      {2.5744352f, -1.4957376f, 0.0f},
      {2.5368962f, -1.4312570f, 0.0f},
      {2.4418906f, -1.2764040f, 0.0f},
      {2.2230472f, -0.9630650f, 0.0f}}},
};

static const coeffs_t *coeffs_named(const char *name)
{
    for (size_t i = 0; i < sizeof(COEFFS) / sizeof(COEFFS[0]); i++)
        if (strcmp(COEFFS[i].name, name) == 0) return &COEFFS[i];
    return NULL;
}

double mc_muon_scale(long rows, long cols, mc_muon_scale_t mode)
{
    switch (mode) {
    case MC_MUON_SHAPE_SCALING: return sqrt(fmax(1.0, (double)rows / (double)cols));
    case MC_MUON_UNIT_RMS_NORM: return sqrt((double)rows / (double)cols);
    default: return sqrt((double)(rows > cols ? rows : cols));
    }
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) mc_fatal("out of host memory");
    return p;
}

/* x rounded to bf16 and back (tmp: n halves), under --muon-fp32-matmul-prec medium. */
static void round_bf16(const mc_backend_t *be, float *x, uint16_t *tmp, long n, bool on)
{
    if (!on) return;
    be->convert(be, tmp, MC_DT_BF16, x, MC_DT_F32, n);
    be->convert(be, x, MC_DT_F32, tmp, MC_DT_BF16, n);
}

/* The iterations on the wide [m, n] X (m <= n): A = X X^T, B = b A + c A A, X = a X + B X. */
static void ns_iterate(const mc_backend_t *be, float *X, int m, int n, const coeffs_t *k, int steps,
                       bool bf16)
{
    const long mn = (long)m * n, mm = (long)m * m;
    float *A = xmalloc((size_t)mm * sizeof(float)), *B = xmalloc((size_t)mm * sizeof(float));
    float *Xn = xmalloc((size_t)mn * sizeof(float));
    uint16_t *tmp = xmalloc((size_t)(mn > mm ? mn : mm) * sizeof(uint16_t));
    round_bf16(be, X, tmp, mn, bf16);
    for (int s = 0; s < steps; s++) {
        const int j = k->repeat_last ? (s < k->n ? s : k->n - 1) : s % k->n;
        const float a = k->abc[j][0], b = k->abc[j][1], c = k->abc[j][2];
        be->gemm(be, 0, 1, m, m, n, 1.0f, X, n, X, n, 0.0f, A, m);
        round_bf16(be, A, tmp, mm, bf16);
        memcpy(Xn, X, (size_t)mn * sizeof(float));
        if (c != 0.0f) {
            memcpy(B, A, (size_t)mm * sizeof(float));
            be->gemm(be, 0, 0, m, m, m, c, A, m, A, m, b, B, m);
            round_bf16(be, B, tmp, mm, bf16);
            be->gemm(be, 0, 0, m, n, m, 1.0f, B, m, X, n, a, Xn, n);
        } else {
            be->gemm(be, 0, 0, m, n, m, b, A, m, X, n, a, Xn, n);
        }
        round_bf16(be, Xn, tmp, mn, bf16);
        memcpy(X, Xn, (size_t)mn * sizeof(float));
    }
    free(A), free(B), free(Xn), free(tmp);
}

static void transpose(float *dst, const float *src, int rows, int cols)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) dst[(long)c * rows + r] = src[(long)r * cols + c];
}

bool mc_newton_schulz(const mc_backend_t *be, float *x, int rows, int cols,
                      const mc_muon_config_t *c)
{
    const coeffs_t *k = coeffs_named(c->coefficients);
    if (!k) return false;
    const long len = (long)rows * cols;
    const bool tr = rows > cols; /* whiten the smaller dimension */
    const int m = tr ? cols : rows, n = tr ? rows : cols;
    float *X = xmalloc((size_t)len * sizeof(float));
    if (tr) transpose(X, x, rows, cols);
    else memcpy(X, x, (size_t)len * sizeof(float));
    /* torch.nn.functional.normalize(x, p=2, dim=(-2, -1), eps=1e-15) */
    double ss = 0;
    for (long i = 0; i < len; i++) ss += (double)X[i] * X[i];
    const float norm = fmaxf((float)sqrt(ss), 1e-15f);
    for (long i = 0; i < len; i++) X[i] /= norm;
    ns_iterate(be, X, m, n, k, c->ns_steps, c->bf16_matmul);
    if (tr) transpose(x, X, m, n);
    else memcpy(x, X, (size_t)len * sizeof(float));
    free(X);
    return true;
}

bool mc_muon_manages(const mc_param_t *p) { return p->ndim == 2 && !p->embedding_or_output; }

int mc_muon_init(mc_adam_t *opt, const mc_muon_config_t *c)
{
    const mc_gpt_t *m = opt->model;
    mc_muon_t *u = calloc(1, sizeof(*u));
    if (!u) mc_fatal("out of host memory");
    u->c = *c;
    u->owns = calloc((size_t)(m->n_params ? m->n_params : 1), sizeof(bool));
    u->buf_off = calloc((size_t)(m->n_params ? m->n_params : 1), sizeof(long));
    if (!u->owns || !u->buf_off) mc_fatal("out of host memory");
    for (int i = 0; i < opt->n_segs; i++) {
        const mc_opt_seg_t *s = &opt->segs[i];
        const mc_param_t *p = &m->params[s->param];
        if (!mc_muon_manages(p) || s->len != p->numel) continue; /* whole parameters only */
        u->owns[s->param] = true;
        u->buf_off[s->param] = u->len;
        u->len += p->numel;
    }
    u->momentum = calloc((size_t)(u->len ? u->len : 1), sizeof(float));
    opt->muon = u;
    return u->momentum ? 0 : -1;
}

void mc_muon_free(mc_adam_t *opt)
{
    mc_muon_t *u = opt->muon;
    if (!u) return;
    free(u->owns), free(u->buf_off), free(u->momentum), free(u);
    opt->muon = NULL;
}

/* torch.lerp(start, end, w) in float: start + w (end - start), or end - (end - start)(1 - w) for
 * |w| >= 0.5 (ATen's form). */
static inline float lerp(float start, float end, float w)
{
    return fabsf(w) < 0.5f ? start + w * (end - start) : end - (end - start) * (1.0f - w);
}

/* The scaled orthogonalised update of the [rows, cols] u in place (torch's orth * scale * extra:
 * two float products). */
static void orthogonalize(const mc_backend_t *be, float *u, int rows, int cols,
                          const mc_muon_config_t *c)
{
    if (!mc_newton_schulz(be, u, rows, cols, c))
        mc_fatal("unknown Newton-Schulz coefficient type %s", c->coefficients);
    const float scale = (float)mc_muon_scale(rows, cols, c->scale), extra = (float)c->extra_scale;
    for (long i = 0; i < (long)rows * cols; i++) u[i] = u[i] * scale * extra;
}

/* TensorParallelMuon.orthogonalize with split_qkv: linear_qkv's rows are query groups of [q rows;
 * k rows; v rows]; q, k and v (each over every group) are orthogonalised on their own. */
static void orthogonalize_qkv(const mc_backend_t *be, const mc_gpt_config_t *g, float *u, int cols,
                              const mc_muon_config_t *c)
{
    const int ng = g->groups, kv = g->head_dim, q = g->heads / ng * kv, per = q + 2 * kv;
    const int size[3] = {q, kv, kv}, at[3] = {0, q, q + kv};
    for (int j = 0; j < 3; j++) {
        const int rows = ng * size[j];
        float *piece = xmalloc((size_t)rows * cols * sizeof(float));
        for (int r = 0; r < rows; r++)
            memcpy(piece + (long)r * cols,
                   u + ((long)(r / size[j]) * per + at[j] + r % size[j]) * cols,
                   (size_t)cols * sizeof(float));
        orthogonalize(be, piece, rows, cols, c);
        for (int r = 0; r < rows; r++)
            memcpy(u + ((long)(r / size[j]) * per + at[j] + r % size[j]) * cols,
                   piece + (long)r * cols, (size_t)cols * sizeof(float));
        free(piece);
    }
}

/* OrthogonalizedOptimizer.step for one parameter (segment s). */
static void step_one(mc_adam_t *opt, const mc_opt_seg_t *s, double lr, double wd, float *u)
{
    const mc_gpt_t *m = opt->model;
    const mc_muon_t *mu = opt->muon;
    const mc_param_t *p = &m->params[s->param];
    const mc_muon_config_t *c = &mu->c;
    float *w = mc_opt_param(opt, s), *g = mc_opt_grad(opt, s),
          *buf = mu->momentum + mu->buf_off[s->param];
    const long n = s->len;
    const double wd_p = p->no_wd ? 0.0 : wd;
    if (wd_p != 0.0) { /* p.add_(p, alpha=-weight_decay * lr) */
        const float alpha = (float)(-wd_p * lr);
        for (long i = 0; i < n; i++) w[i] = w[i] + alpha * w[i];
    }
    const float keep = (float)(1.0 - c->momentum), mom = (float)c->momentum;
    for (long i = 0; i < n; i++) {
        buf[i] = lerp(buf[i], g[i], keep);
        u[i] = c->nesterov ? lerp(g[i], buf[i], mom) : buf[i];
    }
    const int rows = (int)p->local[0], cols = (int)p->local[1];
    if (c->split_qkv && p->kind == MC_PK_QKV_W) orthogonalize_qkv(m->be, &m->cfg, u, cols, c);
    else orthogonalize(m->be, u, rows, cols, c);
    const float alpha = (float)(-lr); /* p.add_(orth_grad, alpha=-lr) */
    for (long i = 0; i < n; i++) w[i] = w[i] + alpha * u[i];
    if (opt->master) /* Megatron's _copy_main_params_to_model_params */
        m->be->convert(m->be, mc_gpt_param_at(m, s->off), m->cfg.dt, w, MC_DT_F32, n);
}

void mc_muon_step(mc_adam_t *opt, double lr, double wd, int first, int n, bool inside)
{
    const mc_muon_t *mu = opt->muon;
    long most = 0;
    for (int i = 0; i < opt->n_segs; i++)
        if (mu->owns[opt->segs[i].param] && opt->segs[i].len > most) most = opt->segs[i].len;
    float *u = xmalloc((size_t)most * sizeof(float));
    for (int i = 0; i < opt->n_segs; i++) {
        const mc_opt_seg_t *s = &opt->segs[i];
        if (mu->owns[s->param] && (s->param >= first && s->param < first + n) == inside)
            step_one(opt, s, lr, wd, u);
    }
    free(u);
}
