/* Drives ckpt/ for test/integration/test_ckpt_torch.sh, which checks it against PyTorch:
 *   ckpt_tool write PATH [--zip64]   writes the sample checkpoint below (Python mirrors it)
 *   ckpt_tool simple PATH            writes a small object whose data.pkl must equal torch's
 *   ckpt_tool dump PATH              loads PATH and prints it as JSON (format below)
 *   ckpt_tool resave IN OUT          loads IN and saves it again as OUT
 *   ckpt_tool big PATH               writes a > 4 GiB file: a 4 GiB + 16 byte tensor of zeros
 *                                    and a small tensor after it (zip64 sizes and offsets)
 * JSON: None/bool/int/float/str/list as themselves; {"bytes": hex}, {"tuple": [...]},
 * {"dict": [[k, v]...], "ordered": b, "attrs": x}, {"global": "mod.name"}, {"object": callable,
 * "args", "newobj", "state", "listitems", "dictitems"}, {"tensor": dtype, "shape", "stride",
 * "offset", "requires_grad", "parameter", "values": [...] (floats; 16-bit floats widened)}.
 * Exit status 0, or 1 with the error on stderr. */
#include "torchfmt/pyobj.h"
#include "torchfmt/torch_save.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- JSON dump ------------------------------------------------------------------------------- */

static void json_str(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void json_float(double f)
{
    if (isnan(f)) printf("\"nan\"");
    else if (isinf(f)) printf(f > 0 ? "\"inf\"" : "\"-inf\"");
    else printf("%.17g", f);
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) bits = sign | 0x7f800000 | man << 13;
    else if (exp) bits = sign | (exp + 112) << 23 | man << 13;
    else if (!man) bits = sign;
    else { /* subnormal */
        exp = 113;
        while (!(man & 0x400)) man <<= 1, exp--;
        bits = sign | exp << 23 | (man & 0x3ff) << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void json_element(mc_torch_dtype_t dt, const uint8_t *p)
{
    union { float f; double d; int64_t i64; int32_t i32; int16_t i16; uint32_t u32; uint64_t u64;
            uint16_t u16; } v;
    switch (dt) {
    case MC_TORCH_FLOAT32: memcpy(&v.f, p, 4); json_float(v.f); break;
    case MC_TORCH_FLOAT64: memcpy(&v.d, p, 8); json_float(v.d); break;
    case MC_TORCH_FLOAT16: memcpy(&v.u16, p, 2); json_float(half_to_float(v.u16)); break;
    case MC_TORCH_BFLOAT16:
        memcpy(&v.u16, p, 2);
        v.u32 = (uint32_t)v.u16 << 16;
        json_float(v.f);
        break;
    case MC_TORCH_INT64: memcpy(&v.i64, p, 8); printf("%lld", (long long)v.i64); break;
    case MC_TORCH_INT32: memcpy(&v.i32, p, 4); printf("%d", v.i32); break;
    case MC_TORCH_INT16: memcpy(&v.i16, p, 2); printf("%d", v.i16); break;
    case MC_TORCH_INT8: printf("%d", (int8_t)p[0]); break;
    case MC_TORCH_UINT8: printf("%u", p[0]); break;
    case MC_TORCH_BOOL: printf(p[0] ? "true" : "false"); break;
    case MC_TORCH_UINT16: memcpy(&v.u16, p, 2); printf("%u", v.u16); break;
    case MC_TORCH_UINT32: memcpy(&v.u32, p, 4); printf("%u", v.u32); break;
    case MC_TORCH_UINT64: memcpy(&v.u64, p, 8); printf("%llu", (unsigned long long)v.u64); break;
    default: printf("null"); break;
    }
}

static void json(const mc_pyobj_t *o);

static void json_opt(const char *key, const mc_pyobj_t *o)
{
    printf(", \"%s\": ", key);
    if (o) json(o);
    else printf("null");
}

static void json_ints(const int64_t *v, int n)
{
    putchar('[');
    for (int i = 0; i < n; i++) printf("%s%lld", i ? ", " : "", (long long)v[i]);
    putchar(']');
}

/* Values printed per tensor (the script cuts the same); the big file's 4 GiB are not. */
#define MAX_VALUES (1 << 16)

static void json_tensor(const mc_pyobj_t *t)
{
    printf("{\"tensor\": \"%s\", \"shape\": ", mc_torch_dtype_name(t->tensor.dtype));
    json_ints(t->tensor.shape, t->tensor.ndim);
    printf(", \"stride\": ");
    json_ints(t->tensor.stride, t->tensor.ndim);
    printf(", \"offset\": %lld, \"requires_grad\": %s, \"parameter\": %s, \"values\": [",
           (long long)t->tensor.offset, t->tensor.requires_grad ? "true" : "false",
           t->tensor.parameter ? "true" : "false");
    int64_t n = mc_py_tensor_numel(t);
    size_t es = mc_torch_dtype_size(t->tensor.dtype);
    const uint8_t *base = t->tensor.storage->storage.data;
    for (int64_t i = 0; i < n && i < MAX_VALUES; i++) {
        int64_t off = t->tensor.offset, r = i;
        for (int d = t->tensor.ndim - 1; d >= 0; d--) {
            off += (r % t->tensor.shape[d]) * t->tensor.stride[d];
            r /= t->tensor.shape[d];
        }
        if (i) printf(", ");
        json_element(t->tensor.dtype, base + off * (int64_t)es);
    }
    printf("]}");
}

static void json(const mc_pyobj_t *o)
{
    switch (o->kind) {
    case MC_PY_NONE: printf("null"); break;
    case MC_PY_BOOL: printf(o->b ? "true" : "false"); break;
    case MC_PY_INT: printf("%lld", (long long)o->i); break;
    case MC_PY_FLOAT: json_float(o->f); break;
    case MC_PY_STR: json_str(o->str.data, o->str.len); break;
    case MC_PY_BYTES:
        printf("{\"bytes\": \"");
        for (size_t i = 0; i < o->str.len; i++) printf("%02x", (unsigned char)o->str.data[i]);
        printf("\"}");
        break;
    case MC_PY_TUPLE:
    case MC_PY_LIST:
        printf(o->kind == MC_PY_TUPLE ? "{\"tuple\": [" : "[");
        for (size_t i = 0; i < o->seq.len; i++) {
            if (i) printf(", ");
            json(o->seq.items[i]);
        }
        printf(o->kind == MC_PY_TUPLE ? "]}" : "]");
        break;
    case MC_PY_DICT:
        printf("{\"dict\": [");
        for (size_t i = 0; i < o->dict.len; i++) {
            printf(i ? ", [" : "[");
            json(o->dict.keys[i]);
            printf(", ");
            json(o->dict.vals[i]);
            printf("]");
        }
        printf("], \"ordered\": %s", o->dict.ordered ? "true" : "false");
        json_opt("attrs", o->dict.attrs);
        printf("}");
        break;
    case MC_PY_GLOBAL: printf("{\"global\": \"%s.%s\"}", o->global.module, o->global.name); break;
    case MC_PY_OBJECT:
        printf("{\"object\": ");
        json(o->object.callable);
        json_opt("args", o->object.args);
        printf(", \"newobj\": %s", o->object.newobj ? "true" : "false");
        json_opt("state", o->object.state);
        json_opt("listitems", o->object.listitems);
        json_opt("dictitems", o->object.dictitems);
        printf("}");
        break;
    case MC_PY_STORAGE:
        printf("{\"storage\": \"%s\", \"numel\": %lld}", mc_torch_dtype_name(o->storage.dtype),
               (long long)o->storage.numel);
        break;
    case MC_PY_TENSOR: json_tensor(o); break;
    }
}

/* ---- the sample checkpoint (test_ckpt_torch.sh builds the same in Python) -------------------- */

#define SET(d, k, v) ok &= mc_py_dict_set_str(d, k, v) == 0
#define ATTR(o, k, v) ok &= mc_py_attr_set(o, k, v) == 0

static mc_pyobj_t *tensor_f32(int ndim, const int64_t *shape, float scale)
{
    mc_pyobj_t *t = mc_py_tensor_new(MC_TORCH_FLOAT32, ndim, shape);
    float *p = t ? mc_py_tensor_data(t) : NULL;
    for (int64_t i = 0; p && i < mc_py_tensor_numel(t); i++) p[i] = (float)i * scale - 1.0f;
    return t;
}

static mc_pyobj_t *sample(void)
{
    bool ok = true;
    mc_pyobj_t *root = mc_py_dict(), *args = mc_py_namespace(), *model = mc_py_ordered_dict();
    ATTR(args, "num_layers", mc_py_int(2));
    ATTR(args, "hidden_size", mc_py_int(64));
    ATTR(args, "lr", mc_py_float(1.5e-4));
    ATTR(args, "bf16", mc_py_bool(true));
    ATTR(args, "fp16", mc_py_bool(false));
    ATTR(args, "tokenizer_type", mc_py_str("GPT2BPETokenizer"));
    mc_pyobj_t *paths = mc_py_list();
    ok &= mc_py_list_append(paths, mc_py_str("corpus_text_document")) == 0;
    ok &= mc_py_list_append(paths, mc_py_str("wiki_text_document")) == 0;
    ATTR(args, "data_path", paths);
    ATTR(args, "train_samples", mc_py_int(1LL << 40));
    ATTR(args, "min_value", mc_py_int(-(1LL << 35)));
    ATTR(args, "load", mc_py_none());
    ATTR(args, "split_ratio", mc_py_tuple(2, mc_py_float(0.9), mc_py_float(0.1)));
    SET(root, "args", args);
    SET(root, "checkpoint_version", mc_py_float(3.0));
    SET(root, "iteration", mc_py_int(100));

    int64_t s43[] = {4, 3}, s22[] = {2, 2}, s2[] = {2}, s3[] = {3}, s03[] = {0, 3}, s5[] = {5};
    SET(model, "embedding.word_embeddings.weight", tensor_f32(2, s43, 0.5f));
    mc_pyobj_t *bf = mc_py_tensor_new(MC_TORCH_BFLOAT16, 2, s22), *h = mc_py_tensor_new(MC_TORCH_FLOAT16, 1, s2);
    uint16_t bfv[] = {0x3f80, 0xc000, 0x3e80, 0x0000}, hv[] = {0x3c00, 0xbc00}; /* 1,-2,.25,0; 1,-1 */
    if (bf) memcpy(mc_py_tensor_data(bf), bfv, sizeof bfv);
    if (h) memcpy(mc_py_tensor_data(h), hv, sizeof hv);
    SET(model, "decoder.layers.0.mlp.linear_fc1.weight", bf);
    SET(model, "decoder.layers.0.mlp.linear_fc1.bias", h);
    float scalar = 3.5f;
    SET(model, "scalar", mc_py_tensor_copy(MC_TORCH_FLOAT32, 0, NULL, &scalar));
    int64_t ids[] = {1, -2, 1LL << 40};
    SET(model, "ids", mc_py_tensor_copy(MC_TORCH_INT64, 1, s3, ids));
    uint8_t mask[] = {1, 0};
    SET(model, "mask", mc_py_tensor_copy(MC_TORCH_BOOL, 1, s2, mask));
    int32_t counts[] = {7, -7};
    SET(model, "counts", mc_py_tensor_copy(MC_TORCH_INT32, 1, s2, counts));
    uint8_t raw[] = {0, 127, 128, 255};
    int64_t s4[] = {4};
    SET(model, "raw", mc_py_tensor_copy(MC_TORCH_UINT8, 1, s4, raw));
    double f64[] = {0.1, -1e300, 2.5};
    SET(model, "f64", mc_py_tensor_copy(MC_TORCH_FLOAT64, 1, s3, f64));
    int16_t i16[] = {-300, 300};
    SET(model, "i16", mc_py_tensor_copy(MC_TORCH_INT16, 1, s2, i16));
    int8_t i8[] = {-128, 127};
    SET(model, "i8", mc_py_tensor_copy(MC_TORCH_INT8, 1, s2, i8));
    SET(model, "empty", mc_py_tensor_new(MC_TORCH_FLOAT32, 2, s03));
    /* two views of one storage: the second starts at element 1 and steps by 2 */
    mc_pyobj_t *st = mc_py_storage_new(MC_TORCH_FLOAT32, 6);
    if (st)
        for (int i = 0; i < 6; i++) ((float *)st->storage.data)[i] = (float)(10 + i);
    int64_t stride2[] = {2};
    SET(model, "base", mc_py_tensor(mc_py_incref(st), MC_TORCH_FLOAT32, 0, 1, (int64_t[]){6}, NULL));
    SET(model, "strided_view", mc_py_tensor(st, MC_TORCH_FLOAT32, 1, 1, (int64_t[]){2}, stride2));
    mc_pyobj_t *param = tensor_f32(1, s5, 1.0f);
    if (param) param->tensor.parameter = param->tensor.requires_grad = true;
    SET(model, "param", param);
    ATTR(model, "_metadata", mc_py_ordered_dict());
    mc_pyobj_t *md = mc_py_attr(model, "_metadata"), *ver = mc_py_dict();
    SET(ver, "version", mc_py_int(1));
    if (md) ok &= mc_py_dict_set_str(md, "", ver) == 0;
    else mc_py_decref(ver);
    SET(root, "model", model);

    mc_pyobj_t *opt = mc_py_dict(), *groups = mc_py_list(), *g = mc_py_dict(), *state = mc_py_dict();
    SET(g, "lr", mc_py_float(1e-3));
    SET(g, "params", mc_py_tuple(2, mc_py_int(0), mc_py_int(1)));
    ok &= mc_py_list_append(groups, g) == 0;
    SET(opt, "param_groups", groups);
    mc_pyobj_t *s0 = mc_py_dict();
    float step = 5;
    SET(s0, "step", mc_py_tensor_copy(MC_TORCH_FLOAT32, 0, NULL, &step));
    SET(s0, "exp_avg", tensor_f32(1, s3, 0.25f));
    ok &= mc_py_dict_set_int(state, 0, s0) == 0;
    SET(opt, "state", state);
    SET(root, "optimizer", opt);

    SET(root, "blob", mc_py_bytes("\x00\xff\x80" "abc", 6));
    SET(root, "empty_bytes", mc_py_bytes("", 0));
    SET(root, "unicode", mc_py_str("h\xc3\xa9llo \xe2\x9c\x93"));
    SET(root, "flags", mc_py_tuple(3, mc_py_bool(true), mc_py_bool(false), mc_py_none()));
    SET(root, "extremes", mc_py_tuple(5, mc_py_int(INT64_MIN), mc_py_int(INT64_MAX),
                                      mc_py_int(-129), mc_py_int(65536), mc_py_int(-1)));
    mc_pyobj_t *nested = mc_py_list(), *inner = mc_py_list();
    ok &= mc_py_list_append(inner, mc_py_tuple(0)) == 0;
    ok &= mc_py_list_append(inner, mc_py_tuple(4, mc_py_int(1), mc_py_int(2), mc_py_int(3),
                                               mc_py_int(4))) == 0;
    ok &= mc_py_list_append(nested, mc_py_int(1)) == 0;
    ok &= mc_py_list_append(nested, inner) == 0;
    SET(root, "nested", nested);
    mc_pyobj_t *big_list = mc_py_list(), *big_dict = mc_py_dict();
    for (int i = 0; i < 1001; i++) ok &= mc_py_list_append(big_list, mc_py_int(i)) == 0;
    for (int i = 0; i < 1000; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        SET(big_dict, k, mc_py_int(i));
    }
    SET(root, "big_list", big_list);
    SET(root, "big_dict", big_dict);
    if (!ok) {
        mc_py_decref(root);
        return NULL;
    }
    return root;
}

/* Its data.pkl must equal torch.save's for the same object built in Python (the script's
 * simple()): memo sharing of a tensor met twice, a view, CPython's singleton strings ('', one
 * character), batching of 1001 list items and 1000 dict items, int encodings, bytes. */
static mc_pyobj_t *simple(void)
{
    bool ok = true;
    mc_pyobj_t *root = mc_py_dict(), *args = mc_py_namespace(), *sd = mc_py_ordered_dict();
    ATTR(args, "hidden_size", mc_py_int(1024));
    ATTR(args, "lr_decay_style", mc_py_str("cosine"));
    SET(root, "args", args);
    SET(root, "iteration", mc_py_int(300000));
    int64_t s23[] = {2, 3}, s2[] = {2}, s3[] = {3}, s5[] = {5};
    mc_pyobj_t *w = tensor_f32(2, s23, 0.5f);
    SET(sd, "weight", mc_py_incref(w));
    SET(sd, "bias", mc_py_tensor_new(MC_TORCH_BFLOAT16, 1, s2));
    /* Python's '' and 'a' literals are single objects: one pointer each here */
    mc_pyobj_t *md = mc_py_ordered_dict(), *ver = mc_py_dict(), *empty = mc_py_str(""),
               *a = mc_py_str("a");
    SET(ver, "version", mc_py_int(1));
    ok &= mc_py_dict_set(md, mc_py_incref(empty), ver) == 0;
    ATTR(sd, "_metadata", md);
    SET(root, "model", sd);
    SET(root, "checkpoint_version", mc_py_float(3.0));
    SET(root, "neg", mc_py_int(-5000000000LL));
    SET(root, "tied", w);
    SET(root, "view", w ? mc_py_tensor(mc_py_incref(w->tensor.storage), MC_TORCH_FLOAT32, 3, 1, s3, NULL) : NULL);
    mc_pyobj_t *p = tensor_f32(1, s5, 1.0f);
    if (p) p->tensor.parameter = p->tensor.requires_grad = true;
    SET(root, "param", p);
    SET(root, "bytes", mc_py_bytes("\x00\xff" "b", 3));
    SET(root, "one", mc_py_bytes("b", 1));
    SET(root, "empty", mc_py_bytes("", 0));
    mc_pyobj_t *chars = mc_py_list();
    ok &= mc_py_list_append(chars, mc_py_incref(a)) == 0;
    ok &= mc_py_list_append(chars, a) == 0;
    ok &= mc_py_list_append(chars, empty) == 0;
    ok &= mc_py_list_append(chars, mc_py_str("\xc3\xa9")) == 0;
    SET(root, "chars", chars);
    mc_pyobj_t *bl = mc_py_list(), *bd = mc_py_dict(), *ints = mc_py_list();
    for (int i = 0; i < 1001; i++) ok &= mc_py_list_append(bl, mc_py_int(i)) == 0;
    for (int i = 0; i < 1000; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        SET(bd, k, mc_py_int(i));
    }
    SET(root, "batch_list", bl);
    SET(root, "batch_dict", bd);
    static const int64_t IV[] = {0, 255, 256, 65535, 65536, -1, 2147483648LL, -2147483649LL,
                                 INT64_MIN, INT64_MAX, -129};
    for (size_t i = 0; i < sizeof IV / sizeof *IV; i++) ok &= mc_py_list_append(ints, mc_py_int(IV[i])) == 0;
    SET(root, "ints", ints);
    if (!ok) {
        mc_py_decref(root);
        return NULL;
    }
    return root;
}

/* > 4 GiB without 4 GiB of memory: an untouched anonymous mapping reads as zeros. */
static int write_big(const char *path, char *err, size_t errn)
{
    size_t n = (4ULL << 30) + 16;
    void *zeros = mmap(NULL, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (zeros == MAP_FAILED) return snprintf(err, errn, "mmap failed"), -1;
    int64_t shape[] = {(int64_t)n}, s3[] = {3};
    float after[] = {1, 2, 3};
    mc_pyobj_t *root = mc_py_dict();
    int rc = mc_py_dict_set_str(root, "zeros", mc_py_tensor_wrap(MC_TORCH_UINT8, 1, shape, zeros)) ||
             mc_py_dict_set_str(root, "after", mc_py_tensor_copy(MC_TORCH_FLOAT32, 1, s3, after))
                 ? snprintf(err, errn, "out of memory"), -1
                 : mc_torch_save(path, root, err, errn);
    mc_py_decref(root);
    munmap(zeros, n);
    return rc;
}

int main(int argc, char **argv)
{
    char err[1024] = "";
    int rc = -1;
    const char *cmd = argc > 2 ? argv[1] : "";
    if ((!strcmp(cmd, "write") || !strcmp(cmd, "simple"))) {
        mc_pyobj_t *o = !strcmp(cmd, "write") ? sample() : simple();
        bool zip64 = argc > 3 && !strcmp(argv[3], "--zip64");
        if (!o) snprintf(err, sizeof err, "building the sample failed");
        else if (!zip64) rc = mc_torch_save(argv[2], o, err, sizeof err);
        else {
            FILE *f = fopen(argv[2], "wb");
            mc_torch_save_opts_t opts = {.archive_name = "sample", .force_zip64 = true};
            rc = f ? mc_torch_save_stream(f, o, &opts, err, sizeof err) : -1;
            if (f && fclose(f)) rc = -1;
        }
        mc_py_decref(o);
    } else if (!strcmp(cmd, "dump")) {
        mc_pyobj_t *o;
        if (!(rc = mc_torch_load(argv[2], 0, &o, err, sizeof err))) {
            json(o);
            putchar('\n');
            mc_py_decref(o);
        }
    } else if (!strcmp(cmd, "resave") && argc > 3) {
        mc_pyobj_t *o;
        if (!(rc = mc_torch_load(argv[2], 0, &o, err, sizeof err))) {
            rc = mc_torch_save(argv[3], o, err, sizeof err);
            mc_py_decref(o);
        }
    } else if (!strcmp(cmd, "big")) {
        rc = write_big(argv[2], err, sizeof err);
    } else {
        fprintf(stderr, "usage: ckpt_tool write|simple|dump|big PATH | resave IN OUT\n");
        return 2;
    }
    if (rc) fprintf(stderr, "ckpt_tool: %s\n", err[0] ? err : "failed");
    return rc ? 1 : 0;
}
