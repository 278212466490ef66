/* The heartbeat ring (comm/heartbeat.h). Wire: the predecessor connects and sends a hello
 * ("MCHB", its rank, the listener's nonce: a stray or stale connection is refused), the listener
 * answers 'A' to the one it keeps, then the predecessor sends 'b' beats and finally 'B' (bye).
 * Every socket is non-blocking and close-on-exec; sends never raise SIGPIPE. */
#define _GNU_SOURCE /* accept4 */
#include "comm/heartbeat.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm/liveness.h"
#include "comm/runtime.h"

enum { MAX_ADDRS = 8, MAX_TRIES = MAX_ADDRS + 1, MAX_PENDING = 8, HELLO = 16 };
#define CONNECT_TRY_S 5.0  /* one connection attempt; then it starts again */
#define RETRY_S 1.0        /* after a refused or failed attempt */
#define PENDING_MAX_S 10.0 /* an accepted connection must say hello within this */

typedef struct {
    int family; /* AF_INET or AF_INET6 */
    unsigned char addr[16];
} addr_t;

/* One connection attempt to the successor, at one of its addresses. */
typedef struct {
    addr_t to;
    int fd;
    bool hello_sent;
    double t_start, retry_at;
} try_t;

/* A connection accepted from someone who has not said hello yet. */
typedef struct {
    int fd, got;
    unsigned char buf[HELLO];
    double t_start;
} pending_t;

struct mc_heartbeat {
    int rank, size, listen_fd;
    uint64_t nonce;
    bool started, byed;
    double t0, last_beat;
    /* to the successor */
    bool succ_expected, succ_lost, succ_reached; /* reached: a TCP connection to it was made */
    uint16_t succ_port;
    uint64_t succ_nonce;
    try_t tries[MAX_TRIES];
    int n_tries, out_fd;
    /* from the predecessor */
    bool pred_expected, pred_done, pred_gone;
    int pred_fd;
    double last_recv;
    pending_t pending[MAX_PENDING];
};

/* ---- the published blob: nonce (8), port (2), count (1), count x (family 4|6, 16 bytes) ---- */

static void put_be(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--, v >>= 8) p[i] = (unsigned char)v;
}

static uint64_t get_be(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v = v << 8 | p[i];
    return v;
}

/* This host's addresses that another node may reach: up, not loopback, not link-local; IPv4
 * first. v6: the listener takes IPv6 too. */
static int own_addrs(addr_t *out, bool v6)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) return 0;
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (struct ifaddrs *i = ifs; i && n < MAX_ADDRS; i = i->ifa_next) {
            if (!i->ifa_addr || !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
            int fam = i->ifa_addr->sa_family;
            if (pass == 0 && fam == AF_INET) {
                memset(&out[n], 0, sizeof(out[n]));
                out[n].family = AF_INET;
                memcpy(out[n++].addr, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
            } else if (pass == 1 && fam == AF_INET6 && v6) {
                const struct in6_addr *a = &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
                if (IN6_IS_ADDR_LINKLOCAL(a)) continue;
                out[n].family = AF_INET6;
                memcpy(out[n++].addr, a, 16);
            }
        }
    freeifaddrs(ifs);
    return n;
}

static size_t make_blob(unsigned char *b, uint64_t nonce, uint16_t port, const addr_t *a, int n)
{
    put_be(b, nonce, 8);
    put_be(b + 8, port, 2);
    b[10] = (unsigned char)n;
    for (int i = 0; i < n; i++) {
        b[11 + 17 * i] = a[i].family == AF_INET6 ? 6 : 4;
        memcpy(b + 12 + 17 * i, a[i].addr, 16);
    }
    return 11 + 17 * (size_t)n;
}

/* ---- opening ---- */

static int listen_on(int family, uint16_t *port)
{
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t len = family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    ss.ss_family = (sa_family_t)family; /* any address, any port */
    int off = 0;
    if (family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, MAX_PENDING) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                     : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

mc_heartbeat_t *mc_heartbeat_open(int rank, int size, unsigned char blob[MC_HEARTBEAT_BLOB_MAX],
                                  size_t *len)
{
    uint16_t port = 0;
    bool v6 = true;
    int fd = size > 1 ? listen_on(AF_INET6, &port) : -1;
    if (fd < 0 && size > 1) v6 = false, fd = listen_on(AF_INET, &port);
    mc_heartbeat_t *hb = fd >= 0 ? calloc(1, sizeof(*hb)) : NULL;
    if (!hb) {
        if (fd >= 0) close(fd);
        *len = make_blob(blob, 0, 0, NULL, 0);
        return NULL;
    }
    hb->rank = rank, hb->size = size, hb->listen_fd = fd, hb->out_fd = hb->pred_fd = -1;
    for (int i = 0; i < MAX_PENDING; i++) hb->pending[i].fd = -1;
    if (getrandom(&hb->nonce, sizeof(hb->nonce), GRND_NONBLOCK) != (ssize_t)sizeof(hb->nonce))
        hb->nonce = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL) ^ (uint64_t)rank;
    addr_t a[MAX_ADDRS];
    *len = make_blob(blob, hb->nonce, port, a, own_addrs(a, v6));
    return hb;
}

static void add_try(mc_heartbeat_t *hb, int family, const unsigned char *addr)
{
    try_t *t = &hb->tries[hb->n_tries++];
    memset(t, 0, sizeof(*t));
    t->fd = -1;
    t->to.family = family;
    memcpy(t->to.addr, addr, family == AF_INET ? 4 : 16);
}

void mc_heartbeat_link(mc_heartbeat_t *hb, const unsigned char *succ, size_t succ_len,
                       bool same_host, const unsigned char *pred, size_t pred_len)
{
    if (!hb) return;
    hb->pred_expected = pred_len >= 11 && get_be(pred + 8, 2) != 0;
    hb->succ_expected = succ_len >= 11 && get_be(succ + 8, 2) != 0;
    if (!hb->succ_expected) return;
    hb->succ_nonce = get_be(succ, 8);
    hb->succ_port = (uint16_t)get_be(succ + 8, 2);
    if (same_host) add_try(hb, AF_INET, (const unsigned char[]){127, 0, 0, 1});
    for (size_t i = 0; i < succ[10] && 11 + 17 * (i + 1) <= succ_len && hb->n_tries < MAX_TRIES;
         i++)
        add_try(hb, succ[11 + 17 * i] == 6 ? AF_INET6 : AF_INET, succ + 12 + 17 * i);
    if (hb->n_tries == 0) hb->succ_expected = false; /* nowhere to connect: nothing to judge */
}

/* ---- the link to the successor ---- */

static void end_try(try_t *t, double retry_at)
{
    if (t->fd >= 0) close(t->fd);
    t->fd = -1, t->hello_sent = false, t->retry_at = retry_at;
}

static void begin_try(mc_heartbeat_t *hb, try_t *t, double now)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t len;
    if (t->to.family == AF_INET6) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
        s->sin6_family = AF_INET6, s->sin6_port = htons(hb->succ_port), len = sizeof(*s);
        memcpy(&s->sin6_addr, t->to.addr, 16);
    } else {
        struct sockaddr_in *s = (struct sockaddr_in *)&ss;
        s->sin_family = AF_INET, s->sin_port = htons(hb->succ_port), len = sizeof(*s);
        memcpy(&s->sin_addr, t->to.addr, 4);
    }
    t->fd = socket(t->to.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    t->t_start = now;
    if (t->fd < 0 || (connect(t->fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS))
        end_try(t, now + RETRY_S);
}

static void hello(const mc_heartbeat_t *hb, unsigned char b[HELLO])
{
    memcpy(b, "MCHB", 4);
    put_be(b + 4, (uint32_t)hb->rank, 4);
    put_be(b + 8, hb->succ_nonce, 8);
}

/* One attempt: connected -> send the hello; the successor's 'A' -> this is the link. */
static void step_try(mc_heartbeat_t *hb, try_t *t, double now)
{
    struct pollfd p = {.fd = t->fd, .events = POLLOUT | POLLIN};
    if (poll(&p, 1, 0) <= 0) {
        if (now - t->t_start > CONNECT_TRY_S) end_try(t, now);
        return;
    }
    int err = 0;
    socklen_t el = sizeof(err);
    if (!t->hello_sent && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
        unsigned char b[HELLO];
        hello(hb, b);
        if (getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0 ||
            send(t->fd, b, HELLO, MSG_NOSIGNAL) != HELLO) {
            end_try(t, now + RETRY_S);
            return;
        }
        t->hello_sent = true;
        hb->succ_reached = true;
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
        char c = 0;
        ssize_t k = recv(t->fd, &c, 1, 0);
        if (k == 1 && c == 'A') {
            hb->out_fd = t->fd, t->fd = -1;
            hb->last_beat = 0;
        } else if (k >= 0 || (errno != EAGAIN && errno != EINTR)) {
            end_try(t, now + RETRY_S); /* refused: a stale or foreign listener at that address */
        }
    }
}

static void progress_out(mc_heartbeat_t *hb, double now)
{
    for (int i = 0; i < hb->n_tries && hb->out_fd < 0; i++) {
        try_t *t = &hb->tries[i];
        if (t->fd < 0 && now >= t->retry_at) begin_try(hb, t, now);
        if (t->fd >= 0) step_try(hb, t, now);
    }
    if (hb->out_fd >= 0)
        for (int i = 0; i < hb->n_tries; i++) end_try(&hb->tries[i], 0);
}

static void beat(mc_heartbeat_t *hb, double now)
{
    if (hb->out_fd < 0 || now - hb->last_beat < MC_HEARTBEAT_PERIOD_S) return;
    hb->last_beat = now;
    if (send(hb->out_fd, "b", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN &&
        errno != EINTR) {
        close(hb->out_fd); /* the successor is gone: its own successor reports it */
        hb->out_fd = -1, hb->succ_lost = true;
    }
}

/* ---- the link from the predecessor ---- */

static void drop_pending(pending_t *p)
{
    if (p->fd >= 0) close(p->fd);
    p->fd = -1, p->got = 0;
}

static void accept_all(mc_heartbeat_t *hb, double now)
{
    for (int fd; hb->listen_fd >= 0 &&
                 (fd = accept4(hb->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
        pending_t *slot = NULL;
        for (int i = 0; i < MAX_PENDING && !slot; i++)
            if (hb->pending[i].fd < 0) slot = &hb->pending[i];
        if (!slot) {
            close(fd);
            continue;
        }
        slot->fd = fd, slot->got = 0, slot->t_start = now;
    }
}

/* Reads a pending connection's hello; the predecessor's (its rank, our nonce) becomes the link. */
static void step_pending(mc_heartbeat_t *hb, pending_t *p, double now)
{
    ssize_t k = recv(p->fd, p->buf + p->got, (size_t)(HELLO - p->got), 0);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR) ||
        now - p->t_start > PENDING_MAX_S) {
        drop_pending(p);
        return;
    }
    if (k > 0) p->got += (int)k;
    if (p->got < HELLO) return;
    int pred = (hb->rank + hb->size - 1) % hb->size;
    bool ok = memcmp(p->buf, "MCHB", 4) == 0 && get_be(p->buf + 4, 4) == (uint64_t)pred &&
              get_be(p->buf + 8, 8) == hb->nonce && hb->pred_fd < 0;
    if (!ok || send(p->fd, "A", 1, MSG_NOSIGNAL) != 1) {
        drop_pending(p);
        return;
    }
    hb->pred_fd = p->fd, p->fd = -1, p->got = 0;
    hb->last_recv = now;
    close(hb->listen_fd); /* nobody else is expected */
    hb->listen_fd = -1;
}

/* Reads what the predecessor sent: any byte is a sign of life; 'B' is its bye; end of stream or
 * a reset without one: it died. */
static void drain_pred(mc_heartbeat_t *hb, double now)
{
    unsigned char buf[256];
    for (;;) {
        ssize_t k = recv(hb->pred_fd, buf, sizeof(buf), 0);
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (k > 0) hb->last_recv = now;
        if (k > 0 && !memchr(buf, 'B', (size_t)k)) continue;
        if (k > 0) hb->pred_done = true;
        else hb->pred_gone = true;
        close(hb->pred_fd);
        hb->pred_fd = -1;
        return;
    }
}

static void progress_in(mc_heartbeat_t *hb, double now)
{
    accept_all(hb, now);
    for (int i = 0; i < MAX_PENDING; i++)
        if (hb->pending[i].fd >= 0) step_pending(hb, &hb->pending[i], now);
    if (hb->pred_fd >= 0) drain_pred(hb, now);
}

/* ---- ticking and judging ---- */

bool mc_heartbeat_tick(mc_heartbeat_t *hb, double now, double watch_s, mc_hb_event_t *ev)
{
    if (!hb || hb->byed) return false;
    if (!hb->started) hb->started = true, hb->t0 = hb->last_recv = now; /* silent since start-up */
    if (hb->succ_expected && hb->out_fd < 0 && !hb->succ_lost) progress_out(hb, now);
    beat(hb, now);
    progress_in(hb, now);
    if (watch_s <= 0) return false;
    /* a predecessor that never connected is silent since start-up (it may have stopped before
     * answering); a successor that accepts TCP but never answers is left to its own successor:
     * only one that cannot be reached at all (a firewall) is reported here */
    int pred = (hb->rank + hb->size - 1) % hb->size, succ = (hb->rank + 1) % hb->size;
    bool watching = hb->pred_fd >= 0 || (hb->pred_expected && !hb->pred_done && !hb->pred_gone);
    *ev = (mc_hb_event_t){.rank = pred, .for_s = now - hb->last_recv};
    if (hb->pred_gone) ev->kind = MC_HB_GONE;
    else if (watching && now - hb->last_recv >= watch_s) ev->kind = MC_HB_SILENT;
    else if (hb->succ_expected && !hb->succ_reached && now - hb->t0 >= watch_s)
        ev->kind = MC_HB_NO_SUCC, ev->rank = succ, ev->for_s = now - hb->t0;
    else return false;
    return true;
}

void mc_heartbeat_line(const mc_runtime_t *rt, const mc_hb_event_t *ev, const char *during,
                       char *buf, size_t n)
{
    int r = ev->rank, pid = (int)rt->pids[r];
    const char *host = rt->hosts[r];
    switch (ev->kind) {
    case MC_HB_SILENT:
        mc_silent_line(
            rt, r, ev->for_s,
            "no heartbeat from it reached this rank, its successor in the heartbeat ring: its "
            "process is stopped or hung, or its node or the network failed",
            during, buf, n);
        break;
    case MC_HB_GONE:
        /* its connection closed without a bye; the same words as the same-node check's */
        snprintf(buf, n, "rank %d (pid %d on host %s) died during %s; aborting the job", r, pid,
                 host, during);
        break;
    case MC_HB_NO_SUCC:
        snprintf(
            buf, n,
            "rank %d (host %s, pid %d) has not responded for %.0f s (this rank cannot open its "
            "heartbeat connection to it, while it waits in %s: a firewall blocks TCP between the "
            "nodes, or the rank hung at start-up; --heartbeat-timeout-seconds 0 turns the check off)",
            r, host, pid, ev->for_s, during);
        break;
    }
}

void mc_heartbeat_bye(mc_heartbeat_t *hb)
{
    if (!hb || hb->byed) return;
    hb->byed = true;
    if (hb->out_fd >= 0) {
        send(hb->out_fd, "B", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        close(hb->out_fd);
        hb->out_fd = -1;
    }
    /* a link still waiting for its 'A' may already be the successor's predecessor link */
    for (int i = 0; i < hb->n_tries; i++) {
        if (hb->tries[i].fd >= 0 && hb->tries[i].hello_sent)
            send(hb->tries[i].fd, "B", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        end_try(&hb->tries[i], 0);
    }
    for (int i = 0; i < MAX_PENDING; i++) drop_pending(&hb->pending[i]);
    if (hb->pred_fd >= 0) close(hb->pred_fd);
    if (hb->listen_fd >= 0) close(hb->listen_fd);
    hb->pred_fd = hb->listen_fd = -1;
}

void mc_heartbeat_free(mc_heartbeat_t *hb)
{
    mc_heartbeat_bye(hb);
    free(hb);
}
