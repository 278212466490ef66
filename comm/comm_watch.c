/* The watchdog pieces the MPI and NCCL communicators share (comm/comm_watch.h). */
#include "comm/comm_watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "comm/heartbeat.h"

int mc_watch_init(mc_watch_t *w, mc_runtime_t *rt, const char *spaces, char *err, size_t n)
{
    memset(w, 0, sizeof(*w));
    w->rt = rt;
    w->watch = calloc((size_t)rt->size, sizeof(*w->watch));
    w->stopped = calloc((size_t)rt->size, sizeof(*w->stopped));
    if (!w->watch || !w->stopped) return mc_errf(err, n, "out of memory for %d ranks", rt->size);
    mc_liveness_watch(rt, spaces, w->watch);
    return 0;
}

void mc_watch_free(mc_watch_t *w)
{
    free(w->watch);
    free(w->stopped);
    w->watch = NULL;
    w->stopped = NULL;
}

bool mc_watch_peers(mc_watch_t *w, const int *ranks, int n, double heartbeat_s,
                    const char *died_during, const char *stopped_during, char *line, size_t len)
{
    const mc_runtime_t *rt = w->rt;
    const double now = mc_now_s();
    for (int i = 0; i < n; i++) {
        const int m = ranks[i];
        if (m < 0 || m >= rt->size || !w->watch[m]) continue;
        if (mc_pid_dead(rt->pids[m])) {
            snprintf(line, len, "rank %d (pid %d on host %s) died during %s; aborting the job", m,
                     (int)rt->pids[m], rt->hosts[m], died_during);
            return true;
        }
        const double silent =
            heartbeat_s > 0 ? mc_stopped_for(rt->pids[m], &w->stopped[m], now) : 0;
        if (silent >= heartbeat_s && silent > 0) {
            mc_silent_line(rt, m, silent, MC_SILENT_STOPPED, stopped_during, line, len);
            return true;
        }
    }
    return false;
}

bool mc_watch_ring(mc_watch_t *w, double watch_s, const char *gone_during, const char *during,
                   char *line, size_t len)
{
    const double now = mc_now_s();
    if (now < w->next_beat) return false;
    w->next_beat = now + MC_HEARTBEAT_PERIOD_S;
    mc_hb_event_t ev;
    if (!mc_heartbeat_tick(w->rt->heartbeat, now, watch_s, &ev)) return false;
    mc_heartbeat_line(w->rt, &ev, ev.kind == MC_HB_GONE ? gone_during : during, line, len);
    return true;
}

void mc_watch_idle(mc_watch_t *w, pthread_mutex_t *mu, pthread_cond_t *work,
                   bool (*idle)(void *ctx), void *ctx)
{
    char unused[8];
    while (idle(ctx)) {
        pthread_mutex_unlock(mu);
        mc_watch_ring(w, 0, NULL, NULL, unused, sizeof(unused)); /* watch_s 0: beats only */
        pthread_mutex_lock(mu);
        if (!idle(ctx)) return;
        mc_cond_wait_s(work, mu, MC_HEARTBEAT_PERIOD_S);
    }
}

void mc_watch_timeout_line(char *line, size_t len, double timeout_s, const char *what,
                           const mc_group_t *g)
{
    snprintf(line, len,
             "timed out after %g s in %s on the %s group of %d ranks (a peer stopped responding; "
             "raise --distributed-timeout-minutes if this is expected)",
             timeout_s, what, g->name, g->size);
}

void mc_watch_error_line(char *line, size_t len, int rank, const char *fmt, va_list ap)
{
    int k = snprintf(line, len, "megatron-c: rank %d: error: ", rank);
    if (k < 0 || (size_t)k >= len) return;
    vsnprintf(line + k, len - (size_t)k, fmt, ap);
}

mc_group_t *mc_group_list_add(mc_group_list_t *l, const int *members, int n, int rank,
                              const char *name, size_t impl_bytes)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        mc_group_t **p = realloc(l->g, (size_t)cap * sizeof(*p));
        if (!p) return NULL;
        l->g = p, l->cap = cap;
    }
    mc_group_t *g = calloc(1, sizeof(*g));
    void *impl = calloc(1, impl_bytes);
    int *m = malloc((size_t)(n > 0 ? n : 1) * sizeof(*m));
    if (!g || !impl || !m) {
        free(g), free(impl), free(m);
        return NULL;
    }
    memcpy(m, members, (size_t)n * sizeof(*m));
    g->rank = rank, g->size = n, g->members = m, g->name = name, g->impl = impl;
    l->g[l->n++] = g;
    return g;
}

bool mc_group_list_remove(mc_group_list_t *l, mc_group_t *g)
{
    for (int i = 0; i < l->n; i++)
        if (l->g[i] == g) {
            l->g[i] = l->g[--l->n];
            return true;
        }
    return false;
}

void mc_group_destroy(mc_group_t *g)
{
    free(g->impl);
    free(g->members);
    free(g);
}
