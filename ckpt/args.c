#include "ckpt/args.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/py_float.h"
#include "config/flags.h"
#include "ckpt/files.h"
#include "base/signame.h"
#include "kernels/attention_choice.h"

typedef enum { A_INT, A_I64, A_DBL, A_BOOL, A_STR, A_LIST, A_SIGNAL, A_ATTN } kind_t;

typedef struct {
    const char *name; /* Megatron's attribute */
    size_t off;
    kind_t kind;
    size_t count_off; /* A_LIST: the int holding the number of items */
    bool moe;         /* a pending (dest-less) flag's field, named after the flag: the MoE
                         layer's settings, stored for MoE models only (dense files unchanged) */
} field_t;

/* The values no flag fills: derived by validation, stored as Megatron stores them. */
static const field_t k_derived[] = {
    {"virtual_pipeline_model_parallel_size",
     offsetof(mc_args_t, virtual_pipeline_model_parallel_size), A_INT, 0, false},
    {"world_size", offsetof(mc_args_t, world_size), A_INT, 0, false},
    {"data_parallel_size", offsetof(mc_args_t, data_parallel_size), A_INT, 0, false},
    {"num_microbatches", offsetof(mc_args_t, num_microbatches), A_INT, 0, false},
};

/* The flags that say how to read a checkpoint's args, which are not part of them. */
static const char *const k_not_stored[] = {"use_checkpoint_args",
                                           "use_mp_args_from_checkpoint_args",
                                           "use_tokenizer_model_from_checkpoint_args"};

enum { MAX_FIELDS = 512 };
static field_t k_fields[MAX_FIELDS];
static char k_pending_names[MAX_FIELDS][64]; /* the dest of a pending flag: its name's */
static size_t k_nfields;
static pthread_once_t k_once = PTHREAD_ONCE_INIT;

static kind_t kind_of(const mc_flag_t *f)
{
    if (f->dest && strcmp(f->dest, "exit_signal") == 0) return A_SIGNAL;
    if (f->dest && strcmp(f->dest, "attention_backend") == 0) return A_ATTN;
    switch (f->type) {
    case MC_FLAG_STORE_TRUE:
    case MC_FLAG_STORE_FALSE: return A_BOOL;
    case MC_FLAG_INT: return A_INT;
    case MC_FLAG_INT64: return A_I64;
    case MC_FLAG_FLOAT: return A_DBL;
    case MC_FLAG_LIST: return A_LIST;
    default: return A_STR;
    }
}

static bool listed(size_t off)
{
    for (size_t k = 0; k < k_nfields; k++)
        if (k_fields[k].off == off) return true;
    return false;
}

/* Every field of mc_args_t that a flag fills (once: a store_true / store_false pair shares one),
 * under the flag's dest, then the derived ones. */
static void list_fields(void)
{
    for (size_t i = 0; i < mc_flag_count(); i++) {
        const mc_flag_t *f = mc_flag_at(i);
        bool skip = !f->field_size || listed(f->field);
        for (size_t k = 0; k < sizeof(k_not_stored) / sizeof(k_not_stored[0]) && !skip; k++)
            skip = f->dest && strcmp(f->dest, k_not_stored[k]) == 0;
        if (skip) continue;
        if (k_nfields == MAX_FIELDS) mc_fatal("internal: more than %d flag fields", MAX_FIELDS);
        const char *name = f->dest;
        if (!name) { /* a pending field (the MoE layer's flags): Megatron's dest, from the name */
            char *d = k_pending_names[k_nfields];
            snprintf(d, sizeof(k_pending_names[0]), "%s", f->name + 2);
            for (char *c = d; *c; c++)
                if (*c == '-') *c = '_';
            name = d;
        }
        k_fields[k_nfields++] = (field_t){name, f->field, kind_of(f), f->count_field, !f->dest};
    }
    for (size_t k = 0; k < sizeof(k_derived) / sizeof(k_derived[0]); k++)
        if (!listed(k_derived[k].off)) k_fields[k_nfields++] = k_derived[k];
}

static size_t field_count(void)
{
    pthread_once(&k_once, list_fields);
    return k_nfields;
}

/* The valued flag filling the field at off, if any: it says whether Megatron's default is None
 * and which value stands for "not given". */
static const mc_flag_t *flag_of(size_t off)
{
    for (size_t i = 0; i < mc_flag_count(); i++) {
        const mc_flag_t *f = mc_flag_at(i);
        if (f->field_size && f->field == off && f->type != MC_FLAG_STORE_TRUE &&
            f->type != MC_FLAG_STORE_FALSE && f->type != MC_FLAG_ACTION)
            return f;
    }
    return NULL;
}

static double none_value(const mc_flag_t *f)
{
    double v = 0;
    if (f && f->none) sscanf(f->none, "%lf", &v);
    return v;
}

static mc_pyobj_t *value_of(const mc_args_t *a, const field_t *fd)
{
    const char *p = (const char *)a + fd->off;
    const mc_flag_t *f = flag_of(fd->off);
    const bool may_be_none = f && !f->def; /* Megatron's default is None */
    int i;
    int64_t l;
    double d;
    bool b;
    switch (fd->kind) {
    case A_INT:
        memcpy(&i, p, sizeof(i));
        return may_be_none && i == (int)none_value(f) ? mc_py_none() : mc_py_int(i);
    case A_I64:
        memcpy(&l, p, sizeof(l));
        return may_be_none && l == (int64_t)none_value(f) ? mc_py_none() : mc_py_int(l);
    case A_DBL:
        memcpy(&d, p, sizeof(d));
        return may_be_none && d == none_value(f) ? mc_py_none() : mc_py_float(d);
    case A_BOOL: memcpy(&b, p, sizeof(b)); return mc_py_bool(b);
    case A_STR: return may_be_none && !*p ? mc_py_none() : mc_py_str(p);
    case A_SIGNAL: /* a signal.Signals member, pickled as Python does: Signals(15) */
        return mc_py_object(mc_py_global("signal", "Signals"),
                            mc_py_tuple(1, mc_py_int(mc_signal_number(p))), false);
    case A_ATTN: /* Megatron's AttnBackend member, pickled as Python does: AttnBackend(5) */
        return mc_py_object(
            mc_py_global("megatron.core.transformer.enums", "AttnBackend"),
            mc_py_tuple(1, mc_py_int(mc_attention_backend_megatron(mc_attention_backend_of(p)))),
            false);
    case A_LIST: {
        int count;
        memcpy(&count, (const char *)a + fd->count_off, sizeof(count));
        if (count == 0 && (!f || !f->def)) return mc_py_none();
        mc_pyobj_t *list = mc_py_list();
        char *const *items = (char *const *)(const void *)p;
        const bool ints = f && f->elem == MC_FLAG_INT; /* --profile-ranks: Python ints */
        if (count == 0) { /* Megatron's default list of one value ([0]) */
            if (mc_py_list_append(list, ints ? mc_py_int(strtoll(f->def, NULL, 10))
                                             : mc_py_str(f->def)) != 0) {
                mc_py_decref(list);
                return NULL;
            }
            return list;
        }
        for (int k = 0; k < count; k++)
            if (mc_py_list_append(list, ints ? mc_py_int(strtoll(items[k], NULL, 10))
                                             : mc_py_str(items[k])) != 0) {
                mc_py_decref(list);
                return NULL;
            }
        return list;
    }
    }
    return NULL;
}

mc_pyobj_t *mc_ckpt_args_namespace(const mc_args_t *a, int64_t consumed_train_samples,
                                   int64_t consumed_valid_samples)
{
    mc_pyobj_t *ns = mc_py_namespace();
    if (!ns) return NULL;
    int rc = 0;
    for (size_t k = 0, nf = field_count(); k < nf; k++)
        if (!k_fields[k].moe || a->num_experts)
            rc |= mc_py_attr_set(ns, k_fields[k].name, value_of(a, &k_fields[k]));
    /* Megatron's None for "no virtual pipeline" (mc_args_t keeps 1) */
    if (a->virtual_pipeline_model_parallel_size <= 1)
        rc |= mc_py_attr_set(ns, "virtual_pipeline_model_parallel_size", mc_py_none());
    /* what Megatron's check_checkpoint_args and tools read, fixed in megatron-c */
    rc |= mc_py_attr_set(ns, "data_parallel_random_init", mc_py_bool(false));
    rc |= mc_py_attr_set(ns, "use_dist_ckpt", mc_py_bool(false));
    rc |= mc_py_attr_set(ns, "params_dtype", mc_py_global("torch", "float32"));
    /* training progress, which Megatron keeps in args */
    rc |= mc_py_attr_set(ns, "consumed_train_samples", mc_py_int(consumed_train_samples));
    rc |= mc_py_attr_set(ns, "skipped_train_samples", mc_py_int(0));
    rc |= mc_py_attr_set(ns, "consumed_valid_samples", mc_py_int(consumed_valid_samples));
    if (rc) {
        mc_py_decref(ns);
        return NULL;
    }
    return ns;
}

void mc_ckpt_args_int(const mc_pyobj_t *ns, const char *name, int64_t *out)
{
    mc_py_get_int(mc_py_attr(ns, name), out); /* leaves *out alone unless an int */
}

int mc_ckpt_args_check(const mc_pyobj_t *ns, const mc_args_t *a, bool any_layout, char *err,
                       size_t n)
{
    if (!mc_py_is_a(ns, "argparse", "Namespace"))
        return mc_errf(err, n, "'args' is not an argparse.Namespace");
    const struct {
        const char *name;
        int64_t have, none; /* none: the value Python's None stands for */
        const char *flag;
    } rows[] = {
        {"num_layers", a->num_layers, -1, "--num-layers"},
        {"hidden_size", a->hidden_size, -1, "--hidden-size"},
        {"num_attention_heads", a->num_attention_heads, -1, "--num-attention-heads"},
        {"max_position_embeddings", a->max_position_embeddings, -1, "--max-position-embeddings"},
        {"padded_vocab_size", a->padded_vocab_size, -1, "the padded vocabulary"},
        {"tensor_model_parallel_size", a->tensor_model_parallel_size, 1,
         "--tensor-model-parallel-size"},
        {"pipeline_model_parallel_size", a->pipeline_model_parallel_size, 1,
         "--pipeline-model-parallel-size"},
        {"virtual_pipeline_model_parallel_size", a->virtual_pipeline_model_parallel_size, 1,
         "virtual pipeline stages per rank"},
        {"decoder_first_pipeline_num_layers", a->decoder_first_pipeline_num_layers, 0,
         "--decoder-first-pipeline-num-layers"},
        {"decoder_last_pipeline_num_layers", a->decoder_last_pipeline_num_layers, 0,
         "--decoder-last-pipeline-num-layers"},
        /* the embedding-only and loss-only counts split L + 1 layers differently */
        {"account_for_embedding_in_pipeline_split", a->account_for_embedding_in_pipeline_split, 0,
         "--account-for-embedding-in-pipeline-split"},
        {"account_for_loss_in_pipeline_split", a->account_for_loss_in_pipeline_split, 0,
         "--account-for-loss-in-pipeline-split"},
    };
    /* torch_dist stores global tensors: only the model's shape must match (the padded vocabulary
     * follows tp, and loading re-pads it) */
    const size_t count = any_layout ? 4 : sizeof(rows) / sizeof(rows[0]);
    for (size_t k = 0; k < count; k++) {
        const mc_pyobj_t *v = mc_py_attr(ns, rows[k].name);
        int64_t saved;
        if (!v) continue;
        if (v->kind == MC_PY_NONE && rows[k].none >= 0) saved = rows[k].none;
        else if (mc_py_get_int(v, &saved) != 0) continue;
        if (saved != rows[k].have)
            return mc_errf(err, n,
                           "saved with %s %" PRId64 " but this run has %" PRId64 " (%s): %s",
                           rows[k].name, saved, rows[k].have, rows[k].flag,
                           any_layout ? "load with the model shape it was saved with"
                                      : "load with the layout and model shape it was saved "
                                        "with, or reshard it with megatron-c convert-checkpoint");
    }
    return 0;
}

/* ---- a checkpoint's Namespace -> mc_args_t ---- */

/* The --attention-backend choice a member name stands for, or -1. */
static int attn_backend_named(const char *name)
{
    if (!name) return -1;
    const mc_attention_backend_t b = mc_attention_backend_of(name);
    return strcmp(mc_attention_backend_name(b), name) == 0 ? (int)b : -1;
}

/* The value None stands for in a field: the flag's "not given" value. */
static void set_none(mc_args_t *a, const field_t *fd)
{
    char *p = (char *)a + fd->off;
    const mc_flag_t *f = flag_of(fd->off);
    const double none = none_value(f);
    switch (fd->kind) {
    case A_INT: *(int *)(void *)p = (int)none; break;
    case A_I64: *(int64_t *)(void *)p = (int64_t)none; break;
    case A_DBL: *(double *)(void *)p = none; break;
    case A_STR: p[0] = '\0'; break;
    case A_BOOL:
    case A_LIST:
    case A_SIGNAL:
    case A_ATTN: break;
    }
}

static void free_list_field(mc_args_t *a, const field_t *fd)
{
    char **items = (char **)(void *)((char *)a + fd->off);
    int *count = (int *)(void *)((char *)a + fd->count_off);
    for (int i = 0; i < *count; i++) free(items[i]);
    *count = 0;
}

static bool value_text(const mc_pyobj_t *v, char *buf, size_t n);

/* An int or float as Python's repr, a list of them as "[a, b]"; false for anything else. */
static bool scalar_text(const mc_pyobj_t *v, char *buf, size_t n)
{
    if (v->kind == MC_PY_INT || v->kind == MC_PY_FLOAT) return value_text(v, buf, n);
    if (v->kind != MC_PY_LIST) return false;
    size_t len = (size_t)snprintf(buf, n, "[");
    for (size_t k = 0; k < mc_py_len(v) && len < n; k++) {
        char item[64];
        const mc_pyobj_t *it = mc_py_item(v, k);
        if (it->kind != MC_PY_INT || !value_text(it, item, sizeof(item))) return false;
        len += (size_t)snprintf(buf + len, n - len, "%s%s", k ? ", " : "", item);
    }
    if (len < n) snprintf(buf + len, n - len, "]");
    return len + 1 < n;
}

static int set_field(mc_args_t *a, const field_t *fd, const mc_pyobj_t *v, char *err, size_t n)
{
    char *p = (char *)a + fd->off;
    if (v->kind == MC_PY_NONE) {
        if (fd->kind == A_LIST) free_list_field(a, fd);
        else set_none(a, fd);
        return 0;
    }
    int64_t i;
    double d;
    bool b;
    const char *s;
    switch (fd->kind) {
    case A_INT:
        if (mc_py_get_int(v, &i) != 0 || i < INT32_MIN || i > INT32_MAX) break;
        *(int *)(void *)p = (int)i;
        return 0;
    case A_I64:
        if (mc_py_get_int(v, &i) != 0) break;
        *(int64_t *)(void *)p = i;
        return 0;
    case A_DBL:
        if (mc_py_get_float(v, &d) != 0) break;
        *(double *)(void *)p = d;
        return 0;
    case A_BOOL:
        if (mc_py_get_bool(v, &b) != 0) break;
        *(bool *)(void *)p = b;
        return 0;
    case A_STR: {
        const mc_flag_t *f = flag_of(fd->off);
        char text[256];
        if (fd->moe && !mc_py_get_str(v) && scalar_text(v, text, sizeof(text)))
            s = text; /* Megatron's int or list (--moe-layer-freq 1, [1, 0]) as the flag's text */
        else s = mc_py_get_str(v);
        if (!s || !f || strlen(s) >= f->field_size) break;
        memcpy(p, s, strlen(s) + 1);
        return 0;
    }
    case A_LIST: {
        const mc_flag_t *lf = flag_of(fd->off);            /* the list's capacity: its field's */
        const bool one = fd->moe && v->kind != MC_PY_LIST; /* Megatron's 'aux_loss' or 0.01 */
        if ((v->kind != MC_PY_LIST && !one) || !lf ||
            (!one && mc_py_len(v) > lf->field_size / sizeof(char *)))
            break;
        free_list_field(a, fd);
        char **items = (char **)(void *)p;
        int *count = (int *)(void *)((char *)a + fd->count_off);
        for (size_t k = 0; k < (one ? 1 : mc_py_len(v)); k++) {
            const mc_pyobj_t *item = one ? v : mc_py_item(v, k);
            char num[64];
            int64_t iv;
            if (mc_py_get_int(item, &iv) == 0) { /* an int list (profile_ranks) */
                snprintf(num, sizeof(num), "%lld", (long long)iv);
                s = num;
            } else if (fd->moe && item->kind == MC_PY_FLOAT && scalar_text(item, num, sizeof(num)))
                s = num; /* --moe-aux-loss-coeff's floats */
            else if (!(s = mc_py_get_str(item)))
                return mc_errf(err, n, "args.%s holds a non-str item", fd->name);
            if (!(items[*count] = strdup(s))) return mc_errf(err, n, "out of host memory");
            (*count)++;
        }
        return 0;
    }
    case A_SIGNAL: { /* a signal.Signals member: Signals(15) (megatron-c writes that) or, as Python
                      * 3.11 pickles a global enum's member, the global signal.SIGTERM */
        const mc_pyobj_t *c = v->kind == MC_PY_OBJECT ? v->object.callable : NULL;
        const char *name = NULL;
        if (c && c->kind == MC_PY_GLOBAL && strcmp(c->global.module, "signal") == 0 &&
            strcmp(c->global.name, "Signals") == 0 &&
            mc_py_get_int(mc_py_item(v->object.args, 0), &i) == 0)
            name = mc_signal_name((int)i);
        else if (v->kind == MC_PY_GLOBAL && strcmp(v->global.module, "signal") == 0 &&
                 mc_signal_number(v->global.name) > 0)
            name = v->global.name;
        const mc_flag_t *f = flag_of(fd->off);
        if (!name || !f || strlen(name) >= f->field_size) break;
        memcpy(p, name, strlen(name) + 1);
        return 0;
    }
    case A_ATTN: { /* AttnBackend(5); getattr(AttnBackend, "auto"), Python 3.11's pickle of a
                    * member, as Megatron's files have it; or a name */
        const mc_pyobj_t *c = v->kind == MC_PY_OBJECT ? v->object.callable : NULL;
        const mc_pyobj_t *a0 = c ? mc_py_item(v->object.args, 0) : NULL;
        int b = -1;
        if (c && c->kind == MC_PY_GLOBAL && strcmp(c->global.name, "AttnBackend") == 0 &&
            mc_py_get_int(a0, &i) == 0)
            b = mc_attention_backend_of_megatron((int)i);
        else if (c && c->kind == MC_PY_GLOBAL && strcmp(c->global.name, "getattr") == 0 && a0 &&
                 a0->kind == MC_PY_GLOBAL && strcmp(a0->global.name, "AttnBackend") == 0)
            b = attn_backend_named(mc_py_get_str(mc_py_item(v->object.args, 1)));
        else b = attn_backend_named(mc_py_get_str(v));
        if (b < 0) break;
        snprintf(p, sizeof(((mc_args_t *)0)->attention_backend), "%s",
                 mc_attention_backend_name((mc_attention_backend_t)b));
        return 0;
    }
    }
    return mc_errf(err, n, "args.%s is a %s, which megatron-c cannot use as that argument",
                   fd->name, mc_py_kind_name(v->kind));
}

int mc_ckpt_args_from_namespace(const mc_pyobj_t *ns, mc_args_t *a, char *err, size_t n)
{
    mc_args_defaults(a);
    if (!mc_py_is_a(ns, "argparse", "Namespace"))
        return mc_errf(err, n, "'args' is not an argparse.Namespace");
    char moe_err[256] = "";
    for (size_t k = 0, nf = field_count(); k < nf; k++) {
        const mc_pyobj_t *v = mc_py_attr(ns, k_fields[k].name);
        if (!v || set_field(a, &k_fields[k], v, moe_err, sizeof(moe_err)) == 0) continue;
        if (!k_fields[k].moe) return mc_errf(err, n, "%s", moe_err);
    }
    /* a dense model's MoE settings are not used: only an MoE model needs them all */
    if (moe_err[0] && a->num_experts) return mc_errf(err, n, "%s", moe_err);
    if (a->virtual_pipeline_model_parallel_size < 1)
        a->virtual_pipeline_model_parallel_size = 1; /* None */
    if (a->world_size < 1) a->world_size = 1;
    if (a->data_parallel_size < 1) a->data_parallel_size = 1;
    return 0;
}

mc_pyobj_t *mc_ckpt_args_copy(const mc_pyobj_t *ns)
{
    mc_pyobj_t *out = mc_py_namespace();
    const mc_pyobj_t *d = ns && ns->kind == MC_PY_OBJECT ? ns->object.state : NULL;
    for (size_t k = 0; out && d && d->kind == MC_PY_DICT && k < d->dict.len; k++)
        if (mc_py_dict_set(out->object.state, mc_py_incref(d->dict.keys[k]),
                           mc_py_incref(d->dict.vals[k])) != 0) {
            mc_py_decref(out);
            return NULL;
        }
    return out;
}

/* ---- --use-checkpoint-args (Megatron's load_args_from_checkpoint) ---- */

/* The attributes load_args_from_checkpoint sets, in its order: force takes the checkpoint's
 * value even over the command line's; without force only an argument that is None (not given)
 * is set. The flag whose field receives the value (and whose support is checked). */
typedef struct {
    const char *attr;
    bool force;
    const char *flag;
} model_arg_t;

static const model_arg_t k_model_args[] = {
    {"num_layers", false, "--num-layers"},
    {"hidden_size", false, "--hidden-size"},
    {"ffn_hidden_size", false, "--ffn-hidden-size"},
    {"seq_length", false, "--seq-length"},
    {"num_attention_heads", false, "--num-attention-heads"},
    {"num_query_groups", true, "--num-query-groups"},
    {"group_query_attention", true, "--group-query-attention"},
    {"kv_channels", false, "--kv-channels"},
    {"max_position_embeddings", false, "--max-position-embeddings"},
    {"position_embedding_type", true, "--position-embedding-type"},
    {"add_position_embedding", true, "--no-position-embedding"},
    {"use_rotary_position_embeddings", true, "--use-rotary-position-embeddings"},
    {"rotary_base", true, "--rotary-base"},
    {"rotary_percent", true, "--rotary-percent"},
    {"rotary_interleaved", true, "--rotary-interleaved"},
    {"add_bias_linear", true, "--disable-bias-linear"},
    {"add_qkv_bias", true, "--add-qkv-bias"},
    {"squared_relu", true, "--squared-relu"},
    {"swiglu", true, "--swiglu"},
    {"untie_embeddings_and_output_weights", true, "--untie-embeddings-and-output-weights"},
    {"apply_layernorm_1p", true, "--apply-layernorm-1p"},
    {"normalization", true, "--normalization"},
    {"apply_query_key_layer_scaling", true, "--apply-query-key-layer-scaling"},
    {"attention_dropout", true, "--attention-dropout"},
    {"hidden_dropout", true, "--hidden-dropout"},
    {"mtp_num_layers", true, "--mtp-num-layers"},
    {"spec", true, "--spec"},
    {"num_experts", true, "--num-experts"},
};
static const model_arg_t k_tokenizer_args[] = {
    {"tokenizer_model", true, "--tokenizer-model"},
    {"tokenizer_type", true, "--tokenizer-type"},
};
static const model_arg_t k_late_args[] = {
    {"padded_vocab_size", false, "--padded-vocab-size"},
    {"ckpt_format", false, "--ckpt-format"},
};
static const model_arg_t k_mp_args[] = {
    {"tensor_model_parallel_size", true, "--tensor-model-parallel-size"},
    {"pipeline_model_parallel_size", true, "--pipeline-model-parallel-size"},
    {"virtual_pipeline_model_parallel_size", true, "--num-virtual-stages-per-pipeline-rank"},
    {"num_layers_per_virtual_pipeline_stage", false, "--num-layers-per-virtual-pipeline-stage"},
    {"expert_model_parallel_size", true, "--expert-model-parallel-size"},
};

/* A Python value as the command line would give it ("True", "0.1", "cosine"); false for None. */
static bool value_text(const mc_pyobj_t *v, char *buf, size_t n)
{
    int64_t i;
    double d;
    switch (v->kind) {
    case MC_PY_BOOL: snprintf(buf, n, "%s", v->b ? "True" : "False"); return true;
    case MC_PY_INT:
        mc_py_get_int(v, &i);
        snprintf(buf, n, "%" PRId64, i);
        return true;
    case MC_PY_FLOAT: /* Python's repr: the shortest text that reads back the same */
        mc_py_get_float(v, &d);
        mc_py_float_repr(d, buf, n);
        return true;
    case MC_PY_STR: snprintf(buf, n, "%s", mc_py_get_str(v)); return true;
    case MC_PY_LIST:
    case MC_PY_TUPLE:
        buf[0] = '\0';
        for (size_t k = 0; k < mc_py_len(v); k++) {
            char item[256];
            if (!value_text(mc_py_item(v, k), item, sizeof(item)))
                snprintf(item, sizeof(item), "None");
            if (k) strncat(buf, " ", n - strlen(buf) - 1);
            strncat(buf, item, n - strlen(buf) - 1);
        }
        return true;
    case MC_PY_NONE: return false;
    default: snprintf(buf, n, "<%s>", mc_py_kind_name(v->kind)); return true;
    }
}

/* Whether the flag's field holds a value (Python: not None). */
static bool field_set(const mc_args_t *a, const mc_flag_t *f)
{
    if (!f->field_size || f->def) return f->def != NULL;
    const char *p = (const char *)a + f->field;
    const double none = f->none ? strtod(f->none, NULL) : 0;
    switch (f->type) {
    case MC_FLAG_INT: return *(const int *)(const void *)p != (int)none;
    case MC_FLAG_INT64: return *(const int64_t *)(const void *)p != (int64_t)none;
    case MC_FLAG_FLOAT: return *(const double *)(const void *)p != none;
    case MC_FLAG_STRING:
    case MC_FLAG_CHOICE: return p[0] != '\0';
    default: return false;
    }
}

static void take_args(mc_args_t *a, const mc_pyobj_t *ns, const model_arg_t *rows, size_t count,
                      bool printer)
{
    for (size_t k = 0; k < count; k++) {
        const mc_flag_t *f = mc_flag_find(rows[k].flag);
        if (!f) mc_fatal("internal error: no flag %s", rows[k].flag);
        if (!rows[k].force && field_set(a, f)) continue; /* the command line's value stays */
        const mc_pyobj_t *v = mc_py_attr(ns, rows[k].attr);
        char text[1024], err[768];
        if (!v || !value_text(v, text, sizeof(text))) {
            if (printer) printf("Checkpoint did not provide arguments %s\n", rows[k].attr);
            continue;
        }
        if (printer) printf("Setting %s to %s from checkpoint\n", rows[k].attr, text);
        /* Megatron's vpp is a derived argument; megatron-c derives it from the virtual stages */
        if (strcmp(rows[k].attr, "virtual_pipeline_model_parallel_size") == 0) {
            int64_t vpp, per_stage = 0;
            mc_py_get_int(mc_py_attr(ns, "num_layers_per_virtual_pipeline_stage"), &per_stage);
            if (mc_py_get_int(v, &vpp) != 0 || vpp <= 1 || per_stage > 0 ||
                a->num_layers_per_virtual_pipeline_stage)
                continue; /* none, or given by the layers per virtual stage */
        }
        if (mc_args_take(a, f, text, err, sizeof(err)) != 0)
            mc_user_error("%s (taken from the checkpoint's arguments by --use-checkpoint-args)",
                          err);
    }
}

int mc_ckpt_args_supported(const mc_pyobj_t *ns, char *err, size_t n)
{
    mc_args_t scratch;
    mc_args_defaults(&scratch);
    int rc = 0;
    for (size_t k = 0; k < sizeof(k_model_args) / sizeof(k_model_args[0]) && !rc; k++) {
        const mc_pyobj_t *v = mc_py_attr(ns, k_model_args[k].attr);
        char text[1024], why[768];
        if (!v || !value_text(v, text, sizeof(text))) continue;
        if (mc_args_take(&scratch, mc_flag_find(k_model_args[k].flag), text, why, sizeof(why)) != 0)
            rc =
                mc_errf(err, n, "the checkpoint's model has %s %s, which megatron-c cannot run: %s",
                        k_model_args[k].attr, text, why);
    }
    mc_args_free(&scratch);
    return rc;
}

static bool g_printer;

void mc_ckpt_args_use(mc_args_t *a, void *ctx)
{
    (void)ctx;
    if (!a->use_checkpoint_args) return;
    if (!a->load[0])
        mc_user_error("--use-checkpoint-args requires --load or --pretrained-checkpoint argument");
    char err[1024], path[MC_CKPT_PATH_MAX + 64];
    mc_pyobj_t *ck = NULL;
    if (mc_ckpt_load_rank0(a->load, a->ckpt_step, path, sizeof(path), &ck, err, sizeof(err)) != 0)
        mc_user_error("%s", err);
    const mc_pyobj_t *ns = mc_py_dict_get_str(ck, "args");
    if (!ck) {
        if (g_printer)
            printf("Checkpoint not found to provide arguments, using provided arguments.\n");
    } else if (!ns) {
        if (g_printer)
            printf(
                "Checkpoint provided does not have arguments saved, using provided arguments.\n");
    } else if (!mc_py_is_a(ns, "argparse", "Namespace")) {
        mc_user_error("%s: 'args' is not an argparse.Namespace (--use-checkpoint-args needs a "
                      "checkpoint's arguments)",
                      path);
    } else {
        take_args(a, ns, k_model_args, sizeof(k_model_args) / sizeof(k_model_args[0]), g_printer);
        if (a->use_tokenizer_model_from_checkpoint_args)
            take_args(a, ns, k_tokenizer_args,
                      sizeof(k_tokenizer_args) / sizeof(k_tokenizer_args[0]), g_printer);
        take_args(a, ns, k_late_args, sizeof(k_late_args) / sizeof(k_late_args[0]), g_printer);
        if (a->use_mp_args_from_checkpoint_args)
            take_args(a, ns, k_mp_args, sizeof(k_mp_args) / sizeof(k_mp_args[0]), g_printer);
    }
    fflush(stdout);
    mc_py_decref(ck);
}

void mc_ckpt_args_install(bool printer) { g_printer = printer; }
