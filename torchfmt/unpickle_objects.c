/* What the pickle reader's opcodes build (torchfmt/unpickle_int.h): tuples, lists, dicts and
 * sets from the stack, items added to them, BUILD's state, REDUCE's calls (torch's tensor and
 * parameter rebuilds, OrderedDict, bytes, encoded strings; any other call an opaque object) and
 * persistent ids (torch storages). An insertion that would make a container contain itself is
 * refused: it needs a container fetched from the memo (u->shared) and a target already inside
 * another container, so only those walk the inserted graph, within a budget set by the input. */
#include "torchfmt/unpickle_int.h"
#include "torchfmt/util.h"

#include <stdlib.h>
#include <string.h>

/* ---- cycle check ----------------------------------------------------------------------------- */

static int walk_push(up_t *u, size_t *n, mc_pyobj_t *o)
{
    if (!o || o->mark == u->stamp) return 0;
    o->mark = u->stamp;
    if (!up_is_container(o)) return 0;
    if (u->walk_budget-- == 0) return up_bad(u, "pickle too complex to check for self-reference");
    if (*n == u->walk_cap) {
        size_t cap = u->walk_cap ? 2 * u->walk_cap : 64;
        mc_pyobj_t **w = realloc(u->walk, cap * sizeof *w);
        if (!w) return up_oom(u);
        u->walk = w;
        u->walk_cap = cap;
    }
    u->walk[(*n)++] = o;
    return 0;
}

/* Refuses to insert value into target if target is reachable from value. */
static int up_check_insert(up_t *u, const mc_pyobj_t *target, mc_pyobj_t *value)
{
    if (value == target) return up_bad(u, "a container that contains itself (not supported)");
    if (!u->shared || !value || !up_is_container(value) || !(target->flags & UP_CONTAINED))
        return 0;
    if (++u->stamp == 0) u->stamp = 1; /* objects start unmarked (0) */
    size_t n = 0;
    if (walk_push(u, &n, value)) return -1;
    while (n) {
        mc_pyobj_t *o = u->walk[--n];
        if (o == target) return up_bad(u, "a container that contains itself (not supported)");
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

static bool is_global(const mc_pyobj_t *o, const char *module, const char *name)
{
    return o && o->kind == MC_PY_GLOBAL && !strcmp(o->global.module, module) &&
           !strcmp(o->global.name, name);
}

/* ---- torch: storages and tensors ------------------------------------------------------------- */

mc_pyobj_t *up_persistent_load(up_t *u, const mc_pyobj_t *pid)
{
    if (!pid || pid->kind != MC_PY_TUPLE || pid->seq.len < 5 || !mc_py_get_str(pid->seq.items[0]) ||
        strcmp(mc_py_get_str(pid->seq.items[0]), "storage")) {
        up_bad(u, "a persistent id that is not a torch storage");
        return NULL;
    }
    mc_pyobj_t *const *f = pid->seq.items;
    const mc_pyobj_t *type = f[1];
    const char *key = mc_py_get_str(f[2]), *loc = mc_py_get_str(f[3]);
    int64_t numel;
    if (!type || type->kind != MC_PY_GLOBAL || !key || !loc || f[4]->kind != MC_PY_INT ||
        (numel = f[4]->i) < 0) {
        up_bad(u, "a malformed storage persistent id");
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
            up_bad(u, "unsupported storage type %s.%s", ck_shown(mod, strlen(mod), a),
                   ck_shown(cls, strlen(cls), b));
            return NULL;
        }
        dt = (mc_torch_dtype_t)found;
    }
    if (!u->st || !u->st->storage) {
        up_bad(u, "a storage outside a checkpoint archive");
        return NULL;
    }
    char why[512] = "";
    mc_pyobj_t *s = u->st->storage(u->st->ctx, key, dt, untyped, numel, loc, why, sizeof why);
    if (!s) up_bad(u, "%s", why);
    else if (s->kind != MC_PY_STORAGE) {
        mc_py_decref(s);
        up_bad(u, "a storage loader returned a %s", mc_py_kind_name(s->kind));
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
        up_bad(u, "_rebuild_tensor%s with %zu arguments",
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
        up_bad(u, "a tensor rebuilt from malformed arguments");
        return NULL;
    }
    mc_torch_dtype_t dt = storage->storage.dtype;
    if (version == 3) {
        if (a[6]->kind != MC_PY_GLOBAL || strcmp(a[6]->global.module, "torch") ||
            mc_torch_dtype_from_name(a[6]->global.name, &dt)) {
            up_bad(u, "_rebuild_tensor_v3 with an unknown dtype");
            return NULL;
        }
    } else if (storage->storage.untyped) {
        up_bad(u, "an untyped storage in _rebuild_tensor_v2");
        return NULL;
    }
    char why[256];
    if (mc_py_tensor_check(storage, dt, a[1]->i, nd, shape, stride, why, sizeof why)) {
        up_bad(u, "%s", why);
        return NULL;
    }
    mc_pyobj_t *t = mc_py_tensor(mc_py_incref(storage), dt, a[1]->i, nd, shape, stride);
    if (!t) {
        up_oom(u);
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
mc_pyobj_t *up_reduce(up_t *u, mc_pyobj_t *callable, mc_pyobj_t *args, int depth)
{
    mc_pyobj_t *r = NULL;
    bool handled = true;
    if (args->kind != MC_PY_TUPLE) {
        up_bad(u, "REDUCE arguments are a %s, not a tuple", mc_py_kind_name(args->kind));
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
            up_oom(u);
        }
    } else if (is_global(callable, "torch._tensor", "_rebuild_from_type_v2") && n == 4 &&
               a[2]->kind == MC_PY_TUPLE && depth < 4) {
        /* a tensor subclass or a tensor with Python attributes: func(*args), type and state
         * dropped except that a Parameter stays one */
        r = up_reduce(u, mc_py_incref(a[0]), mc_py_incref(a[2]), depth + 1);
        if (r && r->kind == MC_PY_TENSOR && is_global(a[1], "torch.nn.parameter", "Parameter"))
            r->tensor.parameter = true;
    } else if (is_global(callable, "collections", "OrderedDict") && n == 0) {
        if (!(r = mc_py_ordered_dict())) up_oom(u);
    } else if (is_global(callable, "builtins", "bytes") && n == 0) {
        if (!(r = mc_py_bytes("", 0))) up_oom(u);
    } else if (is_global(callable, "_codecs", "encode")) {
        bool is_bytes;
        r = encoded_bytes(args, &is_bytes);
        if (!is_bytes) handled = false;
        else if (!r) up_oom(u);
    } else {
        handled = false;
    }
    if (!handled) {
        r = mc_py_object(up_adopt(callable), up_adopt(args), false);
        if (!r) up_oom(u);
        return r;
    }
out:
    mc_py_decref(callable);
    mc_py_decref(args);
    return r;
}

/* ---- containers ------------------------------------------------------------------------------ */

/* A tuple or list of stack[k..sp), which leave the stack. */
int up_collect(up_t *u, size_t k, mc_py_kind_t kind)
{
    size_t n = u->sp - k;
    mc_pyobj_t *o;
    for (size_t i = k; i < u->sp; i++) up_adopt(u->stack[i]);
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
    return up_push(u, o);
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
            up_oom(u);
            return NULL;
        }
        return target->object.listitems;
    }
    up_bad(u, "appending to a %s", mc_py_kind_name(target->kind));
    return NULL;
}

/* Appends stack[k..sp) to the container at stack[k-1]. */
int up_appends(up_t *u, size_t k)
{
    if (k == 0 || k - 1 < up_fence(u)) return up_bad(u, "pickle stack underflow");
    mc_pyobj_t *target = u->stack[k - 1], *list = append_target(u, target);
    if (!list) return -1;
    int rc = 0;
    for (size_t i = k; i < u->sp; i++) {
        mc_pyobj_t *item = u->stack[i];
        if (rc == 0 && up_check_insert(u, target, item)) rc = -1;
        if (rc) mc_py_decref(item);
        else if (mc_py_list_append(list, up_adopt(item))) rc = up_oom(u); /* append took item */
    }
    u->sp = k;
    return rc;
}

/* Sets the key/value pairs stack[k..sp) on the container at stack[k-1]. */
int up_setitems(up_t *u, size_t k)
{
    if (k == 0 || k - 1 < up_fence(u)) return up_bad(u, "pickle stack underflow");
    if ((u->sp - k) % 2) return up_bad(u, "SETITEMS with an odd number of items");
    mc_pyobj_t *target = u->stack[k - 1], *dict = target;
    if (target->kind == MC_PY_OBJECT) {
        if (!target->object.dictitems && !(target->object.dictitems = mc_py_dict()))
            return up_oom(u);
        dict = target->object.dictitems;
    } else if (target->kind != MC_PY_DICT) {
        return up_bad(u, "setting items of a %s", mc_py_kind_name(target->kind));
    }
    int rc = 0;
    for (size_t i = k; i < u->sp; i += 2) {
        mc_pyobj_t *key = u->stack[i], *val = u->stack[i + 1];
        if (rc == 0 && (up_check_insert(u, target, key) || up_check_insert(u, target, val)))
            rc = -1;
        if (rc) {
            mc_py_decref(key);
            mc_py_decref(val);
        } else if (mc_py_dict_set(dict, up_adopt(key), up_adopt(val))) {
            rc = up_oom(u);
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
        if (!(*slot = mc_py_dict())) return up_oom(u);
    }
    for (size_t i = 0; i < src->dict.len; i++)
        if (mc_py_dict_set(*slot, up_adopt(mc_py_incref(src->dict.keys[i])),
                           up_adopt(mc_py_incref(src->dict.vals[i]))))
            return up_oom(u);
    return 0;
}

/* BUILD: state applied to the object below it. A dict state updates the instance's attribute
 * dict (Python's inst.__dict__.update(state)), so later changes to the state dict itself (it
 * may be memoized) do not show through; any other state (numpy's tuples) is kept as it is. */
int up_build(up_t *u)
{
    mc_pyobj_t *state = up_pop(u), *target = state ? up_top(u) : NULL;
    int rc = 0;
    if (!target || up_check_insert(u, target, state)) rc = -1;
    else if (target->kind == MC_PY_TENSOR) rc = 0; /* Python attributes on a tensor: dropped */
    else if (target->kind == MC_PY_OBJECT && state->kind == MC_PY_DICT)
        rc = update_dict(u, &target->object.state, state);
    else if (target->kind == MC_PY_OBJECT) {
        mc_py_decref(target->object.state);
        target->object.state = up_adopt(state);
        return 0;
    } else if (target->kind == MC_PY_DICT && target->dict.ordered && state->kind == MC_PY_DICT)
        rc = update_dict(u, &target->dict.attrs, state);
    else
        rc = up_bad(u, "BUILD with a %s on a %s%s", mc_py_kind_name(state->kind),
                    target->kind == MC_PY_DICT && !target->dict.ordered ? "plain " : "",
                    mc_py_kind_name(target->kind));
    mc_py_decref(state);
    return rc;
}
