/* The num microbatches calculator; see microbatches.h. */
#include "config/microbatches.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

#define SCHED "--step-batch-size-schedule"

/* _parse_numeric_value: int(float(text) * multiplier), the multiplier from a last K, M, B or T.
 * Python's float() takes what strtod takes but hexadecimal; a non-finite or out-of-range
 * product is refused as int() refuses it. */
static int parse_number(const char *word, size_t len, int64_t *out)
{
    char buf[64];
    if (len == 0 || len >= sizeof(buf)) return -1;
    memcpy(buf, word, len);
    buf[len] = 0;
    double mult = 1;
    switch (toupper((unsigned char)buf[len - 1])) {
    case 'T': mult = 1e12; break;
    case 'B': mult = 1e9; break;
    case 'M': mult = 1e6; break;
    case 'K': mult = 1e3; break;
    }
    if (mult != 1) buf[--len] = 0;
    if (len == 0 || strpbrk(buf, "xX") || isspace((unsigned char)buf[0])) return -1;
    char *end;
    errno = 0;
    const double v = strtod(buf, &end) * mult;
    if (*end || !isfinite(v) || v >= 9.2e18 || v <= -9.2e18) return -1;
    *out = (int64_t)v; /* int() truncates toward zero */
    return 0;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    const int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* One "THRESHOLD:BS" entry (split at its first ':'), the threshold made samples. */
static int parse_entry(const char *w, size_t len, int seq_length, int64_t *samples, int *size,
                       char *err, size_t errn)
{
    char shown[MC_SHOWN_MAX + 4], word[MC_SHOWN_MAX + 4];
    snprintf(word, sizeof(word), "%.*s", (int)(len < MC_SHOWN_MAX ? len : MC_SHOWN_MAX), w);
    const char *colon = memchr(w, ':', len);
    if (!colon)
        return mc_errf(err, errn,
                       SCHED ": invalid schedule entry \"%s\" (expected THRESHOLD:BATCH_SIZE, "
                             "e.g. \"0:16 2.4B:320\")",
                       mc_shown(word, shown));
    int64_t threshold, bs;
    if (parse_number(w, (size_t)(colon - w), &threshold) != 0 ||
        parse_number(colon + 1, len - (size_t)(colon - w) - 1, &bs) != 0)
        return mc_errf(err, errn,
                       SCHED ": invalid number in schedule entry \"%s\" (numbers with an optional "
                             "K, M, B or T, e.g. \"2.4B:320\")",
                       mc_shown(word, shown));
    if (bs > INT32_MAX)
        return mc_errf(err, errn, SCHED ": batch size %lld in \"%s\" is too large", (long long)bs,
                       mc_shown(word, shown));
    if (bs < INT32_MIN) bs = INT32_MIN; /* refused as not positive */
    *samples = seq_length > 0 ? floor_div(threshold, seq_length) : threshold;
    *size = (int)bs;
    return 0;
}

/* _validate_schedule on the sorted entries. */
static int check_schedule(const int64_t *samples, const int *size, int n, char *err, size_t errn)
{
    if (n == 0)
        return mc_errf(err, errn,
                       SCHED ": the schedule must have at least one entry (e.g. \"0:16\")");
    if (samples[0] != 0)
        return mc_errf(err, errn,
                       SCHED ": the first schedule entry must have threshold 0, got %lld samples "
                             "(start the schedule with \"0:BATCH_SIZE\")",
                       (long long)samples[0]);
    for (int i = 1; i < n; i++)
        if (samples[i] <= samples[i - 1])
            return mc_errf(err, errn,
                           SCHED ": schedule thresholds must be strictly increasing, got %lld "
                                 "before %lld samples (thresholds are tokens, // --seq-length)",
                           (long long)samples[i - 1], (long long)samples[i]);
    for (int i = 0; i < n; i++)
        if (size[i] <= 0)
            return mc_errf(err, errn, SCHED ": batch size must be positive, got %d", size[i]);
    return 0;
}

int mc_batch_schedule_parse(const char *text, int seq_length, int64_t *samples, int *size, int max,
                            int *n, char *err, size_t errn)
{
    *n = 0;
    for (const char *p = text; *p;) {
        while (*p && (isspace((unsigned char)*p) || *p == ',')) p++;
        const char *w = p;
        while (*p && !isspace((unsigned char)*p) && *p != ',') p++;
        if (p == w) break;
        if (*n == max) return mc_errf(err, errn, SCHED ": more than %d schedule entries", max);
        int64_t s = 0;
        int b = 0;
        if (parse_entry(w, (size_t)(p - w), seq_length, &s, &b, err, errn) != 0) return -1;
        int i = (*n)++; /* insertion sort, stable as Python's sort */
        for (; i > 0 && samples[i - 1] > s; i--) {
            samples[i] = samples[i - 1];
            size[i] = size[i - 1];
        }
        samples[i] = s;
        size[i] = b;
    }
    return check_schedule(samples, size, *n, err, errn);
}

int mc_microbatches_init(mc_microbatches_t *c, const mc_args_t *a, char *err, size_t n)
{
    *c = (mc_microbatches_t){
        .global_batch_size = a->global_batch_size,
        .micro_batch_times_dp = a->micro_batch_size * a->data_parallel_size,
        .start = a->rampup_start,
        .increment = a->rampup_increment,
        .rampup_samples = a->rampup_samples,
        .n_steps = a->n_batch_schedule,
        .step_samples = a->batch_schedule_samples,
        .step_size = a->batch_schedule_size,
    };
    if (c->n_steps) { /* the final batch is the last entry's; update(0) unchecked */
        c->start = 0;
        c->global_batch_size = c->step_size[c->n_steps - 1];
        mc_microbatches_update(c, 0);
        return 0;
    }
    if (!c->start) {
        c->current_global_batch_size = c->global_batch_size;
        c->num_microbatches = c->global_batch_size / c->micro_batch_times_dp;
        return 0;
    }
    const int diff = c->global_batch_size - c->start;
    if (diff < 0)
        return mc_errf(err, n,
                       "expected global batch size to be greater than or equal to start batch "
                       "size, got %d and %d (--global-batch-size, --rampup-batch-size)",
                       c->global_batch_size, c->start);
    if (diff % c->increment != 0)
        return mc_errf(err, n,
                       "expected global batch size interval (%d) to be divisible by global batch "
                       "size increment (%d) (--global-batch-size, --rampup-batch-size)",
                       diff, c->increment);
    /* Megatron divides by the number of increments: a ramp from gbs to gbs raises
     * ZeroDivisionError there */
    if (diff == 0)
        return mc_errf(err, n,
                       "--rampup-batch-size starts at the global batch size (%d): there is no "
                       "increment to ramp up over (drop --rampup-batch-size)",
                       c->start);
    c->samples_per_increment = (double)c->rampup_samples / (double)(diff / c->increment);
    mc_microbatches_update(c, 0);
    return 0;
}

bool mc_microbatches_update(mc_microbatches_t *c, int64_t consumed_samples)
{
    const int old = c->current_global_batch_size;
    if (c->n_steps) { /* _get_batch_size_for_samples */
        c->current_global_batch_size = c->step_size[0];
        for (int i = 0; i < c->n_steps && consumed_samples >= c->step_samples[i]; i++)
            c->current_global_batch_size = c->step_size[i];
    } else if (!c->start || consumed_samples > c->rampup_samples) {
        c->current_global_batch_size = c->global_batch_size;
    } else {
        /* int(consumed_samples / rampup_samples_per_increment): a float division, truncated */
        const int64_t steps = (int64_t)((double)consumed_samples / c->samples_per_increment);
        c->current_global_batch_size = c->start + (int)steps * c->increment;
    }
    c->num_microbatches = c->current_global_batch_size / c->micro_batch_times_dp;
    return old != c->current_global_batch_size;
}

int mc_microbatches_check(const mc_microbatches_t *c, const mc_args_t *a, char *err, size_t n)
{
    if (c->current_global_batch_size % c->micro_batch_times_dp == 0) return 0;
    if (c->n_steps && c->num_microbatches < 1) /* setup_model_and_optimizer's assertion */
        return mc_errf(err, n,
                       "current global batch size (%d) is too small for micro_batch_size (%d) * "
                       "data_parallel_size (%d) = %d: the world size cannot accommodate the "
                       "batch size (" SCHED "; fewer ranks or a smaller --micro-batch-size)",
                       c->current_global_batch_size, a->micro_batch_size, a->data_parallel_size,
                       c->micro_batch_times_dp);
    if (c->n_steps)
        return mc_errf(err, n,
                       "current global batch size (%d) is not divisible by micro_batch_size (%d) "
                       "* data_parallel_size (%d) (" SCHED " reaches it; choose batch sizes "
                       "divisible by it)",
                       c->current_global_batch_size, a->micro_batch_size, a->data_parallel_size);
    return mc_errf(err, n,
                   "current global batch size (%d) is not divisible by micro-batch-size (%d) "
                   "times data parallel size (%d) (--rampup-batch-size %d %d %lld reaches it; "
                   "choose a start and increment divisible by it)",
                   c->current_global_batch_size, a->micro_batch_size, a->data_parallel_size,
                   c->start, c->increment, (long long)c->rampup_samples);
}

int64_t mc_microbatches_seek(mc_microbatches_t *c, int64_t iteration)
{
    const bool vary = mc_microbatches_vary(c);
    int64_t consumed = vary ? 0 : iteration * c->global_batch_size;
    for (int64_t it = 0; vary && it < iteration; it++) {
        mc_microbatches_update(c, consumed);
        consumed += c->current_global_batch_size;
    }
    mc_microbatches_update(c, consumed);
    return consumed;
}

int64_t mc_microbatches_train_iters(const mc_microbatches_t *c, int64_t train_samples)
{
    mc_microbatches_t r = *c;
    int64_t iterations = 0, consumed = 0;
    if (c->n_steps) {
        for (; consumed < train_samples; iterations++) {
            mc_microbatches_update(&r, consumed);
            consumed += r.current_global_batch_size;
        }
        return iterations;
    }
    if (!c->start) return train_samples / c->global_batch_size;
    while (consumed <= r.rampup_samples && consumed <= train_samples) {
        mc_microbatches_update(&r, consumed);
        consumed += r.current_global_batch_size;
        iterations++;
    }
    if (train_samples > consumed) iterations += (train_samples - consumed) / r.global_batch_size;
    return iterations;
}
