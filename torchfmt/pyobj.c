/* The checkpoint object model (pyobj.h): constructors, containers, lookups, equality, freeing.
 * Dtypes, storages and tensors are in pyobj_tensor.c. */
#include "torchfmt/pyobj.h"
#include "torchfmt/pyobj_int.h"
#include "torchfmt/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mc_py_kind_name(mc_py_kind_t kind)
{
    static const char *const NAMES[] = {"None",   "bool",    "int",   "float", "str",
                                        "bytes",  "tuple",   "list",  "dict",  "global",
                                        "object", "storage", "tensor"};
    return (unsigned)kind <= MC_PY_TENSOR ? NAMES[kind] : "invalid";
}

/* ---- references ------------------------------------------------------------------------------ */

mc_pyobj_t *py_new_obj(mc_py_kind_t kind)
{
    mc_pyobj_t *o = calloc(1, sizeof *o);
    if (o) {
        o->kind = kind;
        o->refs = 1;
    }
    return o;
}

mc_pyobj_t *mc_py_incref(mc_pyobj_t *o)
{
    if (o) o->refs++;
    return o;
}

/* Queues child for freeing when this drops its last reference. */
static void release_child(mc_pyobj_t *child, mc_pyobj_t **queue)
{
    if (child && --child->refs == 0) {
        child->gc_next = *queue;
        *queue = child;
    }
}

/* Frees o's own memory, queueing children that die with it: a work list instead of recursion,
 * so a loaded chain of a million nested lists frees without exhausting the C stack. */
static void free_one(mc_pyobj_t *o, mc_pyobj_t **queue)
{
    switch (o->kind) {
    case MC_PY_STR:
    case MC_PY_BYTES: free(o->str.data); break;
    case MC_PY_TUPLE:
    case MC_PY_LIST:
        for (size_t i = 0; i < o->seq.len; i++) release_child(o->seq.items[i], queue);
        free(o->seq.items);
        break;
    case MC_PY_DICT:
        for (size_t i = 0; i < o->dict.len; i++) {
            release_child(o->dict.keys[i], queue);
            release_child(o->dict.vals[i], queue);
        }
        release_child(o->dict.attrs, queue);
        free(o->dict.keys);
        free(o->dict.vals);
        free(o->dict.index);
        break;
    case MC_PY_GLOBAL:
        free(o->global.module);
        free(o->global.name);
        break;
    case MC_PY_OBJECT:
        release_child(o->object.callable, queue);
        release_child(o->object.args, queue);
        release_child(o->object.state, queue);
        release_child(o->object.listitems, queue);
        release_child(o->object.dictitems, queue);
        break;
    case MC_PY_STORAGE:
        mc_py_buf_release(o->storage.owner);
        free(o->storage.location);
        break;
    case MC_PY_TENSOR:
        release_child(o->tensor.storage, queue);
        free(o->tensor.shape);
        free(o->tensor.stride);
        break;
    default: break;
    }
    free(o);
}

void mc_py_decref(mc_pyobj_t *o)
{
    if (!o || --o->refs > 0) return;
    mc_pyobj_t *queue = o;
    o->gc_next = NULL;
    while (queue) {
        mc_pyobj_t *x = queue;
        queue = x->gc_next;
        free_one(x, &queue);
    }
}

/* ---- scalars and strings --------------------------------------------------------------------- */

mc_pyobj_t *mc_py_none(void) { return py_new_obj(MC_PY_NONE); }

mc_pyobj_t *mc_py_bool(bool v)
{
    mc_pyobj_t *o = py_new_obj(MC_PY_BOOL);
    if (o) o->b = v;
    return o;
}

mc_pyobj_t *mc_py_int(int64_t v)
{
    mc_pyobj_t *o = py_new_obj(MC_PY_INT);
    if (o) o->i = v;
    return o;
}

mc_pyobj_t *mc_py_float(double v)
{
    mc_pyobj_t *o = py_new_obj(MC_PY_FLOAT);
    if (o) o->f = v;
    return o;
}

static mc_pyobj_t *bytes_like(mc_py_kind_t kind, const void *p, size_t n)
{
    if (n == SIZE_MAX) return NULL;
    mc_pyobj_t *o = py_new_obj(kind);
    char *d = malloc(n + 1);
    if (!o || !d) {
        free(o);
        free(d);
        return NULL;
    }
    if (n) memcpy(d, p, n);
    d[n] = '\0';
    o->str.data = d;
    o->str.len = n;
    return o;
}

mc_pyobj_t *mc_py_str(const char *s) { return s ? bytes_like(MC_PY_STR, s, strlen(s)) : NULL; }
mc_pyobj_t *mc_py_strn(const char *s, size_t n) { return bytes_like(MC_PY_STR, s, n); }
mc_pyobj_t *mc_py_bytes(const void *p, size_t n) { return bytes_like(MC_PY_BYTES, p, n); }

/* ---- tuples and lists ------------------------------------------------------------------------ */

mc_pyobj_t *mc_py_tuple_of(size_t n, mc_pyobj_t *const *items)
{
    bool ok = true;
    for (size_t i = 0; i < n; i++) ok = ok && items[i];
    mc_pyobj_t *t = ok ? py_new_obj(MC_PY_TUPLE) : NULL;
    mc_pyobj_t **arr = t && n ? malloc(n * sizeof *arr) : NULL;
    if (!t || (n && !arr)) {
        for (size_t i = 0; i < n; i++) mc_py_decref(items[i]);
        free(t);
        return NULL;
    }
    if (n) memcpy(arr, items, n * sizeof *arr);
    t->seq.items = arr;
    t->seq.len = t->seq.cap = n;
    return t;
}

mc_pyobj_t *mc_py_tuple(size_t n, ...)
{
    mc_pyobj_t *small[16], **items = n <= 16 ? small : malloc(n * sizeof *items);
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++) {
        mc_pyobj_t *x = va_arg(ap, mc_pyobj_t *);
        if (items) items[i] = x;
        else mc_py_decref(x);
    }
    va_end(ap);
    if (!items) return NULL;
    mc_pyobj_t *t = mc_py_tuple_of(n, items);
    if (items != small) free(items);
    return t;
}

mc_pyobj_t *mc_py_list(void) { return py_new_obj(MC_PY_LIST); }

int mc_py_list_append(mc_pyobj_t *list, mc_pyobj_t *item)
{
    if (!list || !item || list->kind != MC_PY_LIST) goto fail;
    if (list->seq.len == list->seq.cap) {
        size_t cap = list->seq.cap ? list->seq.cap * 2 : 4;
        mc_pyobj_t **p = realloc(list->seq.items, cap * sizeof *p);
        if (!p) goto fail;
        list->seq.items = p;
        list->seq.cap = cap;
    }
    list->seq.items[list->seq.len++] = item;
    return 0;
fail:
    mc_py_decref(item);
    return -1;
}

size_t mc_py_len(const mc_pyobj_t *o)
{
    if (!o) return 0;
    if (o->kind == MC_PY_TUPLE || o->kind == MC_PY_LIST) return o->seq.len;
    if (o->kind == MC_PY_DICT) return o->dict.len;
    return 0;
}

mc_pyobj_t *mc_py_item(const mc_pyobj_t *seq, size_t i)
{
    if (!seq || (seq->kind != MC_PY_TUPLE && seq->kind != MC_PY_LIST) || i >= seq->seq.len)
        return NULL;
    return seq->seq.items[i];
}

/* ---- dicts ----------------------------------------------------------------------------------- */

mc_pyobj_t *mc_py_dict(void) { return py_new_obj(MC_PY_DICT); }

mc_pyobj_t *mc_py_ordered_dict(void)
{
    mc_pyobj_t *d = py_new_obj(MC_PY_DICT);
    if (d) d->dict.ordered = true;
    return d;
}

/* A hash consistent with key_equal (equal keys hash alike), so every key is indexed: str and
 * int keys of state dicts, but also tuples or floats from a hostile file hash in O(1). */
static uint64_t mix(uint64_t x)
{
    x *= 0x9E3779B97F4A7C15ULL;
    return x ^ (x >> 29);
}

static uint64_t key_hash(const mc_pyobj_t *k, int depth)
{
    switch (k->kind) {
    case MC_PY_NONE: return 0x6e6f6e65;
    case MC_PY_BOOL: return mix(k->b ? 3 : 2);
    case MC_PY_INT: return mix((uint64_t)k->i);
    case MC_PY_FLOAT: {
        double f = k->f == 0 ? 0 : k->f; /* 0.0 == -0.0 */
        uint64_t bits;
        memcpy(&bits, &f, 8);
        return mix(bits ^ 0x464c);
    }
    case MC_PY_STR:
    case MC_PY_BYTES: return ck_hash(k->str.data, k->str.len) ^ k->kind;
    case MC_PY_TUPLE: {
        uint64_t h = mix(k->seq.len + 0x7475);
        if (depth < 64)
            for (size_t i = 0; i < k->seq.len; i++)
                h = mix(h ^ key_hash(k->seq.items[i], depth + 1));
        return h;
    }
    case MC_PY_GLOBAL:
        return ck_hash(k->global.module, strlen(k->global.module)) ^
               mix(ck_hash(k->global.name, strlen(k->global.name)));
    default: return mix((uint64_t)(uintptr_t)k); /* by identity */
    }
}

/* Python's equality for keys, minus numeric cross-kind equality (1 == 1.0 == True). */
static bool key_equal(const mc_pyobj_t *a, const mc_pyobj_t *b, int depth)
{
    if (a == b) return true;
    if (a->kind != b->kind || depth > 64) return false;
    switch (a->kind) {
    case MC_PY_NONE: return true;
    case MC_PY_BOOL: return a->b == b->b;
    case MC_PY_INT: return a->i == b->i;
    case MC_PY_FLOAT: return a->f == b->f;
    case MC_PY_STR:
    case MC_PY_BYTES:
        return a->str.len == b->str.len && !memcmp(a->str.data, b->str.data, a->str.len);
    case MC_PY_TUPLE:
        if (a->seq.len != b->seq.len) return false;
        for (size_t i = 0; i < a->seq.len; i++)
            if (!key_equal(a->seq.items[i], b->seq.items[i], depth + 1)) return false;
        return true;
    case MC_PY_GLOBAL:
        return !strcmp(a->global.module, b->global.module) &&
               !strcmp(a->global.name, b->global.name);
    default: return false; /* objects hash by identity */
    }
}

static int index_rebuild(mc_pyobj_t *d, size_t cap)
{
    uint32_t *idx = calloc(cap, sizeof *idx);
    if (!idx) return -1;
    for (size_t i = 0; i < d->dict.len; i++) {
        size_t h = (size_t)key_hash(d->dict.keys[i], 0) & (cap - 1);
        while (idx[h]) h = (h + 1) & (cap - 1);
        idx[h] = (uint32_t)(i + 1);
    }
    free(d->dict.index);
    d->dict.index = idx;
    d->dict.index_cap = cap;
    return 0;
}

/* Entry index of key, or -1. */
static ptrdiff_t dict_find(const mc_pyobj_t *d, const mc_pyobj_t *key)
{
    if (d->dict.index) {
        size_t cap = d->dict.index_cap, h = (size_t)key_hash(key, 0) & (cap - 1);
        for (; d->dict.index[h]; h = (h + 1) & (cap - 1)) {
            size_t i = d->dict.index[h] - 1;
            if (key_equal(d->dict.keys[i], key, 0)) return (ptrdiff_t)i;
        }
        return -1;
    }
    for (size_t i = 0; i < d->dict.len; i++)
        if (key_equal(d->dict.keys[i], key, 0)) return (ptrdiff_t)i;
    return -1;
}

int mc_py_dict_set(mc_pyobj_t *dict, mc_pyobj_t *key, mc_pyobj_t *val)
{
    if (!dict || !key || !val || dict->kind != MC_PY_DICT) goto fail;
    ptrdiff_t at = dict_find(dict, key);
    if (at >= 0) { /* Python keeps the first key object and replaces the value */
        mc_py_decref(dict->dict.vals[at]);
        dict->dict.vals[at] = val;
        mc_py_decref(key);
        return 0;
    }
    if (dict->dict.len >= UINT32_MAX - 1) goto fail;
    if (dict->dict.len == dict->dict.cap) {
        size_t cap = dict->dict.cap ? dict->dict.cap * 2 : 4;
        mc_pyobj_t **k = realloc(dict->dict.keys, cap * sizeof *k);
        if (!k) goto fail;
        dict->dict.keys = k;
        mc_pyobj_t **v = realloc(dict->dict.vals, cap * sizeof *v);
        if (!v) goto fail;
        dict->dict.vals = v;
        dict->dict.cap = cap;
    }
    size_t i = dict->dict.len++;
    dict->dict.keys[i] = key;
    dict->dict.vals[i] = val;
    /* Index big dicts (state dicts have thousands of keys) at load factor <= 1/2. */
    if (dict->dict.len > 8 && 2 * dict->dict.len > dict->dict.index_cap) {
        size_t cap = 32;
        while (cap < 4 * dict->dict.len) cap *= 2;
        if (index_rebuild(dict, cap)) { /* keep going unindexed: lookups scan */
            free(dict->dict.index);
            dict->dict.index = NULL;
            dict->dict.index_cap = 0;
        }
    } else if (dict->dict.index) {
        size_t cap = dict->dict.index_cap, h = (size_t)key_hash(key, 0) & (cap - 1);
        while (dict->dict.index[h]) h = (h + 1) & (cap - 1);
        dict->dict.index[h] = (uint32_t)(i + 1);
    }
    return 0;
fail:
    mc_py_decref(key);
    mc_py_decref(val);
    return -1;
}

int mc_py_dict_set_str(mc_pyobj_t *dict, const char *key, mc_pyobj_t *val)
{
    return mc_py_dict_set(dict, mc_py_str(key), val);
}

int mc_py_dict_set_int(mc_pyobj_t *dict, int64_t key, mc_pyobj_t *val)
{
    return mc_py_dict_set(dict, mc_py_int(key), val);
}

int mc_py_dict_del(mc_pyobj_t *dict, const mc_pyobj_t *key)
{
    if (!dict || !key || dict->kind != MC_PY_DICT) return -1;
    ptrdiff_t at = dict_find(dict, key);
    if (at < 0) return -1;
    mc_py_decref(dict->dict.keys[at]);
    mc_py_decref(dict->dict.vals[at]);
    size_t tail = dict->dict.len - (size_t)at - 1;
    memmove(dict->dict.keys + at, dict->dict.keys + at + 1, tail * sizeof(mc_pyobj_t *));
    memmove(dict->dict.vals + at, dict->dict.vals + at + 1, tail * sizeof(mc_pyobj_t *));
    dict->dict.len--;
    if (dict->dict.index && index_rebuild(dict, dict->dict.index_cap)) {
        free(dict->dict.index);
        dict->dict.index = NULL;
        dict->dict.index_cap = 0;
    }
    return 0;
}

mc_pyobj_t *mc_py_dict_get(const mc_pyobj_t *dict, const mc_pyobj_t *key)
{
    if (!dict || !key || dict->kind != MC_PY_DICT) return NULL;
    ptrdiff_t at = dict_find(dict, key);
    return at < 0 ? NULL : dict->dict.vals[at];
}

mc_pyobj_t *mc_py_dict_get_str(const mc_pyobj_t *dict, const char *key)
{
    if (!key) return NULL;
    mc_pyobj_t k = {.kind = MC_PY_STR, .str = {(char *)key, strlen(key)}};
    return mc_py_dict_get(dict, &k);
}

mc_pyobj_t *mc_py_dict_get_int(const mc_pyobj_t *dict, int64_t key)
{
    mc_pyobj_t k = {.kind = MC_PY_INT, .i = key};
    return mc_py_dict_get(dict, &k);
}

/* ---- globals, objects, attributes ------------------------------------------------------------ */

mc_pyobj_t *mc_py_global(const char *module, const char *name)
{
    if (!module || !name) return NULL;
    mc_pyobj_t *g = py_new_obj(MC_PY_GLOBAL);
    char *m = strdup(module), *n = strdup(name);
    if (!g || !m || !n) {
        free(g);
        free(m);
        free(n);
        return NULL;
    }
    g->global.module = m;
    g->global.name = n;
    return g;
}

mc_pyobj_t *mc_py_object(mc_pyobj_t *callable, mc_pyobj_t *args, bool newobj)
{
    mc_pyobj_t *o = callable && args && args->kind == MC_PY_TUPLE ? py_new_obj(MC_PY_OBJECT) : NULL;
    if (!o) {
        mc_py_decref(callable);
        mc_py_decref(args);
        return NULL;
    }
    o->object.callable = callable;
    o->object.args = args;
    o->object.newobj = newobj;
    return o;
}

mc_pyobj_t *mc_py_namespace(void)
{
    mc_pyobj_t *o = mc_py_object(mc_py_global("argparse", "Namespace"), mc_py_tuple(0), true);
    if (o && !(o->object.state = mc_py_dict())) {
        mc_py_decref(o);
        return NULL;
    }
    return o;
}

/* The attribute dict of obj, created when create is set; NULL if obj has none. */
static mc_pyobj_t *attr_dict(mc_pyobj_t *obj, bool create)
{
    mc_pyobj_t **slot;
    if (obj->kind == MC_PY_OBJECT) slot = &obj->object.state;
    else if (obj->kind == MC_PY_DICT && obj->dict.ordered) slot = &obj->dict.attrs;
    else return NULL;
    if (!*slot && create) *slot = mc_py_dict();
    return *slot && (*slot)->kind == MC_PY_DICT ? *slot : NULL;
}

int mc_py_attr_set(mc_pyobj_t *obj, const char *name, mc_pyobj_t *val)
{
    mc_pyobj_t *d = obj && name ? attr_dict(obj, true) : NULL;
    if (!d) {
        mc_py_decref(val);
        return -1;
    }
    return mc_py_dict_set_str(d, name, val);
}

mc_pyobj_t *mc_py_attr(const mc_pyobj_t *obj, const char *name)
{
    mc_pyobj_t *d = obj && name ? attr_dict((mc_pyobj_t *)obj, false) : NULL;
    return d ? mc_py_dict_get_str(d, name) : NULL;
}

bool mc_py_is_a(const mc_pyobj_t *o, const char *module, const char *name)
{
    if (o && o->kind == MC_PY_OBJECT) o = o->object.callable;
    return o && o->kind == MC_PY_GLOBAL && !strcmp(o->global.module, module) &&
           !strcmp(o->global.name, name);
}

/* ---- paths and typed access ------------------------------------------------------------------ */

static bool parse_index(const char *s, size_t n, int64_t *out)
{
    if (n == 0 || n > 18) return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

mc_pyobj_t *mc_py_path(const mc_pyobj_t *root, const char *path)
{
    const mc_pyobj_t *o = root;
    const char *p = path;
    while (o && p && *p) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        int64_t idx;
        mc_pyobj_t key = {.kind = MC_PY_STR, .str = {(char *)p, n}};
        if (o->kind == MC_PY_DICT) {
            const mc_pyobj_t *next = mc_py_dict_get(o, &key);
            if (!next && parse_index(p, n, &idx)) next = mc_py_dict_get_int(o, idx);
            o = next;
        } else if (o->kind == MC_PY_LIST || o->kind == MC_PY_TUPLE) {
            o = parse_index(p, n, &idx) ? mc_py_item(o, (size_t)idx) : NULL;
        } else if (o->kind == MC_PY_OBJECT) {
            mc_pyobj_t *d = attr_dict((mc_pyobj_t *)o, false);
            o = d ? mc_py_dict_get(d, &key) : NULL;
        } else {
            o = NULL;
        }
        p = slash ? slash + 1 : NULL;
    }
    return (mc_pyobj_t *)o;
}

static bool kind_accepts(mc_py_kind_t want, mc_py_kind_t have)
{
    return want == have || (want == MC_PY_INT && have == MC_PY_BOOL) ||
           (want == MC_PY_FLOAT && (have == MC_PY_INT || have == MC_PY_BOOL));
}

static const char *article(mc_py_kind_t k)
{
    return k == MC_PY_NONE ? "" : k == MC_PY_INT || k == MC_PY_OBJECT ? "an " : "a ";
}

mc_pyobj_t *mc_py_want(const mc_pyobj_t *dict, const char *key, mc_py_kind_t want, char *err,
                       size_t errn)
{
    char shown[CK_SHOWN_MAX + 4];
    ck_shown(key, strlen(key), shown);
    if (!dict || dict->kind != MC_PY_DICT) {
        mc_errf(err, errn, "looking up '%s' in a %s, not a dict", shown,
                dict ? mc_py_kind_name(dict->kind) : "missing object");
        return NULL;
    }
    mc_pyobj_t *v = mc_py_dict_get_str(dict, key);
    if (!v) {
        mc_errf(err, errn, "no key '%s'", shown);
        return NULL;
    }
    if (!kind_accepts(want, v->kind)) {
        mc_errf(err, errn, "'%s' is %s%s, not %s%s", shown, article(v->kind),
                mc_py_kind_name(v->kind), article(want), mc_py_kind_name(want));
        return NULL;
    }
    return v;
}

int mc_py_get_bool(const mc_pyobj_t *o, bool *out)
{
    if (!o || o->kind != MC_PY_BOOL) return -1;
    *out = o->b;
    return 0;
}

int mc_py_get_int(const mc_pyobj_t *o, int64_t *out)
{
    if (o && o->kind == MC_PY_INT) return *out = o->i, 0;
    if (o && o->kind == MC_PY_BOOL) return *out = o->b, 0;
    return -1;
}

int mc_py_get_float(const mc_pyobj_t *o, double *out)
{
    int64_t i;
    if (o && o->kind == MC_PY_FLOAT) return *out = o->f, 0;
    if (mc_py_get_int(o, &i) == 0) return *out = (double)i, 0;
    return -1;
}

const char *mc_py_get_str(const mc_pyobj_t *o)
{
    return o && o->kind == MC_PY_STR ? o->str.data : NULL;
}

/* ---- equality -------------------------------------------------------------------------------- */

static bool equal(const mc_pyobj_t *a, const mc_pyobj_t *b, int depth);

static bool equal_opt(const mc_pyobj_t *a, const mc_pyobj_t *b, int depth)
{
    return (!a && !b) || (a && b && equal(a, b, depth));
}

/* Element i (row-major over the shape) of tensor t. */
static const uint8_t *element(const mc_pyobj_t *t, int64_t i)
{
    int64_t off = t->tensor.offset;
    for (int d = t->tensor.ndim - 1; d >= 0; d--) {
        off += (i % t->tensor.shape[d]) * t->tensor.stride[d];
        i /= t->tensor.shape[d];
    }
    return (const uint8_t *)t->tensor.storage->storage.data +
           off * (int64_t)mc_torch_dtype_size(t->tensor.dtype);
}

static bool tensor_equal(const mc_pyobj_t *a, const mc_pyobj_t *b)
{
    if (a->tensor.dtype != b->tensor.dtype || a->tensor.ndim != b->tensor.ndim ||
        a->tensor.requires_grad != b->tensor.requires_grad ||
        a->tensor.parameter != b->tensor.parameter)
        return false;
    for (int d = 0; d < a->tensor.ndim; d++)
        if (a->tensor.shape[d] != b->tensor.shape[d]) return false;
    size_t es = mc_torch_dtype_size(a->tensor.dtype);
    int64_t n = mc_py_tensor_numel(a);
    if (mc_py_tensor_contiguous(a) && mc_py_tensor_contiguous(b))
        return n == 0 || !memcmp(mc_py_tensor_data(a), mc_py_tensor_data(b), (size_t)n * es);
    for (int64_t i = 0; i < n; i++)
        if (memcmp(element(a, i), element(b, i), es)) return false;
    return true;
}

static bool equal(const mc_pyobj_t *a, const mc_pyobj_t *b, int depth)
{
    if (a == b) return true;
    if (a->kind != b->kind || depth > 256) return false;
    switch (a->kind) {
    case MC_PY_NONE: return true;
    case MC_PY_BOOL: return a->b == b->b;
    case MC_PY_INT: return a->i == b->i;
    case MC_PY_FLOAT: return !memcmp(&a->f, &b->f, sizeof a->f);
    case MC_PY_STR:
    case MC_PY_BYTES:
    case MC_PY_GLOBAL: return key_equal(a, b, 0);
    case MC_PY_TUPLE:
    case MC_PY_LIST:
        if (a->seq.len != b->seq.len) return false;
        for (size_t i = 0; i < a->seq.len; i++)
            if (!equal(a->seq.items[i], b->seq.items[i], depth + 1)) return false;
        return true;
    case MC_PY_DICT:
        if (a->dict.len != b->dict.len || a->dict.ordered != b->dict.ordered ||
            !equal_opt(a->dict.attrs, b->dict.attrs, depth + 1))
            return false;
        for (size_t i = 0; i < a->dict.len; i++)
            if (!equal(a->dict.keys[i], b->dict.keys[i], depth + 1) ||
                !equal(a->dict.vals[i], b->dict.vals[i], depth + 1))
                return false;
        return true;
    case MC_PY_OBJECT:
        return a->object.newobj == b->object.newobj &&
               equal(a->object.callable, b->object.callable, depth + 1) &&
               equal(a->object.args, b->object.args, depth + 1) &&
               equal_opt(a->object.state, b->object.state, depth + 1) &&
               equal_opt(a->object.listitems, b->object.listitems, depth + 1) &&
               equal_opt(a->object.dictitems, b->object.dictitems, depth + 1);
    case MC_PY_STORAGE:
        return a->storage.dtype == b->storage.dtype && a->storage.nbytes == b->storage.nbytes &&
               (!a->storage.nbytes || !memcmp(a->storage.data, b->storage.data, a->storage.nbytes));
    case MC_PY_TENSOR: return tensor_equal(a, b);
    }
    return false;
}

bool mc_py_equal(const mc_pyobj_t *a, const mc_pyobj_t *b) { return equal_opt(a, b, 0); }
