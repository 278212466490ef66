/* Megatron's log line and validation block (MEGATRON.md section 8). */
#include "train/log.h"

#include "base/py_float.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Appends to a bounded buffer and keeps counting past its end, so the caller gets snprintf's
 * "length of the whole text" even when the buffer is too small. */
typedef struct {
    char *buf;
    size_t cap, len;
} out_t;

__attribute__((format(printf, 2, 3))) static void put(out_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int k = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (k > 0) o->len += (size_t)k;
}

/* Python '{:.6E}': C's %.6E except that NaN has no sign ("NAN"). */
static void put_E6(out_t *o, double v)
{
    if (isnan(v)) put(o, "NAN");
    else put(o, "%.6E", v);
}

/* Python '{:.Nf}': C's %.Nf except that NaN has no sign ("nan"). */
static void put_f(out_t *o, int prec, double v)
{
    if (isnan(v)) put(o, "nan");
    else put(o, "%.*f", prec, v);
}

static int finish(out_t *o)
{
    if (o->cap) o->buf[o->len < o->cap ? o->len : o->cap - 1] = '\0';
    return (int)o->len;
}

int mc_format_log_line(char *buf, size_t n, const mc_log_line_t *l, const struct timespec *when)
{
    out_t o = {buf, n, 0};
    if (n) buf[0] = '\0';

    /* f" [{datetime.now().strftime('%Y-%m-%d %H:%M:%S.%f')}]" */
    struct tm tm;
    time_t sec = when->tv_sec;
    localtime_r(&sec, &tm);
    char ts[64];
    strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tm);
    put(&o, " [%s.%06ld]", ts, (long)(when->tv_nsec / 1000));

    put(&o, " iteration %8lld/%8lld |", (long long)l->iteration, (long long)l->train_iters);
    put(&o, " consumed samples: %12lld |", (long long)l->consumed_samples);
    if (l->skipped_samples > 0)
        put(&o, " skipped samples: %12lld |", (long long)l->skipped_samples);
    put(&o, " elapsed time per iteration (ms): ");
    put_f(&o, 1, l->elapsed_ms_per_iter);
    put(&o, " |");
    if (l->has_throughput) {
        put(&o, " throughput per GPU (TFLOP/s/GPU): ");
        put_f(&o, 1, l->tflops_per_gpu);
        put(&o, " |");
    }
    if (l->has_lr) {
        put(&o, " learning rate: ");
        put_E6(&o, l->lr);
        put(&o, " |");
    }
    if (l->has_decoupled_lr) {
        put(&o, " decoupled learning rate: ");
        put_E6(&o, l->decoupled_lr);
        put(&o, " |");
    }
    put(&o, " global batch size: %5d |", l->global_batch_size);
    for (int i = 0; i < l->n_losses && i < MC_LOG_MAX_LOSSES; i++) {
        if (!(l->loss_values[i] >= 0.0)) continue; /* `if avg >= 0.0` */
        put(&o, " %s: ", l->loss_names[i]);
        put_E6(&o, l->loss_values[i]);
        put(&o, " |");
    }
    put(&o, " loss scale: ");
    put_f(&o, 1, l->loss_scale);
    put(&o, " |");
    if (l->has_grad_norm) {
        put(&o, " grad norm: ");
        put_f(&o, 3, l->grad_norm);
        put(&o, " |");
    }
    if (l->has_num_zeros) { /* f' num zeros: {num_zeros_in_grad} |' of a Python float */
        char repr[40];
        mc_py_float_repr(l->num_zeros, repr, sizeof(repr));
        put(&o, " num zeros: %s |", repr);
    }
    if (l->has_params_norm) {
        put(&o, " params norm: ");
        put_f(&o, 3, l->params_norm);
        put(&o, " |");
    }
    put(&o, " number of skipped iterations: %3d |", l->skipped_iters);
    put(&o, " number of nan iterations: %3d |", l->nan_iters);
    return finish(&o);
}

int mc_format_eval_block(char *buf, size_t n, const char *label, const char **names,
                         const float *values, int n_values)
{
    /* The text line first, into a scratch writer that only measures it. */
    out_t line = {NULL, 0, 0};
    out_t o = {buf, n, 0};
    if (n) buf[0] = '\0';
    for (int pass = 0; pass < 2; pass++) {
        out_t *w = pass == 0 ? &line : &o;
        if (pass == 1) {
            for (size_t i = 0; i < line.len + 1; i++) put(w, "-");
            put(w, "\n");
        }
        put(w, " validation loss at %s | ", label);
        for (int i = 0; i < n_values; i++) {
            double v = values[i];
            double ppl = exp(v < 20 ? v : 20); /* math.exp(min(20, v)): NaN gives exp(20) */
            put(w, "%s value: ", names[i]);
            put_E6(w, v);
            put(w, " | %s PPL: ", names[i]);
            put_E6(w, ppl);
            put(w, " | ");
        }
        if (pass == 1) {
            put(w, "\n");
            for (size_t i = 0; i < line.len + 1; i++) put(w, "-");
            put(w, "\n");
        }
    }
    return finish(&o);
}

void mc_log_loss_report(const double *mb_sums, const double *mb_tokens, int M, float pair[2])
{
    pair[0] = pair[1] = 0.0f;
    for (int i = 0; i < M; i++) {
        pair[0] += (float)mb_sums[i];
        pair[1] += (float)mb_tokens[i]; /* an int count, exact in float32 below 2^24 */
    }
}

float mc_log_loss_ratio(const float pair[2]) { return pair[0] / pair[1]; }

double mc_log_average(float total, int advanced)
{
    return (double)total / (double)(advanced > 1 ? advanced : 1);
}

float mc_log_norm_2(double sumsq)
{
    const float norm = sqrtf((float)sumsq);
    return norm * norm;
}

double mc_log_params_norm(float total_norm_2) { return sqrt((double)total_norm_2); }
