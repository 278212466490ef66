/* The Python objects a PyTorch checkpoint holds, in memory (MEGATRON.md section 9).
 *
 * torch.save pickles arbitrary Python objects; Megatron's legacy checkpoints hold only a few
 * kinds: None, bool, int, float, str, bytes, tuple, list, dict, collections.OrderedDict,
 * argparse.Namespace, torch tensors (whose bytes live in storages) and, in the RNG state, numpy
 * arrays. This model represents those directly and anything else as an opaque "object": a
 * callable (usually a GLOBAL, module + name), its argument tuple, and what the pickle applied
 * afterwards (BUILD state, appended items, set items). Opaque objects survive a load/save round
 * trip unchanged, so nothing a checkpoint holds is lost or fatal to load.
 *
 * Ownership is reference counting, as in CPython: constructors return a new reference (NULL when
 * out of memory), mc_py_decref releases one, and functions that insert an object into a
 * container STEAL the reference passed (also when they fail), so trees are built without
 * temporaries:
 *     mc_py_dict_set_str(ckpt, "iteration", mc_py_int(100));
 * A NULL item makes the insertion fail, so allocation failures propagate to the caller's check.
 * Objects may be shared (a pickle refers to one object from several places); loaded graphs never
 * contain cycles (the loader rejects them). Not thread-safe: one graph belongs to one thread.
 *
 * Tensors follow torch: a tensor is a view (dtype, storage offset, shape, strides) of a storage
 * (a flat byte buffer); several tensors may share one storage. A storage's bytes are owned (heap),
 * borrowed from the caller (never freed here), or mapped from a loaded file (unmapped when the
 * last storage of that file is released). Data is little-endian, as torch writes on x86/ARM. */
#ifndef MC_TORCHFMT_PYOBJ_H
#define MC_TORCHFMT_PYOBJ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    MC_PY_NONE,
    MC_PY_BOOL,
    MC_PY_INT,   /* Python int that fits int64 */
    MC_PY_FLOAT, /* double */
    MC_PY_STR,   /* UTF-8 */
    MC_PY_BYTES,
    MC_PY_TUPLE,
    MC_PY_LIST,
    MC_PY_DICT,    /* dict or collections.OrderedDict (ordered flag); insertion-ordered */
    MC_PY_GLOBAL,  /* a module attribute named in the pickle: a class, function or dtype */
    MC_PY_OBJECT,  /* callable(*args) [+ BUILD state, list/dict items]: Namespace, numpy, ... */
    MC_PY_STORAGE, /* torch storage: the bytes behind tensors */
    MC_PY_TENSOR,
} mc_py_kind_t;

/* Element types of torch tensors that checkpoints use. The float8 and uint16/32/64 types exist
 * only in torch >= 2.1/2.3 and are read (torch writes them with _rebuild_tensor_v3) but not
 * written. */
typedef enum {
    MC_TORCH_FLOAT32,
    MC_TORCH_FLOAT64,
    MC_TORCH_FLOAT16,
    MC_TORCH_BFLOAT16,
    MC_TORCH_INT64,
    MC_TORCH_INT32,
    MC_TORCH_INT16,
    MC_TORCH_INT8,
    MC_TORCH_UINT8,
    MC_TORCH_BOOL,
    MC_TORCH_COMPLEX64,
    MC_TORCH_COMPLEX128,
    MC_TORCH_UINT16,
    MC_TORCH_UINT32,
    MC_TORCH_UINT64,
    MC_TORCH_FLOAT8_E4M3FN,
    MC_TORCH_FLOAT8_E5M2,
    MC_TORCH_DTYPE_COUNT
} mc_torch_dtype_t;

/* torch's limit on dimensions, enforced on load. */
#define MC_PY_MAX_DIMS 64

/* Who owns a storage's bytes (shared by the storages of one loaded file). Internal. */
typedef struct mc_py_buf mc_py_buf_t;

typedef struct mc_pyobj mc_pyobj_t;
struct mc_pyobj {
    mc_py_kind_t kind;
    int32_t refs;
    uint32_t mark;       /* internal: scratch for graph walks (the loader's cycle check) */
    uint32_t flags;      /* internal: the loader's bookkeeping */
    mc_pyobj_t *gc_next; /* internal: lets mc_py_decref free any depth without recursion */
    union {
        bool b;    /* BOOL */
        int64_t i; /* INT */
        double f;  /* FLOAT */
        struct {   /* STR, BYTES: len bytes plus a NUL not counted in len */
            char *data;
            size_t len;
        } str;
        struct { /* TUPLE, LIST */
            mc_pyobj_t **items;
            size_t len, cap;
        } seq;
        struct { /* DICT */
            mc_pyobj_t **keys, **vals;
            size_t len, cap;
            uint32_t *index; /* hash index of the keys (internal), NULL when small */
            size_t index_cap;
            bool ordered;      /* collections.OrderedDict */
            mc_pyobj_t *attrs; /* OrderedDict instance attributes (a DICT, e.g. the
                                   _metadata that module.state_dict() attaches), or NULL */
        } dict;
        struct { /* GLOBAL */
            char *module, *name;
        } global;
        struct {                  /* OBJECT */
            mc_pyobj_t *callable; /* usually a GLOBAL */
            mc_pyobj_t *args;     /* a TUPLE */
            bool newobj;          /* cls.__new__(cls, *args) (NEWOBJ) rather than a call */
            mc_pyobj_t *state;    /* BUILD argument (e.g. Namespace's attribute dict) or NULL */
            mc_pyobj_t *listitems, *dictitems; /* APPENDS / SETITEMS applied to it, or NULL */
        } object;
        struct { /* STORAGE */
            mc_torch_dtype_t dtype;
            bool untyped;  /* torch.UntypedStorage (numel counts bytes; dtype is UINT8) */
            int64_t numel; /* elements of dtype */
            size_t nbytes;
            void *data;         /* NULL only when nbytes is 0 */
            mc_py_buf_t *owner; /* NULL: borrowed */
            char *location;     /* where torch saved it from ("cpu", "cuda:0"); loaded to CPU */
        } storage;
        struct {                 /* TENSOR */
            mc_pyobj_t *storage; /* a STORAGE */
            mc_torch_dtype_t dtype;
            int ndim;
            int64_t offset;          /* storage offset, in elements of dtype */
            int64_t *shape, *stride; /* ndim each (strides in elements); NULL when ndim is 0 */
            bool requires_grad;
            bool parameter; /* a torch.nn.Parameter (_rebuild_parameter) */
        } tensor;
    };
};

/* ---- dtypes ---------------------------------------------------------------------------------- */

size_t mc_torch_dtype_size(mc_torch_dtype_t dt); /* bytes per element; 0 for an invalid value */
const char *mc_torch_dtype_name(mc_torch_dtype_t dt); /* torch's name: "float32", "bfloat16", ... */
/* By torch's name ("float32", also "float"/"half"/"long"...). Returns 0, or -1 if unknown. */
int mc_torch_dtype_from_name(const char *name, mc_torch_dtype_t *out);
const char *mc_py_kind_name(mc_py_kind_t kind); /* Python's word: "int", "dict", "tensor"... */

/* ---- references ------------------------------------------------------------------------------ */

mc_pyobj_t *mc_py_incref(mc_pyobj_t *o); /* returns o; NULL is fine */
void mc_py_decref(mc_pyobj_t *o);        /* frees at zero, children too (no recursion limit) */

/* ---- constructors (new reference, or NULL when out of memory) -------------------------------- */

mc_pyobj_t *mc_py_none(void);
mc_pyobj_t *mc_py_bool(bool v);
mc_pyobj_t *mc_py_int(int64_t v);
mc_pyobj_t *mc_py_float(double v);
mc_pyobj_t *mc_py_str(const char *s);             /* copies; must be UTF-8 */
mc_pyobj_t *mc_py_strn(const char *s, size_t n);  /* copies n bytes */
mc_pyobj_t *mc_py_bytes(const void *p, size_t n); /* copies */
/* A tuple of n items, stealing each (NULL items make it fail, after releasing the rest). */
mc_pyobj_t *mc_py_tuple(size_t n, ...);
mc_pyobj_t *mc_py_tuple_of(size_t n, mc_pyobj_t *const *items); /* steals items[0..n) */
mc_pyobj_t *mc_py_list(void);
mc_pyobj_t *mc_py_dict(void);
mc_pyobj_t *mc_py_ordered_dict(void); /* collections.OrderedDict() */
mc_pyobj_t *mc_py_global(const char *module, const char *name);
/* callable(*args) (newobj: cls.__new__(cls, *args)); steals both; args must be a tuple. */
mc_pyobj_t *mc_py_object(mc_pyobj_t *callable, mc_pyobj_t *args, bool newobj);
/* argparse.Namespace(); set its attributes with mc_py_attr_set. */
mc_pyobj_t *mc_py_namespace(void);

/* A storage of numel zeroed elements that it owns. */
mc_pyobj_t *mc_py_storage_new(mc_torch_dtype_t dt, int64_t numel);
/* A storage over the caller's memory, which must outlive every reference to the storage. */
mc_pyobj_t *mc_py_storage_wrap(mc_torch_dtype_t dt, void *data, int64_t numel);
/* A view of storage (stolen). stride NULL: contiguous (torch's strides). Fails (NULL) when the
 * view does not fit in the storage or the dtype's element size does not divide its bytes. */
mc_pyobj_t *mc_py_tensor(mc_pyobj_t *storage, mc_torch_dtype_t dt, int64_t offset, int ndim,
                         const int64_t *shape, const int64_t *stride);
/* Contiguous tensor with its own zeroed storage. */
mc_pyobj_t *mc_py_tensor_new(mc_torch_dtype_t dt, int ndim, const int64_t *shape);
/* Contiguous tensor with its own storage holding a copy of data. */
mc_pyobj_t *mc_py_tensor_copy(mc_torch_dtype_t dt, int ndim, const int64_t *shape,
                              const void *data);
/* Contiguous tensor over the caller's memory (see mc_py_storage_wrap): saving a model's
 * parameters this way writes them straight from the model's buffers. */
mc_pyobj_t *mc_py_tensor_wrap(mc_torch_dtype_t dt, int ndim, const int64_t *shape, void *data);

/* ---- containers ------------------------------------------------------------------------------ */

/* Each steals item/key/val (also on failure) and returns 0, or -1 (wrong kind, NULL argument,
 * out of memory). dict_set replaces the value of an equal key in place, as Python does. */
int mc_py_list_append(mc_pyobj_t *list, mc_pyobj_t *item);
int mc_py_dict_set(mc_pyobj_t *dict, mc_pyobj_t *key, mc_pyobj_t *val);
int mc_py_dict_set_str(mc_pyobj_t *dict, const char *key, mc_pyobj_t *val);
int mc_py_dict_set_int(mc_pyobj_t *dict, int64_t key, mc_pyobj_t *val);
/* Removes key; returns 0, or -1 if absent. */
int mc_py_dict_del(mc_pyobj_t *dict, const mc_pyobj_t *key);
/* An attribute: of an OBJECT whose state is a dict (argparse.Namespace and most classes), or
 * of an OrderedDict (its attrs). Sets create the dict when there is none yet. */
int mc_py_attr_set(mc_pyobj_t *obj, const char *name, mc_pyobj_t *val);

/* ---- lookups (borrowed references; NULL when absent or the container has another kind) ------- */

size_t mc_py_len(const mc_pyobj_t *o); /* items of a tuple, list or dict; 0 otherwise */
mc_pyobj_t *mc_py_item(const mc_pyobj_t *seq, size_t i); /* tuple or list */
mc_pyobj_t *mc_py_dict_get(const mc_pyobj_t *dict, const mc_pyobj_t *key);
mc_pyobj_t *mc_py_dict_get_str(const mc_pyobj_t *dict, const char *key);
mc_pyobj_t *mc_py_dict_get_int(const mc_pyobj_t *dict, int64_t key);
mc_pyobj_t *mc_py_attr(const mc_pyobj_t *obj, const char *name);
/* Follows a '/'-separated path of str dict keys and decimal list/tuple indices, e.g.
 * "optimizer/param_groups/0/lr" ('/' inside a key cannot be expressed). */
mc_pyobj_t *mc_py_path(const mc_pyobj_t *root, const char *path);
/* key in dict (str or int), with a one-line error when missing or of another kind:
 * "no key 'iteration'", "'iteration' is a str, not an int". want MC_PY_FLOAT accepts an int,
 * MC_PY_INT accepts a bool, as Python would. */
mc_pyobj_t *mc_py_want(const mc_pyobj_t *dict, const char *key, mc_py_kind_t want, char *err,
                       size_t errn);

/* The value of a scalar: 0, or -1 for another kind (int accepts bool; float accepts int/bool). */
int mc_py_get_bool(const mc_pyobj_t *o, bool *out);
int mc_py_get_int(const mc_pyobj_t *o, int64_t *out);
int mc_py_get_float(const mc_pyobj_t *o, double *out);
const char *mc_py_get_str(const mc_pyobj_t *o); /* NUL-terminated; NULL if not a str */

/* A GLOBAL named module.name, or an OBJECT whose callable is (a Namespace is
 * mc_py_is_a(o, "argparse", "Namespace")). */
bool mc_py_is_a(const mc_pyobj_t *o, const char *module, const char *name);
/* Structural equality, for tests and round-trip checks: same kinds and values (floats bit for
 * bit), containers item by item (dicts in order, the OrderedDict flag and attrs included),
 * objects by callable, args, state and items, tensors by dtype, shape, flags and element values
 * (not by storage layout). Nesting deeper than 256 compares unequal. */
bool mc_py_equal(const mc_pyobj_t *a, const mc_pyobj_t *b);

/* ---- tensors --------------------------------------------------------------------------------- */

void *mc_py_tensor_data(const mc_pyobj_t *t); /* first element (storage data + offset) */
int64_t mc_py_tensor_numel(const mc_pyobj_t *t);
size_t mc_py_tensor_nbytes(const mc_pyobj_t *t); /* numel x element size */
bool mc_py_tensor_contiguous(const mc_pyobj_t *t);

/* ---- internal (used by the loader) ----------------------------------------------------------- */

/* A shared owner of bytes: free(p) or munmap(p, len) when the last user lets go. */
mc_py_buf_t *mc_py_buf_new(void *p, size_t len, bool mapped);
void mc_py_buf_release(mc_py_buf_t *b);
/* A storage over data owned by owner (a reference is taken). */
mc_pyobj_t *mc_py_storage_owned_by(mc_torch_dtype_t dt, bool untyped, void *data, int64_t numel,
                                   mc_py_buf_t *owner, const char *location);
/* Checks a view's geometry against its storage. Returns 0, or -1 with a one-line reason. */
int mc_py_tensor_check(const mc_pyobj_t *storage, mc_torch_dtype_t dt, int64_t offset, int ndim,
                       const int64_t *shape, const int64_t *stride, char *err, size_t errn);

#endif
