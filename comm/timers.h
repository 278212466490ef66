/* Megatron's timers (megatron/core/timers.py) for --timing-log-level 1 and 2: named wall-clock
 * timers that accumulate over a log interval, reported after the log line per
 * --timing-log-option as the minimum and maximum (minmax), the maximum (max) or every rank's value
 * (all) over ranks of (time / log interval) in ms, for the timers (and ranks) that used them. */
#ifndef MC_DIST_TIMERS_H
#define MC_DIST_TIMERS_H

#include <stdbool.h>
#include <stddef.h>

#include "comm/comm.h"

/* In the order training_log lists them. */
typedef enum {
    MC_T_FORWARD_BACKWARD, /* level 1 */
    MC_T_FORWARD_COMPUTE,  /* level 2 */
    MC_T_BACKWARD_COMPUTE, /* level 2 */
    MC_T_BATCH_GENERATOR,  /* level 2 */
    /* level 2: pipeline p2p, named after Megatron's p2p_communication calls; the time a rank
     * waits for its pipeline neighbours (the bubble) */
    MC_T_FORWARD_RECV,
    MC_T_FORWARD_SEND,
    MC_T_BACKWARD_RECV,
    MC_T_BACKWARD_SEND,
    MC_T_FWD_SEND_FWD_RECV,
    MC_T_FWD_SEND_BWD_RECV,
    MC_T_BWD_SEND_FWD_RECV,
    MC_T_BWD_SEND_BWD_RECV,
    MC_T_FWD_BWD_SEND_FWD_BWD_RECV,
    MC_T_LAYERNORM_GRADS_ALL_REDUCE, /* level 1: sequence-parallel LayerNorm grads over tp */
    MC_T_EMBEDDING_GRADS_ALL_REDUCE, /* level 1: tied embedding grads over the embedding group */
    MC_T_ALL_GRADS_SYNC,             /* level 1: the gradient reduction left after the backward */
    MC_T_PARAMS_ALL_GATHER,          /* level 1 */
    MC_T_OPT_CLIP,                   /* level 1: optimizer-clip-main-grad (norm and clip) */
    MC_T_OPT_COUNT_ZEROS,            /* level 1 */
    MC_T_OPT_INNER_STEP,             /* level 1 */
    MC_T_OPTIMIZER,                  /* level 1 */
    MC_T_SAVE_CHECKPOINT,            /* level 0: reported after each save (mc_timers_log) */
    MC_T_LOAD_CHECKPOINT,            /* level 0: reported after --load */
    MC_TIMERS
} mc_timer_id_t;

/* --timing-log-option */
typedef enum {
    MC_TIMING_MINMAX, /* "(min, max) time across ranks (ms):" (Megatron's default) */
    MC_TIMING_MAX,    /* "max time across ranks (ms):" */
    MC_TIMING_ALL,    /* "times across ranks (ms):", then each rank's time under each timer */
} mc_timing_option_t;

/* "minmax", "max" or "all" (the flag's choices); anything else is minmax. */
mc_timing_option_t mc_timing_option(const char *name);

typedef struct {
    int level;                 /* --timing-log-level */
    mc_timing_option_t option; /* --timing-log-option */
    bool barrier_l1;           /* barrier before the level-1 timers that Megatron barriers */
    double start[MC_TIMERS], elapsed[MC_TIMERS];
    mc_comm_t *comm;
} mc_timers_t;

void mc_timers_init(mc_timers_t *t, int level, mc_timing_option_t option, bool barrier_l1,
                    mc_comm_t *comm);
/* No-ops for timers above the level. */
void mc_timer_start(mc_timers_t *t, mc_timer_id_t id);
void mc_timer_stop(mc_timers_t *t, mc_timer_id_t id);
/* Megatron's timer label: "<name><name2> " padded with dots to 48 characters. */
void mc_timer_label(char *buf, size_t n, const char *name, const char *name2);
/* Collective over the world: gathers every rank's times, formats Megatron's block into buf
 * (empty when nothing was timed) and, with reset, resets the timers (timers.log(reset=...)). */
void mc_timers_report(mc_timers_t *t, double normalizer, bool reset, char *buf, size_t n);
/* Collective over the world: Megatron's timers.log([name]) for one timer (after a save or load):
 * every rank's elapsed time in ms, unnormalized, formatted into buf per --timing-log-option;
 * resets that timer. */
void mc_timers_log(mc_timers_t *t, mc_timer_id_t id, char *buf, size_t n);
/* Collective over the world (none at --timing-log-level 0): Megatron's timers.write(timers_to_log,
 * writer, iteration, normalizer, reset=False) for TensorBoard. max_s[id] is the maximum over the
 * ranks of timer id's elapsed seconds / normalizer, 0 for a timer no rank used and for the
 * save and load timers, which training_log does not list. */
void mc_timers_max(mc_timers_t *t, double normalizer, double max_s[MC_TIMERS]);
/* Megatron's name of a timer ("forward-backward"). */
const char *mc_timer_name(mc_timer_id_t id);
/* The formatting alone (Timers.get_all_timers_string): all[r * MC_TIMERS + id] is rank r's
 * elapsed seconds for timer id, world ranks; a rank's time counts only when > 0. Writes the
 * block (no trailing newline) into buf, or "" when no rank timed anything. A block longer than
 * buf ends in a "    ... (truncated)" line instead of being cut mid-line. */
void mc_timers_format(mc_timing_option_t option, const double *all, int world, double normalizer,
                      char *buf, size_t n);

#endif
