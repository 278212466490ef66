/* torchfmt/dcp.h: PyTorch Distributed Checkpoint files (Megatron's torch_dist).
 *
 * The reference checkpoints Megatron-LM wrote ($MEGATRON_C_SHARED/data/megatron-ref/torch_dist,
 * default ../shared; tests that need them skip when absent) are read and compared with their
 * manifests: every key's shape, dtype and chunks, every chunk's and tensor's sha256, byte items'
 * values. Then a write / read round trip, the index checks (gaps, overlaps, disagreements) and
 * corrupted files, each of which must give one line naming the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/sha256.h"
#include "kernels/dtype.h"
#include "torchfmt/dcp.h"

static const char *const LAYOUTS[] = {"tp1pp1", "tp2pp1", "tp1pp2"};

static const char *shared_dir(void)
{
    const char *s = getenv("MEGATRON_C_SHARED");
    return s && *s ? s : "../shared";
}

typedef struct {
    char dir[1200];
    json_t *man;
    mc_dcp_meta_t m;
} ref_t;

/* Opens layout's reference checkpoint and manifest, or skips the test when absent. */
static void ref_open(ref_t *r, const char *layout)
{
    char path[1400], err[512];
    snprintf(r->dir, sizeof r->dir, "%s/data/megatron-ref/torch_dist/%s/iter_0000010",
             shared_dir(), layout);
    snprintf(path, sizeof path, "%s/data/megatron-ref/torch_dist/%s.manifest.json", shared_dir(),
             layout);
    if (access(path, R_OK) != 0) {
        print_message("reference checkpoints not found under %s (set MEGATRON_C_SHARED)\n",
                      shared_dir());
        skip();
    }
    json_error_t je;
    r->man = json_load_file(path, 0, &je);
    assert_non_null(r->man);
    snprintf(path, sizeof path, "%s/.metadata", r->dir);
    if (mc_dcp_meta_read(path, &r->m, err, sizeof err)) fail_msg("%s", err);
}

static void ref_close(ref_t *r)
{
    json_decref(r->man);
    mc_dcp_meta_free(&r->m);
}

static void check_ints(json_t *arr, const int64_t *v, int n)
{
    assert_int_equal(json_array_size(arr), n);
    for (int d = 0; d < n; d++) assert_int_equal(json_integer_value(json_array_get(arr, d)), v[d]);
}

static void check_ref_metadata(const char *layout)
{
    ref_t r;
    ref_open(&r, layout);
    json_t *tensors = json_object_get(r.man, "tensors"), *objects = json_object_get(r.man, "objects");
    assert_int_equal(r.m.n, json_object_size(tensors) + json_object_size(objects));
    const char *key;
    json_t *t;
    json_object_foreach(tensors, key, t) {
        const mc_dcp_entry_t *e = mc_dcp_meta_find(&r.m, key);
        assert_non_null(e);
        assert_false(e->bytes);
        assert_string_equal(mc_torch_dtype_name(e->dtype), json_string_value(json_object_get(t, "dtype")));
        check_ints(json_object_get(t, "shape"), e->shape, e->ndim);
        json_t *chunks = json_object_get(t, "chunks");
        assert_int_equal(e->n_chunks, json_array_size(chunks));
        for (size_t i = 0; i < e->n_chunks; i++) {
            json_t *c = json_array_get(chunks, i);
            check_ints(json_object_get(c, "offsets"), e->chunks[i].offsets, e->ndim);
            check_ints(json_object_get(c, "sizes"), e->chunks[i].sizes, e->ndim);
            assert_string_equal(e->chunks[i].file, json_string_value(json_object_get(c, "file")));
            assert_int_equal(e->chunks[i].offset, json_integer_value(json_object_get(c, "file_offset")));
            assert_int_equal(e->chunks[i].length, json_integer_value(json_object_get(c, "length")));
        }
    }
    json_object_foreach(objects, key, t) {
        const mc_dcp_entry_t *e = mc_dcp_meta_find(&r.m, key);
        assert_non_null(e);
        assert_true(e->bytes);
        assert_int_equal(e->n_chunks, 1);
        assert_string_equal(e->chunks[0].file, json_string_value(json_object_get(t, "file")));
        assert_int_equal(e->chunks[0].offset, json_integer_value(json_object_get(t, "file_offset")));
        assert_int_equal(e->chunks[0].length, json_integer_value(json_object_get(t, "length")));
    }
    ref_close(&r);
}

static void test_ref_metadata(void **state)
{
    for (size_t i = 0; i < 3; i++) check_ref_metadata(LAYOUTS[i]);
}

static void check_same_meta(const mc_dcp_meta_t *a, const mc_dcp_meta_t *b);

/* Megatron's MCoreMetadata written again as a plain Metadata reads back the same index. */
static void test_ref_rewrite(void **state)
{
    char path[] = "/tmp/test_dcp_meta.XXXXXX", err[512];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    for (size_t i = 0; i < 3; i++) {
        ref_t r;
        ref_open(&r, LAYOUTS[i]);
        mc_dcp_meta_t back;
        if (mc_dcp_meta_write(path, &r.m, r.dir, err, sizeof err)) fail_msg("%s", err);
        if (mc_dcp_meta_read(path, &back, err, sizeof err)) fail_msg("%s", err);
        check_same_meta(&r.m, &back);
        mc_dcp_meta_free(&back);
        ref_close(&r);
    }
    unlink(path);
}

/* sha256 of a box read in the key's own dtype. */
static void box_sha(mc_dcp_reader_t *rd, const mc_dcp_entry_t *e, const int64_t *start,
                    const int64_t *sizes, char hex[65])
{
    char err[512];
    int64_t n = 1;
    for (int d = 0; d < e->ndim; d++) n *= sizes[d];
    size_t bytes = (size_t)n * mc_torch_dtype_size(e->dtype);
    void *buf = malloc(bytes + 1);
    assert_non_null(buf);
    if (mc_dcp_read_box(rd, e->key, e->ndim, start, sizes, e->dtype, buf, err, sizeof err))
        fail_msg("%s", err);
    mc_sha256_hex(buf, bytes, hex);
    free(buf);
}

/* The one number N in a manifest value "[[{(torch.float32, torch.float32): [N]}]]". */
static int64_t bucket_numel(const char *repr)
{
    const char *p = strrchr(repr, '[');
    assert_non_null(p);
    return strtoll(p + 1, NULL, 10);
}

static void check_objects(ref_t *r, mc_dcp_reader_t *rd)
{
    char err[512];
    const char *key;
    json_t *o;
    json_object_foreach(json_object_get(r->man, "objects"), key, o) {
        mc_pyobj_t *v;
        if (mc_dcp_read_object(rd, key, &v, err, sizeof err)) fail_msg("%s", err);
        assert_int_equal(v->kind, MC_PY_LIST);
        assert_int_equal(mc_py_len(v), 1);
        const char *repr = json_string_value(json_object_get(o, "value"));
        if (!strcmp(repr, "[None]")) {
            assert_int_equal(mc_py_item(v, 0)->kind, MC_PY_NONE);
        } else if (strstr(key, "per_bucket_numel")) {
            mc_pyobj_t *d = mc_py_path(v, "0/0");
            assert_non_null(d);
            assert_int_equal(d->kind, MC_PY_DICT);
            assert_int_equal(mc_py_len(d), 1);
            mc_pyobj_t *k = d->dict.keys[0], *n = mc_py_item(d->dict.vals[0], 0);
            assert_true(mc_py_is_a(mc_py_item(k, 0), "torch", "float32"));
            assert_non_null(n);
            assert_int_equal(n->i, bucket_numel(repr));
        } else if (!strncmp(key, "rng_state/", 10)) {
            mc_pyobj_t *t = mc_py_path(v, "0/0/torch_rng_state");
            assert_non_null(t);
            assert_int_equal(t->kind, MC_PY_TENSOR);
            assert_int_equal(mc_py_tensor_numel(t), 5056);
            assert_non_null(mc_py_path(v, "0/0/random_rng_state"));
        }
        mc_py_decref(v);
    }
}

static void check_ref_tensors(const char *layout)
{
    ref_t r;
    ref_open(&r, layout);
    mc_dcp_reader_t *rd = mc_dcp_reader_new(r.dir, &r.m);
    json_t *padded = json_object_get(r.man, "padding_zeroed_sha256");
    const char *key;
    json_t *t;
    int n_full = 0, n_chunks = 0;
    json_object_foreach(json_object_get(r.man, "tensors"), key, t) {
        const mc_dcp_entry_t *e = mc_dcp_meta_find(&r.m, key);
        char hex[65];
        int64_t zero[MC_DCP_MAX_DIMS] = {0};
        if (!json_object_get(padded, key)) { /* buckets with garbage padding: by chunk */
            box_sha(rd, e, zero, e->shape, hex);
            assert_string_equal(hex, json_string_value(json_object_get(t, "sha256")));
            n_full++;
        }
        for (size_t i = 0; i < e->n_chunks; i++) {
            box_sha(rd, e, e->chunks[i].offsets, e->chunks[i].sizes, hex);
            json_t *c = json_array_get(json_object_get(t, "chunks"), i);
            assert_string_equal(hex, json_string_value(json_object_get(c, "sha256")));
            n_chunks++;
        }
    }
    print_message("# %s: %d full tensors, %d chunks match\n", layout, n_full, n_chunks);
    assert_true(n_full > 10);
    check_objects(&r, rd);
    mc_dcp_reader_free(rd);
    ref_close(&r);
}

static void test_ref_tensors(void **state)
{
    for (size_t i = 0; i < 3; i++) check_ref_tensors(LAYOUTS[i]);
}

/* ---- round trip ---------------------------------------------------------------------------- */

/* The global tensors of the round trip: element i of each has value f(key, i). */
static float value_at(int which, int64_t i) { return (float)(which * 1000 + i) * 0.37f - 3.0f; }

static mc_pyobj_t *chunk_of(int which, mc_torch_dtype_t dt, int ndim, const int64_t *shape,
                            const int64_t *off, const int64_t *sizes)
{
    mc_pyobj_t *t = mc_py_tensor_new(dt, ndim, sizes);
    uint8_t *p = mc_py_tensor_data(t);
    int64_t n = mc_py_tensor_numel(t);
    for (int64_t k = 0; k < n; k++) {
        int64_t rem = k, g = 0, stride = 1, gi[MC_DCP_MAX_DIMS];
        for (int d = ndim - 1; d >= 0; d--) {
            gi[d] = off[d] + rem % sizes[d];
            rem /= sizes[d];
        }
        for (int d = ndim - 1; d >= 0; d--) g += gi[d] * stride, stride *= shape[d];
        float x = value_at(which, g);
        if (dt == MC_TORCH_FLOAT32) memcpy(p + 4 * k, &x, 4);
        else {
            uint16_t h = dt == MC_TORCH_BFLOAT16 ? mc_bf16_from_f32(x) : mc_f16_from_f32(x);
            memcpy(p + 2 * k, &h, 2);
        }
    }
    return t;
}

static const int64_t W3[3] = {4, 6, 5}, B2[2] = {8, 4}, V1[1] = {10}, H1[1] = {7};

static void add_chunk(mc_dcp_writer_t *w, const char *key, int which, mc_torch_dtype_t dt,
                      int ndim, const int64_t *shape, const int64_t *off, const int64_t *sizes)
{
    mc_pyobj_t *t = chunk_of(which, dt, ndim, shape, off, sizes);
    assert_int_equal(mc_dcp_writer_add_tensor(w, key, t, shape, off), 0);
    mc_py_decref(t);
}

static mc_pyobj_t *obj_a(void)
{
    mc_pyobj_t *l = mc_py_list(), *d = mc_py_dict();
    mc_py_dict_set_str(d, "a", mc_py_int(1));
    mc_py_dict_set_str(d, "b", mc_py_tuple(2, mc_py_float(0.5), mc_py_str("x")));
    mc_py_list_append(l, d);
    return l;
}

static mc_pyobj_t *obj_none(void)
{
    mc_pyobj_t *l = mc_py_list();
    mc_py_list_append(l, mc_py_none());
    return l;
}

/* Writes the round-trip checkpoint into dir (two ranks) and its .metadata. */
static void write_roundtrip(const char *dir, mc_dcp_meta_t *m)
{
    char err[512], path[600];
    mc_dcp_writer_t *w0 = mc_dcp_writer_new(dir, 0), *w1 = mc_dcp_writer_new(dir, 1);
    int64_t o0[3] = {0, 0, 0}, o1[3] = {0, 3, 0}, s3[3] = {4, 3, 5};
    mc_pyobj_t *a = obj_a(), *n = obj_none();
    assert_int_equal(mc_dcp_writer_add_object(w0, "obj/shard_0_2", a), 0);
    add_chunk(w0, "w3", 1, MC_TORCH_FLOAT32, 3, W3, o0, s3);
    add_chunk(w1, "w3", 1, MC_TORCH_FLOAT32, 3, W3, o1, s3);
    int64_t r0[2] = {0, 0}, r6[2] = {6, 0}, sz6[2] = {6, 4}, sz2[2] = {2, 4};
    add_chunk(w0, "b2", 2, MC_TORCH_BFLOAT16, 2, B2, r0, sz6);
    add_chunk(w1, "b2", 2, MC_TORCH_BFLOAT16, 2, B2, r6, sz2);
    /* v1: a view into a larger storage, as a model's buffer slice is (saved compact) */
    mc_pyobj_t *v = chunk_of(3, MC_TORCH_FLOAT32, 1, V1, o0, V1), *st;
    st = mc_py_storage_new(MC_TORCH_FLOAT32, 100000);
    memcpy((float *)st->storage.data + 7, mc_py_tensor_data(v), 40);
    mc_py_decref(v);
    v = mc_py_tensor(st, MC_TORCH_FLOAT32, 7, 1, V1, NULL);
    v->tensor.parameter = v->tensor.requires_grad = true;
    assert_int_equal(mc_dcp_writer_add_tensor(w0, "v1", v, V1, o0), 0);
    mc_py_decref(v);
    assert_int_equal(mc_dcp_writer_add_object(w0, "rng/shard_0_1", n), 0);
    add_chunk(w1, "h1", 4, MC_TORCH_FLOAT16, 1, H1, o0, H1);
    assert_int_equal(mc_dcp_writer_add_object(w1, "obj/shard_1_2", n), 0);
    mc_py_decref(a);
    mc_py_decref(n);
    assert_int_equal(mc_dcp_writer_count(w0), 5);
    assert_true(mc_dcp_writer_objects(w0)[0]->kind == MC_PY_LIST);
    mc_dcp_records_t rec0 = {0}, rec1 = {0}, all = {0};
    if (mc_dcp_writer_finish(w0, &rec0, err, sizeof err)) fail_msg("%s", err);
    if (mc_dcp_writer_finish(w1, &rec1, err, sizeof err)) fail_msg("%s", err);
    /* rank 0: byte items round-robin, then tensors largest first to the lighter file */
    const char *want[][2] = {{"obj/shard_0_2", "__0_0.distcp"}, {"w3", "__0_0.distcp"},
                             {"rng/shard_0_1", "__0_1.distcp"}, {"b2", "__0_1.distcp"},
                             {"v1", "__0_1.distcp"}};
    assert_int_equal(rec0.n, 5);
    for (int i = 0; i < 5; i++) {
        assert_string_equal(rec0.items[i].key, want[i][0]);
        assert_string_equal(rec0.items[i].chunk.file, want[i][1]);
    }
    assert_int_equal(rec0.items[0].chunk.offset, 0);
    assert_true(rec0.items[4].chunk.length < 4096); /* v1's storage was not written whole */
    assert_int_equal(rec0.items[1].chunk.offset, rec0.items[0].chunk.length);
    uint8_t *b0, *b1;
    size_t l0, l1;
    assert_int_equal(mc_dcp_records_pack(&rec0, &b0, &l0), 0);
    assert_int_equal(mc_dcp_records_pack(&rec1, &b1, &l1), 0);
    if (mc_dcp_records_unpack(b0, l0, &all, err, sizeof err)) fail_msg("%s", err);
    if (mc_dcp_records_unpack(b1, l1, &all, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(all.n, rec0.n + rec1.n);
    for (size_t i = 0; i < rec0.n; i++) {
        assert_string_equal(all.items[i].key, rec0.items[i].key);
        assert_memory_equal(&all.items[i].chunk, &rec0.items[i].chunk, sizeof rec0.items[i].chunk);
    }
    /* a truncated or extended packing is refused */
    mc_dcp_records_t bad = {0};
    for (size_t cut = 0; cut < l0; cut += 7)
        assert_int_equal(mc_dcp_records_unpack(b0, cut, &bad, err, sizeof err), -1);
    mc_dcp_records_free(&bad);
    free(b0);
    free(b1);
    if (mc_dcp_meta_from_records(&all, m, err, sizeof err)) fail_msg("%s", err);
    snprintf(path, sizeof path, "%s/.metadata", dir);
    if (mc_dcp_meta_write(path, m, dir, err, sizeof err)) fail_msg("%s", err);
    mc_dcp_records_free(&rec0);
    mc_dcp_records_free(&rec1);
    mc_dcp_records_free(&all);
}

static void make_tmpdir(char *dir, size_t n)
{
    snprintf(dir, n, "/tmp/test_dcp.XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void rm_tree(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void check_same_meta(const mc_dcp_meta_t *a, const mc_dcp_meta_t *b)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const mc_dcp_entry_t *x = &a->entries[i], *y = &b->entries[i];
        assert_string_equal(x->key, y->key);
        assert_int_equal(x->bytes, y->bytes);
        assert_int_equal(x->ndim, y->ndim);
        if (!x->bytes) assert_int_equal(x->dtype, y->dtype);
        assert_memory_equal(x->shape, y->shape, sizeof x->shape);
        assert_int_equal(x->n_chunks, y->n_chunks);
        for (size_t c = 0; c < x->n_chunks; c++)
            assert_memory_equal(&x->chunks[c], &y->chunks[c], sizeof x->chunks[c]);
    }
}

/* Reads box [start, start+sizes) of global tensor `which` (shape) as dt and compares it with
 * the values written (rounded to the stored dtype sdt, then to dt). */
static void check_box(mc_dcp_reader_t *rd, const char *key, int which, mc_torch_dtype_t sdt,
                      int ndim, const int64_t *shape, const int64_t *start, const int64_t *sizes,
                      mc_torch_dtype_t dt)
{
    char err[512];
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= sizes[d];
    uint8_t *buf = malloc((size_t)n * 4 + 4);
    if (mc_dcp_read_box(rd, key, ndim, start, sizes, dt, buf, err, sizeof err)) fail_msg("%s", err);
    mc_pyobj_t *want = chunk_of(which, sdt, ndim, shape, start, sizes);
    const uint8_t *w = mc_py_tensor_data(want);
    for (int64_t k = 0; k < n; k++) {
        float x;
        if (sdt == MC_TORCH_FLOAT32) memcpy(&x, w + 4 * k, 4);
        else {
            uint16_t h;
            memcpy(&h, w + 2 * k, 2);
            x = sdt == MC_TORCH_BFLOAT16 ? mc_f32_from_bf16(h) : mc_f32_from_f16(h);
        }
        if (dt == MC_TORCH_FLOAT32) {
            float y;
            memcpy(&y, buf + 4 * k, 4);
            assert_true(x == y);
        } else {
            uint16_t h, g = dt == MC_TORCH_BFLOAT16 ? mc_bf16_from_f32(x) : mc_f16_from_f32(x);
            memcpy(&h, buf + 2 * k, 2);
            assert_int_equal(h, g);
        }
    }
    mc_py_decref(want);
    free(buf);
}

static void test_roundtrip(void **state)
{
    char dir[64], path[600], err[512];
    make_tmpdir(dir, sizeof dir);
    mc_dcp_meta_t m, back;
    write_roundtrip(dir, &m);
    snprintf(path, sizeof path, "%s/.metadata", dir);
    if (mc_dcp_meta_read(path, &back, err, sizeof err)) fail_msg("%s", err);
    check_same_meta(&m, &back);
    assert_int_equal(back.n, 7);
    mc_dcp_reader_t *rd = mc_dcp_reader_new(dir, &back);
    int64_t z[3] = {0, 0, 0}, s1[3] = {1, 2, 1}, sz1[3] = {3, 3, 3}, s2[2] = {5, 1}, sz2[2] = {3, 2};
    check_box(rd, "w3", 1, MC_TORCH_FLOAT32, 3, W3, z, W3, MC_TORCH_FLOAT32);
    check_box(rd, "w3", 1, MC_TORCH_FLOAT32, 3, W3, s1, sz1, MC_TORCH_BFLOAT16); /* straddles */
    check_box(rd, "w3", 1, MC_TORCH_FLOAT32, 3, W3, s1, sz1, MC_TORCH_FLOAT16);
    check_box(rd, "b2", 2, MC_TORCH_BFLOAT16, 2, B2, z, B2, MC_TORCH_FLOAT32);
    check_box(rd, "b2", 2, MC_TORCH_BFLOAT16, 2, B2, s2, sz2, MC_TORCH_BFLOAT16);
    check_box(rd, "v1", 3, MC_TORCH_FLOAT32, 1, V1, z, V1, MC_TORCH_FLOAT32);
    check_box(rd, "h1", 4, MC_TORCH_FLOAT16, 1, H1, z, H1, MC_TORCH_FLOAT32);
    mc_pyobj_t *o, *a = obj_a(), *n = obj_none();
    if (mc_dcp_read_object(rd, "obj/shard_0_2", &o, err, sizeof err)) fail_msg("%s", err);
    assert_true(mc_py_equal(o, a));
    mc_py_decref(o);
    if (mc_dcp_read_object(rd, "obj/shard_1_2", &o, err, sizeof err)) fail_msg("%s", err);
    assert_true(mc_py_equal(o, n));
    mc_py_decref(o);
    mc_py_decref(a);
    mc_py_decref(n);
    /* misuse: one line each */
    float f[200];
    int64_t big[3] = {4, 7, 5};
    assert_int_equal(mc_dcp_read_box(rd, "nope", 1, z, V1, MC_TORCH_FLOAT32, f, err, sizeof err), -1);
    assert_int_equal(mc_dcp_read_box(rd, "w3", 3, z, big, MC_TORCH_FLOAT32, f, err, sizeof err), -1);
    assert_int_equal(mc_dcp_read_box(rd, "w3", 2, z, W3, MC_TORCH_FLOAT32, f, err, sizeof err), -1);
    assert_int_equal(mc_dcp_read_box(rd, "w3", 3, z, W3, MC_TORCH_INT64, f, err, sizeof err), -1);
    assert_int_equal(mc_dcp_read_object(rd, "w3", &o, err, sizeof err), -1);
    mc_dcp_reader_free(rd);
    mc_dcp_meta_free(&m);
    mc_dcp_meta_free(&back);
    rm_tree(dir);
}

/* Converting the reference embedding to bfloat16 while reading rounds as mc_bf16_from_f32. */
static void test_ref_convert(void **state)
{
    ref_t r;
    ref_open(&r, "tp2pp1");
    char err[512];
    const char *key = "decoder.layers.self_attention.linear_qkv.weight";
    const mc_dcp_entry_t *e = mc_dcp_meta_find(&r.m, key);
    assert_non_null(e);
    mc_dcp_reader_t *rd = mc_dcp_reader_new(r.dir, &r.m);
    int64_t start[3] = {1, 90, 3}, sizes[3] = {1, 12, 50}; /* across the two TP pieces */
    float f[600];
    uint16_t h[600];
    assert_int_equal(mc_dcp_read_box(rd, key, 3, start, sizes, MC_TORCH_FLOAT32, f, err, sizeof err), 0);
    assert_int_equal(mc_dcp_read_box(rd, key, 3, start, sizes, MC_TORCH_BFLOAT16, h, err, sizeof err), 0);
    for (int i = 0; i < 600; i++) assert_int_equal(h[i], mc_bf16_from_f32(f[i]));
    mc_dcp_reader_free(rd);
    ref_close(&r);
}

/* ---- the index checks ------------------------------------------------------------------------ */

static void rec_add(mc_dcp_records_t *r, const char *key, bool bytes, mc_torch_dtype_t dt,
                    int ndim, const int64_t *shape, const int64_t *off, const int64_t *sizes)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 8;
        r->items = realloc(r->items, r->cap * sizeof *r->items);
    }
    mc_dcp_record_t *x = &r->items[r->n++];
    memset(x, 0, sizeof *x);
    x->key = strdup(key);
    x->bytes = bytes;
    x->dtype = dt;
    x->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        x->shape[d] = shape[d];
        x->chunk.offsets[d] = off[d];
        x->chunk.sizes[d] = sizes[d];
    }
    snprintf(x->chunk.file, sizeof x->chunk.file, "__0_0.distcp");
}

/* meta_from_records on two chunks of an [8, 6] tensor: expect rc, and msg in the error. */
static void two_chunks(const int64_t *o2, const int64_t *s2, const int64_t *shape2,
                       mc_torch_dtype_t dt2, int want, const char *msg)
{
    static const int64_t shape[2] = {8, 6}, o1[2] = {0, 0}, s1[2] = {4, 6};
    mc_dcp_records_t r = {0};
    rec_add(&r, "k", false, MC_TORCH_FLOAT32, 2, shape, o1, s1);
    rec_add(&r, "k", false, dt2, 2, shape2, o2, s2);
    mc_dcp_meta_t m;
    char err[512] = "";
    int rc = mc_dcp_meta_from_records(&r, &m, err, sizeof err);
    if (rc != want || (msg && !strstr(err, msg))) fail_msg("rc %d: %s (wanted %s)", rc, err, msg);
    if (rc == 0) mc_dcp_meta_free(&m);
    mc_dcp_records_free(&r);
}

static void test_from_records_checks(void **state)
{
    static const int64_t shape[2] = {8, 6}, other[2] = {8, 7};
    int64_t o[2] = {4, 0}, s[2] = {4, 6}, o_gap[2] = {5, 0}, s_gap[2] = {3, 6};
    int64_t o_ov[2] = {3, 0}, s_ov[2] = {5, 6}, s_out[2] = {5, 6}, o_ov2[2] = {2, 2}, s_ov2[2] = {1, 1};
    two_chunks(o, s, shape, MC_TORCH_FLOAT32, 0, NULL);
    two_chunks(o_gap, s_gap, shape, MC_TORCH_FLOAT32, -1, "gap");
    two_chunks(o_ov, s_ov, shape, MC_TORCH_FLOAT32, -1, "overlap");
    two_chunks(o_ov2, s_ov2, shape, MC_TORCH_FLOAT32, -1, "overlap");
    two_chunks(o, s_out, shape, MC_TORCH_FLOAT32, -1, "outside");
    two_chunks(o, s, other, MC_TORCH_FLOAT32, -1, "shape");
    two_chunks(o, s, shape, MC_TORCH_BFLOAT16, -1, "dtype");
    /* a byte key twice; a key that is bytes in one record and a tensor in another */
    mc_dcp_records_t r = {0};
    rec_add(&r, "b", true, MC_TORCH_UINT8, 0, NULL, NULL, NULL);
    rec_add(&r, "b", true, MC_TORCH_UINT8, 0, NULL, NULL, NULL);
    mc_dcp_meta_t m;
    char err[512];
    assert_int_equal(mc_dcp_meta_from_records(&r, &m, err, sizeof err), -1);
    assert_non_null(strstr(err, "2 items"));
    r.items[1].bytes = false;
    assert_int_equal(mc_dcp_meta_from_records(&r, &m, err, sizeof err), -1);
    assert_non_null(strstr(err, "kind"));
    mc_dcp_records_free(&r);
    /* many chunks: a 1000 x 1000 grid of one-element chunks tiles, one moved does not */
    static const int64_t sq[2] = {1000, 1000}, one[2] = {1, 1};
    for (int64_t i = 0; i < 1000000; i += 1) {
        int64_t off[2] = {i / 1000, i % 1000};
        rec_add(&r, "grid", false, MC_TORCH_FLOAT32, 2, sq, off, one);
    }
    assert_int_equal(mc_dcp_meta_from_records(&r, &m, err, sizeof err), 0);
    mc_dcp_meta_free(&m);
    r.items[777].chunk.offsets[1] = 3;
    assert_int_equal(mc_dcp_meta_from_records(&r, &m, err, sizeof err), -1);
    assert_non_null(strstr(err, "overlap"));
    mc_dcp_records_free(&r);
}

/* ---- corrupted files ------------------------------------------------------------------------ */

static void copy_file(const char *from, const char *to, long keep)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    assert_non_null(a);
    assert_non_null(b);
    int c;
    for (long k = 0; (keep < 0 || k < keep) && (c = fgetc(a)) != EOF; k++) fputc(c, b);
    fclose(a);
    fclose(b);
}

/* Every read of every key of the checkpoint in dir: expects a failure naming file. */
static void expect_read_fails(const char *dir, const mc_dcp_meta_t *m, const char *key,
                              const char *file)
{
    char err[512];
    const mc_dcp_entry_t *e = mc_dcp_meta_find(m, key);
    mc_dcp_reader_t *rd = mc_dcp_reader_new(dir, m);
    float buf[200];
    int64_t z[3] = {0, 0, 0};
    int rc = mc_dcp_read_box(rd, key, e->ndim, z, e->shape, MC_TORCH_FLOAT32, buf, err, sizeof err);
    print_message("# %s\n", err);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, file));
    assert_null(strchr(err, '\n'));
    mc_dcp_reader_free(rd);
}

static void test_corrupt(void **state)
{
    char dir[64], path[600], p2[600], err[512];
    make_tmpdir(dir, sizeof dir);
    mc_dcp_meta_t m;
    write_roundtrip(dir, &m);
    const mc_dcp_entry_t *e = mc_dcp_meta_find(&m, "w3");
    const mc_dcp_chunk_t *c = &e->chunks[0];
    assert_string_equal(c->file, "__0_0.distcp");
    /* a CRC mismatch: one byte of the chunk's data changed */
    snprintf(path, sizeof path, "%s/%s", dir, c->file);
    snprintf(p2, sizeof p2, "%s/orig", dir);
    copy_file(path, p2, -1);
    FILE *f = fopen(path, "r+b");
    fseek(f, (long)(c->offset + c->length / 2), SEEK_SET);
    int ch = fgetc(f);
    fseek(f, (long)(c->offset + c->length / 2), SEEK_SET);
    fputc(ch ^ 0x5a, f);
    fclose(f);
    expect_read_fails(dir, &m, "w3", "__0_0.distcp");
    /* the file truncated inside the item */
    copy_file(p2, path, (long)(c->offset + c->length - 10));
    expect_read_fails(dir, &m, "w3", "__0_0.distcp");
    /* the file missing */
    unlink(path);
    expect_read_fails(dir, &m, "w3", "__0_0.distcp");
    /* .metadata truncated anywhere */
    snprintf(path, sizeof path, "%s/.metadata", dir);
    FILE *mf = fopen(path, "rb");
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, mf);
    fclose(mf);
    assert_true(n > 100 && n < sizeof buf);
    int tried = 0;
    for (size_t cut = 0; cut < n; cut += 1 + cut / 16, tried++) {
        mc_dcp_meta_t t;
        assert_int_equal(mc_dcp_meta_read_mem(buf, cut, path, &t, err, sizeof err), -1);
        assert_non_null(strstr(err, path));
        assert_null(strchr(err, '\n'));
    }
    print_message("# %d truncations of .metadata refused\n", tried);
    mc_dcp_meta_free(&m);
    rm_tree(dir);
}

/* The reference .metadata truncated at many points. */
static void test_ref_truncated(void **state)
{
    ref_t r;
    ref_open(&r, "tp1pp1");
    char path[1400], err[512];
    snprintf(path, sizeof path, "%s/.metadata", r.dir);
    FILE *f = fopen(path, "rb");
    static uint8_t buf[1 << 17];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    for (size_t cut = 0; cut < n; cut += 97) {
        mc_dcp_meta_t t;
        assert_int_equal(mc_dcp_meta_read_mem(buf, cut, ".metadata", &t, err, sizeof err), -1);
        assert_non_null(strstr(err, ".metadata"));
    }
    ref_close(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_metadata),
        cmocka_unit_test(test_ref_rewrite),
        cmocka_unit_test(test_ref_tensors),
        cmocka_unit_test(test_ref_convert),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_from_records_checks),
        cmocka_unit_test(test_corrupt),
        cmocka_unit_test(test_ref_truncated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
