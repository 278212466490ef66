/* The MCFX fixture reader: every committed fixture loads with the expected records, names,
 * shapes and dtypes, and damaged files are rejected with NULL and one line on stderr. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/unit/fixture.h"

static const char *FIXTURES[] = {"gpt_tied_bias.mcfx", "gpt_untied_nobias.mcfx",
                                 "train_tied_bias.mcfx", "train_untied_nobias.mcfx"};

/* ---------------------------------------------------------------------------------------- */
/* helpers                                                                                  */

static mc_fx_t *open_fixture(const char *file)
{
    mc_fx_t *fx = mc_fx_open(file);
    if (!fx) fail_msg("cannot load fixture %s (run `make fixtures`?)", file);
    return fx;
}

static int64_t cfg_int(const mc_fx_t *fx, const char *key)
{
    char name[128];
    snprintf(name, sizeof(name), "config.%s", key);
    const mc_fx_tensor_t *t = mc_fx_require(fx, name, MC_FX_I64, 1);
    assert_int_equal(t->ndim, 0);
    return ((const int64_t *)t->data)[0];
}

static double cfg_f64(const mc_fx_t *fx, const char *key)
{
    char name[128];
    snprintf(name, sizeof(name), "config.%s", key);
    const mc_fx_tensor_t *t = mc_fx_require(fx, name, MC_FX_F64, 1);
    assert_int_equal(t->ndim, 0);
    return ((const double *)t->data)[0];
}

/* Checks that record `name` exists with the given dtype and shape. */
static const mc_fx_tensor_t *expect(const mc_fx_t *fx, const char *name, int dtype, int ndim, ...)
{
    const mc_fx_tensor_t *t = mc_fx_get(fx, name);
    if (!t) fail_msg("record '%s' missing", name);
    if (t->dtype != dtype) fail_msg("record '%s': dtype %d, expected %d", name, t->dtype, dtype);
    if (t->ndim != ndim) fail_msg("record '%s': ndim %d, expected %d", name, t->ndim, ndim);
    va_list ap;
    va_start(ap, ndim);
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        int64_t want = va_arg(ap, int64_t);
        if (t->dims[d] != want)
            fail_msg("record '%s': dim %d is %lld, expected %lld", name, d, (long long)t->dims[d],
                     (long long)want);
        numel *= want;
    }
    va_end(ap);
    assert_int_equal(t->numel, numel);
    assert_true(((uintptr_t)t->data & 7) == 0);
    return t;
}

typedef struct {
    int64_t L, h, heads, ffn, s, mbs, M, V, Vpad, max_pos, bias, untied;
} cfg_t;

static cfg_t read_cfg(const mc_fx_t *fx)
{
    cfg_t c = {
        .L = cfg_int(fx, "num_layers"), .h = cfg_int(fx, "hidden_size"),
        .heads = cfg_int(fx, "num_attention_heads"), .ffn = cfg_int(fx, "ffn_hidden_size"),
        .s = cfg_int(fx, "seq_length"), .mbs = cfg_int(fx, "micro_batch_size"),
        .M = cfg_int(fx, "num_microbatches"), .V = cfg_int(fx, "vocab_size"),
        .Vpad = cfg_int(fx, "padded_vocab_size"), .max_pos = cfg_int(fx, "max_position_embeddings"),
        .bias = cfg_int(fx, "add_bias_linear"), .untied = cfg_int(fx, "untie_embeddings_and_output_weights"),
    };
    assert_true(c.h % c.heads == 0);
    assert_int_equal(c.Vpad % 128, 0);
    assert_true(c.Vpad >= c.V && c.Vpad - c.V < 128);
    assert_true(c.max_pos >= c.s);
    assert_float_equal(cfg_f64(fx, "norm_epsilon"), 1e-5, 1e-12);
    assert_int_equal(cfg_int(fx, "kv_channels"), c.h / c.heads);
    assert_int_equal(cfg_int(fx, "global_batch_size"), c.mbs * c.M);
    return c;
}

typedef struct {
    char name[96];
    int ndim;
    int64_t d0, d1;
} pshape_t;

/* Parameter names and shapes of a config, as in test/ref/gpt_ref.py:param_shapes. */
static int param_list(const cfg_t *c, pshape_t *out)
{
    int n = 0;
#define ADD(nd, a, b, ...)                                                                         \
    do {                                                                                           \
        snprintf(out[n].name, sizeof(out[n].name), __VA_ARGS__);                                   \
        out[n].ndim = nd, out[n].d0 = a, out[n].d1 = b, n++;                                       \
    } while (0)
    ADD(2, c->Vpad, c->h, "embedding.word_embeddings.weight");
    ADD(2, c->max_pos, c->h, "embedding.position_embeddings.weight");
    for (int i = 0; i < c->L; i++) {
        const char *p = "decoder.layers.";
        ADD(1, c->h, 0, "%s%d.input_layernorm.weight", p, i);
        ADD(1, c->h, 0, "%s%d.input_layernorm.bias", p, i);
        ADD(2, 3 * c->h, c->h, "%s%d.self_attention.linear_qkv.weight", p, i);
        if (c->bias) ADD(1, 3 * c->h, 0, "%s%d.self_attention.linear_qkv.bias", p, i);
        ADD(2, c->h, c->h, "%s%d.self_attention.linear_proj.weight", p, i);
        if (c->bias) ADD(1, c->h, 0, "%s%d.self_attention.linear_proj.bias", p, i);
        ADD(1, c->h, 0, "%s%d.pre_mlp_layernorm.weight", p, i);
        ADD(1, c->h, 0, "%s%d.pre_mlp_layernorm.bias", p, i);
        ADD(2, c->ffn, c->h, "%s%d.mlp.linear_fc1.weight", p, i);
        if (c->bias) ADD(1, c->ffn, 0, "%s%d.mlp.linear_fc1.bias", p, i);
        ADD(2, c->h, c->ffn, "%s%d.mlp.linear_fc2.weight", p, i);
        if (c->bias) ADD(1, c->h, 0, "%s%d.mlp.linear_fc2.bias", p, i);
    }
    ADD(1, c->h, 0, "decoder.final_layernorm.weight");
    ADD(1, c->h, 0, "decoder.final_layernorm.bias");
    if (c->untied) ADD(2, c->Vpad, c->h, "output_layer.weight");
#undef ADD
    return n;
}

static void expect_param_set(const mc_fx_t *fx, const cfg_t *c, const char *prefix, int dtype)
{
    pshape_t ps[256];
    int np = param_list(c, ps);
    char name[160];
    for (int i = 0; i < np; i++) {
        snprintf(name, sizeof(name), "%.40s%.96s", prefix, ps[i].name);
        const mc_fx_tensor_t *t = ps[i].ndim == 2 ? expect(fx, name, dtype, 2, ps[i].d0, ps[i].d1)
                                                  : expect(fx, name, dtype, 1, ps[i].d0);
        for (int64_t k = 0; k < t->numel; k++) assert_true(isfinite(mc_fx_at(t, k)));
    }
    /* No parameter records beyond the expected ones (e.g. no output_layer when tied). */
    size_t pl = strlen(prefix);
    int count = 0;
    for (int i = 0; i < fx->n; i++)
        if (strncmp(fx->t[i].name, prefix, pl) == 0) count++;
    assert_int_equal(count, np);
}

/* tokens/labels int32 [b,s] in [0,V); loss_mask float32 [b,s] of 0/1. Returns sum(mask). */
static double expect_batch(const mc_fx_t *fx, const cfg_t *c, const char *prefix, int m, int shifted)
{
    char n1[96], n2[96], n3[96];
    snprintf(n1, sizeof(n1), "%sbatch.%d.tokens", prefix, m);
    snprintf(n2, sizeof(n2), "%sbatch.%d.labels", prefix, m);
    snprintf(n3, sizeof(n3), "%sbatch.%d.loss_mask", prefix, m);
    const mc_fx_tensor_t *tok = expect(fx, n1, MC_FX_I32, 2, c->mbs, c->s);
    const mc_fx_tensor_t *lab = expect(fx, n2, MC_FX_I32, 2, c->mbs, c->s);
    const mc_fx_tensor_t *msk = expect(fx, n3, MC_FX_F32, 2, c->mbs, c->s);
    const int32_t *tk = tok->data, *lb = lab->data;
    const float *mk = msk->data;
    double ntok = 0;
    for (int64_t i = 0; i < tok->numel; i++) {
        assert_true(tk[i] >= 0 && tk[i] < c->V);
        assert_true(lb[i] >= 0 && lb[i] < c->V);
        assert_true(mk[i] == 0.0f || mk[i] == 1.0f);
        ntok += mk[i];
    }
    assert_true(ntok > 0.5 * (double)tok->numel); /* mostly ones */
    if (shifted) /* labels are the token stream shifted by one */
        for (int64_t b = 0; b < c->mbs; b++)
            for (int64_t j = 0; j + 1 < c->s; j++) assert_int_equal(lb[b * c->s + j], tk[b * c->s + j + 1]);
    return ntok;
}

/* ---------------------------------------------------------------------------------------- */
/* well-formed fixtures                                                                      */

static void check_model_fixture(const char *file, int64_t want_L, int64_t want_bias, int64_t want_untied)
{
    mc_fx_t *fx = open_fixture(file);
    cfg_t c = read_cfg(fx);
    assert_int_equal(c.L, want_L);
    assert_int_equal(c.bias, want_bias);
    assert_int_equal(c.untied, want_untied);
    assert_int_equal(cfg_int(fx, "bias_gelu_fusion"), want_bias);
    expect_param_set(fx, &c, "param.", MC_FX_F32);
    expect_param_set(fx, &c, "grad.", MC_FX_F64);
    const mc_fx_tensor_t *mb = expect(fx, "out.mb_loss", MC_FX_F64, 1, c.M);
    const mc_fx_tensor_t *lg = expect(fx, "out.logits.0", MC_FX_F64, 3, c.s, c.mbs, c.Vpad);
    expect(fx, "out.loss", MC_FX_F64, 0);
    double wsum = 0, ntot = 0;
    for (int m = 0; m < c.M; m++) {
        double ntok = expect_batch(fx, &c, "", m, 0);
        wsum += mc_fx_at(mb, m) * ntok;
        ntot += ntok;
    }
    /* reported loss = token-weighted mean of the per-microbatch losses */
    assert_float_equal(mc_fx_scalar(fx, "out.loss"), wsum / ntot, 1e-12);
    /* the [s,b,V] logits of microbatch 0 reproduce its loss: logsumexp - logit[label] */
    const int32_t *lab = mc_fx_get(fx, "batch.0.labels")->data;
    const float *mask = mc_fx_get(fx, "batch.0.loss_mask")->data;
    const double *L = lg->data;
    double lsum = 0, n = 0;
    for (int64_t b = 0; b < c.mbs; b++)
        for (int64_t j = 0; j < c.s; j++) {
            const double *row = L + (j * c.mbs + b) * c.Vpad;
            double mx = row[0], se = 0;
            for (int64_t v = 1; v < c.Vpad; v++) mx = row[v] > mx ? row[v] : mx;
            for (int64_t v = 0; v < c.Vpad; v++) se += exp(row[v] - mx);
            lsum += mask[b * c.s + j] * (mx + log(se) - row[lab[b * c.s + j]]);
            n += mask[b * c.s + j];
        }
    assert_float_equal(lsum / n, mc_fx_at(mb, 0), 1e-10);
    /* Untouched position rows get exactly zero gradient; used ones do not. */
    const mc_fx_tensor_t *gp = mc_fx_get(fx, "grad.embedding.position_embeddings.weight");
    for (int64_t k = c.s * c.h; k < gp->numel; k++) assert_true(mc_fx_at(gp, k) == 0.0);
    assert_true(mc_fx_at(gp, 0) != 0.0);
    mc_fx_free(fx);
}

static void test_gpt_tied_bias(void **state)
{
    (void)state;
    check_model_fixture("gpt_tied_bias.mcfx", 2, 1, 0);
}

static void test_gpt_untied_nobias(void **state)
{
    (void)state;
    check_model_fixture("gpt_untied_nobias.mcfx", 3, 0, 1);
}

/* Megatron's LR schedule in samples (spec section 7), to cross-check out.step_lr. */
static double lr_at(const mc_fx_t *fx, double n)
{
    double gbs = (double)cfg_int(fx, "global_batch_size");
    double warm = (double)cfg_int(fx, "lr_warmup_iters") * gbs;
    double decay = (double)cfg_int(fx, "lr_decay_iters") * gbs;
    double mx = cfg_f64(fx, "lr"), mn = cfg_f64(fx, "min_lr"), init = cfg_f64(fx, "lr_warmup_init");
    int64_t style = cfg_int(fx, "lr_decay_style");
    if (warm > 0 && n <= warm) return init + (mx - init) * n / warm;
    if (style == 0) return mx;
    if (n > decay) return mn;
    if (style == 3) return fmax(mn, mx * sqrt(fmax(warm, 1)) / sqrt(fmax(n, 1)));
    double r = (n - warm) / (decay - warm);
    double coeff = style == 1 ? 1.0 - r : 0.5 * (cos(M_PI * r) + 1.0);
    return mn + coeff * (mx - mn);
}

static void check_train_fixture(const char *file, int64_t want_L, int64_t style)
{
    mc_fx_t *fx = open_fixture(file);
    cfg_t c = read_cfg(fx);
    assert_int_equal(c.L, want_L);
    int64_t iters = cfg_int(fx, "train_iters");
    assert_int_equal(iters, 10);
    assert_int_equal(cfg_int(fx, "lr_decay_iters"), iters);
    assert_int_equal(cfg_int(fx, "lr_decay_style"), style);
    const char *f64keys[] = {"lr", "min_lr", "weight_decay", "clip_grad", "adam_beta1", "adam_beta2",
                             "adam_eps", "lr_warmup_init"};
    for (size_t i = 0; i < sizeof(f64keys) / sizeof(*f64keys); i++) assert_true(cfg_f64(fx, f64keys[i]) >= 0);
    expect_param_set(fx, &c, "param.", MC_FX_F32);
    expect_param_set(fx, &c, "final.param.", MC_FX_F64);
    char prefix[32];
    for (int t = 0; t < iters; t++) {
        snprintf(prefix, sizeof(prefix), "step.%d.", t);
        for (int m = 0; m < c.M; m++) expect_batch(fx, &c, prefix, m, 1);
    }
    const mc_fx_tensor_t *loss = expect(fx, "out.step_loss", MC_FX_F64, 1, iters);
    const mc_fx_tensor_t *gn = expect(fx, "out.step_grad_norm", MC_FX_F64, 1, iters);
    const mc_fx_tensor_t *lr = expect(fx, "out.step_lr", MC_FX_F64, 1, iters);
    int clipped = 0;
    double clip = cfg_f64(fx, "clip_grad");
    for (int t = 0; t < iters; t++) {
        assert_true(mc_fx_at(loss, t) > 0 && mc_fx_at(loss, t) < 10);
        assert_true(mc_fx_at(gn, t) > 0);
        clipped += mc_fx_at(gn, t) > clip;
        assert_float_equal(mc_fx_at(lr, t), lr_at(fx, (double)t * c.mbs * c.M), 1e-15);
    }
    assert_true(clipped > 0);
    assert_true(mc_fx_at(loss, iters - 1) < mc_fx_at(loss, 0));
    /* Training moved the parameters. */
    const mc_fx_tensor_t *p0 = mc_fx_get(fx, "param.embedding.word_embeddings.weight");
    const mc_fx_tensor_t *p1 = mc_fx_get(fx, "final.param.embedding.word_embeddings.weight");
    double d = 0;
    for (int64_t k = 0; k < p0->numel; k++) d += fabs(mc_fx_at(p1, k) - mc_fx_at(p0, k));
    assert_true(d > 0);
    mc_fx_free(fx);
}

static void test_train_tied_bias(void **state)
{
    (void)state;
    check_train_fixture("train_tied_bias.mcfx", 2, 2);
}

static void test_train_untied_nobias(void **state)
{
    (void)state;
    check_train_fixture("train_untied_nobias.mcfx", 3, 1);
}

static void test_api_basics(void **state)
{
    (void)state;
    char buf[8];
    assert_int_equal(mc_fx_path(buf, sizeof(buf), "gpt_tied_bias.mcfx"), -1); /* too small */
    char path[512];
    assert_int_equal(mc_fx_path(path, sizeof(path), "x.mcfx"), 0);
    assert_non_null(strstr(path, "/x.mcfx"));
    mc_fx_t *fx = open_fixture(FIXTURES[0]);
    assert_null(mc_fx_get(fx, "no.such.record"));
    assert_null(mc_fx_get(NULL, "config.num_layers"));
    assert_true(mc_fx_scalar(fx, "config.hidden_size") == 32.0);
    assert_true(mc_fx_scalar(fx, "config.norm_epsilon") == 1e-5);
    const mc_fx_tensor_t *t = mc_fx_get(fx, "out.mb_loss");
    assert_int_equal(mc_fx_compare_f64(t, t->data, t->numel, 0, 0, "self"), 0);
    float f[2] = {(float)mc_fx_at(t, 0), (float)mc_fx_at(t, 1) + 1.0f};
    assert_int_equal(mc_fx_compare_f32(t, f, 2, 1e-6, 1e-6, "expected mismatch"), 1);
    assert_int_equal(mc_fx_compare_f32(t, f, 1, 1e-6, 1e-6, "expected size mismatch"), 2);
    mc_fx_free(fx);
    mc_fx_free(NULL);
}

/* ---------------------------------------------------------------------------------------- */
/* damaged files                                                                             */

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return b;
}

typedef struct {
    char path[256];
    char errpath[256];
} tmp_t;

static void tmp_init(tmp_t *t)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    snprintf(t->path, sizeof(t->path), "%s/mcfx_test_XXXXXX", dir);
    int fd = mkstemp(t->path);
    assert_true(fd >= 0);
    close(fd);
    snprintf(t->errpath, sizeof(t->errpath), "%s/mcfx_err_XXXXXX", dir);
    fd = mkstemp(t->errpath);
    assert_true(fd >= 0);
    close(fd);
}

static void tmp_done(tmp_t *t)
{
    unlink(t->path);
    unlink(t->errpath);
}

static void write_file(const char *path, const unsigned char *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

/* Loads `path` with stderr captured; returns the result and the number of stderr lines. */
static mc_fx_t *load_captured(tmp_t *t, const char *path, int *lines, char *msg, size_t msgn)
{
    fflush(stderr);
    int saved = dup(2);
    FILE *ef = fopen(t->errpath, "w");
    assert_non_null(ef);
    dup2(fileno(ef), 2);
    mc_fx_t *fx = mc_fx_load(path);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(ef);
    size_t n;
    unsigned char *e = slurp(t->errpath, &n);
    *lines = 0;
    for (size_t i = 0; i < n; i++) *lines += e[i] == '\n';
    if (msg) {
        size_t k = n < msgn - 1 ? n : msgn - 1;
        memcpy(msg, e, k);
        msg[k] = 0;
    }
    free(e);
    return fx;
}

/* The damaged bytes must be rejected with NULL and exactly one stderr line naming the file. */
static void expect_rejected(tmp_t *t, const unsigned char *b, size_t n, const char *what)
{
    write_file(t->path, b, n);
    int lines;
    char msg[512];
    mc_fx_t *fx = load_captured(t, t->path, &lines, msg, sizeof(msg));
    if (fx) {
        mc_fx_free(fx);
        fail_msg("damaged file accepted: %s (%zu bytes)", what, n);
    }
    if (lines != 1 || !strstr(msg, t->path)) fail_msg("%s: expected one stderr line naming the file, got '%s'", what, msg);
}

static uint32_t get_u32(const unsigned char *p)
{
    return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_i64(unsigned char *p, int64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)((uint64_t)v >> (8 * i));
}

static void test_missing_file(void **state)
{
    (void)state;
    tmp_t t;
    tmp_init(&t);
    int lines;
    char msg[512];
    assert_null(load_captured(&t, "/nonexistent/dir/none.mcfx", &lines, msg, sizeof(msg)));
    assert_int_equal(lines, 1);
    assert_non_null(strstr(msg, "none.mcfx"));
    tmp_done(&t);
}

static void test_truncated(void **state)
{
    (void)state;
    tmp_t t;
    tmp_init(&t);
    char path[512];
    for (size_t f = 0; f < sizeof(FIXTURES) / sizeof(*FIXTURES); f++) {
        assert_int_equal(mc_fx_path(path, sizeof(path), FIXTURES[f]), 0);
        size_t n;
        unsigned char *b = slurp(path, &n);
        /* every cut inside the headers at the start, then cuts spread over the whole file */
        for (size_t cut = 0; cut < 300 && cut < n; cut++) expect_rejected(&t, b, cut, "truncated");
        for (size_t k = 1; k < 64; k++) expect_rejected(&t, b, n * k / 64, "truncated");
        expect_rejected(&t, b, n - 1, "truncated by one byte");
        /* the full copy written the same way still loads */
        write_file(t.path, b, n);
        mc_fx_t *fx = mc_fx_load(t.path);
        assert_non_null(fx);
        mc_fx_free(fx);
        free(b);
    }
    tmp_done(&t);
}

/* Hand-made files: duplicate names rejected; empty record lists and zero-size tensors valid. */
static void check_hand_made(tmp_t *t)
{
    /* Duplicate names: a hand-made two-record file. */
    unsigned char d[64];
    size_t o;
    memcpy(d, "MCFX0001", 8), o = 8;
    put_u32(d + o, 2), o += 4;
    for (int r = 0; r < 2; r++) {
        put_u32(d + o, 1), o += 4;
        d[o++] = 'a';
        put_u32(d + o, MC_FX_I32), o += 4;
        put_u32(d + o, 0), o += 4;
        put_u32(d + o, 7), o += 4;
    }
    expect_rejected(t, d, o, "duplicate name");
    d[12 + 17 + 4] = 'b'; /* rename the second record: now valid */
    write_file(t->path, d, o);
    mc_fx_t *fx = mc_fx_load(t->path);
    assert_non_null(fx);
    assert_int_equal(fx->n, 2);
    assert_string_equal(fx->t[1].name, "b");
    assert_int_equal(fx->t[0].ndim, 0);
    assert_int_equal(fx->t[0].numel, 1);
    assert_true(mc_fx_scalar(fx, "b") == 7.0);
    mc_fx_free(fx);

    /* An empty record list and a zero-size tensor are valid. */
    memcpy(d, "MCFX0001\0\0\0\0", 12);
    write_file(t->path, d, 12);
    fx = mc_fx_load(t->path);
    assert_non_null(fx);
    assert_int_equal(fx->n, 0);
    mc_fx_free(fx);
    o = 8;
    put_u32(d + o, 1), o += 4;
    put_u32(d + o, 1), o += 4;
    d[o++] = 'z';
    put_u32(d + o, MC_FX_F64), o += 4;
    put_u32(d + o, 2), o += 4;
    put_i64(d + o, 0), o += 8;
    put_i64(d + o, INT64_MAX), o += 8;
    write_file(t->path, d, o);
    fx = mc_fx_load(t->path);
    assert_non_null(fx);
    assert_int_equal(fx->t[0].numel, 0);
    mc_fx_free(fx);
}

/* Random single-byte damage in the first records of orig[0..n) (b: room for n bytes). */
static void check_random_damage(tmp_t *t, const unsigned char *orig, unsigned char *b,
                                size_t n)
{
    /* Random single-byte damage in the first records: never a crash; NULL or a valid load. */
    srand(12345);
    mc_fx_t *fx;
    int rejected = 0;
    for (int i = 0; i < 300; i++) {
        memcpy(b, orig, n);
        size_t pos = (size_t)rand() % (n < 4096 ? n : 4096);
        b[pos] ^= (unsigned char)(1 + rand() % 255);
        write_file(t->path, b, n);
        int lines;
        fx = load_captured(t, t->path, &lines, NULL, 0);
        if (fx) {
            assert_int_equal(lines, 0);
            mc_fx_free(fx);
        } else {
            assert_int_equal(lines, 1);
            rejected++;
        }
    }
    assert_true(rejected > 0);
}

static void test_corrupt_headers(void **state)
{
    (void)state;
    tmp_t t;
    tmp_init(&t);
    char path[512];
    assert_int_equal(mc_fx_path(path, sizeof(path), FIXTURES[0]), 0);
    size_t n;
    unsigned char *orig = slurp(path, &n);
    unsigned char *b = malloc(n + 16);
    assert_non_null(b);
    /* first record: name_len at 12, name at 16, then dtype, ndim (it is a 0-d config scalar) */
    uint32_t nl = get_u32(orig + 12);
    size_t dt = 16 + nl, nd = dt + 4;
    assert_true(nl > 0 && nl < 100 && get_u32(orig + nd) == 0);
    /* dims of the first record with ndim >= 1 */
    size_t o = 12, dims = 0;
    for (;;) {
        size_t rl = get_u32(orig + o), rdt = o + 4 + rl, rnd = rdt + 4;
        uint32_t ndim = get_u32(orig + rnd);
        if (ndim > 0) {
            dims = rnd + 4;
            break;
        }
        o = rnd + 4 + mc_fx_dtype_size((int)get_u32(orig + rdt));
        assert_true(o < n);
    }

#define MUTATE(stmt, what)                                                                         \
    do {                                                                                           \
        memcpy(b, orig, n);                                                                        \
        size_t len = n;                                                                            \
        stmt;                                                                                      \
        expect_rejected(&t, b, len, what);                                                         \
    } while (0)
    MUTATE(b[0] = 'X', "bad magic");
    MUTATE(b[7] = '2', "bad version");
    MUTATE(put_u32(b + 8, 0xFFFFFFFFu), "huge record count");
    MUTATE(put_u32(b + 8, b[8] + 1u), "record count one too many");
    MUTATE(put_u32(b + 8, b[8] - 1u), "record count one too few (trailing bytes)");
    MUTATE(put_u32(b + 12, 0), "empty name");
    MUTATE(put_u32(b + 12, 0xFFFFFFF0u), "huge name length");
    MUTATE(put_u32(b + 12, (uint32_t)n), "name length = file size");
    MUTATE(b[16] = 0, "NUL in name");
    MUTATE(put_u32(b + dt, 4), "dtype 4");
    MUTATE(put_u32(b + dt, 0x80000000u), "dtype negative");
    MUTATE(put_u32(b + nd, 9), "ndim 9");
    MUTATE(put_u32(b + nd, 0xFFFFFFFFu), "ndim huge");
    MUTATE(put_i64(b + dims, -1), "negative dim");
    MUTATE(put_i64(b + dims, INT64_MAX), "dim INT64_MAX");
    MUTATE(put_i64(b + dims, (int64_t)1 << 40), "dim 2^40");
    MUTATE(put_i64(b + dims, ((int64_t)1 << 62) + 1), "numel overflow");
    MUTATE((b[n] = 0, len = n + 1), "trailing byte");
    MUTATE((memcpy(b + n, "\0\0\0\0\0\0\0\0", 8), len = n + 8), "trailing zeros");
#undef MUTATE

    check_hand_made(&t);
    check_random_damage(&t, orig, b, n);
    free(b);
    free(orig);
    tmp_done(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt_tied_bias),
        cmocka_unit_test(test_gpt_untied_nobias),
        cmocka_unit_test(test_train_tied_bias),
        cmocka_unit_test(test_train_untied_nobias),
        cmocka_unit_test(test_api_basics),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_corrupt_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
