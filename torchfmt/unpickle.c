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
 * insertions walk the inserted graph, with a total budget proportional to the input. What the
 * opcodes build (containers, BUILD, REDUCE, persistent ids) is in unpickle_objects.c. */
#include "torchfmt/pickle.h"
#include "torchfmt/unpickle_int.h"
#include "torchfmt/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int up_bad(up_t *u, const char *fmt, ...)
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

int up_oom(up_t *u) { return up_bad(u, "out of memory"); }

/* ---- input ----------------------------------------------------------------------------------- */

static const uint8_t *take(up_t *u, uint64_t n)
{
    if ((uint64_t)(u->end - u->p) < n) {
        up_bad(u, "truncated pickle: %llu more bytes needed, %zu left", (unsigned long long)n,
               (size_t)(u->end - u->p));
        return NULL;
    }
    const uint8_t *q = u->p;
    u->p += n;
    return q;
}

/* ---- stack ----------------------------------------------------------------------------------- */

int up_push(up_t *u, mc_pyobj_t *o)
{
    if (!o) return up_oom(u);
    if (u->sp == u->cap) {
        size_t cap = u->cap ? 2 * u->cap : 64;
        mc_pyobj_t **s = realloc(u->stack, cap * sizeof *s);
        if (!s) {
            mc_py_decref(o);
            return up_oom(u);
        }
        u->stack = s;
        u->cap = cap;
    }
    u->stack[u->sp++] = o;
    return 0;
}

mc_pyobj_t *up_pop(up_t *u)
{
    if (u->sp <= up_fence(u)) {
        up_bad(u, "pickle stack underflow");
        return NULL;
    }
    return u->stack[--u->sp];
}

mc_pyobj_t *up_top(up_t *u)
{
    if (u->sp <= up_fence(u)) {
        up_bad(u, "pickle stack underflow");
        return NULL;
    }
    return u->stack[u->sp - 1];
}

/* Pops the last MARK; returns the stack index it stood at, or -1. */
static ptrdiff_t pop_mark(up_t *u)
{
    if (!u->nmarks) return up_bad(u, "no MARK on the pickle stack"), -1;
    return (ptrdiff_t)u->marks[--u->nmarks];
}

static void drop_to(up_t *u, size_t k)
{
    while (u->sp > k) mc_py_decref(u->stack[--u->sp]);
}

/* ---- scalars and strings --------------------------------------------------------------------- */

/* Little-endian two's complement of n bytes (LONG1/LONG4) into an int64. */
static int decode_long(up_t *u, const uint8_t *b, uint64_t n, int64_t *out)
{
    if (n == 0) return *out = 0, 0;
    bool neg = b[n - 1] & 0x80;
    for (uint64_t i = 8; i < n; i++)
        if (b[i] != (neg ? 0xff : 0)) return up_bad(u, "an int wider than 64 bits");
    if (n > 8 && (bool)(b[7] & 0x80) != neg) return up_bad(u, "an int wider than 64 bits");
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
    if (!bytes && !valid_utf8(s, n)) return up_bad(u, "a str that is not valid UTF-8");
    return up_push(u, bytes ? mc_py_bytes(s, n) : mc_py_strn((const char *)s, n));
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
        return up_bad(u, "an invalid global name");
    char *m = strndup(module, mlen), *n = strndup(name, nlen);
    mc_pyobj_t *g = m && n ? mc_py_global(py3_module(m), n) : NULL;
    free(m);
    free(n);
    return up_push(u, g);
}

static const char *read_line(up_t *u, size_t *len)
{
    const uint8_t *nl = memchr(u->p, '\n', (size_t)(u->end - u->p));
    if (!nl) {
        up_bad(u, "truncated pickle: a GLOBAL line without its newline");
        return NULL;
    }
    const char *s = (const char *)u->p;
    *len = (size_t)(nl - u->p);
    u->p = nl + 1;
    return s;
}

/* ---- memo ------------------------------------------------------------------------------------ */

static int memo_put(up_t *u, uint64_t idx)
{
    mc_pyobj_t *o = up_top(u);
    if (!o) return -1;
    if (idx >= u->memo_limit)
        return up_bad(u, "memo index %llu out of range", (unsigned long long)idx);
    if (idx >= u->memo_cap) {
        size_t cap = u->memo_cap ? u->memo_cap : 64;
        while (cap <= idx) cap *= 2;
        mc_pyobj_t **m = realloc(u->memo, cap * sizeof *m);
        if (!m) return up_oom(u);
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
        return up_bad(u, "memo index %llu was never stored", (unsigned long long)idx);
    mc_pyobj_t *o = u->memo[idx];
    if (up_is_container(o)) u->shared = true;
    return up_push(u, mc_py_incref(o));
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
        if (b[0] > 5) rc = up_bad(u, "unsupported pickle protocol %d", b[0]);
        break;
    case 0x95: /* FRAME: a length hint */ rc = take(u, 8) ? 0 : -1; break;
    case '(': /* MARK */
        if (u->nmarks == u->mcap) {
            size_t cap = u->mcap ? 2 * u->mcap : 32;
            size_t *m = realloc(u->marks, cap * sizeof *m);
            if (!m) return up_oom(u);
            u->marks = m;
            u->mcap = cap;
        }
        u->marks[u->nmarks++] = u->sp;
        break;
    case '0': /* POP: an item, or the MARK when none is above it */
        if (u->sp > up_fence(u)) mc_py_decref(u->stack[--u->sp]);
        else if (u->nmarks) u->nmarks--;
        else rc = up_bad(u, "pickle stack underflow");
        break;
    case '1': { /* POP_MARK */
        ptrdiff_t k = pop_mark(u);
        if (k < 0) return -1;
        drop_to(u, (size_t)k);
        break;
    }
    case '2': { /* DUP */
        mc_pyobj_t *o = up_top(u);
        if (!o) return -1;
        if (up_is_container(o)) u->shared = true;
        rc = up_push(u, mc_py_incref(o));
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
    case 'N': rc = up_push(u, mc_py_none()); break;
    case 0x88: rc = up_push(u, mc_py_bool(true)); break;
    case 0x89: rc = up_push(u, mc_py_bool(false)); break;
    case 'J':
        if (!(b = take(u, 4))) return -1;
        rc = up_push(u, mc_py_int((int32_t)ck_le32(b)));
        break;
    case 'K':
        if (!(b = take(u, 1))) return -1;
        rc = up_push(u, mc_py_int(b[0]));
        break;
    case 'M':
        if (!(b = take(u, 2))) return -1;
        rc = up_push(u, mc_py_int(ck_le16(b)));
        break;
    case 0x8a:   /* LONG1 */
    case 0x8b: { /* LONG4 */
        uint64_t n;
        if (!(b = take(u, op == 0x8a ? 1 : 4))) return -1;
        if (op == 0x8a) n = b[0];
        else if ((int32_t)ck_le32(b) < 0) return up_bad(u, "negative LONG4 length");
        else n = ck_le32(b);
        if (!(b = take(u, n)) || decode_long(u, b, n, &iv)) return -1;
        rc = up_push(u, mc_py_int(iv));
        break;
    }
    case 'G': { /* BINFLOAT: big-endian */
        if (!(b = take(u, 8))) return -1;
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++) bits = bits << 8 | b[i];
        double f;
        memcpy(&f, &bits, 8);
        rc = up_push(u, mc_py_float(f));
        break;
    }
    case 'X': /* BINUNICODE */
    case 'T': /* BINSTRING (Python 2 str; signed length) */
    case 'B': /* BINBYTES */
        if (!(b = take(u, 4))) return -1;
        if (op == 'T' && (int32_t)ck_le32(b) < 0) return up_bad(u, "negative BINSTRING length");
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
    case ')': rc = up_push(u, mc_py_tuple(0)); break;
    case ']': rc = up_push(u, mc_py_list()); break;
    case '}': rc = up_push(u, mc_py_dict()); break;
    case 't':   /* TUPLE */
    case 'l': { /* LIST */
        ptrdiff_t k = pop_mark(u);
        if (k < 0) return -1;
        rc = up_collect(u, (size_t)k, op == 't' ? MC_PY_TUPLE : MC_PY_LIST);
        break;
    }
    case 0x85: /* TUPLE1-3 */
    case 0x86:
    case 0x87: {
        size_t n = (size_t)(op - 0x84);
        if (u->sp - up_fence(u) < n) return up_bad(u, "pickle stack underflow");
        rc = up_collect(u, u->sp - n, MC_PY_TUPLE);
        break;
    }
    case 'd': { /* DICT */
        ptrdiff_t k = pop_mark(u);
        if (k < 0) return -1;
        if (up_push(u, mc_py_dict())) return -1;
        /* move the dict below its items, then set them */
        mc_pyobj_t *d = u->stack[u->sp - 1];
        memmove(u->stack + k + 1, u->stack + k, (u->sp - 1 - (size_t)k) * sizeof *u->stack);
        u->stack[k] = d;
        rc = up_setitems(u, (size_t)k + 1);
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
        if (u->sp - up_fence(u) < 2) return up_bad(u, "pickle stack underflow");
        rc = up_appends(u, u->sp - 1);
        break;
    case 'e': { /* APPENDS */
        ptrdiff_t k = pop_mark(u);
        rc = k < 0 ? -1 : up_appends(u, (size_t)k);
        break;
    }
    case 's': /* SETITEM */
        if (u->sp - up_fence(u) < 3) return up_bad(u, "pickle stack underflow");
        rc = up_setitems(u, u->sp - 2);
        break;
    case 'u': { /* SETITEMS */
        ptrdiff_t k = pop_mark(u);
        rc = k < 0 ? -1 : up_setitems(u, (size_t)k);
        break;
    }
    case 0x8f:   /* EMPTY_SET: set([]) as protocol 2 would write it */
    case 0x91: { /* FROZENSET */
        ptrdiff_t k = 0;
        if (op == 0x91 && (k = pop_mark(u)) < 0) return -1;
        if (op == 0x91) rc = up_collect(u, (size_t)k, MC_PY_LIST);
        else rc = up_push(u, mc_py_list());
        if (rc) break;
        mc_pyobj_t *items = up_adopt(up_pop(u));
        rc = up_push(u, mc_py_object(mc_py_global("builtins", op == 0x91 ? "frozenset" : "set"),
                                     up_adopt(mc_py_tuple(1, items)), false));
        break;
    }
    case 0x90: { /* ADDITEMS */
        ptrdiff_t k = pop_mark(u);
        if (k < 0) return -1;
        if (k == 0 || (size_t)k - 1 < up_fence(u) ||
            !mc_py_is_a(u->stack[k - 1], "builtins", "set"))
            return up_bad(u, "ADDITEMS without a set");
        rc = up_appends(u, (size_t)k);
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
        mc_pyobj_t *name = up_pop(u), *mod = name ? up_pop(u) : NULL;
        if (!mod || mod->kind != MC_PY_STR || name->kind != MC_PY_STR)
            rc = u->failed ? -1 : up_bad(u, "STACK_GLOBAL names that are not str");
        else rc = push_global(u, mod->str.data, mod->str.len, name->str.data, name->str.len);
        mc_py_decref(name);
        mc_py_decref(mod);
        break;
    }
    case 'R': { /* REDUCE */
        mc_pyobj_t *args = up_pop(u), *fn = args ? up_pop(u) : NULL;
        if (!fn) {
            mc_py_decref(args);
            return -1;
        }
        mc_pyobj_t *r = up_reduce(u, fn, args, 0);
        rc = r ? up_push(u, r) : -1;
        break;
    }
    case 0x81:   /* NEWOBJ */
    case 0x92: { /* NEWOBJ_EX */
        mc_pyobj_t *kw = op == 0x92 ? up_pop(u) : NULL;
        if (op == 0x92 && !kw) return -1;
        mc_pyobj_t *args = up_pop(u), *cls = args ? up_pop(u) : NULL;
        if (!cls || args->kind != MC_PY_TUPLE || (kw && mc_py_len(kw))) {
            if (!u->failed)
                up_bad(u, kw && mc_py_len(kw) ? "NEWOBJ_EX with keyword arguments (not supported)"
                                              : "NEWOBJ arguments that are not a tuple");
            mc_py_decref(kw);
            mc_py_decref(args);
            mc_py_decref(cls);
            return -1;
        }
        mc_py_decref(kw);
        rc = up_push(u, mc_py_object(up_adopt(cls), up_adopt(args), true));
        break;
    }
    case 'b': rc = up_build(u); break;
    case 'Q': { /* BINPERSID */
        mc_pyobj_t *pid = up_pop(u);
        if (!pid) return -1;
        mc_pyobj_t *s = up_persistent_load(u, pid);
        mc_py_decref(pid);
        rc = s ? up_push(u, s) : -1;
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
    default: return up_bad(u, op_name(op) ? "unsupported pickle opcode" : "invalid pickle opcode");
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
            mc_pyobj_t *o = up_pop(u);
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
