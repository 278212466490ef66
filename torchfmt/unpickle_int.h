/* Internals shared by the pickle reader's two files (torchfmt/pickle.h): unpickle.c runs the
 * opcodes over the input (the stack, MARKs, the memo, scalars and globals); unpickle_objects.c
 * builds what they make (tuples, lists, dicts and sets with the self-reference check, BUILD,
 * REDUCE with torch's rebuild functions, persistent ids). */
#ifndef MC_TORCHFMT_UNPICKLE_INT_H
#define MC_TORCHFMT_UNPICKLE_INT_H

#include "torchfmt/pickle.h"

#include <stddef.h>

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

/* flags: o has been put inside a container (so another object may reach it) */
#define UP_CONTAINED 1u

static inline size_t up_fence(const up_t *u) { return u->nmarks ? u->marks[u->nmarks - 1] : 0; }

static inline bool up_is_container(const mc_pyobj_t *o)
{
    return o->kind == MC_PY_TUPLE || o->kind == MC_PY_LIST || o->kind == MC_PY_DICT ||
           o->kind == MC_PY_OBJECT;
}

static inline mc_pyobj_t *up_adopt(mc_pyobj_t *o)
{
    if (o) o->flags |= UP_CONTAINED;
    return o;
}

/* unpickle.c */
/* Records the first error, one line: "<what> (<OPCODE> at byte N)"; returns -1. */
__attribute__((format(printf, 2, 3))) int up_bad(up_t *u, const char *fmt, ...);
int up_oom(up_t *u);
/* Pushes o (stolen; NULL is out of memory). */
int up_push(up_t *u, mc_pyobj_t *o);
/* The top item (a new reference for the caller), or NULL at the current MARK. */
mc_pyobj_t *up_pop(up_t *u);
/* The top item (borrowed), or NULL at the current MARK. */
mc_pyobj_t *up_top(up_t *u);

/* unpickle_objects.c */
/* A tuple or list of stack[k..sp), which leave the stack. */
int up_collect(up_t *u, size_t k, mc_py_kind_t kind);
/* Appends stack[k..sp) to the container at stack[k-1]. */
int up_appends(up_t *u, size_t k);
/* Sets the key/value pairs stack[k..sp) on the container at stack[k-1]. */
int up_setitems(up_t *u, size_t k);
/* BUILD: the state on the stack applied to the object below it. */
int up_build(up_t *u);
/* REDUCE: callable(*args), both stolen. */
mc_pyobj_t *up_reduce(up_t *u, mc_pyobj_t *callable, mc_pyobj_t *args, int depth);
/* BINPERSID: a torch storage from the archive (the storages callback). */
mc_pyobj_t *up_persistent_load(up_t *u, const mc_pyobj_t *pid);

#endif
