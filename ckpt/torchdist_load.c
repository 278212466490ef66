/* Loading a torch_dist checkpoint (ckpt/torchdist.h) at any layout. Each rank reads the boxes of the
 * global tensors its parameters hold and builds what a legacy file of its own would hold (the
 * model chunks' state dicts, with the iteration, args and rng state of common.pt), which
 * ckpt/rank.c then applies as for the legacy format. The optimizer's tensors become each local
 * parameter's whole state (ckpt/torchdist_state.c): read as boxes from the model-space forms, or
 * decoded from the dp_reshardable buckets of every (tp, pp) domain of the saved layout. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "ckpt/args.h"
#include "ckpt/torchdist.h"
#include "ckpt/files.h"
#include "ckpt/state.h"
#include "model/param_names.h"
#include "kernels/device.h"
#include "torchfmt/torch_save.h"

typedef struct {
    const char *dir;
    mc_pyobj_t *common;
    mc_dcp_meta_t meta;
    mc_dcp_reader_t *r;
    uint8_t *used; /* [meta.n]: the keys this rank asked for (--dist-ckpt-strictness) */
} source_t;

/* Marks key (or every key starting with it, prefix) as asked for. */
static void mark(source_t *s, const char *key, bool prefix)
{
    const size_t l = strlen(key);
    if (!prefix) {
        const mc_dcp_entry_t *e = mc_dcp_meta_find(&s->meta, key);
        if (e) s->used[e - s->meta.entries] = 1;
        return;
    }
    for (size_t k = 0; k < s->meta.n; k++)
        if (strncmp(s->meta.entries[k].key, key, l) == 0) s->used[k] = 1;
}

bool mc_torchdist_is_checkpoint(const char *iter_dir)
{
    char path[MC_CKPT_PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/metadata.json", iter_dir);
    return access(path, F_OK) == 0;
}

static void close_source(source_t *s)
{
    free(s->used);
    mc_dcp_reader_free(s->r);
    mc_dcp_meta_free(&s->meta);
    mc_py_decref(s->common);
    memset(s, 0, sizeof(*s));
}

/* metadata.json must name the torch_dist backend (Megatron refuses a directory without it). */
static int check_metadata_json(const char *dir, char *err, size_t n)
{
    char path[MC_CKPT_PATH_MAX + 32], text[1024] = "";
    snprintf(path, sizeof(path), "%s/metadata.json", dir);
    FILE *f = fopen(path, "r");
    if (!f) return mc_path_errf(err, n, path, "cannot be read");
    const size_t got = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[got] = '\0';
    if (!strstr(text, "\"sharded_backend\"") || !strstr(text, "\"torch_dist\""))
        return mc_path_errf(err, n, path,
                            "is not a torch_dist checkpoint's metadata (expected "
                            "{\"sharded_backend\": \"torch_dist\", ...}; the file is damaged or "
                            "of another format)");
    return 0;
}

static int open_source(source_t *s, const char *dir, char *err, size_t n)
{
    memset(s, 0, sizeof(*s));
    s->dir = dir;
    char path[MC_CKPT_PATH_MAX + 32];
    if (check_metadata_json(dir, err, n) != 0) return -1;
    snprintf(path, sizeof(path), "%s/common.pt", dir);
    if (mc_torch_load(path, 0, &s->common, err, n) != 0) return -1;
    if (s->common->kind != MC_PY_DICT)
        return mc_path_errf(err, n, path, "holds a %s, not a dict",
                            mc_py_kind_name(s->common->kind));
    snprintf(path, sizeof(path), "%s/.metadata", dir);
    if (mc_dcp_meta_read(path, &s->meta, err, n) != 0) return -1;
    if (!(s->r = mc_dcp_reader_new(dir, &s->meta)) || !(s->used = calloc(s->meta.n + 1, 1)))
        mc_fatal("out of host memory");
    return 0;
}

/* A key of a tensor with vocabulary rows: the word embeddings or an output layer's weight. */
static bool vocab_key(const char *key)
{
    const char *out = mc_param_names[MC_PK_OUTPUT_W].local;
    char dotted[64];
    snprintf(dotted, sizeof(dotted), ".%s", out);
    return strcmp(key, mc_param_names[MC_PK_WORD_EMBEDDINGS].local) == 0 || strcmp(key, out) == 0 ||
           strstr(key, dotted) != NULL;
}

static void shape_text(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t at = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && at < n; d++)
        at += (size_t)snprintf(buf + at, n - at, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (at < n) snprintf(buf + at, n - at, "]");
}

/* The piece p of key into dst (as dt). A vocabulary saved at another padding (another tp) loads
 * its rows that exist; rows past them are zero (padding, never a real token's). */
static int read_piece(source_t *s, const char *key, const mc_shard_t *p, mc_torch_dtype_t dt,
                      void *dst, char *err, size_t n)
{
    const mc_dcp_entry_t *e = mc_dcp_meta_find(&s->meta, key);
    if (!e || e->bytes)
        return mc_errf(err, n,
                       "%s/.metadata: no tensor '%s' (saved with another model configuration)",
                       s->dir, key);
    mark(s, key, false);
    bool same = e->ndim == p->ndim, rest = same;
    for (int d = 0; same && d < p->ndim; d++) {
        same = e->shape[d] == p->global[d];
        if (d > 0) rest = rest && e->shape[d] == p->global[d];
    }
    if (same) return mc_dcp_read_box(s->r, key, p->ndim, p->offsets, p->sizes, dt, dst, err, n);
    if (!rest || !vocab_key(key)) {
        char saved[96], here[96];
        shape_text(saved, sizeof(saved), e->ndim, e->shape);
        shape_text(here, sizeof(here), p->ndim, p->global);
        return mc_errf(err, n,
                       "%s: '%s' is %s in the checkpoint but %s in this run (saved with another "
                       "model shape)",
                       s->dir, key, saved, here);
    }
    memset(dst, 0, (size_t)p->numel * mc_torch_dtype_size(dt));
    const int64_t hi =
        e->shape[0] < p->offsets[0] + p->sizes[0] ? e->shape[0] : p->offsets[0] + p->sizes[0];
    if (hi <= p->offsets[0]) return 0;
    int64_t sizes[MC_DCP_MAX_DIMS];
    memcpy(sizes, p->sizes, sizeof(sizes));
    sizes[0] = hi - p->offsets[0];
    return mc_dcp_read_box(s->r, key, p->ndim, p->offsets, sizes, dt, dst, err, n);
}

static mc_torch_dtype_t stored_dtype(const source_t *s, const char *key)
{
    const mc_dcp_entry_t *e = mc_dcp_meta_find(&s->meta, key);
    if (e && !e->bytes && (e->dtype == MC_TORCH_BFLOAT16 || e->dtype == MC_TORCH_FLOAT16))
        return e->dtype;
    return MC_TORCH_FLOAT32;
}

/* The router's expert_bias of p's layer (--moe-router-enable-expert-bias) into od under key,
 * fp32 [E], as the legacy files hold it. */
static int read_expert_bias(source_t *s, const mc_gpt_t *m, const mc_param_t *p, const char *key,
                            mc_pyobj_t *od, char *err, size_t n)
{
    int l = 0;
    while (l < m->n_local_layers - 1 && m->layer_no[l] != p->layer) l++;
    mc_shard_t sh;
    mc_torchdist_expert_bias_shard(m, l, &sh);
    const int64_t E = m->cfg.moe.num_experts;
    mc_pyobj_t *v = mc_py_tensor_new(MC_TORCH_FLOAT32, 1, &E);
    if (!v) mc_fatal("out of host memory");
    if (read_piece(s, sh.key, &sh, MC_TORCH_FLOAT32, mc_py_tensor_data(v), err, n) != 0) {
        mc_py_decref(v);
        return -1;
    }
    if (mc_py_dict_set_str(od, key, v)) mc_fatal("out of host memory");
    return 0;
}

/* The model chunks' state dicts into ck ("model", or "model0", "model1", ...). */
static int model_dicts(source_t *s, const mc_gpt_t *m, const mc_shard_t *sh, int n_sh,
                       mc_pyobj_t *ck, char *err, size_t n)
{
    for (int c = 0; c < m->cfg.n_chunks; c++) {
        int first, count;
        mc_gpt_chunk_params(m, c, &first, &count);
        mc_pyobj_t *od = mc_py_ordered_dict();
        char key[32], name[128];
        for (int i = first; i < first + count; i++) {
            const mc_param_t *p = &m->params[i];
            mc_pyobj_t *tensor = NULL;
            for (int k = 0; k < n_sh; k++) {
                if (sh[k].param != i) continue;
                const mc_torch_dtype_t dt = stored_dtype(s, sh[k].key);
                if (!tensor && !(tensor = mc_py_tensor_new(dt, p->ndim, p->local)))
                    mc_fatal("out of host memory");
                char *at = (char *)mc_py_tensor_data(tensor) +
                           (size_t)sh[k].start * mc_torch_dtype_size(tensor->tensor.dtype);
                if (read_piece(s, sh[k].key, &sh[k], tensor->tensor.dtype, at, err, n) != 0) {
                    mc_py_decref(tensor);
                    mc_py_decref(od);
                    return -1;
                }
            }
            mc_ckpt_param_key(m, c, p, MC_CKPT_NAMES_LOCAL, name, sizeof(name));
            if (mc_py_dict_set_str(od, name, tensor)) mc_fatal("out of host memory");
            float *bias;
            if (mc_ckpt_expert_bias_of((mc_gpt_t *)m, c, p, name, sizeof(name), &bias) &&
                read_expert_bias(s, m, p, name, od, err, n) != 0) {
                mc_py_decref(od);
                return -1;
            }
        }
        mc_ckpt_model_key(m, c, key, sizeof(key));
        if (mc_py_dict_set_str(ck, key, od)) mc_fatal("out of host memory");
    }
    return 0;
}

/* A byte item's object: Megatron's ShardedObject [value] gives value. NULL when absent. */
static mc_pyobj_t *read_value(source_t *s, const char *key, char *err, size_t n, int *rc)
{
    const mc_dcp_entry_t *e = mc_dcp_meta_find(&s->meta, key);
    if (!e || !e->bytes) return NULL;
    mark(s, key, false);
    mc_pyobj_t *list = NULL;
    if (mc_dcp_read_object(s->r, key, &list, err, n) != 0) {
        *rc = -1;
        return NULL;
    }
    mc_pyobj_t *v = mc_py_incref(mc_py_item(list, 0));
    mc_py_decref(list);
    if (!v) *rc = mc_errf(err, n, "%s: '%s' is not a one-item list", s->dir, key);
    return v;
}

/* rng_state: this rank's domain's, else any domain's (megatron-c's one dropout seed is the
 * same in all; a layout change keeps it). */
static int rng_of(source_t *s, const mc_trainer_t *t, mc_pyobj_t *ck, char *err, size_t n)
{
    char key[96];
    mc_torchdist_rng_key(t, key, sizeof(key));
    if (!mc_dcp_meta_find(&s->meta, key))
        for (size_t k = 0; k < s->meta.n; k++)
            if (strncmp(s->meta.entries[k].key, "rng_state/", 10) == 0) {
                snprintf(key, sizeof(key), "%s", s->meta.entries[k].key);
                break;
            }
    int rc = 0;
    mc_pyobj_t *v = read_value(s, key, err, n, &rc);
    if (v && mc_py_dict_set_str(ck, "rng_state", v)) mc_fatal("out of host memory");
    return rc;
}

/* The model-space forms: optimizer.state.{fp32_param|param,exp_avg,exp_avg_sq}.<key>; fp32
 * training without masters saved reads them from the model's own tensors. */
static int model_space_state(source_t *s, const mc_shard_t *sh, int n_sh, mc_param_state_t *ps,
                             char *err, size_t n)
{
    static const char *const masters[] = {"fp32_param", "param"};
    char key[320];
    for (int k = 0; k < n_sh; k++)
        for (int v = 0; v < 3; v++) {
            if (v == 0) {
                snprintf(key, sizeof(key), "%s", sh[k].key);
                for (int j = 0; j < 2; j++) {
                    char alt[320];
                    snprintf(alt, sizeof(alt), "optimizer.state.%s.%s", masters[j], sh[k].key);
                    if (mc_dcp_meta_find(&s->meta, alt)) snprintf(key, sizeof(key), "%s", alt);
                }
            } else {
                snprintf(key, sizeof(key), "optimizer.state.%s.%s", mc_ckpt_state_keys[v],
                         sh[k].key);
            }
            if (read_piece(s, key, &sh[k], MC_TORCH_FLOAT32, ps->v[sh[k].param][v] + sh[k].start,
                           err, n) != 0)
                return -1;
        }
    return 0;
}

/* Whether any piece of a overlaps a piece of b of the same key. */
static bool overlaps(const mc_shard_t *a, int na, const mc_shard_t *b, int nb)
{
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++) {
            if (a[i].ndim != b[j].ndim || strcmp(a[i].key, b[j].key) != 0) continue;
            bool meet = true;
            for (int d = 0; meet && d < a[i].ndim; d++)
                meet = a[i].offsets[d] < b[j].offsets[d] + b[j].sizes[d] &&
                       b[j].offsets[d] < a[i].offsets[d] + a[i].sizes[d];
            if (meet) return true;
        }
    return false;
}

/* One saved optimizer domain: the (tp, pp, ep) rank of the saved layout whose buffers it holds,
 * which of them (sel: all, or with expert parallelism the dense parameters' or the experts'),
 * and its key prefix (Megatron's chained optimizer's index, -1 for none; its dp_group_idx). */
typedef struct {
    int tp, pp, ep;
    mc_ckpt_sel_t sel;
    int chain, dom;
} domain_t;

/* The world tensors of domain d's buffer c (st: that rank's state, b: its buffers) into this
 * rank's pieces sh of ps. */
static int decode_buffer(source_t *s, const mc_args_t *src, const domain_t *d,
                         const mc_ckpt_buffers_t *b, int c, const mc_shard_t *ssh, int n_ssh,
                         const mc_shard_t *sh, int n_sh, mc_param_state_t *ps, char *err, size_t n)
{
    char prefix[256], key[320];
    float *world[3];
    int rc = 0;
    for (int v = 0; v < 3; v++)
        if (!(world[v] = calloc((size_t)b->unpadded[c] + 1, sizeof(float))))
            mc_fatal("out of host memory");
    long wstart = 0;
    for (int k = 0; k < b->l[c].n_buckets && !rc; k++) {
        mc_torchdist_bucket_key(src, d->chain, d->dom, c, k, prefix, sizeof(prefix));
        const int64_t start[1] = {0}, len[1] = {b->l[c].buckets[k].numel_unpadded};
        for (int v = 0; v < 3 && !rc; v++) {
            snprintf(key, sizeof(key), "%s.%s", prefix, mc_ckpt_state_keys[v]);
            rc = mc_dcp_read_box(s->r, key, 1, start, len, MC_TORCH_FLOAT32, world[v] + wstart, err,
                                 n);
        }
        wstart += len[0];
    }
    for (int a = 0; a < n_ssh && !rc; a++) {
        if (b->chunk[ssh[a].param] != c) continue;
        for (int k = 0; k < n_sh; k++) {
            if (strcmp(ssh[a].key, sh[k].key) != 0) continue;
            for (int v = 0; v < 3; v++)
                mc_dcp_copy_overlap(ssh[a].ndim, ssh[a].offsets, ssh[a].sizes,
                                    world[v] + b->pos[ssh[a].param] + ssh[a].start,
                                    MC_TORCH_FLOAT32, sh[k].offsets, sh[k].sizes,
                                    ps->v[sh[k].param][v] + sh[k].start, MC_TORCH_FLOAT32);
        }
    }
    for (int v = 0; v < 3; v++) free(world[v]);
    return rc;
}

/* dp_reshardable: the buckets of one saved domain, rebuilt as that rank's training state would
 * hold them (a rank of the saved layout on the host), then every piece of it that overlaps one
 * of this rank's pieces copied into ps. */
static int decode_domain(source_t *s, const mc_args_t *src, const domain_t *d, const mc_shard_t *sh,
                         int n_sh, mc_param_state_t *ps, char *err, size_t n)
{
    char why[256];
    const mc_backend_t *be = mc_backend_select("cpu", 0, 0, why, sizeof(why));
    mc_trainer_t st;
    if (mc_trainer_init_state_ep(&st, src, be, d->tp, d->pp, d->sel == MC_CKPT_ALL ? -1 : d->ep,
                                 err, n) != 0)
        return -1;
    mc_shard_t *ssh;
    int n_ssh, rc = 0;
    if (mc_torchdist_shards(&st.model, &ssh, &n_ssh) != 0) mc_fatal("out of host memory");
    char prefix[256];
    mc_torchdist_optim_key(prefix, sizeof(prefix), d->chain, d->dom, "", false);
    mark(s, prefix, true); /* the domain's buckets and objects */
    /* only the pieces of the domain's buffers (with expert parallelism: its dense or its
     * experts' parameters) */
    int kept = 0;
    for (int a = 0; a < n_ssh; a++)
        if (d->sel == MC_CKPT_ALL ||
            (d->sel == MC_CKPT_EXPERTS) == (st.model.params[ssh[a].param].expert >= 0))
            ssh[kept++] = ssh[a];
    n_ssh = kept;
    if (!overlaps(ssh, n_ssh, sh, n_sh)) { /* none of this rank's parameters: not read */
        free(ssh);
        mc_trainer_free(&st);
        return 0;
    }
    mc_ckpt_order_t o;
    if (mc_ckpt_order_spec(&st.model, mc_ckpt_names_of(src), &o) != 0)
        mc_fatal("out of host memory");
    mc_ckpt_buffers_t b;
    mc_ckpt_buffers_of(&st, &o, d->sel, &b);
    for (int c = 0; c < b.n_chunks && !rc; c++)
        rc = decode_buffer(s, src, d, &b, c, ssh, n_ssh, sh, n_sh, ps, err, n);
    mc_ckpt_buffers_free(&b);
    mc_ckpt_order_free(&o);
    free(ssh);
    mc_trainer_free(&st);
    return rc;
}

/* Every domain of the saved layout src: one per (tp, pp) rank; with expert parallelism
 * Megatron's chained optimizer's dense domains (chained_0) and the experts' per (ep, pp). */
static int decode_domains(source_t *s, const mc_args_t *src, const mc_shard_t *sh, int n_sh,
                          mc_param_state_t *ps, char *err, size_t n)
{
    const int ep = src->num_experts && src->expert_model_parallel_size > 1
                       ? src->expert_model_parallel_size
                       : 1;
    const int tp = src->tensor_model_parallel_size > 0 ? src->tensor_model_parallel_size : 1;
    const int etp = src->expert_tensor_parallel_size > 0 ? src->expert_tensor_parallel_size : tp;
    if (ep > 1 && etp != tp && etp != 1)
        return mc_errf(err, n,
                       "%s: the distributed optimizer's state of a checkpoint saved with "
                       "--expert-tensor-parallel-size %d and --tensor-model-parallel-size %d is "
                       "recognised but not read yet by megatron-c (add --no-load-optim)",
                       s->dir, etp, tp);
    int rc = 0;
    for (int pp = 0; pp < src->pipeline_model_parallel_size && !rc; pp++) {
        for (int tp = 0; tp < src->tensor_model_parallel_size && !rc; tp++) {
            const domain_t d = {tp,
                                pp,
                                0,
                                ep > 1 ? MC_CKPT_DENSE : MC_CKPT_ALL,
                                ep > 1 ? 0 : -1,
                                mc_torchdist_domain(src, tp, pp)};
            rc = decode_domain(s, src, &d, sh, n_sh, ps, err, n);
        }
        /* the experts' domains per (etp, ep): an etp rank's state is built as that tp rank's */
        for (int e = 0; ep > 1 && e < ep && !rc; e++)
            for (int et = 0; et < etp && !rc; et++) {
                const domain_t d = {
                    et, pp, e, MC_CKPT_EXPERTS, 1, mc_torchdist_expert_domain(src, et, e, pp)};
                rc = decode_domain(s, src, &d, sh, n_sh, ps, err, n);
            }
    }
    return rc;
}

static int dp_reshardable_state(source_t *s, const mc_shard_t *sh, int n_sh, mc_param_state_t *ps,
                                char *err, size_t n)
{
    const mc_pyobj_t *ns = mc_py_dict_get_str(s->common, "args");
    mc_args_t src;
    memset(&src, 0, sizeof(src));
    char inner[512];
    if (!ns || mc_ckpt_args_from_namespace(ns, &src, inner, sizeof(inner)) != 0) {
        mc_args_free(&src);
        return mc_errf(err, n, "%s/common.pt: %s", s->dir,
                       ns ? inner : "no 'args' (the layout of its optimizer buckets is unknown)");
    }
    const int rc = decode_domains(s, &src, sh, n_sh, ps, err, n);
    mc_args_free(&src);
    return rc;
}

/* The optimizer's scalars: common.pt's optimizer entry, or for dp_reshardable the per-domain
 * objects of DistributedOptimizer.state_dict() (this rank's domain's when saved at this
 * layout, else the first's: the step and the group settings are the same in all). */
static int optimizer_scalars(source_t *s, mc_trainer_t *t, const mc_pyobj_t *opt, int chain,
                             char *err, size_t n)
{
    if (!mc_py_dict_get_str(opt, "param_state_sharding_type") ||
        mc_py_dict_get_str(opt, "optimizer") || mc_py_dict_get_str(opt, "param_groups"))
        return mc_ckpt_optimizer_load_scalars(t, opt, err, n);
    char key[200];
    int dom = mc_torchdist_domain(t->args, t->par.me.tp, t->par.me.pp), rc = 0;
    mc_torchdist_optim_key(key, sizeof(key), chain, dom, "optimizer", true);
    if (!mc_dcp_meta_find(&s->meta, key)) dom = 0;
    mc_pyobj_t *d = mc_py_dict();
    static const char *const names[] = {"optimizer", "grad_scaler"};
    for (int k = 0; k < 2 && !rc; k++) {
        mc_torchdist_optim_key(key, sizeof(key), chain, dom, names[k], true);
        mc_pyobj_t *v = read_value(s, key, err, n, &rc);
        if (v && mc_py_dict_set_str(d, names[k], v)) mc_fatal("out of host memory");
    }
    if (!rc && !mc_py_dict_get_str(d, "optimizer"))
        rc = mc_errf(err, n, "%s/.metadata: no %s (the distributed optimizer's parameter groups)",
                     s->dir, key);
    if (!rc) rc = mc_ckpt_optimizer_load_scalars(t, d, err, n);
    mc_py_decref(d);
    return rc;
}

static int load_optimizer(source_t *s, mc_trainer_t *t, const mc_shard_t *sh, int n_sh, char *err,
                          size_t n)
{
    const mc_pyobj_t *opt = mc_py_dict_get_str(s->common, "optimizer");
    const mc_pyobj_t *sched = mc_py_dict_get_str(s->common, "opt_param_scheduler");
    if (!opt || !sched || opt->kind != MC_PY_DICT)
        return mc_errf(err, n,
                       "%s/common.pt: no optimizer state (saved with --no-save-optim?): add "
                       "--no-load-optim or --finetune",
                       s->dir);
    /* Megatron's chained optimizer (expert parallelism): {0: the dense parameters', 1: the
     * experts'}; the scalars (step, groups' settings) are the dense one's */
    const int chain = mc_py_dict_get_int(opt, 0) ? 0 : -1;
    if (chain == 0) opt = mc_py_dict_get_int(opt, 0);
    if (!opt || opt->kind != MC_PY_DICT)
        return mc_errf(err, n, "%s/common.pt: the chained optimizer's entry 0 is not a dict",
                       s->dir);
    char inner[512];
    if (mc_ckpt_scheduler_load(&t->sched, t->args, sched, inner, sizeof(inner)) != 0 ||
        optimizer_scalars(s, t, opt, chain, inner, sizeof(inner)) != 0)
        return mc_errf(err, n, "%s/common.pt: %s", s->dir, inner);
    const char *kind = mc_py_get_str(mc_py_dict_get_str(opt, "param_state_sharding_type"));
    mc_param_state_t ps;
    mc_param_state_alloc(&ps, &t->model);
    int rc;
    if (kind && strcmp(kind, "dp_reshardable") == 0)
        rc = dp_reshardable_state(s, sh, n_sh, &ps, err, n);
    else if (!kind || strcmp(kind, "fully_reshardable") == 0)
        rc = model_space_state(s, sh, n_sh, &ps, err, n);
    else
        rc = mc_errf(err, n,
                     "%s/common.pt: the distributed optimizer's state is of the %s kind, which "
                     "megatron-c does not read (save it with dp_reshardable or "
                     "--dist-ckpt-optim-fully-reshardable, or add --no-load-optim)",
                     s->dir, kind);
    if (!rc) mc_param_state_set(t, &ps);
    mc_param_state_free(&ps);
    return rc;
}

/* Hands the keys and what this rank asked for to the caller's strictness check. */
static void usage_of(source_t *s, mc_torchdist_usage_t *u)
{
    u->n = s->meta.n;
    u->used = s->used;
    s->used = NULL;
    if (!(u->keys = calloc(u->n + 1, sizeof(char *)))) mc_fatal("out of host memory");
    for (size_t k = 0; k < u->n; k++)
        if (!(u->keys[k] = strdup(s->meta.entries[k].key))) mc_fatal("out of host memory");
}

void mc_torchdist_usage_free(mc_torchdist_usage_t *u)
{
    for (size_t k = 0; u->keys && k < u->n; k++) free(u->keys[k]);
    free(u->keys);
    free(u->used);
    memset(u, 0, sizeof(*u));
}

int mc_torchdist_load(mc_trainer_t *t, const char *iter_dir, bool release, mc_torchdist_usage_t *u,
                      char *err, size_t n)
{
    memset(u, 0, sizeof(*u));
    const mc_args_t *a = t->args;
    source_t s;
    mc_shard_t *sh = NULL;
    int n_sh = 0, rc = open_source(&s, iter_dir, err, n);
    if (!rc && mc_torchdist_shards(&t->model, &sh, &n_sh) != 0) mc_fatal("out of host memory");
    /* the model's shape first: a clearer line than the first tensor that does not fit */
    const mc_pyobj_t *ns = rc ? NULL : mc_py_dict_get_str(s.common, "args");
    char inner[1024];
    if (ns && !a->finetune && mc_ckpt_args_check(ns, a, true, inner, sizeof(inner)) != 0)
        rc = mc_errf(err, n, "%s/common.pt: %s", iter_dir, inner);
    mc_pyobj_t *ck = mc_py_dict();
    static const char *const carried[] = {"args", "checkpoint_version", "iteration",
                                          "num_floating_point_operations_so_far"};
    for (size_t k = 0; !rc && k < sizeof(carried) / sizeof(carried[0]); k++) {
        mc_pyobj_t *v = mc_py_dict_get_str(s.common, carried[k]);
        if (v && mc_py_dict_set_str(ck, carried[k], mc_py_incref(v)))
            mc_fatal("out of host memory");
    }
    if (!rc) rc = model_dicts(&s, &t->model, sh, n_sh, ck, err, n);
    if (!rc) { /* the linears' _extra_state objects (megatron-c's are None) */
        mark(&s, "decoder.layers.", true);
        mark(&s, "output_layer._extra_state", true);
    }
    const bool rng = !release && !a->finetune && !a->no_load_rng;
    if (!rc && rng) rc = rng_of(&s, t, ck, err, n);
    const mc_ckpt_apply_opts_t opts = {.dist = true, .release = release, .load_optim = false};
    mc_ckpt_applied_t got = {0};
    if (!rc && mc_ckpt_apply(t, ck, &opts, &got, inner, sizeof(inner)) != 0)
        rc = mc_errf(err, n, "%s: %s", iter_dir, inner);
    mc_ckpt_order_free(&got.order);
    u->foreign_rng = got.foreign_rng;
    if (!rc && !release && !a->finetune && !a->no_load_optim)
        rc = load_optimizer(&s, t, sh, n_sh, err, n);
    mc_py_decref(ck);
    free(sh);
    if (!rc) usage_of(&s, u);
    close_source(&s);
    return rc;
}

/* Megatron's StrictHandling for the keys no rank asked for (a key a rank needs and the
 * checkpoint lacks is an error of the load itself). */
void mc_torchdist_strictness(mc_trainer_t *t, mc_torchdist_usage_t *u, char *err, size_t n)
{
    const char *mode = t->args->dist_ckpt_strictness;
    const bool log = strncmp(mode, "log_", 4) == 0 || strncmp(mode, "return_", 7) == 0;
    const bool raise = strncmp(mode, "raise_", 6) == 0;
    if (!log && !raise) return;
    int32_t *any = calloc(u->n + 1, sizeof(int32_t));
    if (!any) mc_fatal("out of host memory");
    for (size_t k = 0; k < u->n; k++) any[k] = u->used[k];
    mc_all_reduce(t->comm, t->comm->world, any, u->n, MC_DT_I32, MC_OP_MAX);
    char list[2048] = "";
    size_t count = 0, at = 0;
    for (size_t k = 0; k < u->n; k++) {
        if (any[k]) continue;
        if (at < sizeof(list) - 1)
            at += (size_t)snprintf(list + at, sizeof(list) - at, "%s'%s'", count ? ", " : "",
                                   u->keys[k]);
        count++;
    }
    free(any);
    if (count == 0) return;
    if (at >= sizeof(list) - 1) snprintf(list + sizeof(list) - 5, 5, "...");
    if (raise)
        snprintf(err, n,
                 "--dist-ckpt-strictness %s: %zu unexpected keys in the checkpoint (not found in "
                 "this run's sharded state dict): {%s}",
                 mode, count, list);
    else if (t->par.rank == 0)
        printf("WARNING: Unexpected keys (not found in sharded_state_dict): {%s}\n", list);
}
