/* A network heartbeat around the ring of ranks, so a rank that falls silent on another node is
 * noticed (the same-node /proc check of comm/liveness.h cannot see it), whatever the collective
 * backend.
 *
 * Start-up (comm/runtime.c): every rank opens a non-blocking TCP listening socket and publishes
 * its port, its addresses and a nonce in the runtime's existing pid/host exchange (no extra
 * fence). Afterwards each rank connects to its successor ((rank + 1) % world) and accepts its
 * predecessor. The comm backends drive it from the thread that already checks peers about once a
 * second (comm_mpi.c's comm thread, comm_nccl.c's watchdog), also while idle: every
 * MC_HEARTBEAT_PERIOD_S a tick sends one byte to the successor and drains the predecessor's, all
 * non-blocking. SIGSTOP stops every thread, so a stopped rank's beats stop; a rank computing,
 * evaluating or saving a checkpoint keeps beating.
 *
 * Judging (only while the ticking thread waits in a collective, watch_s > 0): the predecessor
 * silent for watch_s (counted from the first tick when it never connected), its connection
 * closed without a 'bye' (it died), or no TCP connection to the successor possible within
 * watch_s of the first tick (a firewall). A rank that finishes sends 'bye' (mc_heartbeat_bye), so
 * ranks finishing at different times are not reported. */
#ifndef MC_DIST_HEARTBEAT_H
#define MC_DIST_HEARTBEAT_H

#include <stdbool.h>
#include <stddef.h>

struct mc_runtime;
typedef struct mc_heartbeat mc_heartbeat_t;

#define MC_HEARTBEAT_PERIOD_S 0.5
#define MC_HEARTBEAT_BLOB_MAX 160 /* what a rank publishes: nonce, port, addresses */

/* Opens the listening socket and fills blob (*len bytes) for the runtime to publish. Returns
 * NULL when sockets are unavailable: the blob then says "no heartbeat" (port 0) and its
 * neighbours neither connect nor expect it. */
mc_heartbeat_t *mc_heartbeat_open(int rank, int size, unsigned char blob[MC_HEARTBEAT_BLOB_MAX],
                                  size_t *len);

/* After the exchange: the successor's and predecessor's blobs; same_host: the successor runs on
 * this host (then loopback is tried first). */
void mc_heartbeat_link(mc_heartbeat_t *hb, const unsigned char *succ, size_t succ_len,
                       bool same_host, const unsigned char *pred, size_t pred_len);

typedef enum {
    MC_HB_SILENT, /* the predecessor sent nothing for for_s (or never connected) */
    MC_HB_GONE,   /* its connection closed without a bye: it died */
    MC_HB_NO_SUCC /* no TCP connection to the successor could be made at all */
} mc_hb_kind_t;

typedef struct {
    mc_hb_kind_t kind;
    int rank; /* the world rank named */
    double for_s;
} mc_hb_event_t;

/* One step, from the checking thread only, at least every MC_HEARTBEAT_PERIOD_S: progresses the
 * links, beats, drains. watch_s > 0 (this thread waits in a collective with that heartbeat
 * bound): returns true with *ev when the job must end. hb may be NULL (one rank, no sockets). */
bool mc_heartbeat_tick(mc_heartbeat_t *hb, double now, double watch_s, mc_hb_event_t *ev);

/* The one-line message for ev while this rank waits in `during` ("all-reduce on the dp group"). */
void mc_heartbeat_line(const struct mc_runtime *rt, const mc_hb_event_t *ev, const char *during,
                       char *buf, size_t n);

/* This rank is finishing: tells the successor (a 'bye'), stops watching. Idempotent. */
void mc_heartbeat_bye(mc_heartbeat_t *hb);
void mc_heartbeat_free(mc_heartbeat_t *hb);

#endif
