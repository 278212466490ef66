/* Megatron's rerun state machine (megatron/core/rerun_state_machine.py at main): it validates
 * results during the forward-backward (the loss NaN/Inf checks, the spiky-loss check), re-runs
 * the step in place when one is rejected (the same microbatches, the same dropout keys: the same
 * numbers unless the fault was transient), and says whether to continue, to checkpoint and exit
 * (16: resume on another GPU to establish a diagnostic) or to exit (17: failed on validation). In
 * report_stats mode every step runs twice and the relative differences of the validated results
 * are reported every other iteration. The machine knows no communicator: the step gives it
 * `reduce` (a sum or max over the world), so its transitions are tested alone. */
#ifndef MC_TRAIN_RERUN_H
#define MC_TRAIN_RERUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config/args.h"

/* Megatron's exit codes */
#define MC_RERUN_EXIT_RESUME_TO_DISAMBIGUATE 16
#define MC_RERUN_EXIT_FAILED_ON_RESULT_VALIDATION 17

typedef enum {
    MC_RERUN_DISABLED,
    MC_RERUN_VALIDATE_RESULTS,
    MC_RERUN_REPORT_STATS
} mc_rerun_mode_t;

typedef enum {
    MC_RERUN_NOT_RUNNING_YET,
    MC_RERUN_INITIAL_RUN,
    MC_RERUN_RERUNNING_IN_PLACE,
    MC_RERUN_WILL_RERUN_FROM_CHECKPOINT,
    MC_RERUN_RERUNNING_FROM_CHECKPOINT,
    MC_RERUN_RERUNNING_AGAIN_FROM_CHECKPOINT,
} mc_rerun_state_t;

/* RerunDiagnostic: what the error injector pretends the fault was */
typedef enum {
    MC_DIAG_NONE = -1,
    MC_DIAG_CORRECT,
    MC_DIAG_TRANSIENT,
    MC_DIAG_PERSISTENT
} mc_diag_t;

/* The validation calls a step makes, by message (Megatron's Caller); their order is fixed. */
enum { MC_RERUN_MAX_CALLERS = 4, MC_RERUN_CONTEXTS = 2 };

/* QuickStats: the non-zero relative differences, the count of identical ones, the largest */
typedef struct {
    double *samples;
    int64_t n, cap, zero_cnt;
    double max;
} mc_rerun_stats_t;

typedef struct mc_rerun mc_rerun_t;
typedef bool (*mc_rerun_reject_fn)(mc_rerun_t *r, double result);

struct mc_rerun {
    mc_rerun_mode_t mode;
    mc_rerun_state_t state;
    int64_t current_iteration; /* 0-based, as Megatron's; messages add 1 */
    bool first_iteration_complete, logged_sdc_enabled;
    /* per-rank requests, reduced over the world when the machine decides */
    bool rerun_requested, checkpoint_requested, restart_again_requested, continue_requested;
    /* RerunErrorInjector */
    int64_t inject_rate;
    mc_diag_t inject_type, injected;
    uint64_t inject_seed, inject_draws;
    /* validation calls of this run of the step: message -> count (the sequence) */
    int n_callers;
    const char *caller[MC_RERUN_MAX_CALLERS];
    int caller_count[MC_RERUN_MAX_CALLERS];
    const char *failed_message; /* failed_validation_call */
    int failed_sequence;
    double initial_result;
    char suspicious_node[64]; /* where the first re-run reproduced it */
    int suspicious_device;
    /* is_unexpectedly_large: per context ("loss", "grads") */
    const char *large_context[MC_RERUN_CONTEXTS];
    int64_t large_count[MC_RERUN_CONTEXTS];
    double max_value[MC_RERUN_CONTEXTS];
    /* report_stats: the initial run's results in call order, and the stats per message */
    double *saved;
    int n_saved, cap_saved, replay_pos;
    mc_rerun_stats_t stats[MC_RERUN_MAX_CALLERS];
    /* where this rank is, for the messages; rank 0 prints the single-rank ones */
    int rank;
    char node[64];
    int device;
    bool cuda;
    FILE *out;
    /* the world's sum (max: false) or max (true) of v[0..n-1], in place */
    void (*reduce)(void *ctx, double *v, int n, bool max);
    void *reduce_ctx;
};

/* Megatron's loss_func messages (pretrain_gpt.py), registered in this order by mc_rerun_init
 * so every rank's report_stats slots agree. */
#define MC_RERUN_MSG_NAN "found NaN in local forward loss calculation"
#define MC_RERUN_MSG_INF "found Inf in local forward loss calculation"
#define MC_RERUN_MSG_SPIKY "Spiky loss"

/* The machine for a run's arguments (--rerun-mode, --error-injection-*); prints Megatron's
 * "RerunStateMachine initialized" line when not disabled. Messages go to out (stderr in runs). */
void mc_rerun_init(mc_rerun_t *r, const mc_args_t *a, int rank, int device, bool cuda, FILE *out);
void mc_rerun_free(mc_rerun_t *r);

/* should_run_forward_backward: whether to run the step's forward-backward (again). */
bool mc_rerun_should_run(mc_rerun_t *r);

/* should_checkpoint_and_exit, after the forward-backward loop: the exit code (0: go on to the
 * optimizer step); *checkpoint: save before exiting. */
int mc_rerun_checkpoint_and_exit(mc_rerun_t *r, bool *checkpoint);

/* validate_result: result from this rank's forward; reject decides whether it is suspicious. */
void mc_rerun_validate(mc_rerun_t *r, double result, mc_rerun_reject_fn reject, const char *message,
                       double tolerance, bool fatal);

/* The rejection functions Megatron's loss_func passes: torch.isnan, torch.isinf and
 * is_unexpectedly_large(threshold=SPIKY_LOSS_FACTOR 10, context "loss", 100 samples). */
bool mc_rerun_is_nan(mc_rerun_t *r, double result);
bool mc_rerun_is_inf(mc_rerun_t *r, double result);
bool mc_rerun_is_spiky_loss(mc_rerun_t *r, double result);

/* _compare_floats: 0 for the same value (or two NaNs), inf when one is NaN or Inf and the
 * other not, else the relative difference |a-b| / ((a+b)/2). */
double mc_rerun_compare(double a, double b);

/* str() of a 0-dim float32 torch tensor holding v (precision 4), with its device:
 * "tensor(5.5452, device='cuda:0')". */
void mc_rerun_format_tensor(char *buf, size_t n, double v, int device, bool cuda);

/* QuickStats.print_stats */
void mc_rerun_stats_text(mc_rerun_stats_t *s, char *buf, size_t n);

#endif
