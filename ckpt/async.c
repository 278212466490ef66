#include "ckpt/async.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

#define ALIGN 64 /* each tensor's copy starts on a cache line */

struct mc_ckpt_async {
    char *snapshot;
    size_t cap, used;
    pthread_t thread;
    bool running;     /* a thread was started and not joined */
    atomic_bool done; /* set by the writer as its last action */
    void (*write)(void *job);
    void *job;
};

/* ---- the object graph ---- */

typedef void (*visit_fn)(mc_pyobj_t *storage, void *ctx);

/* Calls visit on every storage reachable from o. Checkpoint trees are a few levels deep; the
 * depth bound only guards against a malformed graph. */
static void each_storage(mc_pyobj_t *o, visit_fn visit, void *ctx, int depth)
{
    if (!o || depth > 64) return;
    switch (o->kind) {
    case MC_PY_TUPLE:
    case MC_PY_LIST:
        for (size_t i = 0; i < o->seq.len; i++)
            each_storage(o->seq.items[i], visit, ctx, depth + 1);
        break;
    case MC_PY_DICT:
        for (size_t i = 0; i < o->dict.len; i++) {
            each_storage(o->dict.keys[i], visit, ctx, depth + 1);
            each_storage(o->dict.vals[i], visit, ctx, depth + 1);
        }
        each_storage(o->dict.attrs, visit, ctx, depth + 1);
        break;
    case MC_PY_OBJECT:
        each_storage(o->object.args, visit, ctx, depth + 1);
        each_storage(o->object.state, visit, ctx, depth + 1);
        each_storage(o->object.listitems, visit, ctx, depth + 1);
        each_storage(o->object.dictitems, visit, ctx, depth + 1);
        break;
    case MC_PY_TENSOR: each_storage(o->tensor.storage, visit, ctx, depth + 1); break;
    case MC_PY_STORAGE: visit(o, ctx); break;
    default: break;
    }
}

static size_t aligned(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static void count_borrowed(mc_pyobj_t *s, void *ctx)
{
    if (!s->storage.owner && s->storage.nbytes) *(size_t *)ctx += aligned(s->storage.nbytes);
}

size_t mc_ckpt_borrowed_bytes(const mc_pyobj_t *obj)
{
    size_t n = 0;
    each_storage((mc_pyobj_t *)obj, count_borrowed, &n, 0); /* only reads */
    return n;
}

/* ---- snapshot ---- */

typedef struct {
    mc_ckpt_async_t *a;
    bool full;
} copy_ctx_t;

static void copy_borrowed(mc_pyobj_t *s, void *ctx)
{
    copy_ctx_t *c = ctx;
    mc_ckpt_async_t *a = c->a;
    const uintptr_t p = (uintptr_t)s->storage.data, base = (uintptr_t)a->snapshot;
    const size_t n = s->storage.nbytes;
    if (s->storage.owner || !n) return;
    if (p >= base && p < base + a->used) return; /* met before: copied already */
    if (a->used + aligned(n) > a->cap) {
        c->full = true;
        return;
    }
    char *dst = a->snapshot + a->used;
    memcpy(dst, s->storage.data, n);
    a->used += aligned(n);
    s->storage.data = dst; /* still borrowed: the buffer outlives the graph */
}

mc_ckpt_async_t *mc_ckpt_async_new(size_t snapshot_bytes)
{
    mc_ckpt_async_t *a = calloc(1, sizeof(*a));
    if (!a) return NULL;
    if (snapshot_bytes && !(a->snapshot = aligned_alloc(ALIGN, aligned(snapshot_bytes)))) {
        free(a);
        return NULL;
    }
    a->cap = snapshot_bytes ? aligned(snapshot_bytes) : 0;
    /* touched now, as the rest of the plan is: the first save then costs a copy, not page
     * faults, and a shortage of memory shows at start-up rather than mid-training */
    if (a->cap) memset(a->snapshot, 0, a->cap);
    atomic_init(&a->done, false);
    return a;
}

int mc_ckpt_async_snapshot(mc_ckpt_async_t *a, mc_pyobj_t *const *objs, int n, char *err,
                           size_t errn)
{
    copy_ctx_t c = {.a = a};
    a->used = 0;
    for (int i = 0; i < n && !c.full; i++) each_storage(objs[i], copy_borrowed, &c, 0);
    if (c.full) {
        size_t need = 0;
        for (int i = 0; i < n; i++) need += mc_ckpt_borrowed_bytes(objs[i]);
        return mc_errf(err, errn,
                       "the checkpoint needs a snapshot of %zu bytes but %zu were "
                       "planned (a bug: please report it; --async-save off avoids it)",
                       need, a->cap);
    }
    return 0;
}

/* ---- the writer thread ---- */

static void *writer_main(void *arg)
{
    mc_ckpt_async_t *a = arg;
    a->write(a->job);
    atomic_store(&a->done, true);
    return NULL;
}

int mc_ckpt_async_start(mc_ckpt_async_t *a, void (*write)(void *job), void *job, char *err,
                        size_t errn)
{
    if (a->running) return mc_errf(err, errn, "an asynchronous save is in flight (a bug)");
    a->write = write;
    a->job = job;
    atomic_store(&a->done, false);
    int rc = pthread_create(&a->thread, NULL, writer_main, a);
    if (rc)
        return mc_errf(err, errn, "cannot start the checkpoint writer thread: %s", strerror(rc));
    a->running = true;
    return 0;
}

bool mc_ckpt_async_pending(const mc_ckpt_async_t *a) { return a && a->running; }

void *mc_ckpt_async_finish(mc_ckpt_async_t *a, mc_comm_t *comm, bool blocking)
{
    if (!mc_ckpt_async_pending(a)) return NULL;
    if (!blocking) {
        int64_t busy = !atomic_load(&a->done);
        mc_all_reduce(comm, comm->world, &busy, 1, MC_DT_I64, MC_OP_MAX);
        if (busy) return NULL;
    }
    pthread_join(a->thread, NULL);
    a->running = false;
    void *job = a->job;
    a->job = NULL;
    return job;
}

void mc_ckpt_async_free(mc_ckpt_async_t *a)
{
    if (!a) return;
    if (a->running) pthread_join(a->thread, NULL);
    free(a->snapshot);
    free(a);
}
