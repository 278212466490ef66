/* Model chunks <-> Megatron's module state dicts (MEGATRON.md section 6, "Local-spec state-dict
 * keys", and Transformer Engine's fused names), the parameters' order in a file, and the tensor
 * conversions the checkpoint entries share. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "ckpt/state.h"
#include "model/param_names.h"

/* ---- tensors ---- */

static bool on_host(const mc_backend_t *be) { return !be->device_memory; }

static mc_torch_dtype_t torch_dtype(mc_dtype_t dt)
{
    return dt == MC_DT_BF16  ? MC_TORCH_BFLOAT16
           : dt == MC_DT_F16 ? MC_TORCH_FLOAT16
                             : MC_TORCH_FLOAT32;
}

mc_pyobj_t *mc_ckpt_host_tensor(const mc_backend_t *be, const void *dev, mc_dtype_t dt, int ndim,
                                const int64_t *shape)
{
    if (on_host(be)) return mc_py_tensor_wrap(torch_dtype(dt), ndim, shape, (void *)dev);
    mc_pyobj_t *t = mc_py_tensor_new(torch_dtype(dt), ndim, shape);
    if (t) be->memcpy_d2h(be, mc_py_tensor_data(t), dev, mc_py_tensor_nbytes(t));
    return t;
}

mc_pyobj_t *mc_ckpt_host_tensor_as(const mc_backend_t *be, const float *dev, int ndim,
                                   const int64_t *shape, mc_torch_dtype_t dt)
{
    if (dt == MC_TORCH_FLOAT32) return mc_ckpt_host_tensor(be, dev, MC_DT_F32, ndim, shape);
    mc_pyobj_t *t = mc_py_tensor_new(dt, ndim, shape);
    if (!t) return NULL;
    const int64_t count = mc_py_tensor_numel(t);
    const float *src = dev;
    float *tmp = NULL;
    if (!on_host(be)) {
        if (!(tmp = malloc((size_t)(count ? count : 1) * sizeof(float)))) {
            mc_py_decref(t);
            return NULL;
        }
        be->memcpy_d2h(be, tmp, dev, (size_t)count * sizeof(float));
        src = tmp;
    }
    /* round to nearest even, as torch's .to() and Megatron's main-to-model copy */
    mc_convert(mc_py_tensor_data(t), dt == MC_TORCH_BFLOAT16 ? MC_DT_BF16 : MC_DT_F16, src,
               MC_DT_F32, count);
    free(tmp);
    return t;
}

static void shape_text(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (len < n) snprintf(buf + len, n - len, "]");
}

int mc_ckpt_tensor_into(const mc_backend_t *be, void *dev, mc_dtype_t dt, const mc_pyobj_t *t,
                        int ndim, const int64_t *shape, const char *what, char *err, size_t n)
{
    if (!t || t->kind != MC_PY_TENSOR)
        return mc_errf(err, n, "%s is a %s, not a tensor", what,
                       t ? mc_py_kind_name(t->kind) : "missing value");
    bool same = t->tensor.ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->tensor.shape[i] == shape[i];
    if (!same) {
        char have[128], want[128];
        shape_text(have, sizeof(have), t->tensor.ndim, t->tensor.shape);
        shape_text(want, sizeof(want), ndim, shape);
        return mc_errf(err, n,
                       "%s has shape %s but this run's is %s (saved with another model "
                       "shape or tensor-parallel layout)",
                       what, have, want);
    }
    if (!mc_py_tensor_contiguous(t)) return mc_errf(err, n, "%s is not a contiguous tensor", what);
    const int64_t count = mc_py_tensor_numel(t);
    const void *src = mc_py_tensor_data(t);
    if (t->tensor.dtype == torch_dtype(dt)) {
        be->memcpy_h2d(be, dev, src, (size_t)count * mc_dtype_size(dt));
        return 0;
    }
    mc_dtype_t from;
    switch (t->tensor.dtype) {
    case MC_TORCH_FLOAT32: from = MC_DT_F32; break;
    case MC_TORCH_FLOAT16: from = MC_DT_F16; break;
    case MC_TORCH_BFLOAT16: from = MC_DT_BF16; break;
    case MC_TORCH_FLOAT64: from = MC_DT_F64; break;
    default:
        return mc_errf(err, n, "%s holds %s values, not floating point", what,
                       mc_torch_dtype_name(t->tensor.dtype));
    }
    float *tmp = malloc((size_t)(count ? count : 1) * sizeof(float));
    if (!tmp) return mc_errf(err, n, "out of host memory reading %s", what);
    if (from == MC_DT_F64)
        for (int64_t i = 0; i < count; i++) tmp[i] = (float)((const double *)src)[i];
    else mc_convert(tmp, MC_DT_F32, src, from, count);
    mc_convert(tmp, dt, tmp, MC_DT_F32, count); /* narrowing in place */
    be->memcpy_h2d(be, dev, tmp, (size_t)count * mc_dtype_size(dt));
    free(tmp);
    return 0;
}

/* ---- names ---- */

#define KEY_MAX 160

mc_ckpt_names_t mc_ckpt_names_of(const mc_args_t *a)
{
    return strcmp(a->transformer_impl, "transformer_engine") == 0 ? MC_CKPT_NAMES_TE
                                                                  : MC_CKPT_NAMES_LOCAL;
}

mc_torch_dtype_t mc_ckpt_model_dtype(const mc_args_t *a)
{
    return a->bf16 ? MC_TORCH_BFLOAT16 : a->fp16 ? MC_TORCH_FLOAT16 : MC_TORCH_FLOAT32;
}

int mc_ckpt_local_expert(const mc_gpt_t *m, const mc_param_t *p)
{
    /* this rank holds experts ep_rank*E/ep .. (ep_rank+1)*E/ep - 1 of each MoE layer: the
     * first is the lowest expert number among its tensors of p's layer */
    int first = p->expert;
    for (int i = 0; i < m->n_params; i++) {
        const mc_param_t *q = &m->params[i];
        if (q->expert >= 0 && q->layer == p->layer && q->expert < first) first = q->expert;
    }
    return p->expert - first;
}

void mc_ckpt_param_key(const mc_gpt_t *m, int c, const mc_param_t *p, mc_ckpt_names_t names,
                       char *buf, size_t n)
{
    const int layer = p->layer < 0 ? -1 : p->layer - m->cfg.chunk[c].first_layer;
    /* the legacy files' SequentialMLP names number a rank's experts from 0 (local_experts.j) */
    if (p->expert >= 0) mc_param_name_expert(p->kind, layer, mc_ckpt_local_expert(m, p), buf, n);
    else if (names == MC_CKPT_NAMES_TE) mc_param_name_te(p->kind, layer, buf, n);
    else mc_param_name_local(p->kind, layer, buf, n);
}

bool mc_ckpt_expert_bias_of(mc_gpt_t *m, int c, const mc_param_t *p, char *key, size_t n,
                            float **bias)
{
    if (!m->cfg.moe.expert_bias || p->kind != MC_PK_ROUTER_W) return false;
    int local = 0;
    while (local < m->n_local_layers && m->layer_no[local] != p->layer) local++;
    if (local == m->n_local_layers) return false;
    snprintf(key, n, "decoder.layers.%d.%s", p->layer - m->cfg.chunk[c].first_layer,
             MC_EXPERT_BIAS_NAME);
    *bias = mc_gpt_moe_expert_bias(m, local);
    return true;
}

static bool is_expert_bias(const char *key)
{
    const char *suffix = "." MC_EXPERT_BIAS_NAME;
    size_t l = strlen(key), s = strlen(suffix);
    return l >= s && strcmp(key + l - s, suffix) == 0;
}

mc_pyobj_t *mc_ckpt_weight_tensor(const mc_gpt_t *m, const void *w, int ndim, const int64_t *shape,
                                  mc_torch_dtype_t dt)
{
    return m->cfg.dt == MC_DT_F32 ? mc_ckpt_host_tensor_as(m->be, w, ndim, shape, dt)
                                  : mc_ckpt_host_tensor(m->be, w, m->cfg.dt, ndim, shape);
}

void mc_ckpt_model_key(const mc_gpt_t *m, int c, char *buf, size_t n)
{
    if (m->cfg.n_chunks > 1) snprintf(buf, n, "model%d", c);
    else snprintf(buf, n, "model");
}

/* The tp linear module parameter p belongs to in chunk c's keys (its layer numbered within the
 * chunk), which adds `<module>._extra_state` after its parameters; false outside one. */
static bool linear_module(const mc_gpt_t *m, int c, const mc_param_t *p, mc_ckpt_names_t names,
                          char *module, size_t n)
{
    const mc_param_name_t *row = &mc_param_names[p->kind];
    if (p->expert >= 0) { /* a SequentialMLP expert's linear: its key without ".weight" */
        mc_ckpt_param_key(m, c, p, names, module, n);
        char *dot = strrchr(module, '.');
        if (dot) *dot = 0;
        return true;
    }
    const char *mod = names == MC_CKPT_NAMES_TE ? row->module_te : row->module_local;
    if (!mod) return false;
    if (p->layer < 0) snprintf(module, n, "%s", mod);
    else snprintf(module, n, "decoder.layers.%d.%s", p->layer - m->cfg.chunk[c].first_layer, mod);
    return true;
}

static bool is_extra_state(const char *key)
{
    const char *suffix = "._extra_state";
    size_t l = strlen(key), s = strlen(suffix);
    return l >= s && strcmp(key + l - s, suffix) == 0;
}

/* ---- order ---- */

void mc_ckpt_order_free(mc_ckpt_order_t *o)
{
    free(o->param);
    memset(o, 0, sizeof(*o));
}

static int order_alloc(const mc_gpt_t *m, mc_ckpt_order_t *o, mc_ckpt_names_t names)
{
    memset(o, 0, sizeof(*o));
    o->names = names;
    o->param = malloc((size_t)(m->n_params ? m->n_params : 1) * sizeof(int));
    return o->param ? 0 : -1;
}

/* Transformer Engine's spec builds linear_proj before linear_qkv and the norm fused into it. */
static bool in_linear_proj(const mc_param_t *p)
{
    return p->kind == MC_PK_PROJ_W || p->kind == MC_PK_PROJ_B;
}

int mc_ckpt_order_spec(const mc_gpt_t *m, mc_ckpt_names_t names, mc_ckpt_order_t *o)
{
    if (order_alloc(m, o, names) != 0) return -1;
    for (int c = 0; c < m->cfg.n_chunks; c++) {
        int first, count;
        mc_gpt_chunk_params(m, c, &first, &count);
        for (int i = first; i < first + count;) {
            int j = i;
            if (names != MC_CKPT_NAMES_TE || m->params[i].layer < 0) {
                o->param[o->n++] = i++;
                continue;
            }
            /* a layer's parameters: TE builds linear_proj before linear_qkv (and its LayerNorm) */
            while (j < first + count && m->params[j].layer == m->params[i].layer) j++;
            for (int k = i; k < j; k++)
                if (in_linear_proj(&m->params[k])) o->param[o->n++] = k;
            for (int k = i; k < j; k++)
                if (!in_linear_proj(&m->params[k])) o->param[o->n++] = k;
            i = j;
        }
        o->chunk_end[c] = o->n;
    }
    return 0;
}

/* Chunk c's keys in both specs' names: keys[2*(i-first)] local, [+1] TE. */
static char (*chunk_keys(const mc_gpt_t *m, int c, int first, int count))[KEY_MAX]
{
    char(*keys)[KEY_MAX] = malloc((size_t)(2 * count + 1) * KEY_MAX);
    for (int i = 0; keys && i < count; i++) {
        mc_ckpt_param_key(m, c, &m->params[first + i], MC_CKPT_NAMES_LOCAL, keys[2 * i], KEY_MAX);
        mc_ckpt_param_key(m, c, &m->params[first + i], MC_CKPT_NAMES_TE, keys[2 * i + 1], KEY_MAX);
    }
    return keys;
}

int mc_ckpt_order_file(const mc_gpt_t *m, const mc_pyobj_t *ck, mc_ckpt_order_t *o, char *err,
                       size_t n)
{
    if (order_alloc(m, o, MC_CKPT_NAMES_LOCAL) != 0) return mc_errf(err, n, "out of host memory");
    bool *seen = calloc((size_t)(m->n_params ? m->n_params : 1), sizeof(bool));
    if (!seen) return mc_errf(err, n, "out of host memory");
    int rc = 0;
    char entry[32], shown[MC_SHOWN_MAX + 4];
    for (int c = 0; c < m->cfg.n_chunks && !rc; c++) {
        mc_ckpt_model_key(m, c, entry, sizeof(entry));
        const mc_pyobj_t *sd = mc_py_dict_get_str(ck, entry);
        if (!sd) {
            rc = mc_errf(err, n, "no '%s' entry (saved with %s virtual pipeline stages)", entry,
                         m->cfg.n_chunks > 1 ? "no or other" : "");
            break;
        }
        if (sd->kind != MC_PY_DICT) {
            rc =
                mc_errf(err, n, "'%s' is a %s, not a state dict", entry, mc_py_kind_name(sd->kind));
            break;
        }
        int first, count;
        mc_gpt_chunk_params(m, c, &first, &count);
        char(*keys)[KEY_MAX] = chunk_keys(m, c, first, count);
        if (!keys) {
            rc = mc_errf(err, n, "out of host memory");
            break;
        }
        for (size_t k = 0; k < sd->dict.len && !rc; k++) {
            const char *name = mc_py_get_str(sd->dict.keys[k]);
            if (!name) {
                rc = mc_errf(err, n, "'%s' has a %s key, not a str", entry,
                             mc_py_kind_name(sd->dict.keys[k]->kind));
                break;
            }
            if (is_extra_state(name)) continue; /* Transformer Engine's FP8 metadata, or None */
            /* a buffer, not a parameter: mc_ckpt_model_load reads it */
            if (m->cfg.moe.expert_bias && is_expert_bias(name)) continue;
            int found = -1;
            for (int i = 0; i < count && found < 0; i++)
                if (strcmp(keys[2 * i], name) == 0 || strcmp(keys[2 * i + 1], name) == 0)
                    found = first + i;
            /* strict, as Megatron's load_state_dict: nothing the model lacks */
            if (found < 0)
                rc = mc_errf(err, n,
                             "%s: unexpected tensor '%s' (saved with another model "
                             "configuration or pipeline layout)",
                             entry, mc_shown(name, shown));
            else if (seen[found])
                rc = mc_errf(err, n,
                             "%s: tensor '%s' given twice (under the local and the "
                             "Transformer Engine name)",
                             entry, mc_shown(name, shown));
            else {
                seen[found] = true;
                o->param[o->n++] = found;
                if (strcmp(keys[2 * (found - first)], name) != 0) o->names = MC_CKPT_NAMES_TE;
            }
        }
        for (int i = 0; i < count && !rc; i++)
            if (!seen[first + i])
                rc = mc_errf(err, n,
                             "%s: no tensor '%s' (saved with another model configuration "
                             "or pipeline layout)",
                             entry, keys[2 * i]);
        free(keys);
        o->chunk_end[c] = o->n;
    }
    free(seen);
    if (rc) mc_ckpt_order_free(o);
    return rc;
}

/* ---- model state dicts ---- */

/* A linear's _extra_state: Transformer Engine's modules keep their FP8 metadata there (an empty
 * uint8 tensor without FP8); Megatron's own linears return None. */
static mc_pyobj_t *extra_state_value(mc_ckpt_names_t names, const char *module)
{
    /* the output layer is Megatron's own ColumnParallelLinear in both specs */
    if (names == MC_CKPT_NAMES_TE &&
        strcmp(module, mc_param_names[MC_PK_OUTPUT_W].module_te) != 0) {
        const int64_t zero = 0;
        return mc_py_tensor_new(MC_TORCH_UINT8, 1, &zero);
    }
    return mc_py_none();
}

static int add_extra_state(mc_pyobj_t *sd, mc_ckpt_names_t names, const char *module)
{
    char key[KEY_MAX + 16];
    snprintf(key, sizeof(key), "%s._extra_state", module);
    return mc_py_dict_set_str(sd, key, extra_state_value(names, module));
}

mc_pyobj_t *mc_ckpt_model_dict(const mc_gpt_t *m, const mc_ckpt_order_t *o, int c,
                               mc_torch_dtype_t dt)
{
    mc_pyobj_t *sd = mc_py_ordered_dict();
    if (!sd) return NULL;
    int rc = 0;
    char key[KEY_MAX], module[KEY_MAX], next_module[KEY_MAX] = "";
    const int lo = c ? o->chunk_end[c - 1] : 0, hi = o->chunk_end[c];
    for (int k = lo; k < hi; k++) {
        const mc_param_t *p = &m->params[o->param[k]];
        mc_ckpt_param_key(m, c, p, o->names, key, sizeof(key));
        rc |= mc_py_dict_set_str(
            sd, key,
            mc_ckpt_weight_tensor(m, mc_gpt_param_at(m, p->offset), p->ndim, p->local, dt));
        float *bias;
        if (mc_ckpt_expert_bias_of((mc_gpt_t *)m, c, p, key, sizeof(key), &bias)) {
            const int64_t E = m->cfg.moe.num_experts;
            mc_pyobj_t *v = mc_py_tensor_new(MC_TORCH_FLOAT32, 1, &E); /* a copy, fp32 always */
            if (v) m->be->memcpy_d2h(m->be, mc_py_tensor_data(v), bias, (size_t)E * sizeof(float));
            rc |= !v || mc_py_dict_set_str(sd, key, v);
        }
        /* the module's _extra_state follows its last parameter */
        if (linear_module(m, c, p, o->names, module, sizeof(module))) {
            bool last = k + 1 == hi;
            if (!last && !linear_module(m, c, &m->params[o->param[k + 1]], o->names, next_module,
                                        sizeof(next_module)))
                next_module[0] = 0;
            if (last || strcmp(next_module, module) != 0)
                rc |= add_extra_state(sd, o->names, module);
        }
    }
    /* tied output layer on the embedding's stage: the module exists without a weight */
    const mc_param_name_t *out = &mc_param_names[MC_PK_OUTPUT_W];
    if (m->cfg.chunk[c].post && !mc_gpt_find_param(m, out->local))
        rc |= add_extra_state(sd, o->names, out->module_local);
    if (rc) {
        mc_py_decref(sd);
        return NULL;
    }
    return sd;
}

int mc_ckpt_model_load(mc_gpt_t *m, int c, const mc_pyobj_t *sd, char *err, size_t n)
{
    if (!sd || sd->kind != MC_PY_DICT) return mc_errf(err, n, "the model state is not a dict");
    int first, count;
    mc_gpt_chunk_params(m, c, &first, &count);
    char local[KEY_MAX], te[KEY_MAX];
    for (int i = first; i < first + count; i++) {
        const mc_param_t *p = &m->params[i];
        mc_ckpt_param_key(m, c, p, MC_CKPT_NAMES_LOCAL, local, sizeof(local));
        mc_ckpt_param_key(m, c, p, MC_CKPT_NAMES_TE, te, sizeof(te));
        const mc_pyobj_t *t = mc_py_dict_get_str(sd, local);
        const char *key = local;
        if (!t && (t = mc_py_dict_get_str(sd, te))) key = te;
        if (!t)
            return mc_errf(err, n,
                           "no tensor '%s' (saved with another model configuration or "
                           "pipeline layout)",
                           local);
        if (mc_ckpt_tensor_into(m->be, mc_gpt_param_at(m, p->offset), m->cfg.dt, t, p->ndim,
                                p->local, key, err, n) != 0)
            return -1;
        float *bias;
        if (!mc_ckpt_expert_bias_of(m, c, p, local, sizeof(local), &bias)) continue;
        const int64_t E = m->cfg.moe.num_experts;
        if (!(t = mc_py_dict_get_str(sd, local)))
            return mc_errf(err, n, "no tensor '%s' (saved without --moe-router-enable-expert-bias)",
                           local);
        if (mc_ckpt_tensor_into(m->be, bias, MC_DT_F32, t, 1, &E, local, err, n) != 0) return -1;
    }
    return 0;
}
