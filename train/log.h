/* Megatron's text output (MEGATRON.md section 8): the per-interval training line
 * (training.py:training_log on main) and the validation block (evaluate_and_print_results).
 *
 * Python's format specs map to printf: {:.6E} -> %.6E, {:.3f} -> %.3f, {:8d} -> %8lld. Both round
 * the exact binary value half-to-even and print at least two exponent digits; NaN is printed
 * without a sign, as Python does ("NAN" for E formats, "nan" for f formats); '{}' of a float is
 * Python's repr (base/py_float.h). Which values are float32 and how they are summed: train/README.md,
 * "The log line". */
#ifndef MC_TRAIN_LOG_H
#define MC_TRAIN_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>


/* The fields hold the type of the value Megatron formats: float where training_log gets a Python
 * float made from a float32 tensor (.item()), double where it gets a Python float computed in
 * double; the formatter prints the double the value converts to, as Python does. */
#define MC_LOG_MAX_LOSSES 8

typedef struct {
    int64_t iteration, train_iters, consumed_samples;
    int64_t skipped_samples; /* ' skipped samples' appears only when > 0 */
    double elapsed_ms_per_iter;
    int has_throughput; /* --log-throughput */
    double tflops_per_gpu;
    int has_lr; /* learning rate is omitted when None */
    float lr;   /* reduce_max_stat_across_model_parallel_group: a float32 tensor's .item() */
    /* --decoupled-lr: the embedding and output layer's group, printed by the first and last
     * pipeline stages (the last rank prints the line); core_v0.15's field (main dropped it),
     * the param group's Python float */
    int has_decoupled_lr;
    double decoupled_lr;
    int global_batch_size;
    int n_losses; /* a loss whose average is not >= 0 (or NaN) is left out */
    const char *loss_names[MC_LOG_MAX_LOSSES]; /* lm loss, then the MoE losses */
    double loss_values[MC_LOG_MAX_LOSSES];     /* mc_log_average of the float32 totals */
    float loss_scale;  /* optimizer.get_loss_scale().item(): a float32 tensor */
    int has_grad_norm; /* None on a skipped step */
    float grad_norm;   /* reduce_max_stat_across_model_parallel_group: float32 */
    int has_num_zeros; /* --log-num-zeros-in-grad */
    float num_zeros;   /* reduced as grad_norm (float32), printed as Python's str(float): "12.0" */
    int has_params_norm;          /* --log-params-norm */
    double params_norm;           /* mc_log_params_norm: norm_2.item() ** 0.5 */
    int skipped_iters, nan_iters; /* counts within the interval */
} mc_log_line_t;

/* Writes the line without a trailing newline, starting with the timestamp " [YYYY-mm-dd
 * HH:MM:SS.ffffff]" of `when` in local time (microseconds truncated, as datetime.now()).
 * Returns the length of the full line, like snprintf (>= n means it was truncated). */
int mc_format_log_line(char *buf, size_t n, const mc_log_line_t *l, const struct timespec *when);

/* The validation block: a line of '-' (length of the text line + 1), the line
 * " validation loss at <label> | <name> value: %.6E | <name> PPL: %.6E | " for each value (the
 * float32 numerator / denominator of evaluate(); PPL math.exp(min(20, value)) in double), and the
 * dashes again, each followed by '\n'. `label` is what follows "at": "iteration 25",
 * "iteration 50 on validation set", "iteration 50 on test set". PPL = exp(min(20, loss)).
 * Returns the length of the full block, like snprintf. */
int mc_format_eval_block(char *buf, size_t n, const char *label, const char **names,
                         const float *values, int n_values);

/* Megatron's arithmetic behind the printed losses and norms: float32 where it holds float32
 * tensors, in its order (train/README.md, "The log line").
 *
 * loss_func's report per microbatch, [torch.sum(losses * mask), num_tokens] in float32 (the
 * masked sum, formed in double here, rounded once: the device reduction's order is not
 * reproducible), summed over the microbatches in their order in float32 (train_step's
 * torch.vstack(val).sum(dim=0)). */
void mc_log_loss_report(const double *mb_sums, const double *mb_tokens, int M, float pair[2]);

/* loss_reduced['lm loss'] = val[0] / val[1] of the pair reduced over dp-cp, in float32 (0/0 is
 * NaN, as in Megatron: the line then leaves the loss out). */
float mc_log_loss_ratio(const float pair[2]);

/* training_log's avg = total_loss_dict[key].item() / float(max(1, advanced)): the float32 total
 * over the interval divided in double. */
double mc_log_average(float total, int advanced);

/* calc_params_l2_norm: a rank's _compute_norm_2 (multi_tensor_l2norm's float32 norm, squared in
 * float32) of its sum of squares ... */
float mc_log_norm_2(double sumsq);
/* ... and, of the float32 total over the ranks, norm_2.item() ** 0.5 in double. */
double mc_log_params_norm(float total_norm_2);

#endif
