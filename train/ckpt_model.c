/* Model chunks <-> Megatron's module state dicts (MEGATRON.md section 6, "Local-spec state-dict
 * keys"), and the tensor conversions the checkpoint entries share. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/error.h"
#include "train/ckpt_state.h"

/* ---- tensors ---- */

static bool on_host(const mc_backend_t *be) { return strcmp(be->name, "cpu") == 0; }

static mc_torch_dtype_t torch_dtype(mc_dtype_t dt)
{
    return dt == MC_DT_BF16 ? MC_TORCH_BFLOAT16 : dt == MC_DT_F16 ? MC_TORCH_FLOAT16 : MC_TORCH_FLOAT32;
}

mc_pyobj_t *mc_ckpt_host_tensor(const mc_backend_t *be, const void *dev, mc_dtype_t dt, int ndim,
                                const int64_t *shape)
{
    if (on_host(be)) return mc_py_tensor_wrap(torch_dtype(dt), ndim, shape, (void *)dev);
    mc_pyobj_t *t = mc_py_tensor_new(torch_dtype(dt), ndim, shape);
    if (t) be->memcpy_d2h(be, mc_py_tensor_data(t), dev, mc_py_tensor_nbytes(t));
    return t;
}

static void shape_text(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (len < n) snprintf(buf + len, n - len, "]");
}

int mc_ckpt_tensor_into(const mc_backend_t *be, void *dev, mc_dtype_t dt, const mc_pyobj_t *t, int ndim,
                        const int64_t *shape, const char *what, char *err, size_t n)
{
    if (!t || t->kind != MC_PY_TENSOR)
        return mc_errf(err, n, "%s is a %s, not a tensor", what, t ? mc_py_kind_name(t->kind) : "missing value");
    bool same = t->tensor.ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->tensor.shape[i] == shape[i];
    if (!same) {
        char have[128], want[128];
        shape_text(have, sizeof(have), t->tensor.ndim, t->tensor.shape);
        shape_text(want, sizeof(want), ndim, shape);
        return mc_errf(err, n, "%s has shape %s but this run's is %s (saved with another model "
                       "shape or tensor-parallel layout)", what, have, want);
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
    else
        mc_convert(tmp, MC_DT_F32, src, from, count);
    mc_convert(tmp, dt, tmp, MC_DT_F32, count); /* narrowing in place */
    be->memcpy_h2d(be, dev, tmp, (size_t)count * mc_dtype_size(dt));
    free(tmp);
    return 0;
}

/* ---- names ---- */

/* Megatron's key of a parameter in chunk c: its global layer number made chunk-local. */
static void local_name(const mc_gpt_t *m, int c, const char *global, char *buf, size_t n)
{
    int layer, used = 0;
    if (sscanf(global, "decoder.layers.%d.%n", &layer, &used) == 1 && used > 0)
        snprintf(buf, n, "decoder.layers.%d.%s", layer - m->cfg.chunk[c].first_layer, global + used);
    else
        snprintf(buf, n, "%s", global);
}

/* The module a linear's weight or bias belongs to ("...linear_qkv"), or false for other
 * parameters: Megatron's tensor-parallel linears add `<module>._extra_state` (None) after their
 * parameters. */
static bool linear_module(const char *name, char *module, size_t n)
{
    static const char *const linears[] = {"linear_proj", "linear_qkv", "linear_fc1", "linear_fc2",
                                          "output_layer"};
    const char *dot = strrchr(name, '.');
    if (!dot) return false;
    for (size_t i = 0; i < sizeof(linears) / sizeof(linears[0]); i++) {
        size_t l = strlen(linears[i]);
        if ((size_t)(dot - name) >= l && strncmp(dot - l, linears[i], l) == 0) {
            snprintf(module, n, "%.*s", (int)(dot - name), name);
            return true;
        }
    }
    return false;
}

static int add_extra_state(mc_pyobj_t *sd, const char *module)
{
    char key[160];
    snprintf(key, sizeof(key), "%s._extra_state", module);
    return mc_py_dict_set_str(sd, key, mc_py_none());
}

mc_pyobj_t *mc_ckpt_model_dict(const mc_gpt_t *m, int c)
{
    mc_pyobj_t *sd = mc_py_ordered_dict();
    if (!sd) return NULL;
    int first, count, rc = 0;
    mc_gpt_chunk_params(m, c, &first, &count);
    char key[160], module[160], next[160];
    for (int i = first; i < first + count; i++) {
        const mc_param_t *p = &m->params[i];
        local_name(m, c, p->name, key, sizeof(key));
        rc |= mc_py_dict_set_str(sd, key, mc_ckpt_host_tensor(m->be, mc_gpt_param_at(m, p->offset),
                                                             m->cfg.dt, p->ndim, p->local));
        /* the module's _extra_state follows its last parameter (weight, then bias if any) */
        if (linear_module(key, module, sizeof(module))) {
            bool last = i + 1 == first + count;
            if (!last) local_name(m, c, m->params[i + 1].name, next, sizeof(next));
            if (last || strncmp(next, module, strlen(module)) != 0 || next[strlen(module)] != '.')
                rc |= add_extra_state(sd, module);
        }
    }
    /* tied output layer on the embedding's stage: the module exists without a weight */
    if (m->cfg.chunk[c].post && !mc_gpt_find_param(m, "output_layer.weight"))
        rc |= add_extra_state(sd, "output_layer");
    if (rc) {
        mc_py_decref(sd);
        return NULL;
    }
    return sd;
}

static bool is_extra_state(const char *key)
{
    const char *suffix = "._extra_state";
    size_t l = strlen(key), s = strlen(suffix);
    return l >= s && strcmp(key + l - s, suffix) == 0;
}

int mc_ckpt_model_load(mc_gpt_t *m, int c, const mc_pyobj_t *sd, char *err, size_t n)
{
    if (!sd || sd->kind != MC_PY_DICT) return mc_errf(err, n, "the model state is not a dict");
    int first, count;
    mc_gpt_chunk_params(m, c, &first, &count);
    char key[160], shown[MC_SHOWN_MAX + 4];
    for (int i = first; i < first + count; i++) {
        const mc_param_t *p = &m->params[i];
        local_name(m, c, p->name, key, sizeof(key));
        const mc_pyobj_t *t = mc_py_dict_get_str(sd, key);
        if (!t)
            return mc_errf(err, n, "no tensor '%s' (saved with another model configuration or "
                           "pipeline layout)", key);
        if (mc_ckpt_tensor_into(m->be, mc_gpt_param_at(m, p->offset), m->cfg.dt, t, p->ndim, p->local,
                                key, err, n) != 0)
            return -1;
    }
    /* strict, as Megatron's load_state_dict: nothing the model lacks */
    for (size_t k = 0; k < sd->dict.len; k++) {
        const char *name = mc_py_get_str(sd->dict.keys[k]);
        if (!name) return mc_errf(err, n, "a model key is a %s, not a str", mc_py_kind_name(sd->dict.keys[k]->kind));
        if (is_extra_state(name)) continue;
        bool known = false;
        for (int i = first; i < first + count && !known; i++) {
            local_name(m, c, m->params[i].name, key, sizeof(key));
            known = strcmp(key, name) == 0;
        }
        if (!known)
            return mc_errf(err, n, "unexpected tensor '%s' (saved with another model configuration "
                           "or pipeline layout)", mc_shown(name, shown));
    }
    return 0;
}
