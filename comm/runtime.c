/* PMIx bootstrap (DESIGN decision 4): who am I, how many are we, who runs where. */
#include "comm/runtime.h"

#include <pmix.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "comm/heartbeat.h"

/* Key-value store for the single-rank case (no PMIx server): put/get still work, so callers
 * need no special case for one rank. */
typedef struct kv {
    struct kv *next;
    char *key;
    size_t len;
    unsigned char val[];
} kv_t;

typedef struct {
    pmix_proc_t me;
    kv_t *local; /* only when not launched */
} rt_impl_t;

static mc_runtime_t *g_rt;

static pmix_status_t put_bytes(const char *key, const void *val, size_t len);
static pmix_status_t fence_all(rt_impl_t *im, double timeout_s);

mc_runtime_t *mc_runtime(void) { return g_rt; }

static void rt_abort_hook(int code)
{
    if (g_rt) mc_runtime_abort(g_rt, code, "megatron-c: fatal error; aborting the job");
}

static int alloc_peer_arrays(mc_runtime_t *rt, char *err, size_t n)
{
    rt->pids = calloc((size_t)rt->size, sizeof(*rt->pids));
    rt->hosts = calloc((size_t)rt->size, sizeof(*rt->hosts));
    if (!rt->pids || !rt->hosts)
        return mc_errf(err, n, "out of memory for %d ranks' pids and hosts", rt->size);
    return 0;
}

static void own_host(mc_runtime_t *rt)
{
    if (gethostname(rt->host, sizeof(rt->host)) != 0)
        snprintf(rt->host, sizeof(rt->host), "localhost");
    rt->host[sizeof(rt->host) - 1] = '\0';
}

static int init_single(mc_runtime_t *rt, rt_impl_t *im, char *err, size_t n)
{
    rt->rank = 0, rt->size = 1, rt->local_rank = 0, rt->local_size = 1;
    rt->launched = false;
    if (alloc_peer_arrays(rt, err, n) != 0) return -1;
    rt->pids[0] = getpid();
    memcpy(rt->hosts[0], rt->host, MC_HOST_MAX);
    (void)im;
    return 0;
}

/* PMIx returns integers in whichever width the server chose; accept them all. */
static int value_as_long(const pmix_value_t *v, long *out)
{
    switch (v->type) {
    case PMIX_UINT8: *out = v->data.uint8; return 0;
    case PMIX_UINT16: *out = v->data.uint16; return 0;
    case PMIX_UINT32: *out = (long)v->data.uint32; return 0;
    case PMIX_UINT64: *out = (long)v->data.uint64; return 0;
    case PMIX_INT: *out = v->data.integer; return 0;
    case PMIX_INT16: *out = v->data.int16; return 0;
    case PMIX_INT32: *out = v->data.int32; return 0;
    case PMIX_INT64: *out = (long)v->data.int64; return 0;
    case PMIX_UINT: *out = (long)v->data.uint; return 0;
    case PMIX_SIZE: *out = (long)v->data.size; return 0;
    case PMIX_PROC_RANK: *out = (long)v->data.rank; return 0;
    default: return -1;
    }
}

/* A job-level or own integer key. Returns the PMIx status (PMIX_ERR_BAD_PARAM for a value
 * that is not an integer). */
static pmix_status_t get_long(const pmix_proc_t *proc, const char *key, long *out)
{
    pmix_value_t *v = NULL;
    pmix_status_t st = PMIx_Get(proc, key, NULL, 0, &v);
    if (st != PMIX_SUCCESS) return st;
    if (value_as_long(v, out) != 0) st = PMIX_ERR_BAD_PARAM;
    PMIX_VALUE_RELEASE(v);
    return st;
}

/* PMIX_LOCAL_PEERS is "0,1,2,3": the local size is its element count, the local rank our
 * position in it. Used only when the server does not publish PMIX_LOCAL_SIZE/RANK. */
static int local_from_peers(const pmix_proc_t *wild, int rank, int *lrank, int *lsize)
{
    pmix_value_t *v = NULL;
    if (PMIx_Get(wild, PMIX_LOCAL_PEERS, NULL, 0, &v) != PMIX_SUCCESS) return -1;
    int ok = -1;
    if (v->type == PMIX_STRING && v->data.string) {
        int count = 0, pos = -1;
        for (const char *s = v->data.string; *s;) {
            char *end;
            long r = strtol(s, &end, 10);
            if (end == s) break;
            if (r == rank) pos = count;
            count++;
            s = *end == ',' ? end + 1 : end;
        }
        if (count > 0) {
            *lsize = count;
            if (pos >= 0) *lrank = pos;
            ok = 0;
        }
    }
    PMIX_VALUE_RELEASE(v);
    return ok;
}

static int query_job(mc_runtime_t *rt, rt_impl_t *im, char *err, size_t n)
{
    pmix_proc_t wild;
    PMIX_LOAD_PROCID(&wild, im->me.nspace, PMIX_RANK_WILDCARD);
    long size = 0, lrank = -1, lsize = -1;
    pmix_status_t st = get_long(&wild, PMIX_JOB_SIZE, &size);
    if (st != PMIX_SUCCESS || size < 1 || size > INT32_MAX)
        return mc_errf(err, n, "PMIx_Get(PMIX_JOB_SIZE) failed: %s",
                       st != PMIX_SUCCESS ? PMIx_Error_string(st) : "bad value");
    rt->size = (int)size;
    if (rt->rank >= rt->size)
        return mc_errf(err, n, "PMIx rank %d is not below the job size %d", rt->rank, rt->size);

    get_long(&im->me, PMIX_LOCAL_RANK, &lrank);
    get_long(&wild, PMIX_LOCAL_SIZE, &lsize);
    int lr = (int)lrank, ls = (int)lsize;
    if (lrank < 0 || lsize < 1) {
        int pr = -1, ps = -1;
        if (local_from_peers(&wild, rt->rank, &pr, &ps) == 0) {
            if (lsize < 1) ls = ps;
            if (lrank < 0) lr = pr;
        }
    }
    /* Nothing published at all: assume one rank per node. */
    if (ls < 1) ls = 1;
    if (lr < 0 || lr >= ls) lr = ls == 1 ? 0 : rt->rank % ls;
    rt->local_rank = lr, rt->local_size = ls;
    return 0;
}

/* The heartbeat ring's links: the successor's and predecessor's listening sockets. */
static void link_heartbeat(mc_runtime_t *rt)
{
    unsigned char succ[MC_HEARTBEAT_BLOB_MAX], pred[MC_HEARTBEAT_BLOB_MAX];
    int s = (rt->rank + 1) % rt->size, p = (rt->rank + rt->size - 1) % rt->size;
    long ns = mc_runtime_get(rt, s, "mc.hb", succ, sizeof(succ));
    long np = mc_runtime_get(rt, p, "mc.hb", pred, sizeof(pred));
    mc_heartbeat_link(rt->heartbeat, succ, ns > 0 ? (size_t)ns : 0,
                      strcmp(rt->hosts[s], rt->host) == 0, pred, np > 0 ? (size_t)np : 0);
}

/* Every rank publishes its pid, host and heartbeat address; after one fence (bounded by
 * timeout_s, 0: none) everyone knows everyone's. */
static int exchange_peers(mc_runtime_t *rt, rt_impl_t *im, double timeout_s, char *err, size_t n)
{
    int32_t pid = (int32_t)getpid();
    unsigned char hb[MC_HEARTBEAT_BLOB_MAX];
    size_t hb_len = 0;
    rt->heartbeat = mc_heartbeat_open(rt->rank, rt->size, hb, &hb_len);
    pmix_status_t st = put_bytes("mc.pid", &pid, sizeof(pid));
    if (st == PMIX_SUCCESS) st = put_bytes("mc.host", rt->host, strlen(rt->host) + 1);
    if (st == PMIX_SUCCESS) st = put_bytes("mc.hb", hb, hb_len);
    if (st != PMIX_SUCCESS)
        return mc_errf(err, n, "PMIx_Put of this rank's pid and host failed: %s",
                       PMIx_Error_string(st));
    st = PMIx_Commit();
    if (st != PMIX_SUCCESS) return mc_errf(err, n, "PMIx_Commit failed: %s", PMIx_Error_string(st));
    st = fence_all(im, timeout_s);
    if (st == PMIX_ERR_TIMEOUT)
        return mc_errf(err, n,
                       "timed out after %g s waiting for every rank to start (a rank is stopped, "
                       "hung or slow before its first exchange; raise "
                       "--distributed-timeout-minutes if this is expected)",
                       timeout_s);
    if (st != PMIX_SUCCESS)
        return mc_errf(err, n, "PMIx_Fence (exchanging pids and hosts) failed: %s",
                       PMIx_Error_string(st));
    if (alloc_peer_arrays(rt, err, n) != 0) return -1;
    for (int r = 0; r < rt->size; r++) {
        int32_t p = 0;
        if (mc_runtime_get(rt, r, "mc.pid", &p, sizeof(p)) != (long)sizeof(p))
            return mc_errf(err, n, "PMIx_Get of rank %d's pid failed", r);
        rt->pids[r] = (pid_t)p;
        long len = mc_runtime_get(rt, r, "mc.host", rt->hosts[r], MC_HOST_MAX);
        if (len < 1) return mc_errf(err, n, "PMIx_Get of rank %d's host failed", r);
        rt->hosts[r][MC_HOST_MAX - 1] = '\0';
    }
    link_heartbeat(rt);
    return 0;
}

static int init_launched(mc_runtime_t *rt, rt_impl_t *im, char *err, size_t n)
{
    pmix_status_t st = PMIx_Init(&im->me, NULL, 0);
    if (st != PMIX_SUCCESS)
        return mc_errf(
            err, n,
            "PMIx_Init failed: %s (PMIX_RANK/PMIX_NAMESPACE are set, but the launcher's PMIx "
            "server did not answer)",
            PMIx_Error_string(st));
    rt->launched = true;
    rt->rank = (int)im->me.rank;
    return query_job(rt, im, err, n);
}

int mc_runtime_init(mc_runtime_t *rt, char *err, size_t n)
{
    memset(rt, 0, sizeof(*rt));
    rt_impl_t *im = calloc(1, sizeof(*im));
    if (!im) return mc_errf(err, n, "out of memory");
    rt->impl = im;
    own_host(rt);
    bool launcher = getenv("PMIX_RANK") || getenv("PMIX_NAMESPACE");
    int rc = launcher ? init_launched(rt, im, err, n) : init_single(rt, im, err, n);
    if (rc != 0) {
        mc_runtime_finalize(rt);
        return -1;
    }
    g_rt = rt;
    mc_error_set_rank(rt->rank, rt->size);
    if (rt->launched) mc_error_set_abort_hook(rt_abort_hook);
    return 0;
}

int mc_runtime_connect(mc_runtime_t *rt, double timeout_s, char *err, size_t n)
{
    if (rt->pids) return 0; /* one rank (init_single), or connected already */
    return exchange_peers(rt, rt->impl, timeout_s, err, n);
}

static int local_put(rt_impl_t *im, const char *key, const void *val, size_t len)
{
    kv_t *e = malloc(sizeof(*e) + len);
    if (!e || !(e->key = strdup(key))) {
        free(e);
        return -1;
    }
    memcpy(e->val, val, len);
    e->len = len;
    e->next = im->local; /* newest first, so a get sees the latest put */
    im->local = e;
    return 0;
}

static pmix_status_t put_bytes(const char *key, const void *val, size_t len)
{
    pmix_value_t v;
    memset(&v, 0, sizeof(v));
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)val; /* PMIx_Put copies it */
    v.data.bo.size = len;
    return PMIx_Put(PMIX_GLOBAL, key, &v);
}

int mc_runtime_put(mc_runtime_t *rt, const char *key, const void *val, size_t len)
{
    if (!rt->launched) return local_put(rt->impl, key, val, len);
    return put_bytes(key, val, len) == PMIX_SUCCESS ? 0 : -1;
}

int mc_runtime_commit(mc_runtime_t *rt)
{
    if (!rt->launched) return 0;
    return PMIx_Commit() == PMIX_SUCCESS ? 0 : -1;
}

/* A fence over the whole job that also distributes every rank's committed keys. */
static pmix_status_t fence_all(rt_impl_t *im, double timeout_s)
{
    pmix_proc_t all;
    PMIX_LOAD_PROCID(&all, im->me.nspace, PMIX_RANK_WILDCARD);
    pmix_info_t info[2];
    bool collect = true;
    int secs = timeout_s > 0 ? (timeout_s < 1 ? 1 : (int)timeout_s) : 0;
    size_t ninfo = 1;
    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    if (secs > 0) {
        PMIX_INFO_CONSTRUCT(&info[1]);
        PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &secs, PMIX_INT);
        ninfo = 2;
    }
    pmix_status_t st = PMIx_Fence(&all, 1, info, ninfo);
    for (size_t i = 0; i < ninfo; i++) PMIX_INFO_DESTRUCT(&info[i]);
    return st;
}

int mc_runtime_fence(mc_runtime_t *rt, double timeout_s)
{
    if (!rt->launched) return 0;
    return fence_all(rt->impl, timeout_s) == PMIX_SUCCESS ? 0 : -1;
}

static long copy_out(const void *src, size_t len, void *out, size_t cap)
{
    memcpy(out, src, len < cap ? len : cap);
    return (long)len;
}

long mc_runtime_get(mc_runtime_t *rt, int rank, const char *key, void *out, size_t cap)
{
    rt_impl_t *im = rt->impl;
    if (rank < 0 || rank >= rt->size) return -1;
    if (!rt->launched) {
        for (kv_t *e = im->local; e; e = e->next)
            if (strcmp(e->key, key) == 0) return copy_out(e->val, e->len, out, cap);
        return -1;
    }
    pmix_proc_t p;
    PMIX_LOAD_PROCID(&p, im->me.nspace, (pmix_rank_t)rank);
    pmix_value_t *v = NULL;
    if (PMIx_Get(&p, key, NULL, 0, &v) != PMIX_SUCCESS) return -1;
    long len = -1;
    if (v->type == PMIX_BYTE_OBJECT) len = copy_out(v->data.bo.bytes, v->data.bo.size, out, cap);
    PMIX_VALUE_RELEASE(v);
    return len;
}

void mc_runtime_abort(mc_runtime_t *rt, int code, const char *msg)
{
    fflush(stdout);
    fflush(stderr);
    if (rt && rt->launched) {
        /* NULL procs: every process of our namespace, i.e. the whole job. */
        PMIx_Abort(code, msg ? msg : "megatron-c: aborting the job", NULL, 0);
        _exit(code); /* PMIx_Abort may return once the request is delivered */
    }
    exit(code);
}

void mc_runtime_finalize(mc_runtime_t *rt)
{
    rt_impl_t *im = rt->impl;
    if (rt->launched) PMIx_Finalize(NULL, 0);
    if (im) {
        while (im->local) {
            kv_t *e = im->local;
            im->local = e->next;
            free(e->key);
            free(e);
        }
        free(im);
    }
    mc_heartbeat_free(rt->heartbeat);
    free(rt->pids);
    free(rt->hosts);
    rt->pids = NULL, rt->hosts = NULL, rt->impl = NULL, rt->heartbeat = NULL;
    rt->launched = false;
    if (g_rt == rt) g_rt = NULL;
}
