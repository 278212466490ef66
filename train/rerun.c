/* Megatron's RerunStateMachine, RerunErrorInjector and QuickStats (train/rerun.h). The state a
 * re-run must restore is nothing here: a step's numbers are a function of its microbatches (kept
 * by the caller) and of the iteration (the dropout key). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/py_float.h"
#include "train/rerun.h"

#define COMPARISON_MATCH 0.0
#define COMPARISON_MISMATCH INFINITY
#define REPORTING_INTERVAL_ITERATIONS 2
#define STATS_MAX_SIZE 100000
#define LARGE_NUM_SAMPLES 100
#define SPIKY_LOSS_FACTOR 10.0

static const char *const mode_names[] = {"RerunMode.DISABLED", "RerunMode.VALIDATE_RESULTS",
                                         "RerunMode.REPORT_DETERMINISM_STATS"};
static const char *const error_names[] = {"Expected result", "Transient error", "Persistent error"};

static void say(const mc_rerun_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const mc_rerun_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(r->out, fmt, ap);
    va_end(ap);
    fputc('\n', r->out);
    fflush(r->out);
}

/* log_single_rank: rank 0's line */
#define SAY0(r, ...)                                                                               \
    do {                                                                                           \
        if ((r)->rank == 0) say((r), __VA_ARGS__);                                                 \
    } while (0)

static int caller_index(mc_rerun_t *r, const char *message)
{
    for (int i = 0; i < r->n_callers; i++)
        if (strcmp(r->caller[i], message) == 0) return i;
    if (r->n_callers == MC_RERUN_MAX_CALLERS) mc_fatal("too many rerun validation messages");
    r->caller[r->n_callers] = message;
    return r->n_callers++;
}

void mc_rerun_init(mc_rerun_t *r, const mc_args_t *a, int rank, int device, bool cuda, FILE *out)
{
    memset(r, 0, sizeof(*r));
    r->mode = strcmp(a->rerun_mode, "validate_results") == 0 ? MC_RERUN_VALIDATE_RESULTS
              : strcmp(a->rerun_mode, "report_stats") == 0   ? MC_RERUN_REPORT_STATS
                                                             : MC_RERUN_DISABLED;
    r->state = MC_RERUN_NOT_RUNNING_YET;
    r->current_iteration = -1;
    r->inject_rate = a->error_injection_rate;
    r->inject_type = strcmp(a->error_injection_type, "correct_result") == 0     ? MC_DIAG_CORRECT
                     : strcmp(a->error_injection_type, "persistent_error") == 0 ? MC_DIAG_PERSISTENT
                                                                                : MC_DIAG_TRANSIENT;
    r->injected = MC_DIAG_NONE;
    r->inject_seed = (uint64_t)a->seed * 0x9E3779B97F4A7C15ull + 1;
    r->rank = rank, r->device = device, r->cuda = cuda;
    r->out = out;
    if (gethostname(r->node, sizeof(r->node) - 1) != 0) strcpy(r->node, "localhost");
    if (a->check_for_nan_in_loss_and_grad) {
        caller_index(r, MC_RERUN_MSG_NAN);
        caller_index(r, MC_RERUN_MSG_INF);
    }
    if (a->check_for_spiky_loss) caller_index(r, MC_RERUN_MSG_SPIKY);
    if (r->mode != MC_RERUN_DISABLED)
        SAY0(r, "RerunStateMachine initialized in mode %s", mode_names[r->mode]);
}

void mc_rerun_free(mc_rerun_t *r)
{
    free(r->saved);
    for (int i = 0; i < MC_RERUN_MAX_CALLERS; i++) free(r->stats[i].samples);
    memset(r, 0, sizeof(*r));
}

/* _reduce_any over the world, of n flags at once */
static void reduce_any(mc_rerun_t *r, bool *flags, int n)
{
    double v[4];
    for (int i = 0; i < n; i++) v[i] = flags[i];
    if (r->reduce) r->reduce(r->reduce_ctx, v, n, false);
    for (int i = 0; i < n; i++) flags[i] = v[i] > 0;
}

static void record(mc_rerun_stats_t *s, double d)
{
    if (d == 0.0) {
        s->zero_cnt++;
        return;
    }
    if (s->n < STATS_MAX_SIZE) {
        if (s->n == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 64;
            if (!(s->samples = realloc(s->samples, (size_t)s->cap * sizeof(double))))
                mc_fatal("out of host memory");
        }
        s->samples[s->n] = d;
    } else {
        s->samples[s->n % STATS_MAX_SIZE] = d;
    }
    s->n++; /* QuickStats.pos */
    if (d > s->max) s->max = d;
}

/* gather_object + combine to rank 0 (the others reset): the counts, the largest, and the
 * samples placed at each rank's offset in one zero-filled buffer summed over the world. */
static void combine_to_rank0(mc_rerun_t *r, mc_rerun_stats_t *s, int world)
{
    double *v = calloc((size_t)world + 1, sizeof(double));
    if (!v) mc_fatal("out of host memory");
    const int64_t mine = s->n < STATS_MAX_SIZE ? s->n : STATS_MAX_SIZE;
    if (r->rank != 0) v[r->rank] = (double)mine, v[world] = (double)s->zero_cnt;
    r->reduce(r->reduce_ctx, v, world + 1, false);
    double mx = s->max;
    r->reduce(r->reduce_ctx, &mx, 1, true);
    int64_t total = 0, offset = 0;
    for (int i = 0; i < world; i++) {
        if (i == r->rank) offset = total;
        total += (int64_t)v[i];
    }
    double *buf = calloc((size_t)total + 1, sizeof(double));
    if (!buf) mc_fatal("out of host memory");
    if (r->rank != 0 && mine) memcpy(buf + offset, s->samples, (size_t)mine * sizeof(double));
    if (total) r->reduce(r->reduce_ctx, buf, (int)total, false);
    if (r->rank == 0) {
        s->zero_cnt += (int64_t)v[world];
        if (s->n + total <= STATS_MAX_SIZE) /* combine() keeps the samples while they fit */
            for (int64_t i = 0; i < total; i++) record(s, buf[i]);
        s->max = mx > s->max ? mx : s->max;
    } else {
        s->n = s->zero_cnt = 0, s->max = 0.0;
    }
    free(buf);
    free(v);
}

static void maybe_report_stats(mc_rerun_t *r)
{
    if (r->current_iteration % REPORTING_INTERVAL_ITERATIONS != 0) return;
    double world = 1.0; /* every rank counts itself */
    if (r->reduce) r->reduce(r->reduce_ctx, &world, 1, false);
    char text[512];
    if (r->rank == 0) say(r, "Stats on computation determinism in validation calls");
    for (int i = 0; i < r->n_callers; i++) {
        if (world > 1) combine_to_rank0(r, &r->stats[i], (int)world);
        if (r->rank != 0) continue;
        say(r, "  From validation call '%s':", r->caller[i]);
        mc_rerun_stats_text(&r->stats[i], text, sizeof(text));
        say(r, "    %s", text);
    }
}

bool mc_rerun_should_run(mc_rerun_t *r)
{
    memset(r->caller_count, 0, sizeof(r->caller_count)); /* validation_counts */
    r->replay_pos = 0;
    bool f[2];
    switch (r->state) {
    case MC_RERUN_NOT_RUNNING_YET: /* the initial run */
        if (r->mode != MC_RERUN_DISABLED) {
            r->rerun_requested = r->checkpoint_requested = false;
            r->restart_again_requested = r->continue_requested = false;
            r->n_saved = 0;
        }
        r->current_iteration++;
        r->state = MC_RERUN_INITIAL_RUN;
        return true;
    case MC_RERUN_INITIAL_RUN: /* done with the initial run */
        f[0] = r->rerun_requested;
        if (r->mode != MC_RERUN_DISABLED) reduce_any(r, f, 1);
        if (r->mode == MC_RERUN_DISABLED || !f[0]) {
            r->state = MC_RERUN_NOT_RUNNING_YET;
            return false;
        }
        if (r->mode == MC_RERUN_VALIDATE_RESULTS)
            SAY0(r, "Need to rerun step to check reproducibility of initial result");
        r->state = MC_RERUN_RERUNNING_IN_PLACE;
        return true;
    case MC_RERUN_RERUNNING_IN_PLACE: /* done with the first re-run */
        if (r->mode == MC_RERUN_REPORT_STATS) {
            r->state = MC_RERUN_NOT_RUNNING_YET;
            maybe_report_stats(r);
            r->n_saved = 0;
            return false;
        }
        f[0] = r->continue_requested, f[1] = r->checkpoint_requested;
        reduce_any(r, f, 2);
        if (f[0]) {
            SAY0(r, "Continuing normal execution because failed validation was not fatal");
            r->state = MC_RERUN_NOT_RUNNING_YET;
        } else if (f[1]) {
            r->state = MC_RERUN_WILL_RERUN_FROM_CHECKPOINT;
        }
        return false;
    case MC_RERUN_WILL_RERUN_FROM_CHECKPOINT:
        r->state = MC_RERUN_RERUNNING_FROM_CHECKPOINT;
        return true;
    case MC_RERUN_RERUNNING_FROM_CHECKPOINT: /* done re-running from a checkpoint */
        f[0] = r->restart_again_requested, f[1] = r->continue_requested;
        reduce_any(r, f, 2);
        if (f[0]) {
            SAY0(r, "Need to restart job from the same checkpoint because it was scheduled on the "
                    "same node/GPU");
            r->state = MC_RERUN_RERUNNING_AGAIN_FROM_CHECKPOINT;
        } else if (f[1]) {
            SAY0(r, "Continuing normal execution because failed validation was not fatal");
            r->state = MC_RERUN_NOT_RUNNING_YET;
        }
        return false;
    default: mc_fatal("the rerun state machine should not be here (state %d)", (int)r->state);
    }
}

int mc_rerun_checkpoint_and_exit(mc_rerun_t *r, bool *checkpoint)
{
    *checkpoint = false;
    r->first_iteration_complete = true;
    if (r->mode != MC_RERUN_VALIDATE_RESULTS) return 0;
    switch (r->state) {
    case MC_RERUN_RERUNNING_IN_PLACE:
        SAY0(r, "Exiting now. The job can be resumed from a previous checkpoint");
        return MC_RERUN_EXIT_FAILED_ON_RESULT_VALIDATION;
    case MC_RERUN_WILL_RERUN_FROM_CHECKPOINT:
        SAY0(r, "Saving a checkpoint and exiting now. Please resume the job from the checkpoint to "
                "rerun the last iteration and establish a diagnostic");
        *checkpoint = true;
        return MC_RERUN_EXIT_RESUME_TO_DISAMBIGUATE;
    case MC_RERUN_RERUNNING_FROM_CHECKPOINT:
        SAY0(r, "Exiting now. A checkpoint at the last iteration already exists if further "
                "examination is needed");
        return MC_RERUN_EXIT_FAILED_ON_RESULT_VALIDATION;
    case MC_RERUN_RERUNNING_AGAIN_FROM_CHECKPOINT:
        SAY0(r, "Exiting now. Please resume the job from the same checkpoint to rerun the last "
                "iteration and establish a diagnostic");
        return MC_RERUN_EXIT_RESUME_TO_DISAMBIGUATE;
    default: return 0;
    }
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* RerunErrorInjector.maybe_inject: once every inject_rate validations, at most one pending.
 * Megatron draws random.randint(0, rate - 1) from Python's generator; megatron-c from its own
 * (at rate 1 every validation is hit in both). */
static bool maybe_inject(mc_rerun_t *r)
{
    if (r->inject_rate <= 0 || r->injected != MC_DIAG_NONE) return false;
    const uint64_t d = splitmix64(r->inject_seed + r->inject_draws++) % (uint64_t)r->inject_rate;
    if ((d + (uint64_t)r->rank) % (uint64_t)r->inject_rate != 0) return false;
    r->injected = r->inject_type;
    say(r, "Injecting error type %s", error_names[r->inject_type]);
    return true;
}

/* maybe_miscompare: with an injected error, the answer its type makes; else the comparison */
static double maybe_miscompare(mc_rerun_t *r, double initial, double result)
{
    if (r->injected == MC_DIAG_NONE) return mc_rerun_compare(initial, result);
    if (r->state == MC_RERUN_RERUNNING_IN_PLACE) {
        if (r->injected != MC_DIAG_TRANSIENT) return COMPARISON_MATCH;
        r->injected = MC_DIAG_NONE;
        return COMPARISON_MISMATCH;
    }
    if (r->injected == MC_DIAG_TRANSIENT) mc_fatal("the rerun error injector should not be here");
    const bool persistent = r->injected == MC_DIAG_PERSISTENT;
    r->injected = MC_DIAG_NONE;
    return persistent ? COMPARISON_MISMATCH : COMPARISON_MATCH;
}

/* log_failure: logger.error when fatal, else logger.warning (the same words) */
static void log_failure(const mc_rerun_t *r, const char *message)
{
    say(r, "Rank %d, node %s, device %d, iteration #%lld: %s!", r->rank, r->node, r->device,
        (long long)(r->current_iteration + 1), message);
}

static void first_rerun(mc_rerun_t *r, const char *res, const char *init, double comparison,
                        double tolerance, bool fatal)
{
    char m[512];
    if (comparison > tolerance) {
        if (!fatal) r->continue_requested = true;
        snprintf(m, sizeof(m),
                 "First rerun: unexpected result is not reproducible within the tolerance "
                 "(%s != %s)",
                 res, init);
        log_failure(r, m);
        log_failure(r, "Possible transient error!");
        return;
    }
    if (fatal) r->checkpoint_requested = true;
    else r->continue_requested = true;
    /* where it reproduced: the re-run from the checkpoint must be elsewhere */
    memcpy(r->suspicious_node, r->node, sizeof(r->node));
    r->suspicious_device = r->device;
    snprintf(m, sizeof(m),
             "First rerun: unexpected result is reproducible within the tolerance (%s = %s). "
             "Need to rerun on a different GPU to verify correctness.",
             res, init);
    log_failure(r, m);
}

/* The second re-run (resumed from the checkpoint): megatron-c does not save the machine's state
 * in its checkpoints (Megatron does only with torch_dist), so a run reaches this state only when
 * a test puts it there. */
static void second_rerun(mc_rerun_t *r, const char *res, const char *init, double comparison,
                         double tolerance, const char *message, bool fatal)
{
    char m[512];
    if (strcmp(r->node, r->suspicious_node) == 0 && r->device == r->suspicious_device) {
        say(r,
            "Got rescheduled on the same GPU. Need to resume again from the same checkpoint "
            "(node: %s, gpu: %d)",
            r->suspicious_node, r->suspicious_device);
        r->restart_again_requested = true;
        return;
    }
    if (comparison > tolerance) {
        say(r,
            "Second rerun: unexpected result is not reproducible on a different GPU, therefore "
            "was likely incorrect (%s != %s)",
            res, init);
        log_failure(r, "Possible persistent error!");
    } else {
        say(r,
            "Second rerun: unexpected result is reproducible on a different GPU, therefore it was "
            "likely correct (%s = %s)",
            res, init);
        snprintf(m, sizeof(m), "Correct result (but possible Application error) (%s)", message);
        log_failure(r, m);
    }
    if (!fatal) r->continue_requested = true;
}

static void report_call(mc_rerun_t *r, int idx, double result)
{
    if (r->state == MC_RERUN_INITIAL_RUN) {
        r->rerun_requested = true;
        if (r->n_saved == r->cap_saved) {
            r->cap_saved = r->cap_saved ? 2 * r->cap_saved : 16;
            if (!(r->saved = realloc(r->saved, (size_t)r->cap_saved * sizeof(double))))
                mc_fatal("out of host memory");
        }
        r->saved[r->n_saved++] = result;
    } else if (r->state == MC_RERUN_RERUNNING_IN_PLACE) {
        if (r->replay_pos >= r->n_saved)
            mc_fatal("the rerun's result from the initial run is missing");
        record(&r->stats[idx], mc_rerun_compare(r->saved[r->replay_pos++], result));
    }
}

void mc_rerun_validate(mc_rerun_t *r, double result, mc_rerun_reject_fn reject, const char *message,
                       double tolerance, bool fatal)
{
    char res[96], init[96];
    if (r->mode == MC_RERUN_DISABLED) { /* the step stops on fatal ones itself (train/step.c) */
        if (fatal || !reject(r, result)) return;
        mc_rerun_format_tensor(res, sizeof(res), result, r->device, r->cuda);
        say(r, "Rank %d, node %s, device %d, iteration %lld: Unexpected result %s (message='%s')",
            r->rank, r->node, r->device, (long long)(r->current_iteration + 1), res, message);
        return;
    }
    if (r->state == MC_RERUN_NOT_RUNNING_YET)
        mc_fatal("validate_result called outside of the forward-backward pass");
    const int idx = caller_index(r, message);
    const int seq = ++r->caller_count[idx];
    if (r->mode == MC_RERUN_REPORT_STATS) {
        report_call(r, idx, result);
        return;
    }
    if (!r->logged_sdc_enabled) {
        r->logged_sdc_enabled = true;
        SAY0(r, "Result validation enabled");
    }
    if (r->state == MC_RERUN_INITIAL_RUN && !r->rerun_requested) {
        /* no validation before the first optimizer step: no checkpoint could be taken */
        if (!r->first_iteration_complete) return;
        if (!maybe_inject(r) && !reject(r, result)) return;
        r->failed_message = message, r->failed_sequence = seq;
        r->initial_result = result;
        r->rerun_requested = true;
        mc_rerun_format_tensor(res, sizeof(res), result, r->device, r->cuda);
        say(r, "Unexpected result %s on rank %d at iteration #%lld invocation #%d (message='%s')",
            res, r->rank, (long long)(r->current_iteration + 1), seq, message);
        return;
    }
    const bool rerun =
        r->state == MC_RERUN_RERUNNING_IN_PLACE || r->state == MC_RERUN_RERUNNING_FROM_CHECKPOINT;
    if (!rerun || !r->failed_message || strcmp(message, r->failed_message) != 0 ||
        seq != r->failed_sequence)
        return;
    const double comparison = maybe_miscompare(r, r->initial_result, result);
    mc_rerun_format_tensor(res, sizeof(res), result, r->device, r->cuda);
    mc_rerun_format_tensor(init, sizeof(init), r->initial_result, r->device, r->cuda);
    if (r->state == MC_RERUN_RERUNNING_IN_PLACE)
        first_rerun(r, res, init, comparison, tolerance, fatal);
    else second_rerun(r, res, init, comparison, tolerance, message, fatal);
}

bool mc_rerun_is_nan(mc_rerun_t *r, double result)
{
    (void)r;
    return isnan(result);
}

bool mc_rerun_is_inf(mc_rerun_t *r, double result)
{
    (void)r;
    return isinf(result);
}

/* is_unexpectedly_large for one context: the largest |value| of the first num_samples, then
 * whether a value reaches threshold times it (NaN and Inf are checked separately) */
static bool unexpectedly_large(mc_rerun_t *r, double result, double threshold, const char *context)
{
    const double value = fabs(result);
    if (isnan(value) || isinf(value)) return false;
    int c = 0;
    while (c < MC_RERUN_CONTEXTS && r->large_context[c] && strcmp(r->large_context[c], context))
        c++;
    if (c == MC_RERUN_CONTEXTS) mc_fatal("too many contexts for is_unexpectedly_large");
    r->large_context[c] = context;
    if (r->large_count[c] < LARGE_NUM_SAMPLES) {
        r->large_count[c]++;
        if (value > r->max_value[c]) r->max_value[c] = value;
        if (r->large_count[c] == LARGE_NUM_SAMPLES) {
            char v[32];
            mc_py_float_repr(r->max_value[c], v, sizeof(v));
            say(r, "Max value for %s: %s", context, v);
        }
        return false;
    }
    return value >= r->max_value[c] * threshold;
}

bool mc_rerun_is_spiky_loss(mc_rerun_t *r, double result)
{
    return unexpectedly_large(r, result, SPIKY_LOSS_FACTOR, "loss");
}

double mc_rerun_compare(double a, double b)
{
    if (a == b || (isnan(a) && isnan(b))) return COMPARISON_MATCH;
    if (isnan(a) || isnan(b) || isinf(a) || isinf(b)) return COMPARISON_MISMATCH;
    return fabs((a - b) / (a + b) * 2);
}

void mc_rerun_format_tensor(char *buf, size_t n, double v, int device, bool cuda)
{
    const float f = (float)v; /* the loss is a float32 tensor */
    const double a = fabs((double)f);
    char num[48];
    if (isnan(f) || isinf(f) || f == 0.0f) /* no finite non-zero value: int mode, no point */
        snprintf(num, sizeof(num), isnan(f) ? "nan" : isinf(f) ? (f < 0 ? "-inf" : "inf") : "0.");
    else if (f == ceilf(f)) /* int mode: scientific past 1e8 */
        snprintf(num, sizeof(num), a > 1e8 ? "%.4e" : "%.0f.", (double)f);
    else snprintf(num, sizeof(num), a > 1e8 || a < 1e-4 ? "%.4e" : "%.4f", (double)f);
    if (cuda) snprintf(buf, n, "tensor(%s, device='cuda:%d')", num, device);
    else snprintf(buf, n, "tensor(%s)", num);
}

/* Python's "{:,}" of a count */
static void with_commas(char *out, size_t n, int64_t v)
{
    char digits[32];
    snprintf(digits, sizeof(digits), "%lld", (long long)v);
    const size_t len = strlen(digits);
    size_t o = 0;
    for (size_t i = 0; i < len && o + 2 < n; i++) {
        if (i && (len - i) % 3 == 0) out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = 0;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void mc_rerun_stats_text(mc_rerun_stats_t *s, char *buf, size_t n)
{
    const int64_t kept = s->n < STATS_MAX_SIZE ? s->n : STATS_MAX_SIZE;
    char t_txt[32], z_txt[32];
    with_commas(z_txt, sizeof(z_txt), s->zero_cnt);
    if (kept == 0) {
        snprintf(buf, n, "%s samples, all identical", z_txt);
        return;
    }
    qsort(s->samples, (size_t)kept, sizeof(double), cmp_double);
    const int64_t t = s->zero_cnt + kept;
    with_commas(t_txt, sizeof(t_txt), t);
    double sum = 0;
    for (int64_t i = 0; i < kept; i++) sum += s->samples[i];
    static const double ps[4] = {0.5, 0.9, 0.99, 0.999};
    char p[4][24];
    for (int k = 0; k < 4; k++) {
        const int64_t i = (int64_t)((double)t * ps[k]) - s->zero_cnt;
        if (i >= 0) snprintf(p[k], sizeof(p[k]), "%.3E", s->samples[i]);
        else snprintf(p[k], sizeof(p[k]), "0.0");
    }
    snprintf(buf, n,
             "%s/%s total/identical samples, rel. variability: avg= %.3E, p50= %s, p90= %s, "
             "p99= %s, p99.9= %s, max: %.3E",
             t_txt, z_txt, sum / (double)t, p[0], p[1], p[2], p[3], s->max);
}
