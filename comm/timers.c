#include "comm/timers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"

static const struct {
    const char *name;
    int level;
    bool barrier; /* Megatron starts these with barrier=args.barrier_with_L1_time */
} INFO[MC_TIMERS] = {
    [MC_T_FORWARD_BACKWARD] = {"forward-backward", 1, true},
    [MC_T_FORWARD_COMPUTE] = {"forward-compute", 2, false},
    [MC_T_BACKWARD_COMPUTE] = {"backward-compute", 2, false},
    [MC_T_BATCH_GENERATOR] = {"batch-generator", 2, false},
    [MC_T_FORWARD_RECV] = {"forward-recv", 2, false},
    [MC_T_FORWARD_SEND] = {"forward-send", 2, false},
    [MC_T_BACKWARD_RECV] = {"backward-recv", 2, false},
    [MC_T_BACKWARD_SEND] = {"backward-send", 2, false},
    [MC_T_FWD_SEND_FWD_RECV] = {"forward-send-forward-recv", 2, false},
    [MC_T_FWD_SEND_BWD_RECV] = {"forward-send-backward-recv", 2, false},
    [MC_T_BWD_SEND_FWD_RECV] = {"backward-send-forward-recv", 2, false},
    [MC_T_BWD_SEND_BWD_RECV] = {"backward-send-backward-recv", 2, false},
    [MC_T_FWD_BWD_SEND_FWD_BWD_RECV] = {"forward-backward-send-forward-backward-recv", 2, false},
    [MC_T_LAYERNORM_GRADS_ALL_REDUCE] = {"layernorm-grads-all-reduce", 1, false},
    [MC_T_EMBEDDING_GRADS_ALL_REDUCE] = {"embedding-grads-all-reduce", 1, false},
    [MC_T_ALL_GRADS_SYNC] = {"all-grads-sync", 1, false},
    [MC_T_PARAMS_ALL_GATHER] = {"params-all-gather", 1, false},
    [MC_T_OPT_CLIP] = {"optimizer-clip-main-grad", 1, false},
    [MC_T_OPT_COUNT_ZEROS] = {"optimizer-count-zeros", 1, false},
    [MC_T_OPT_INNER_STEP] = {"optimizer-inner-step", 1, false},
    [MC_T_OPTIMIZER] = {"optimizer", 1, true},
    [MC_T_SAVE_CHECKPOINT] = {"save-checkpoint", 0, false},
    [MC_T_LOAD_CHECKPOINT] = {"load-checkpoint", 0, false},
};

mc_timing_option_t mc_timing_option(const char *name)
{
    if (strcmp(name, "max") == 0) return MC_TIMING_MAX;
    if (strcmp(name, "all") == 0) return MC_TIMING_ALL;
    return MC_TIMING_MINMAX;
}

void mc_timers_init(mc_timers_t *t, int level, mc_timing_option_t option, bool barrier_l1,
                    mc_comm_t *comm)
{
    memset(t, 0, sizeof(*t));
    t->level = level;
    t->option = option;
    t->barrier_l1 = barrier_l1;
    t->comm = comm;
}

void mc_timer_start(mc_timers_t *t, mc_timer_id_t id)
{
    if (INFO[id].level > t->level) return;
    if (INFO[id].barrier && t->barrier_l1 && t->comm) mc_barrier(t->comm, t->comm->world);
    t->start[id] = mc_now_s();
}

void mc_timer_stop(mc_timers_t *t, mc_timer_id_t id)
{
    if (INFO[id].level > t->level) return;
    t->elapsed[id] += mc_now_s() - t->start[id];
}

void mc_timer_label(char *buf, size_t n, const char *name, const char *name2)
{
    snprintf(buf, n, "%s%s ", name, name2);
    size_t len = strlen(buf);
    while (len < 48 && len + 1 < n) buf[len++] = '.';
    buf[len] = '\0';
}

#define TRUNCATED "\n    ... (truncated)"

/* Copies the whole block text into buf, or its longest prefix of whole lines followed by
 * TRUNCATED when it does not fit. */
static void copy_block(const char *text, size_t len, char *buf, size_t n)
{
    if (n == 0) return;
    if (len < n) {
        memcpy(buf, text, len + 1);
        return;
    }
    size_t keep = n > sizeof(TRUNCATED) ? n - sizeof(TRUNCATED) : 0; /* room for the marker */
    while (keep > 0 && text[keep] != '\n') keep--;
    memcpy(buf, text, keep);
    buf[keep] = '\0';
    if (keep + sizeof(TRUNCATED) <= n) memcpy(buf + keep, TRUNCATED, sizeof(TRUNCATED));
}

void mc_timers_format(mc_timing_option_t option, const double *all, int world, double normalizer,
                      char *buf, size_t n)
{
    if (n) buf[0] = '\0';
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) mc_fatal("out of host memory");
    /* _get_global_min_max_time_string / _get_all_ranks_time_string: times in ms per iteration */
    const double scale = 1000.0 / normalizer;
    fputs(option == MC_TIMING_ALL   ? "times across ranks (ms):"
          : option == MC_TIMING_MAX ? "max time across ranks (ms):"
                                    : "(min, max) time across ranks (ms):",
          f);
    bool any = false;
    for (int id = 0; id < MC_TIMERS; id++) {
        /* Megatron keeps the ranks that used the timer (time > 0) */
        double lo = 0, hi = 0;
        int used = 0;
        for (int r = 0; r < world; r++) {
            const double v = all[(size_t)r * MC_TIMERS + id] * scale;
            if (v <= 0) continue;
            if (option == MC_TIMING_ALL) {
                if (!used) fprintf(f, "\n  %s:", INFO[id].name);
                fprintf(f, "\n     rank %2d: %.2f", r, v);
            }
            lo = used ? (v < lo ? v : lo) : v;
            hi = used ? (v > hi ? v : hi) : v;
            used++;
        }
        if (!used) continue;
        any = true;
        if (option == MC_TIMING_ALL) continue;
        char label[64];
        mc_timer_label(label, sizeof(label), INFO[id].name, "");
        if (option == MC_TIMING_MAX) fprintf(f, "\n    %s: %.2f", label, hi);
        else fprintf(f, "\n    %s: (%.2f, %.2f)", label, lo, hi);
    }
    if (fclose(f) != 0 || !text) mc_fatal("out of host memory");
    if (any) copy_block(text, len, buf, n);
    free(text);
}

/* Gathers every rank's times (src: MC_TIMERS values) and formats the block. */
static void gather_format(mc_timers_t *t, const double *src, double normalizer, char *buf, size_t n)
{
    const int W = t->comm->size;
    double *all = malloc((size_t)W * MC_TIMERS * sizeof(double));
    if (!all) mc_fatal("out of host memory");
    mc_all_gather(t->comm, t->comm->world, src, all, MC_TIMERS, MC_DT_F64);
    mc_timers_format(t->option, all, W, normalizer, buf, n);
    free(all);
}

void mc_timers_report(mc_timers_t *t, double normalizer, bool reset, char *buf, size_t n)
{
    if (n) buf[0] = '\0';
    if (t->level == 0) return;
    gather_format(t, t->elapsed, normalizer, buf, n);
    if (reset) memset(t->elapsed, 0, sizeof(t->elapsed));
}

void mc_timers_max(mc_timers_t *t, double normalizer, double max_s[MC_TIMERS])
{
    memset(max_s, 0, MC_TIMERS * sizeof(double));
    if (t->level == 0) return;
    const int W = t->comm->size;
    double *all = malloc((size_t)W * MC_TIMERS * sizeof(double));
    if (!all) mc_fatal("out of host memory");
    mc_all_gather(t->comm, t->comm->world, t->elapsed, all, MC_TIMERS, MC_DT_F64);
    for (int id = 0; id < MC_TIMERS; id++) {
        if (id == MC_T_SAVE_CHECKPOINT || id == MC_T_LOAD_CHECKPOINT) continue;
        for (int r = 0; r < W; r++) {
            const double v = all[(size_t)r * MC_TIMERS + id];
            if (v > max_s[id]) max_s[id] = v; /* unused on every rank: stays 0 */
        }
        max_s[id] /= normalizer;
    }
    free(all);
}

const char *mc_timer_name(mc_timer_id_t id) { return INFO[id].name; }

void mc_timers_log(mc_timers_t *t, mc_timer_id_t id, char *buf, size_t n)
{
    double mine[MC_TIMERS] = {0};
    mine[id] = t->elapsed[id];
    gather_format(t, mine, 1.0, buf, n);
    t->elapsed[id] = 0;
}
