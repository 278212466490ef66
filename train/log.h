/* Megatron's text output (MEGATRON.md section 8): the per-interval training line
 * (training.py:training_log on main) and the validation block (evaluate_and_print_results).
 *
 * Python's format specs map to printf: {:.6E} -> %.6E, {:.3f} -> %.3f, {:8d} -> %8lld. Both round
 * the exact binary value half-to-even and print at least two exponent digits; NaN is printed
 * without a sign, as Python does ("NAN" for E formats, "nan" for f formats). */
#ifndef MC_TRAIN_LOG_H
#define MC_TRAIN_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>


typedef struct {
    int64_t iteration, train_iters, consumed_samples;
    int64_t skipped_samples; /* ' skipped samples' appears only when > 0 */
    double elapsed_ms_per_iter;
    int has_throughput; /* --log-throughput */
    double tflops_per_gpu;
    int has_lr; /* learning rate is omitted when None */
    double lr;
    /* --decoupled-lr: the embedding and output layer's group, printed by the first and last
     * pipeline stages (the last rank prints the line) */
    int has_decoupled_lr;
    double decoupled_lr;
    int global_batch_size;
    int n_losses; /* a loss whose average is not >= 0 (or NaN) is left out */
    const char *loss_names[4];
    double loss_values[4];
    double loss_scale;
    int has_grad_norm; /* None on a skipped step */
    double grad_norm;
    int has_num_zeros; /* --log-num-zeros-in-grad */
    long num_zeros;
    int has_params_norm; /* --log-params-norm */
    double params_norm;
    int skipped_iters, nan_iters; /* counts within the interval */
} mc_log_line_t;

/* Writes the line without a trailing newline, starting with the timestamp " [YYYY-mm-dd
 * HH:MM:SS.ffffff]" of `when` in local time (microseconds truncated, as datetime.now()).
 * Returns the length of the full line, like snprintf (>= n means it was truncated). */
int mc_format_log_line(char *buf, size_t n, const mc_log_line_t *l, const struct timespec *when);

/* The validation block: a line of '-' (length of the text line + 1), the line
 * " validation loss at <label> | <name> value: %.6E | <name> PPL: %.6E | " for each value, and the
 * dashes again, each followed by '\n'. `label` is what follows "at": "iteration 25",
 * "iteration 50 on validation set", "iteration 50 on test set". PPL = exp(min(20, loss)).
 * Returns the length of the full block, like snprintf. */
int mc_format_eval_block(char *buf, size_t n, const char *label, const char **names,
                         const double *values, int n_values);

#endif
