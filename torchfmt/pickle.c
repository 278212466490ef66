/* The pickle writer (pickle.h): protocol 2, as CPython's _pickle.c emits it under torch.save.
 *
 * What "as CPython emits it" means, opcode by opcode (Modules/_pickle.c, protocol 2):
 *   None, True, False      NONE, NEWTRUE, NEWFALSE
 *   int                    BININT1 (0..255), BININT2 (..65535), BININT (other int32), else
 *                          LONG1 with the fewest little-endian two's complement bytes
 *   float                  BINFLOAT (big-endian double)
 *   str                    BINUNICODE (UTF-8), memoized
 *   bytes                  protocol 2 has no bytes opcode: _codecs.encode(<latin-1 str>,
 *                          'latin1') via REDUCE, or __builtin__.bytes() when empty
 *   tuple                  EMPTY_TUPLE (not memoized); TUPLE1-3; MARK ... TUPLE; memoized
 *   list                   EMPTY_LIST, memoized, then one APPEND or MARK ... APPENDS per 1000
 *   dict                   EMPTY_DICT, memoized, then one SETITEM or MARK ... SETITEMS per 1000
 *                          (a multiple of 1000 items ends with an empty MARK SETITEMS, as
 *                          CPython's batch_dict_exact does)
 *   global                 GLOBAL "module\nname\n", memoized; Python-3 module names mapped back
 *                          to Python 2's (builtins -> __builtin__) as fix_imports does
 *   reduce (obj)           callable, args, REDUCE (or cls, args, NEWOBJ), memoized, then
 *                          listitems/dictitems by the iterator batching, then state + BUILD
 *   OrderedDict            collections.OrderedDict, (), REDUCE, items, [attrs BUILD]
 *   tensor                 torch._utils._rebuild_tensor_v2(<pid> BINPERSID, offset, size,
 *                          stride, requires_grad, OrderedDict()), args tuple memoized
 *   Parameter              torch._utils._rebuild_parameter((tensor, requires_grad, OrderedDict()))
 * Memo indices count up from 0 (BINPUT below 256, LONG_BINPUT above); an object met again is
 * a BINGET (LONG_BINGET). CPython memoizes by object identity; here an object is a pointer
 * (share a pointer where Python would share an object: a loaded graph keeps the file's
 * sharing, so saving it again reproduces the file), globals are identified by name, and the
 * strings torch or CPython make single objects are single here: torch's constants ('storage',
 * 'cpu', 'latin1') and, for bytes, the empty or one-character latin-1 strings that CPython's
 * decoder returns as cached objects (numpy's b'b' in every array is one string). */
#include "torchfmt/pickle.h"
#include "torchfmt/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCHSIZE 1000
#define MAX_DEPTH 1000

/* ---- output buffer --------------------------------------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t len, cap;
    bool oom;
} buf_t;

static void put(buf_t *b, const void *data, size_t n)
{
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void put1(buf_t *b, uint8_t c) { put(b, &c, 1); }

/* ---- pointer -> index maps (memo, storages) -------------------------------------------------- */

typedef struct {
    const void **keys;
    uint32_t *vals;
    size_t cap, count;
} ptrmap_t;

static size_t ptr_slot(const void *p, size_t cap)
{
    uint64_t x = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ULL;
    return (size_t)(x >> 17) & (cap - 1);
}

static bool ptrmap_get(const ptrmap_t *m, const void *k, uint32_t *v)
{
    if (!m->cap) return false;
    for (size_t h = ptr_slot(k, m->cap); m->keys[h]; h = (h + 1) & (m->cap - 1))
        if (m->keys[h] == k) return *v = m->vals[h], true;
    return false;
}

static int ptrmap_set(ptrmap_t *m, const void *k, uint32_t v)
{
    if (2 * (m->count + 1) > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        const void **keys = calloc(cap, sizeof *keys);
        uint32_t *vals = calloc(cap, sizeof *vals);
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i]) continue;
            size_t h = ptr_slot(m->keys[i], cap);
            while (keys[h]) h = (h + 1) & (cap - 1);
            keys[h] = m->keys[i];
            vals[h] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = cap;
    }
    size_t h = ptr_slot(k, m->cap);
    while (m->keys[h] && m->keys[h] != k) h = (h + 1) & (m->cap - 1);
    if (!m->keys[h]) m->count++;
    m->keys[h] = k;
    m->vals[h] = v;
    return 0;
}

static void ptrmap_free(ptrmap_t *m)
{
    free(m->keys);
    free(m->vals);
}

/* ---- writer state ---------------------------------------------------------------------------- */

typedef struct {
    char *module, *name;
    uint32_t memo;
} gmemo_t;

typedef struct {
    buf_t out;
    ptrmap_t memo; /* object -> memo index */
    uint32_t next_memo;
    gmemo_t *globals; /* globals already written, by name */
    size_t nglobals;
    /* torch's constant strings: memo index + 1, 0 until first written */
    uint32_t s_storage, s_cpu, s_latin1;
    uint32_t singletons[257]; /* the same for bytes' '' (256) and one-character latin-1 strs */
    ptrmap_t storage_ids;     /* storage -> index into storages */
    const mc_pyobj_t **storages;
    uint32_t *storage_key_memo; /* memo index of each storage's key string */
    size_t nstorages, storages_cap;
    char *err;
    size_t errn;
    bool failed;
} w_t;

__attribute__((format(printf, 2, 3))) static int fail(w_t *w, const char *fmt, ...)
{
    if (!w->failed && w->err && w->errn) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->err, w->errn, fmt, ap);
        va_end(ap);
    }
    w->failed = true;
    return -1;
}

static int oom(w_t *w) { return fail(w, "out of memory while pickling"); }

static void write_memo_op(w_t *w, uint8_t op1, uint8_t op4, uint32_t idx)
{
    if (idx < 256) {
        uint8_t b[2] = {op1, (uint8_t)idx};
        put(&w->out, b, 2);
    } else {
        uint8_t b[5] = {op4};
        ck_put32(b + 1, idx);
        put(&w->out, b, 5);
    }
}

/* BINPUT for the next memo index; obj (NULL for a temporary Python would create afresh) is
 * remembered so a second reference becomes a BINGET. Returns the index. */
static uint32_t memo_put(w_t *w, const void *obj)
{
    uint32_t idx = w->next_memo++;
    if (obj && ptrmap_set(&w->memo, obj, idx)) oom(w);
    write_memo_op(w, 'q', 'r', idx);
    return idx;
}

static void memo_get(w_t *w, uint32_t idx) { write_memo_op(w, 'h', 'j', idx); }

/* ---- scalars --------------------------------------------------------------------------------- */

static void save_int(w_t *w, int64_t v)
{
    uint8_t b[10];
    if (v >= 0 && v <= 0xff) {
        b[0] = 'K';
        b[1] = (uint8_t)v;
        put(&w->out, b, 2);
    } else if (v >= 0 && v <= 0xffff) {
        b[0] = 'M';
        ck_put16(b + 1, (uint16_t)v);
        put(&w->out, b, 3);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        b[0] = 'J';
        ck_put32(b + 1, (uint32_t)v);
        put(&w->out, b, 5);
    } else {
        /* LONG1: CPython takes bit_length(|v|) / 8 + 1 bytes, then drops the top byte of a
         * negative number when it is pure sign extension. */
        uint64_t mag = v < 0 ? -(uint64_t)v : (uint64_t)v;
        int nbits = 64 - __builtin_clzll(mag), n = nbits / 8 + 1;
        uint8_t bytes[9];
        for (int i = 0; i < n; i++)
            bytes[i] = i < 8 ? (uint8_t)((uint64_t)v >> (8 * i)) : (v < 0 ? 0xff : 0);
        if (v < 0 && n > 1 && bytes[n - 1] == 0xff && (bytes[n - 2] & 0x80)) n--;
        b[0] = 0x8a;
        b[1] = (uint8_t)n;
        put(&w->out, b, 2);
        put(&w->out, bytes, (size_t)n);
    }
}

static void save_float(w_t *w, double f)
{
    uint64_t bits;
    memcpy(&bits, &f, 8);
    uint8_t b[9] = {'G'};
    for (int i = 0; i < 8; i++) b[1 + i] = (uint8_t)(bits >> (56 - 8 * i));
    put(&w->out, b, 9);
}

/* The slot of a string CPython keeps a single object of: '' or one code point below 256
 * (one UTF-8 byte, or two starting 0xc2/0xc3). -1 for any other. */
static int singleton(const char *s, size_t n)
{
    const uint8_t *u = (const uint8_t *)s;
    if (n == 0) return 256;
    if (n == 1 && u[0] < 0x80) return u[0];
    if (n == 2 && (u[0] & 0xfe) == 0xc2 && (u[1] & 0xc0) == 0x80)
        return (u[0] & 3) << 6 | (u[1] & 0x3f);
    return -1;
}

/* BINUNICODE of n bytes of UTF-8, memoized as obj (NULL: a string Python makes afresh).
 * decoded: a string CPython's latin-1 decoder made, a cached object when it is '' or one
 * character. Returns the memo index that holds it. */
static uint32_t save_unicode(w_t *w, const char *s, size_t n, const void *obj, bool decoded)
{
    int single = decoded ? singleton(s, n) : -1;
    if (single >= 0 && w->singletons[single]) {
        uint32_t idx = w->singletons[single] - 1;
        memo_get(w, idx);
        return idx;
    }
    if (n > UINT32_MAX) {
        fail(w, "a str of 4 GiB or more (protocol 2 cannot hold it)");
        return 0;
    }
    uint8_t b[5] = {'X'};
    ck_put32(b + 1, (uint32_t)n);
    put(&w->out, b, 5);
    put(&w->out, s, n);
    uint32_t idx = memo_put(w, obj);
    if (single >= 0) w->singletons[single] = idx + 1;
    return idx;
}

/* One of torch's constant strings: written once, then BINGET. */
static void save_const_str(w_t *w, uint32_t *slot, const char *s)
{
    if (*slot) memo_get(w, *slot - 1);
    else *slot = save_unicode(w, s, strlen(s), NULL, false) + 1;
}

static void save_global(w_t *w, const char *module, const char *name)
{
    /* fix_imports: Python 3 writes Python 2's module names at protocols below 3. */
    if (!strcmp(module, "builtins")) module = "__builtin__";
    else if (!strcmp(module, "copyreg")) module = "copy_reg";
    for (size_t i = 0; i < w->nglobals; i++)
        if (!strcmp(w->globals[i].module, module) && !strcmp(w->globals[i].name, name)) {
            memo_get(w, w->globals[i].memo);
            return;
        }
    put1(&w->out, 'c');
    put(&w->out, module, strlen(module));
    put1(&w->out, '\n');
    put(&w->out, name, strlen(name));
    put1(&w->out, '\n');
    gmemo_t *g = realloc(w->globals, (w->nglobals + 1) * sizeof *g);
    char *m = strdup(module), *n = strdup(name);
    if (!g || !m || !n) {
        if (g) w->globals = g;
        free(m);
        free(n);
        oom(w);
        return;
    }
    w->globals = g;
    g[w->nglobals++] = (gmemo_t){m, n, memo_put(w, NULL)};
}

static int save(w_t *w, const mc_pyobj_t *o, int depth);

/* bytes at protocol 2 (CPython's save_bytes): a call that rebuilds them. */
static void save_bytes(w_t *w, const mc_pyobj_t *o)
{
    if (o->str.len == 0) {
        save_global(w, "__builtin__", "bytes");
        put1(&w->out, ')');
    } else {
        save_global(w, "_codecs", "encode");
        /* the bytes as a latin-1 str, in UTF-8: bytes >= 0x80 take two */
        size_t n = o->str.len;
        for (size_t i = 0; i < o->str.len; i++) n += (uint8_t)o->str.data[i] >= 0x80;
        char *u = n < SIZE_MAX / 2 ? malloc(n ? n : 1) : NULL;
        if (!u) {
            oom(w);
            return;
        }
        for (size_t i = 0, k = 0; i < o->str.len; i++) {
            uint8_t c = (uint8_t)o->str.data[i];
            if (c < 0x80) u[k++] = (char)c;
            else {
                u[k++] = (char)(0xc0 | c >> 6);
                u[k++] = (char)(0x80 | (c & 0x3f));
            }
        }
        save_unicode(w, u, n, NULL, true);
        free(u);
        save_const_str(w, &w->s_latin1, "latin1");
        put1(&w->out, 0x86); /* TUPLE2 */
        memo_put(w, NULL);
    }
    put1(&w->out, 'R');
    memo_put(w, o);
}

/* A tuple of the n objects in items (CPython's save_tuple), memoized as obj. */
static int save_tuple_items(w_t *w, mc_pyobj_t *const *items, size_t n, const void *obj, int depth)
{
    uint32_t idx;
    if (n == 0) {
        put1(&w->out, ')');
        return 0;
    }
    if (n > 3) put1(&w->out, '(');
    for (size_t i = 0; i < n; i++)
        if (save(w, items[i], depth + 1)) return -1;
    if (obj && ptrmap_get(&w->memo, obj, &idx)) {
        /* the tuple was reached through its own items: drop the copy, refer to the first */
        if (n > 3) put1(&w->out, '1');
        else
            for (size_t i = 0; i < n; i++) put1(&w->out, '0');
        memo_get(w, idx);
        return 0;
    }
    put1(&w->out, n > 3 ? 't' : (uint8_t)(0x84 + n));
    memo_put(w, obj);
    return 0;
}

/* A tuple of int64s (a tensor's size or stride), built afresh as Python does. */
static void save_int_tuple(w_t *w, const int64_t *v, int n)
{
    if (n == 0) {
        put1(&w->out, ')');
        return;
    }
    if (n > 3) put1(&w->out, '(');
    for (int i = 0; i < n; i++) save_int(w, v[i]);
    put1(&w->out, n > 3 ? 't' : (uint8_t)(0x84 + n));
    memo_put(w, NULL);
}

/* Items of a list (CPython's batch_list_exact). */
static int batch_list_exact(w_t *w, mc_pyobj_t *const *items, size_t n, int depth)
{
    if (n == 1) {
        if (save(w, items[0], depth + 1)) return -1;
        put1(&w->out, 'a');
        return 0;
    }
    size_t total = 0;
    do {
        put1(&w->out, '(');
        for (size_t k = 0; total < n && k < BATCHSIZE; k++, total++)
            if (save(w, items[total], depth + 1)) return -1;
        put1(&w->out, 'e');
    } while (total < n);
    return 0;
}

/* Items appended by a reduce (CPython's batch_list over an iterator). */
static int batch_list_iter(w_t *w, mc_pyobj_t *const *items, size_t n, int depth)
{
    size_t i = 0, k;
    do {
        if (i >= n) break;
        if (i + 1 == n) {
            if (save(w, items[i], depth + 1)) return -1;
            put1(&w->out, 'a');
            break;
        }
        put1(&w->out, '(');
        for (k = 0; i < n && k < BATCHSIZE; k++, i++)
            if (save(w, items[i], depth + 1)) return -1;
        put1(&w->out, 'e');
    } while (k == BATCHSIZE);
    return 0;
}

static int save_pair(w_t *w, const mc_pyobj_t *d, size_t i, int depth)
{
    return save(w, d->dict.keys[i], depth + 1) || save(w, d->dict.vals[i], depth + 1) ? -1 : 0;
}

/* Items of a dict (CPython's batch_dict_exact), d non-empty. */
static int batch_dict_exact(w_t *w, const mc_pyobj_t *d, int depth)
{
    size_t n = d->dict.len, i = 0, k;
    if (n == 1) {
        if (save_pair(w, d, 0, depth)) return -1;
        put1(&w->out, 's');
        return 0;
    }
    do {
        put1(&w->out, '(');
        for (k = 0; i < n && k < BATCHSIZE; k++, i++)
            if (save_pair(w, d, i, depth)) return -1;
        put1(&w->out, 'u');
    } while (k == BATCHSIZE);
    return 0;
}

/* Items set by a reduce: OrderedDict's, an object's dictitems (batch_dict over an iterator). */
static int batch_dict_iter(w_t *w, const mc_pyobj_t *d, int depth)
{
    size_t n = d->dict.len, i = 0, k;
    do {
        if (i >= n) break;
        if (i + 1 == n) {
            if (save_pair(w, d, i, depth)) return -1;
            put1(&w->out, 's');
            break;
        }
        put1(&w->out, '(');
        for (k = 0; i < n && k < BATCHSIZE; k++, i++)
            if (save_pair(w, d, i, depth)) return -1;
        put1(&w->out, 'u');
    } while (k == BATCHSIZE);
    return 0;
}

static void save_empty_ordered_dict(w_t *w)
{
    save_global(w, "collections", "OrderedDict");
    put1(&w->out, ')');
    put1(&w->out, 'R');
    memo_put(w, NULL);
}

static const char *const STORAGE_CLASS[MC_TORCH_DTYPE_COUNT] = {
    [MC_TORCH_FLOAT32] = "FloatStorage",
    [MC_TORCH_FLOAT64] = "DoubleStorage",
    [MC_TORCH_FLOAT16] = "HalfStorage",
    [MC_TORCH_BFLOAT16] = "BFloat16Storage",
    [MC_TORCH_INT64] = "LongStorage",
    [MC_TORCH_INT32] = "IntStorage",
    [MC_TORCH_INT16] = "ShortStorage",
    [MC_TORCH_INT8] = "CharStorage",
    [MC_TORCH_UINT8] = "ByteStorage",
    [MC_TORCH_BOOL] = "BoolStorage",
    [MC_TORCH_COMPLEX64] = "ComplexFloatStorage",
    [MC_TORCH_COMPLEX128] = "ComplexDoubleStorage",
};

const char *mc_pickle_storage_class(mc_torch_dtype_t dt)
{
    return (unsigned)dt < MC_TORCH_DTYPE_COUNT ? STORAGE_CLASS[dt] : NULL;
}

/* ('storage', torch.<Type>Storage, key, 'cpu', numel) BINPERSID; keys in order of appearance.
 * torch's persistent_id returns a new tuple each time but the same key string for a storage
 * seen before, so the tuple is written afresh and the key is a BINGET. */
static int save_storage_pid(w_t *w, const mc_pyobj_t *s)
{
    const char *cls = mc_pickle_storage_class(s->storage.dtype);
    if (!cls || s->storage.untyped)
        return fail(w,
                    "cannot save a %s storage (torch >= 2.3 writes it untyped, through "
                    "_rebuild_tensor_v3, which this writer does not emit)",
                    mc_torch_dtype_name(s->storage.dtype));
    uint32_t id;
    bool seen = ptrmap_get(&w->storage_ids, s, &id);
    if (!seen) {
        if (w->nstorages == w->storages_cap) {
            size_t cap = w->storages_cap ? 2 * w->storages_cap : 16;
            const mc_pyobj_t **p = realloc(w->storages, cap * sizeof *p);
            if (!p) return oom(w);
            w->storages = p;
            uint32_t *m = realloc(w->storage_key_memo, cap * sizeof *m);
            if (!m) return oom(w);
            w->storage_key_memo = m;
            w->storages_cap = cap;
        }
        id = (uint32_t)w->nstorages++;
        w->storages[id] = s;
        if (ptrmap_set(&w->storage_ids, s, id)) return oom(w);
    }
    put1(&w->out, '(');
    save_const_str(w, &w->s_storage, "storage");
    save_global(w, "torch", cls);
    if (seen) {
        memo_get(w, w->storage_key_memo[id]);
    } else {
        char key[16];
        int n = snprintf(key, sizeof key, "%u", id);
        /* str(int): a new object even for one digit, unlike decoded strings */
        w->storage_key_memo[id] = save_unicode(w, key, (size_t)n, NULL, false);
    }
    save_const_str(w, &w->s_cpu, "cpu");
    save_int(w, s->storage.numel);
    put1(&w->out, 't');
    memo_put(w, NULL);
    put1(&w->out, 'Q');
    return 0;
}

/* torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, OrderedDict()),
 * the reduction of a plain tensor. requires_grad is the tensor's own (a Parameter's data is
 * detached: False). */
static int save_plain_tensor(w_t *w, const mc_pyobj_t *t, bool requires_grad, const void *memo_as)
{
    const mc_pyobj_t *s = t->tensor.storage;
    if (!s->storage.untyped && s->storage.dtype != t->tensor.dtype)
        return fail(w, "cannot save a tensor viewing a storage of another dtype");
    if (s->storage.untyped || !mc_pickle_storage_class(t->tensor.dtype))
        return fail(w,
                    "cannot save a %s tensor (torch >= 2.3 writes it through "
                    "_rebuild_tensor_v3, which this writer does not emit)",
                    mc_torch_dtype_name(t->tensor.dtype));
    save_global(w, "torch._utils", "_rebuild_tensor_v2");
    put1(&w->out, '(');
    if (save_storage_pid(w, s)) return -1;
    save_int(w, t->tensor.offset);
    save_int_tuple(w, t->tensor.shape, t->tensor.ndim);
    save_int_tuple(w, t->tensor.stride, t->tensor.ndim);
    put1(&w->out, requires_grad ? 0x88 : 0x89);
    save_empty_ordered_dict(w);
    put1(&w->out, 't');
    memo_put(w, NULL);
    put1(&w->out, 'R');
    memo_put(w, memo_as);
    return 0;
}

static int save_tensor(w_t *w, const mc_pyobj_t *t)
{
    if (!t->tensor.parameter) return save_plain_tensor(w, t, t->tensor.requires_grad, t);
    /* Parameter.__reduce_ex__: _rebuild_parameter((self.data, self.requires_grad, hooks)) */
    save_global(w, "torch._utils", "_rebuild_parameter");
    if (save_plain_tensor(w, t, false, NULL)) return -1;
    put1(&w->out, t->tensor.requires_grad ? 0x88 : 0x89);
    save_empty_ordered_dict(w);
    put1(&w->out, 0x87); /* TUPLE3 */
    memo_put(w, NULL);
    put1(&w->out, 'R');
    memo_put(w, t);
    return 0;
}

static int save_object(w_t *w, const mc_pyobj_t *o, int depth)
{
    if (!o->object.args || o->object.args->kind != MC_PY_TUPLE)
        return fail(w, "an object whose arguments are not a tuple");
    if (save(w, o->object.callable, depth + 1) || save(w, o->object.args, depth + 1)) return -1;
    put1(&w->out, o->object.newobj ? 0x81 : 'R');
    memo_put(w, o);
    const mc_pyobj_t *li = o->object.listitems, *di = o->object.dictitems;
    if (li && li->kind == MC_PY_LIST && batch_list_iter(w, li->seq.items, li->seq.len, depth))
        return -1;
    if (di && di->kind == MC_PY_DICT && batch_dict_iter(w, di, depth)) return -1;
    /* object.__reduce_ex__ gives no state for an empty __dict__ (an empty Namespace) */
    const mc_pyobj_t *st = o->object.state;
    if (st && !(o->object.newobj && st->kind == MC_PY_DICT && !st->dict.len && !st->dict.ordered)) {
        if (save(w, st, depth + 1)) return -1;
        put1(&w->out, 'b');
    }
    return 0;
}

static int save(w_t *w, const mc_pyobj_t *o, int depth)
{
    uint32_t idx;
    if (w->failed) return -1;
    if (w->out.oom) return oom(w);
    if (!o) return fail(w, "a NULL object in the graph");
    if (depth > MAX_DEPTH) return fail(w, "objects nested deeper than 1000 levels");
    if (ptrmap_get(&w->memo, o, &idx)) {
        memo_get(w, idx);
        return 0;
    }
    switch (o->kind) {
    case MC_PY_NONE: put1(&w->out, 'N'); break;
    case MC_PY_BOOL: put1(&w->out, o->b ? 0x88 : 0x89); break;
    case MC_PY_INT: save_int(w, o->i); break;
    case MC_PY_FLOAT: save_float(w, o->f); break;
    case MC_PY_STR: save_unicode(w, o->str.data, o->str.len, o, false); break;
    case MC_PY_BYTES: save_bytes(w, o); break;
    case MC_PY_TUPLE: return save_tuple_items(w, o->seq.items, o->seq.len, o, depth);
    case MC_PY_LIST:
        put1(&w->out, ']');
        memo_put(w, o);
        return o->seq.len ? batch_list_exact(w, o->seq.items, o->seq.len, depth) : 0;
    case MC_PY_DICT:
        if (!o->dict.ordered) {
            put1(&w->out, '}');
            memo_put(w, o);
            return o->dict.len ? batch_dict_exact(w, o, depth) : 0;
        }
        save_global(w, "collections", "OrderedDict");
        put1(&w->out, ')');
        put1(&w->out, 'R');
        memo_put(w, o);
        if (batch_dict_iter(w, o, depth)) return -1;
        if (o->dict.attrs && mc_py_len(o->dict.attrs)) { /* OrderedDict.__reduce__: vars(od) */
            if (save(w, o->dict.attrs, depth + 1)) return -1;
            put1(&w->out, 'b');
        }
        break;
    case MC_PY_GLOBAL: save_global(w, o->global.module, o->global.name); break;
    case MC_PY_OBJECT: return save_object(w, o, depth);
    case MC_PY_STORAGE: return save_storage_pid(w, o);
    case MC_PY_TENSOR: return save_tensor(w, o);
    default: return fail(w, "an object of unknown kind");
    }
    return w->failed ? -1 : 0;
}

int mc_pickle_dump(const mc_pyobj_t *obj, uint8_t **out, size_t *len, mc_pickle_storages_t *st,
                   char *err, size_t errn)
{
    w_t w = {.err = err, .errn = errn};
    *out = NULL;
    *len = 0;
    st->storages = NULL;
    st->n = 0;
    put(&w.out, "\x80\x02", 2); /* PROTO 2 */
    int rc = save(&w, obj, 0);
    put1(&w.out, '.');
    if (!rc && w.out.oom) rc = oom(&w);
    ptrmap_free(&w.memo);
    ptrmap_free(&w.storage_ids);
    for (size_t i = 0; i < w.nglobals; i++) {
        free(w.globals[i].module);
        free(w.globals[i].name);
    }
    free(w.globals);
    free(w.storage_key_memo);
    if (rc || w.failed) {
        free(w.out.p);
        free(w.storages);
        return -1;
    }
    *out = w.out.p;
    *len = w.out.len;
    st->storages = w.storages;
    st->n = w.nstorages;
    return 0;
}

void mc_pickle_storages_free(mc_pickle_storages_t *st)
{
    free(st->storages);
    st->storages = NULL;
    st->n = 0;
}
