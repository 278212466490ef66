/* Fuzzes the torch.load equivalent (torchfmt/): mutated torch.save files go to mc_torch_load_mem
 * (zip container, CRC-32 usually skipped so that mutations reach the records, pickle, storages),
 * and mutated data.pkl records to mc_unpickle directly. What loads is walked (every tensor's
 * bytes read) and saved again (torchfmt's writer on the loaded graph). Seeds: the .pt files on
 * the command line (e.g. a common.pt that torch wrote) and a Megatron-like checkpoint built here.
 *
 *   fuzz_pt [--seconds N] [--seed S] [--crashes DIR] [FILE.pt...] */
#include "test/fuzz/fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torchfmt/pickle.h"
#include "torchfmt/torch_save.h"

#define MAX_SEEDS 8
#define MAX_LEN (8u << 20)

typedef struct {
    fuzz_buf_t zip[MAX_SEEDS], pkl[MAX_SEEDS];
    int n_zip, n_pkl;
    fuzz_buf_t cur;
    bool raw_pickle; /* cur is a data.pkl for mc_unpickle, else a whole file */
    unsigned flags;
} pt_ctx_t;

/* A checkpoint shaped like Megatron's: args Namespace, iteration, model tensors of several
 * dtypes (one a view with an offset), an rng list, nested dicts and every scalar kind. */
static mc_pyobj_t *megatron_like(void)
{
    mc_pyobj_t *ck = mc_py_dict(), *args = mc_py_namespace(), *model = mc_py_ordered_dict();
    mc_py_attr_set(args, "num_layers", mc_py_int(2));
    mc_py_attr_set(args, "lr", mc_py_float(3e-4));
    mc_py_attr_set(args, "tokenizer_type", mc_py_str("GPT2BPETokenizer"));
    mc_py_attr_set(args, "bf16", mc_py_bool(true));
    mc_py_attr_set(args, "load", mc_py_none());
    mc_py_dict_set_str(ck, "args", args);
    mc_py_dict_set_str(ck, "checkpoint_version", mc_py_float(3.0));
    mc_py_dict_set_str(ck, "iteration", mc_py_int(1LL << 40));
    int64_t shape[2] = {4, 3};
    mc_py_dict_set_str(model, "embedding.weight", mc_py_tensor_new(MC_TORCH_FLOAT32, 2, shape));
    mc_py_dict_set_str(model, "layer.bias", mc_py_tensor_new(MC_TORCH_BFLOAT16, 1, shape));
    mc_py_dict_set_str(model, "ids", mc_py_tensor_new(MC_TORCH_INT64, 1, shape + 1));
    mc_pyobj_t *st = mc_py_storage_new(MC_TORCH_FLOAT16, 16);
    int64_t vshape[1] = {5}, vstride[1] = {2};
    mc_py_dict_set_str(model, "view", mc_py_tensor(st, MC_TORCH_FLOAT16, 3, 1, vshape, vstride));
    mc_py_dict_set_str(ck, "model", model);
    mc_pyobj_t *rng = mc_py_list();
    mc_py_list_append(rng, mc_py_tuple(3, mc_py_str("MT19937"), mc_py_bytes("\x01\x02\x03", 3),
                                       mc_py_int(-7)));
    mc_py_list_append(rng, mc_py_int(0));
    mc_py_dict_set_str(ck, "rng_state", rng);
    mc_py_dict_set_int(ck, 5, mc_py_str("int key"));
    return ck;
}

static void add_zip(pt_ctx_t *c, const void *p, size_t n)
{
    if (c->n_zip < MAX_SEEDS) fuzz_buf_set(&c->zip[c->n_zip++], p, n);
}

static void add_seed_obj(pt_ctx_t *c, mc_pyobj_t *obj)
{
    char err[512];
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    mc_torch_save_opts_t opts = {.archive_name = "model_optim_rng"};
    if (!f || mc_torch_save_stream(f, obj, &opts, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz pt: cannot build the seed: %s\n", err);
        exit(2);
    }
    fclose(f);
    add_zip(c, mem, len);
    free(mem);
    uint8_t *pkl;
    size_t pn;
    mc_pickle_storages_t st;
    if (mc_pickle_dump(obj, &pkl, &pn, &st, err, sizeof err) == 0) {
        fuzz_buf_set(&c->pkl[c->n_pkl++], pkl, pn);
        free(pkl);
        mc_pickle_storages_free(&st);
    }
}

static void make(void *ctx, long i)
{
    pt_ctx_t *c = ctx;
    c->raw_pickle = c->n_pkl && fuzz_below(3) == 0;
    if (c->raw_pickle) {
        const fuzz_buf_t *s = &c->pkl[fuzz_below((uint64_t)c->n_pkl)];
        fuzz_buf_set(&c->cur, s->p, s->n);
        fuzz_mutate(&c->cur, 0, MAX_LEN);
    } else {
        const fuzz_buf_t *s = &c->zip[fuzz_below((uint64_t)c->n_zip)];
        fuzz_buf_set(&c->cur, s->p, s->n);
        /* the records' headers are at the start, the directory at the end: mutate both */
        fuzz_mutate(&c->cur, fuzz_below(2) ? 128 : 0, MAX_LEN);
        c->flags = (fuzz_below(8) ? MC_TORCH_LOAD_NO_CRC : 0) |
                   (fuzz_below(2) ? MC_TORCH_LOAD_COPY : 0);
    }
}

static uint64_t touch(const mc_pyobj_t *o, int depth)
{
    if (!o || depth > 200) return 0;
    uint64_t h = (uint64_t)o->kind;
    switch (o->kind) {
    case MC_PY_STR: case MC_PY_BYTES:
        for (size_t i = 0; i < o->str.len; i++) h = h * 31 + (uint8_t)o->str.data[i];
        break;
    case MC_PY_TUPLE: case MC_PY_LIST:
        for (size_t i = 0; i < o->seq.len; i++) h += touch(o->seq.items[i], depth + 1);
        break;
    case MC_PY_DICT:
        for (size_t i = 0; i < o->dict.len; i++)
            h += touch(o->dict.keys[i], depth + 1) * 7 + touch(o->dict.vals[i], depth + 1);
        h += touch(o->dict.attrs, depth + 1);
        break;
    case MC_PY_OBJECT:
        h += touch(o->object.callable, depth + 1) + touch(o->object.args, depth + 1) +
             touch(o->object.state, depth + 1) + touch(o->object.listitems, depth + 1) +
             touch(o->object.dictitems, depth + 1);
        break;
    case MC_PY_TENSOR: {
        /* every byte the tensor's shape and strides reach must be inside its storage */
        const uint8_t *base = mc_py_tensor_data(o);
        size_t es = mc_torch_dtype_size(o->tensor.dtype);
        int64_t last = 0;
        bool empty = false;
        for (int d = 0; d < o->tensor.ndim; d++) {
            if (o->tensor.shape[d] == 0) empty = true;
            else last += (o->tensor.shape[d] - 1) * o->tensor.stride[d];
        }
        if (!empty && base && es) h += base[0] + base[(size_t)last * es + es - 1];
        if (mc_py_tensor_contiguous(o) && base)
            for (size_t i = 0; i < mc_py_tensor_nbytes(o); i++) h += base[i];
        break;
    }
    default:
        break;
    }
    return h;
}

static void resave(const mc_pyobj_t *o)
{
    char *mem = NULL, err[512];
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    if (!f) return;
    mc_torch_save_stream(f, o, NULL, err, sizeof err);
    fclose(f);
    free(mem);
}

static mc_pyobj_t *fake_storage(void *ctx, const char *key, mc_torch_dtype_t dt, bool untyped,
                                int64_t numel, const char *location, char *err, size_t errn)
{
    if (numel < 0 || numel > (1 << 20)) {
        snprintf(err, errn, "storage too large");
        return NULL;
    }
    return mc_py_storage_new(untyped ? MC_TORCH_UINT8 : dt, numel);
}

static void run(void *ctx)
{
    pt_ctx_t *c = ctx;
    mc_pyobj_t *o = NULL;
    char err[1024];
    int rc;
    if (c->raw_pickle) {
        mc_unpickle_storages_t st = {fake_storage, NULL};
        rc = mc_unpickle(c->cur.p, c->cur.n, &st, &o, err, sizeof err);
    } else {
        rc = mc_torch_load_mem(c->cur.p, c->cur.n, c->flags, &o, err, sizeof err);
    }
    if (rc != 0) {
        if (o || !memchr(err, '\0', sizeof err) || strchr(err, '\n')) abort(); /* one line */
        return;
    }
    volatile uint64_t h = touch(o, 0);
    (void)h;
    resave(o);
    mc_py_decref(o);
}

static void save(void *ctx, const char *prefix)
{
    pt_ctx_t *c = ctx;
    char path[4300];
    snprintf(path, sizeof path, "%s.%s", prefix, c->raw_pickle ? "pkl" : "pt");
    fuzz_write_file(path, c->cur.p, c->cur.n);
    snprintf(path, sizeof path, "%s.txt", prefix);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%s flags %u\n", c->raw_pickle ? "mc_unpickle" : "mc_torch_load_mem", c->flags);
        fclose(f);
    }
}

int main(int argc, char **argv)
{
    fuzz_opts_t o;
    fuzz_parse(&o, argc, argv, "[FILE.pt...]");
    static pt_ctx_t c;
    for (int k = 0; k < o.argc; k++) {
        fuzz_buf_t b = {0};
        if (fuzz_read_file(o.argv[k], &b) != 0) {
            fprintf(stderr, "fuzz pt: cannot read %s\n", o.argv[k]);
            return 2;
        }
        add_zip(&c, b.p, b.n);
        fuzz_buf_free(&b);
    }
    mc_pyobj_t *seed = megatron_like();
    add_seed_obj(&c, seed);
    mc_py_decref(seed);
    static const int allowed[] = {0};
    fuzz_target_t t = {"pt", make, run, save, allowed, 1, &c};
    long failures = fuzz_loop(&o, &t);
    for (int s = 0; s < MAX_SEEDS; s++) fuzz_buf_free(&c.zip[s]), fuzz_buf_free(&c.pkl[s]);
    fuzz_buf_free(&c.cur);
    return failures ? 1 : 0;
}
