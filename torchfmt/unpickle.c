/* The pickle reader (pickle.h), a stack machine like CPython's Unpickler, over untrusted bytes.
 *
 * Opcodes: PROTO, FRAME, STOP, MARK, POP, POP_MARK, DUP, NONE, NEWTRUE, NEWFALSE, BININT,
 * BININT1, BININT2, LONG1, LONG4, BINFLOAT, BINUNICODE, SHORT_BINUNICODE, BINUNICODE8,
 * BINSTRING, SHORT_BINSTRING (Python 2 str, decoded as UTF-8 like torch.load's default),
 * BINBYTES, SHORT_BINBYTES, BINBYTES8, BYTEARRAY8, EMPTY_TUPLE, TUPLE, TUPLE1-3, EMPTY_LIST,
 * LIST, APPEND, APPENDS, EMPTY_DICT, DICT, SETITEM, SETITEMS, EMPTY_SET, ADDITEMS, FROZENSET,
 * GLOBAL, STACK_GLOBAL, REDUCE, NEWOBJ, NEWOBJ_EX, BUILD, BINPERSID, BINPUT, LONG_BINPUT,
 * MEMOIZE, BINGET, LONG_BINGET: everything the binary protocols 2-5 produce for the objects
 * checkpoints hold. The text opcodes of protocol 0, extension codes and out-of-band buffers are
 * rejected with an error naming them.
 *
 * Safety: reads check the remaining length first; lengths are checked against the input before
 * anything is allocated; pops may not cross the current MARK (CPython's "stack underflow");
 * memo indices are bounded by the input length. No recursion depends on the input (the stack
 * is explicit, freeing is iterative). A container that would come to contain itself is
 * rejected. That needs a container fetched from the memo (BINGET/DUP) and a target that is
 * already inside another container (nothing else can reach a container), so only such
 * insertions walk the inserted graph, with a total budget proportional to the input. */
#include "torchfmt/pickle.h"
#include "torchfmt/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *base, *p, *end;
    mc_pyobj_t **stack;
    size_t sp, cap;
    size_t *marks;
    size_t nmarks, mcap;
    mc_pyobj_t **memo;
    size_t memo_cap, memo_count, memo_limit;
    const mc_unpickle_storages_t *st;
    char *err;
    size_t errn;
    size_t op_at; /* offset of the opcode being run */
    uint8_t op;
    bool failed;
    bool shared; /* a container was fetched from the memo: check insertions for cycles */
    uint32_t stamp;
    uint64_t walk_budget;
    mc_pyobj_t **walk;
    size_t walk_cap;
} up_t;

static const char *op_name(uint8_t op)
{
    switch (op) {
    case 0x80: return "PROTO";
    case 0x95: return "FRAME";
    case '.': return "STOP";
    case '(': return "MARK";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'N': return "NONE";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'M': return "BININT2";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 'G': return "BINFLOAT";
    case 'X': return "BINUNICODE";
    case 'B': return "BINBYTES";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'C': return "SHORT_BINBYTES";
    case 0x8e: return "BINBYTES8";
    case 0x96: return "BYTEARRAY8";
    case ')': return "EMPTY_TUPLE";
    case 't': return "TUPLE";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case ']': return "EMPTY_LIST";
    case 'l': return "LIST";
    case 'a': return "APPEND";
    case 'e': return "APPENDS";
    case '}': return "EMPTY_DICT";
    case 'd': return "DICT";
    case 's': return "SETITEM";
    case 'u': return "SETITEMS";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'b': return "BUILD";
    case 'Q': return "BINPERSID";
    case 'P': return "PERSID";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 0x94: return "MEMOIZE";
    case 'h': return "BINGET";
    case 'j': return "LONG_BINGET";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'F': return "FLOAT";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 'p': return "PUT";
    case 'g': return "GET";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return NULL;
    }
}

/* One line: "<what> (<OPCODE> at byte N)". */
__attribute__((format(printf, 2, 3))) static int bad(up_t *u, const char *fmt, ...)
{
    if (u->failed) return -1;
    u->failed = true;
    if (!u->err || !u->errn) return -1;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *name = op_name(u->op);
    if (name) snprintf(u->err, u->errn, "%s (%s at byte %zu)", what, name, u->op_at);
    else snprintf(u->err, u->errn, "%s (opcode 0x%02x at byte %zu)", what, u->op, u->op_at);
    return -1;
}

static int oom(up_t *u) { return bad(u, "out of memory"); }

/* ---- input ----------------------------------------------------------------------------------- */

static const uint8_t *take(up_t *u, uint64_t n)
{
    if ((uint64_t)(u->end - u->p) < n) {
        bad(u, "truncated pickle: %llu more bytes needed, %zu left", (unsigned long long)n,
            (size_t)(u->end - u->p));
        return NULL;
    }
    const uint8_t *q = u->p;
    u->p += n;
    return q;
}

/* ---- stack ----------------------------------------------------------------------------------- */

static size_t fence(const up_t *u) { return u->nmarks ? u->marks[u->nmarks - 1] : 0; }

static int push(up_t *u, mc_pyobj_t *o) /* steals o */
{
    if (!o) return oom(u);
    if (u->sp == u->cap) {
        size_t cap = u->cap ? 2 * u->cap : 64;
        mc_pyobj_t **s = realloc(u->stack, cap * sizeof *s);
        if (!s) {
            mc_py_decref(o);
            return oom(u);
        }
        u->stack = s;
        u->cap = cap;
    }
    u->stack[u->sp++] = o;
    return 0;
}

/* The top item (a new reference for the caller), or NULL at the current MARK. */
static mc_pyobj_t *pop(up_t *u)
{
    if (u->sp <= fence(u)) {
        bad(u, "pickle stack underflow");
        return NULL;
    }
    return u->stack[--u->sp];
}

static mc_pyobj_t *top(up_t *u)
{
    if (u->sp <= fence(u)) {
        bad(u, "pickle stack underflow");
        return NULL;
    }
    return u->stack[u->sp - 1];
}

/* Pops the last MARK; returns the stack index it stood at, or -1. */
static ptrdiff_t pop_mark(up_t *u)
{
    if (!u->nmarks) return bad(u, "no MARK on the pickle stack"), -1;
    return (ptrdiff_t)u->marks[--u->nmarks];
}

static void drop_to(up_t *u, size_t k)
{
    while (u->sp > k) mc_py_decref(u->stack[--u->sp]);
}

static bool is_container(const mc_pyobj_t *o)
{
    return o->kind == MC_PY_TUPLE || o->kind == MC_PY_LIST || o->kind == MC_PY_DICT ||
           o->kind == MC_PY_OBJECT;
}

/* flags: o has been put inside a container (so another object may reach it) */
#define CONTAINED 1u

static mc_pyobj_t *adopt(mc_pyobj_t *o)
{
    if (o) o->flags |= CONTAINED;
    return o;
}

/* ---- cycle check ----------------------------------------------------------------------------- */

static int walk_push(up_t *u, size_t *n, mc_pyobj_t *o)
{
    if (!o || o->mark == u->stamp) return 0;
    o->mark = u->stamp;
    if (!is_container(o)) return 0;
    if (u->walk_budget-- == 0) return bad(u, "pickle too complex to check for self-reference");
    if (*n == u->walk_cap) {
        size_t cap = u->walk_cap ? 2 * u->walk_cap : 64;
        mc_pyobj_t **w = realloc(u->walk, cap * sizeof *w);
        if (!w) return oom(u);
        u->walk = w;
        u->walk_cap = cap;
    }
    u->walk[(*n)++] = o;
    return 0;
}

/* Refuses to insert value into target if target is reachable from value. */
static int check_insert(up_t *u, const mc_pyobj_t *target, mc_pyobj_t *value)
{
    if (value == target) return bad(u, "a container that contains itself (not supported)");
    if (!u->shared || !value || !is_container(value) || !(target->flags & CONTAINED)) return 0;
    if (++u->stamp == 0) u->stamp = 1; /* objects start unmarked (0) */
    size_t n = 0;
    if (walk_push(u, &n, value)) return -1;
    while (n) {
        mc_pyobj_t *o = u->walk[--n];
        if (o == target) return bad(u, "a container that contains itself (not supported)");
        int rc = 0;
        switch (o->kind) {
        case MC_PY_TUPLE:
        case MC_PY_LIST:
            for (size_t i = 0; i < o->seq.len && !rc; i++) rc = walk_push(u, &n, o->seq.items[i]);
            break;
        case MC_PY_DICT:
            for (size_t i = 0; i < o->dict.len && !rc; i++)
                rc = walk_push(u, &n, o->dict.keys[i]) || walk_push(u, &n, o->dict.vals[i]);
            rc = rc || walk_push(u, &n, o->dict.attrs);
            break;
        default: /* OBJECT */
            rc = walk_push(u, &n, o->object.callable) || walk_push(u, &n, o->object.args) ||
                 walk_push(u, &n, o->object.state) || walk_push(u, &n, o->object.listitems) ||
                 walk_push(u, &n, o->object.dictitems);
            break;
        }
        if (rc) return -1;
    }
    return 0;
}

/* ---- scalars and strings --------------------------------------------------------------------- */

/* Little-endian two's complement of n bytes (LONG1/LONG4) into an int64. */
static int decode_long(up_t *u, const uint8_t *b, uint64_t n, int64_t *out)
{
    if (n == 0) return *out = 0, 0;
    bool neg = b[n - 1] & 0x80;
    for (uint64_t i = 8; i < n; i++)
        if (b[i] != (neg ? 0xff : 0)) return bad(u, "an int wider than 64 bits");
    if (n > 8 && (bool)(b[7] & 0x80) != neg) return bad(u, "an int wider than 64 bits");
    uint64_t v = neg ? ~0ULL : 0;
    for (uint64_t i = 0; i < n && i < 8; i++) {
        v &= ~(0xffULL << (8 * i));
        v |= (uint64_t)b[i] << (8 * i);
    }
    memcpy(out, &v, 8);
    return 0;
}

/* UTF-8 as Python's decoder with "surrogatepass" accepts it (what pickle writes for str). */
static bool valid_utf8(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t len = c < 0x80             ? 1
                     : (c & 0xe0) == 0xc0 ? 2
                     : (c & 0xf0) == 0xe0 ? 3
                     : (c & 0xf8) == 0xf0 ? 4
                                          : 0;
        if (!len || i + len > n) return false;
        uint32_t cp = len == 1 ? c : c & (0x7f >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return false;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        static const uint32_t MIN[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < MIN[len] || cp > 0x10ffff) return false;
        i += len;
    }
    return true;
}

static int push_str(up_t *u, uint64_t n, bool bytes)
{
    const uint8_t *s = take(u, n);
    if (!s) return -1;
    if (!bytes && !valid_utf8(s, n)) return bad(u, "a str that is not valid UTF-8");
    return push(u, bytes ? mc_py_bytes(s, n) : mc_py_strn((const char *)s, n));
}

/* ---- globals --------------------------------------------------------------------------------- */

/* Python 2 module names, as protocol 2 files from Python 3 name them (fix_imports). */
static const char *py3_module(const char *m)
{
    if (!strcmp(m, "__builtin__")) return "builtins";
    if (!strcmp(m, "copy_reg")) return "copyreg";
    return m;
}

static int push_global(up_t *u, const char *module, size_t mlen, const char *name, size_t nlen)
{
    if (memchr(module, 0, mlen) || memchr(name, 0, nlen) || !mlen || !nlen)
        return bad(u, "an invalid global name");
    char *m = strndup(module, mlen), *n = strndup(name, nlen);
    mc_pyobj_t *g = m && n ? mc_py_global(py3_module(m), n) : NULL;
    free(m);
    free(n);
    return push(u, g);
}

static const char *read_line(up_t *u, size_t *len)
{
    const uint8_t *nl = memchr(u->p, '\n', (size_t)(u->end - u->p));
    if (!nl) {
        bad(u, "truncated pickle: a GLOBAL line without its newline");
        return NULL;
    }
    const char *s = (const char *)u->p;
    *len = (size_t)(nl - u->p);
    u->p = nl + 1;
    return s;
}

static bool is_global(const mc_pyobj_t *o, const char *module, const char *name)
{
    return o && o->kind == MC_PY_GLOBAL && !strcmp(o->global.module, module) &&
           !strcmp(o->global.name, name);
}

/* ---- torch: storages and tensors ------------------------------------------------------------- */

static mc_pyobj_t *persistent_load(up_t *u, const mc_pyobj_t *pid)
{
    if (!pid || pid->kind != MC_PY_TUPLE || pid->seq.len < 5 || !mc_py_get_str(pid->seq.items[0]) ||
        strcmp(mc_py_get_str(pid->seq.items[0]), "storage")) {
        bad(u, "a persistent id that is not a torch storage");
        return NULL;
    }
    mc_pyobj_t *const *f = pid->seq.items;
    const mc_pyobj_t *type = f[1];
    const char *key = mc_py_get_str(f[2]), *loc = mc_py_get_str(f[3]);
    int64_t numel;
    if (!type || type->kind != MC_PY_GLOBAL || !key || !loc || f[4]->kind != MC_PY_INT ||
        (numel = f[4]->i) < 0) {
        bad(u, "a malformed storage persistent id");
        return NULL;
    }
    /* torch.FloatStorage (torch.cuda.FloatStorage from torch < 1.11), torch.UntypedStorage */
    const char *mod = type->global.module, *cls = type->global.name;
    bool untyped =
        !strcmp(cls, "UntypedStorage") && (!strcmp(mod, "torch") || !strcmp(mod, "torch.storage"));
    mc_torch_dtype_t dt = MC_TORCH_UINT8;
    if (!untyped) {
        int found = -1;
        if (!strcmp(mod, "torch") || !strcmp(mod, "torch.cuda"))
            for (int i = 0; i < MC_TORCH_DTYPE_COUNT && found < 0; i++)
                if (mc_pickle_storage_class((mc_torch_dtype_t)i) &&
                    !strcmp(cls, mc_pickle_storage_class((mc_torch_dtype_t)i)))
                    found = i;
        if (found < 0) {
            char a[CK_SHOWN_MAX + 4], b[CK_SHOWN_MAX + 4];
            bad(u, "unsupported storage type %s.%s", ck_shown(mod, strlen(mod), a),
                ck_shown(cls, strlen(cls), b));
            return NULL;
        }
        dt = (mc_torch_dtype_t)found;
    }
    if (!u->st || !u->st->storage) {
        bad(u, "a storage outside a checkpoint archive");
        return NULL;
    }
    char why[512] = "";
    mc_pyobj_t *s = u->st->storage(u->st->ctx, key, dt, untyped, numel, loc, why, sizeof why);
    if (!s) bad(u, "%s", why);
    else if (s->kind != MC_PY_STORAGE) {
        mc_py_decref(s);
        bad(u, "a storage loader returned a %s", mc_py_kind_name(s->kind));
        return NULL;
    }
    return s;
}

static int int_tuple(const mc_pyobj_t *t, int64_t *v, int *n)
{
    if (!t || t->kind != MC_PY_TUPLE || t->seq.len > MC_PY_MAX_DIMS) return -1;
    for (size_t i = 0; i < t->seq.len; i++) {
        if (t->seq.items[i]->kind != MC_PY_INT) return -1;
        v[i] = t->seq.items[i]->i;
    }
    *n = (int)t->seq.len;
    return 0;
}

static bool truthy(const mc_pyobj_t *o)
{
    return (o->kind == MC_PY_BOOL && o->b) || (o->kind == MC_PY_INT && o->i);
}

/* torch._utils._rebuild_tensor (v1: storage, offset, size, stride), _rebuild_tensor_v2
 * (+ requires_grad, backward_hooks[, metadata]) and _rebuild_tensor_v3 (+ dtype[, metadata]),
 * whose storage is untyped and whose dtype comes as a global (torch.float8_e4m3fn). */
static mc_pyobj_t *rebuild_tensor(up_t *u, const mc_pyobj_t *args, int version)
{
    size_t need = version == 1 ? 4 : version == 2 ? 6 : 7;
    int64_t shape[MC_PY_MAX_DIMS], stride[MC_PY_MAX_DIMS];
    int nd, ns;
    if (args->seq.len < need) {
        bad(u, "_rebuild_tensor%s with %zu arguments",
            version == 1   ? ""
            : version == 2 ? "_v2"
                           : "_v3",
            args->seq.len);
        return NULL;
    }
    mc_pyobj_t *const *a = args->seq.items;
    mc_pyobj_t *storage = a[0];
    if (storage->kind != MC_PY_STORAGE || a[1]->kind != MC_PY_INT || int_tuple(a[2], shape, &nd) ||
        int_tuple(a[3], stride, &ns) || nd != ns) {
        bad(u, "a tensor rebuilt from malformed arguments");
        return NULL;
    }
    mc_torch_dtype_t dt = storage->storage.dtype;
    if (version == 3) {
        if (a[6]->kind != MC_PY_GLOBAL || strcmp(a[6]->global.module, "torch") ||
            mc_torch_dtype_from_name(a[6]->global.name, &dt)) {
            bad(u, "_rebuild_tensor_v3 with an unknown dtype");
            return NULL;
        }
    } else if (storage->storage.untyped) {
        bad(u, "an untyped storage in _rebuild_tensor_v2");
        return NULL;
    }
    char why[256];
    if (mc_py_tensor_check(storage, dt, a[1]->i, nd, shape, stride, why, sizeof why)) {
        bad(u, "%s", why);
        return NULL;
    }
    mc_pyobj_t *t = mc_py_tensor(mc_py_incref(storage), dt, a[1]->i, nd, shape, stride);
    if (!t) {
        oom(u);
        return NULL;
    }
    t->tensor.requires_grad = version > 1 && truthy(a[4]);
    return t;
}

/* A new tensor object viewing what t views (a Parameter made from a tensor is a new object). */
static mc_pyobj_t *tensor_view(const mc_pyobj_t *t)
{
    return mc_py_tensor(mc_py_incref(t->tensor.storage), t->tensor.dtype, t->tensor.offset,
                        t->tensor.ndim, t->tensor.shape, t->tensor.stride);
}

/* bytes from _codecs.encode(str, encoding) as protocol 2 writes them, or NULL (not bytes). */
static mc_pyobj_t *encoded_bytes(const mc_pyobj_t *args, bool *is_bytes)
{
    *is_bytes = false;
    if (args->seq.len != 2 || args->seq.items[0]->kind != MC_PY_STR ||
        args->seq.items[1]->kind != MC_PY_STR)
        return NULL;
    const mc_pyobj_t *s = args->seq.items[0];
    const char *enc = args->seq.items[1]->str.data;
    if (!strcmp(enc, "utf-8") || !strcmp(enc, "utf8")) {
        *is_bytes = true;
        return mc_py_bytes(s->str.data, s->str.len);
    }
    if (strcmp(enc, "latin1") && strcmp(enc, "latin-1") && strcmp(enc, "latin_1") &&
        strcmp(enc, "iso-8859-1"))
        return NULL;
    /* every code point must be below 256: one or two UTF-8 bytes (the str is valid UTF-8) */
    const uint8_t *p = (const uint8_t *)s->str.data;
    size_t n = 0;
    uint8_t *out = malloc(s->str.len + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < s->str.len; n++) {
        if (p[i] < 0x80) out[n] = p[i++];
        else if ((p[i] & 0xfe) == 0xc2 && i + 1 < s->str.len) {
            out[n] = (uint8_t)((p[i] & 0x03) << 6 | (p[i + 1] & 0x3f));
            i += 2;
        } else {
            free(out);
            return NULL; /* not encodable in latin-1: Python would raise; keep the call opaque */
        }
    }
    *is_bytes = true;
    mc_pyobj_t *b = mc_py_bytes(out, n);
    free(out);
    return b;
}

/* REDUCE: callable(*args). torch's rebuild functions become tensors, OrderedDict() an ordered
 * dict, encoded latin-1 strings bytes; any other call an opaque object. Steals both. */
static mc_pyobj_t *reduce(up_t *u, mc_pyobj_t *callable, mc_pyobj_t *args, int depth)
{
    mc_pyobj_t *r = NULL;
    bool handled = true;
    if (args->kind != MC_PY_TUPLE) {
        bad(u, "REDUCE arguments are a %s, not a tuple", mc_py_kind_name(args->kind));
        goto out;
    }
    mc_pyobj_t *const *a = args->seq.items;
    size_t n = args->seq.len;
    if (is_global(callable, "torch._utils", "_rebuild_tensor")) r = rebuild_tensor(u, args, 1);
    else if (is_global(callable, "torch._utils", "_rebuild_tensor_v2"))
        r = rebuild_tensor(u, args, 2);
    else if (is_global(callable, "torch._utils", "_rebuild_tensor_v3"))
        r = rebuild_tensor(u, args, 3);
    else if ((is_global(callable, "torch._utils", "_rebuild_parameter") ||
              is_global(callable, "torch._utils", "_rebuild_parameter_with_state")) &&
             n >= 2 && a[0]->kind == MC_PY_TENSOR) {
        /* Parameter(data, requires_grad); a state (Python attributes) is dropped */
        if ((r = tensor_view(a[0]))) {
            r->tensor.parameter = true;
            r->tensor.requires_grad = truthy(a[1]);
        } else {
            oom(u);
        }
    } else if (is_global(callable, "torch._tensor", "_rebuild_from_type_v2") && n == 4 &&
               a[2]->kind == MC_PY_TUPLE && depth < 4) {
        /* a tensor subclass or a tensor with Python attributes: func(*args), type and state
         * dropped except that a Parameter stays one */
        r = reduce(u, mc_py_incref(a[0]), mc_py_incref(a[2]), depth + 1);
        if (r && r->kind == MC_PY_TENSOR && is_global(a[1], "torch.nn.parameter", "Parameter"))
            r->tensor.parameter = true;
    } else if (is_global(callable, "collections", "OrderedDict") && n == 0) {
        if (!(r = mc_py_ordered_dict())) oom(u);
    } else if (is_global(callable, "builtins", "bytes") && n == 0) {
        if (!(r = mc_py_bytes("", 0))) oom(u);
    } else if (is_global(callable, "_codecs", "encode")) {
        bool is_bytes;
        r = encoded_bytes(args, &is_bytes);
        if (!is_bytes) handled = false;
        else if (!r) oom(u);
    } else {
        handled = false;
    }
    if (!handled) {
        r = mc_py_object(adopt(callable), adopt(args), false);
        if (!r) oom(u);
        return r;
    }
out:
    mc_py_decref(callable);
    mc_py_decref(args);
    return r;
}

/* ---- containers ------------------------------------------------------------------------------ */

/* A tuple or list of stack[k..sp), which leave the stack. */
static int collect(up_t *u, size_t k, mc_py_kind_t kind)
{
    size_t n = u->sp - k;
    mc_pyobj_t *o;
    for (size_t i = k; i < u->sp; i++) adopt(u->stack[i]);
    if (kind == MC_PY_TUPLE) {
        o = mc_py_tuple_of(n, u->stack + k);
    } else {
        o = mc_py_list();
        for (size_t i = 0; i < n; i++) {
            if (!o) mc_py_decref(u->stack[k + i]);
            else if (mc_py_list_append(o, u->stack[k + i])) {
                mc_py_decref(o);
                o = NULL;
            }
        }
    }
    u->sp = k;
    return push(u, o);
}

/* The list that APPENDS/ADDITEMS extend on target, or NULL with an error. */
static mc_pyobj_t *append_target(up_t *u, mc_pyobj_t *target)
{
    if (target->kind == MC_PY_LIST) return target;
    if (target->kind == MC_PY_OBJECT) {
        /* set()/frozenset() keep their items in the list argument (how protocol 2 writes them) */
        mc_pyobj_t *args = target->object.args;
        if ((mc_py_is_a(target, "builtins", "set") ||
             mc_py_is_a(target, "builtins", "frozenset")) &&
            mc_py_len(args) == 1 && args->seq.items[0]->kind == MC_PY_LIST)
            return args->seq.items[0];
        if (!target->object.listitems && !(target->object.listitems = mc_py_list())) {
            oom(u);
            return NULL;
        }
        return target->object.listitems;
    }
    bad(u, "appending to a %s", mc_py_kind_name(target->kind));
    return NULL;
}

/* Appends stack[k..sp) to the container at stack[k-1]. */
static int appends(up_t *u, size_t k)
{
    if (k == 0 || k - 1 < fence(u)) return bad(u, "pickle stack underflow");
    mc_pyobj_t *target = u->stack[k - 1], *list = append_target(u, target);
    if (!list) return -1;
    int rc = 0;
    for (size_t i = k; i < u->sp; i++) {
        mc_pyobj_t *item = u->stack[i];
        if (rc == 0 && check_insert(u, target, item)) rc = -1;
        if (rc) mc_py_decref(item);
        else if (mc_py_list_append(list, adopt(item))) rc = oom(u); /* append took item */
    }
    u->sp = k;
    return rc;
}

/* Sets the key/value pairs stack[k..sp) on the container at stack[k-1]. */
static int setitems(up_t *u, size_t k)
{
    if (k == 0 || k - 1 < fence(u)) return bad(u, "pickle stack underflow");
    if ((u->sp - k) % 2) return bad(u, "SETITEMS with an odd number of items");
    mc_pyobj_t *target = u->stack[k - 1], *dict = target;
    if (target->kind == MC_PY_OBJECT) {
        if (!target->object.dictitems && !(target->object.dictitems = mc_py_dict())) return oom(u);
        dict = target->object.dictitems;
    } else if (target->kind != MC_PY_DICT) {
        return bad(u, "setting items of a %s", mc_py_kind_name(target->kind));
    }
    int rc = 0;
    for (size_t i = k; i < u->sp; i += 2) {
        mc_pyobj_t *key = u->stack[i], *val = u->stack[i + 1];
        if (rc == 0 && (check_insert(u, target, key) || check_insert(u, target, val))) rc = -1;
        if (rc) {
            mc_py_decref(key);
            mc_py_decref(val);
        } else if (mc_py_dict_set(dict, adopt(key), adopt(val))) {
            rc = oom(u);
        }
    }
    u->sp = k;
    return rc;
}

/* Copies the items of dict src into *slot (a dict created when missing or not a dict). */
static int update_dict(up_t *u, mc_pyobj_t **slot, const mc_pyobj_t *src)
{
    if (!*slot || (*slot)->kind != MC_PY_DICT) {
        mc_py_decref(*slot);
        if (!(*slot = mc_py_dict())) return oom(u);
    }
    for (size_t i = 0; i < src->dict.len; i++)
        if (mc_py_dict_set(*slot, adopt(mc_py_incref(src->dict.keys[i])),
                           adopt(mc_py_incref(src->dict.vals[i]))))
            return oom(u);
    return 0;
}

/* BUILD: state applied to the object below it. A dict state updates the instance's attribute
 * dict (Python's inst.__dict__.update(state)), so later changes to the state dict itself (it
 * may be memoized) do not show through; any other state (numpy's tuples) is kept as it is. */
static int build(up_t *u)
{
    mc_pyobj_t *state = pop(u), *target = state ? top(u) : NULL;
    int rc = 0;
    if (!target || check_insert(u, target, state)) rc = -1;
    else if (target->kind == MC_PY_TENSOR) rc = 0; /* Python attributes on a tensor: dropped */
    else if (target->kind == MC_PY_OBJECT && state->kind == MC_PY_DICT)
        rc = update_dict(u, &target->object.state, state);
    else if (target->kind == MC_PY_OBJECT) {
        mc_py_decref(target->object.state);
        target->object.state = adopt(state);
        return 0;
    } else if (target->kind == MC_PY_DICT && target->dict.ordered && state->kind == MC_PY_DICT)
        rc = update_dict(u, &target->dict.attrs, state);
    else
        rc = bad(u, "BUILD with a %s on a %s%s", mc_py_kind_name(state->kind),
                 target->kind == MC_PY_DICT && !target->dict.ordered ? "plain " : "",
                 mc_py_kind_name(target->kind));
    mc_py_decref(state);
    return rc;
}

/* ---- memo ------------------------------------------------------------------------------------ */

static int memo_put(up_t *u, uint64_t idx)
{
    mc_pyobj_t *o = top(u);
    if (!o) return -1;
    if (idx >= u->memo_limit)
        return bad(u, "memo index %llu out of range", (unsigned long long)idx);
    if (idx >= u->memo_cap) {
        size_t cap = u->memo_cap ? u->memo_cap : 64;
        while (cap <= idx) cap *= 2;
        mc_pyobj_t **m = realloc(u->memo, cap * sizeof *m);
        if (!m) return oom(u);
        memset(m + u->memo_cap, 0, (cap - u->memo_cap) * sizeof *m);
        u->memo = m;
        u->memo_cap = cap;
    }
    if (u->memo[idx]) mc_py_decref(u->memo[idx]);
    else u->memo_count++;
    u->memo[idx] = mc_py_incref(o);
    return 0;
}

static int memo_get(up_t *u, uint64_t idx)
{
    if (idx >= u->memo_cap || !u->memo[idx])
        return bad(u, "memo index %llu was never stored", (unsigned long long)idx);
    mc_pyobj_t *o = u->memo[idx];
    if (is_container(o)) u->shared = true;
    return push(u, mc_py_incref(o));
}

/* ---- the machine ----------------------------------------------------------------------------- */

/* PROTO, FRAME and the stack itself: MARK, POP, POP_MARK, DUP. */
static int op_stack(up_t *u, uint8_t op)
{
    const uint8_t *b;
    int rc = 0;
    switch (op) {
    case 0x80: /* PROTO */
        if (!(b = take(u, 1))) return -1;
        if (b[0] > 5) rc = bad(u, "unsupported pickle protocol %d", b[0]);
        break;
    case 0x95: /* FRAME: a length hint */ rc = take(u, 8) ? 0 : -1; break;
    case '(': /* MARK */
        if (u->nmarks == u->mcap) {
            size_t cap = u->mcap ? 2 * u->mcap : 32;
            size_t *m = realloc(u->marks, cap * sizeof *m);
            if (!m) return oom(u);
            u->marks = m;
            u->mcap = cap;
        }
        u->marks[u->nmarks++] = u->sp;
        break;
    case '0': /* POP: an item, or the MARK when none is above it */
        if (u->sp > fence(u)) mc_py_decref(u->stack[--u->sp]);
        else if (u->nmarks) u->nmarks--;
        else rc = bad(u, "pickle stack underflow");
        break;
    case '1': { /* POP_MARK */
        ptrdiff_t k = pop_mark(u);
        if (k < 0) return -1;
        drop_to(u, (size_t)k);
        break;
    }
    case '2': { /* DUP */
        mc_pyobj_t *o = top(u);
        if (!o) return -1;
        if (is_container(o)) u->shared = true;
        rc = push(u, mc_py_incref(o));
        break;
    }
    }
    return rc;
}

/* None, booleans, ints, floats, strings and bytes. */
static int op_scalar(up_t *u, uint8_t op)
{
    const uint8_t *b;
    int64_t iv = 0;
    int rc = 0;
    switch (op) {
    case 'N': rc = push(u, mc_py_none()); break;
    case 0x88: rc = push(u, mc_py_bool(true)); break;
    case 0x89: rc = push(u, mc_py_bool(false)); break;
    case 'J':
        if (!(b = take(u, 4))) return -1;
        rc = push(u, mc_py_int((int32_t)ck_le32(b)));
        break;
    case 'K':
        if (!(b = take(u, 1))) return -1;
        rc = push(u, mc_py_int(b[0]));
        break;
    case 'M':
        if (!(b = take(u, 2))) return -1;
        rc = push(u, mc_py_int(ck_le16(b)));
        break;
    case 0x8a:   /* LONG1 */
    case 0x8b: { /* LONG4 */
        uint64_t n;
        if (!(b = take(u, op == 0x8a ? 1 : 4))) return -1;
        if (op == 0x8a) n = b[0];
        else if ((int32_t)ck_le32(b) < 0) return bad(u, "negative LONG4 length");
        else n = ck_le32(b);
        if (!(b = take(u, n)) || decode_long(u, b, n, &iv)) return -1;
        rc = push(u, mc_py_int(iv));
        break;
    }
    case 'G': { /* BINFLOAT: big-endian */
        if (!(b = take(u, 8))) return -1;
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++) bits = bits << 8 | b[i];
        double f;
        memcpy(&f, &bits, 8);
        rc = push(u, mc_py_float(f));
        break;
    }
    case 'X': /* BINUNICODE */
    case 'T': /* BINSTRING (Python 2 str; signed length) */
    case 'B': /* BINBYTES */
        if (!(b = take(u, 4))) return -1;
        if (op == 'T' && (int32_t)ck_le32(b) < 0) return bad(u, "negative BINSTRING length");
        rc = push_str(u, ck_le32(b), op == 'B');
        break;
    case 0x8c: /* SHORT_BINUNICODE */
    case 'U':  /* SHORT_BINSTRING */
    case 'C':  /* SHORT_BINBYTES */
        if (!(b = take(u, 1))) return -1;
        rc = push_str(u, b[0], op == 'C');
        break;
    case 0x8d: /* BINUNICODE8 */
    case 0x8e: /* BINBYTES8 */
    case 0x96: /* BYTEARRAY8 (kept as bytes) */
        if (!(b = take(u, 8))) return -1;
        rc = push_str(u, ck_le64(b), op != 0x8d);
        break;
    }
    return rc;
}

/* Empty containers and the ones built from the stack: tuples, lists, dicts. */
static int op_collect(up_t *u, uint8_t op)
{
    int rc = 0;
    switch (op) {
    case ')': rc = push(u, mc_py_tuple(0)); break;
    case ']': rc = push(u, mc_py_list()); break;
    case '}': rc = push(u, mc_py_dict()); break;
    case 't':   /* TUPLE */
    case 'l': { /* LIST */
        ptrdiff_t k = pop_mark(u);
        if (k < 0) return -1;
        rc = collect(u, (size_t)k, op == 't' ? MC_PY_TUPLE : MC_PY_LIST);
        break;
    }
    case 0x85: /* TUPLE1-3 */
    case 0x86:
    case 0x87: {
        size_t n = (size_t)(op - 0x84);
        if (u->sp - fence(u) < n) return bad(u, "pickle stack underflow");
        rc = collect(u, u->sp - n, MC_PY_TUPLE);
        break;
    }
    case 'd': { /* DICT */
        ptrdiff_t k = pop_mark(u);
        if (k < 0) return -1;
        if (push(u, mc_py_dict())) return -1;
        /* move the dict below its items, then set them */
        mc_pyobj_t *d = u->stack[u->sp - 1];
        memmove(u->stack + k + 1, u->stack + k, (u->sp - 1 - (size_t)k) * sizeof *u->stack);
        u->stack[k] = d;
        rc = setitems(u, (size_t)k + 1);
        break;
    }
    }
    return rc;
}

/* Items added to a list, dict or set on the stack; sets. */
static int op_fill(up_t *u, uint8_t op)
{
    int rc = 0;
    switch (op) {
    case 'a': /* APPEND */
        if (u->sp - fence(u) < 2) return bad(u, "pickle stack underflow");
        rc = appends(u, u->sp - 1);
        break;
    case 'e': { /* APPENDS */
        ptrdiff_t k = pop_mark(u);
        rc = k < 0 ? -1 : appends(u, (size_t)k);
        break;
    }
    case 's': /* SETITEM */
        if (u->sp - fence(u) < 3) return bad(u, "pickle stack underflow");
        rc = setitems(u, u->sp - 2);
        break;
    case 'u': { /* SETITEMS */
        ptrdiff_t k = pop_mark(u);
        rc = k < 0 ? -1 : setitems(u, (size_t)k);
        break;
    }
    case 0x8f:   /* EMPTY_SET: set([]) as protocol 2 would write it */
    case 0x91: { /* FROZENSET */
        ptrdiff_t k = 0;
        if (op == 0x91 && (k = pop_mark(u)) < 0) return -1;
        if (op == 0x91) rc = collect(u, (size_t)k, MC_PY_LIST);
        else rc = push(u, mc_py_list());
        if (rc) break;
        mc_pyobj_t *items = adopt(pop(u));
        rc = push(u, mc_py_object(mc_py_global("builtins", op == 0x91 ? "frozenset" : "set"),
                                  adopt(mc_py_tuple(1, items)), false));
        break;
    }
    case 0x90: { /* ADDITEMS */
        ptrdiff_t k = pop_mark(u);
        if (k < 0) return -1;
        if (k == 0 || (size_t)k - 1 < fence(u) || !mc_py_is_a(u->stack[k - 1], "builtins", "set"))
            return bad(u, "ADDITEMS without a set");
        rc = appends(u, (size_t)k);
        break;
    }
    }
    return rc;
}

/* Globals, reductions, objects, BUILD, persistent ids. */
static int op_object(up_t *u, uint8_t op)
{
    int rc = 0;
    switch (op) {
    case 'c': { /* GLOBAL */
        size_t ml, nl;
        const char *m = read_line(u, &ml), *n = m ? read_line(u, &nl) : NULL;
        if (!n) return -1;
        rc = push_global(u, m, ml, n, nl);
        break;
    }
    case 0x93: { /* STACK_GLOBAL */
        mc_pyobj_t *name = pop(u), *mod = name ? pop(u) : NULL;
        if (!mod || mod->kind != MC_PY_STR || name->kind != MC_PY_STR)
            rc = u->failed ? -1 : bad(u, "STACK_GLOBAL names that are not str");
        else rc = push_global(u, mod->str.data, mod->str.len, name->str.data, name->str.len);
        mc_py_decref(name);
        mc_py_decref(mod);
        break;
    }
    case 'R': { /* REDUCE */
        mc_pyobj_t *args = pop(u), *fn = args ? pop(u) : NULL;
        if (!fn) {
            mc_py_decref(args);
            return -1;
        }
        mc_pyobj_t *r = reduce(u, fn, args, 0);
        rc = r ? push(u, r) : -1;
        break;
    }
    case 0x81:   /* NEWOBJ */
    case 0x92: { /* NEWOBJ_EX */
        mc_pyobj_t *kw = op == 0x92 ? pop(u) : NULL;
        if (op == 0x92 && !kw) return -1;
        mc_pyobj_t *args = pop(u), *cls = args ? pop(u) : NULL;
        if (!cls || args->kind != MC_PY_TUPLE || (kw && mc_py_len(kw))) {
            if (!u->failed)
                bad(u, kw && mc_py_len(kw) ? "NEWOBJ_EX with keyword arguments (not supported)"
                                           : "NEWOBJ arguments that are not a tuple");
            mc_py_decref(kw);
            mc_py_decref(args);
            mc_py_decref(cls);
            return -1;
        }
        mc_py_decref(kw);
        rc = push(u, mc_py_object(adopt(cls), adopt(args), true));
        break;
    }
    case 'b': rc = build(u); break;
    case 'Q': { /* BINPERSID */
        mc_pyobj_t *pid = pop(u);
        if (!pid) return -1;
        mc_pyobj_t *s = persistent_load(u, pid);
        mc_py_decref(pid);
        rc = s ? push(u, s) : -1;
        break;
    }
    }
    return rc;
}

/* The memo. */
static int op_memo(up_t *u, uint8_t op)
{
    const uint8_t *b;
    int rc = 0;
    switch (op) {
    case 'q':
        if (!(b = take(u, 1))) return -1;
        rc = memo_put(u, b[0]);
        break;
    case 'r':
        if (!(b = take(u, 4))) return -1;
        rc = memo_put(u, ck_le32(b));
        break;
    case 0x94: rc = memo_put(u, u->memo_count); break; /* MEMOIZE */
    case 'h':
        if (!(b = take(u, 1))) return -1;
        rc = memo_get(u, b[0]);
        break;
    case 'j':
        if (!(b = take(u, 4))) return -1;
        rc = memo_get(u, ck_le32(b));
        break;
    }
    return rc;
}

/* One opcode other than STOP, by its group. */
static int dispatch(up_t *u, uint8_t op)
{
    switch (op) {
    case 0x80:
    case 0x95:
    case '(':
    case '0':
    case '1':
    case '2': return op_stack(u, op);
    case 'N':
    case 0x88:
    case 0x89:
    case 'J':
    case 'K':
    case 'M':
    case 0x8a:
    case 0x8b:
    case 'G':
    case 'X':
    case 'T':
    case 'B':
    case 0x8c:
    case 'U':
    case 'C':
    case 0x8d:
    case 0x8e:
    case 0x96: return op_scalar(u, op);
    case ')':
    case ']':
    case '}':
    case 't':
    case 'l':
    case 0x85:
    case 0x86:
    case 0x87:
    case 'd': return op_collect(u, op);
    case 'a':
    case 'e':
    case 's':
    case 'u':
    case 0x8f:
    case 0x91:
    case 0x90: return op_fill(u, op);
    case 'c':
    case 0x93:
    case 'R':
    case 0x81:
    case 0x92:
    case 'b':
    case 'Q': return op_object(u, op);
    case 'q':
    case 'r':
    case 0x94:
    case 'h':
    case 'j': return op_memo(u, op);
    default: return bad(u, op_name(op) ? "unsupported pickle opcode" : "invalid pickle opcode");
    }
}

/* Runs the opcodes up to STOP; each group of opcodes has its function. */
static int run(up_t *u, mc_pyobj_t **out)
{
    while (!u->failed) {
        u->op_at = (size_t)(u->p - u->base);
        if (u->p >= u->end) {
            u->op = 0;
            return mc_errf(u->err, u->errn, "truncated pickle: no STOP opcode in %zu bytes",
                           (size_t)(u->end - u->base));
        }
        uint8_t op = u->op = *u->p++;
        if (op == '.') { /* STOP */
            mc_pyobj_t *o = pop(u);
            if (!o) return -1;
            *out = o;
            return 0;
        }
        int rc = dispatch(u, op);
        if (rc) return -1;
    }
    return -1;
}

int mc_unpickle(const void *buf, size_t len, const mc_unpickle_storages_t *storages,
                mc_pyobj_t **out, char *err, size_t errn)
{
    up_t u = {.base = buf,
              .p = buf,
              .end = (const uint8_t *)buf + len,
              .st = storages,
              .err = err,
              .errn = errn};
    /* Python's pickler numbers memo entries from 0, one per memoized object: an index beyond
     * the input length cannot come from it. */
    u.memo_limit = len + 1;
    u.walk_budget = 64 * (uint64_t)len + 1000000;
    *out = NULL;
    int rc = len ? run(&u, out) : mc_errf(err, errn, "empty pickle");
    drop_to(&u, 0);
    for (size_t i = 0; i < u.memo_cap; i++) mc_py_decref(u.memo[i]);
    free(u.memo);
    free(u.stack);
    free(u.marks);
    free(u.walk);
    return rc;
}
