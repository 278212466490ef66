/* `megatron-c inspect-data`: the datasets training would build, printed.
 *
 * Takes training's command line (the data, tokenizer and batch flags decide the datasets:
 * --data-path/--split or the per-split paths or --mock-data, --seq-length, --seed,
 * --train-iters/--train-samples, --global-batch-size, --eval-interval, --eval-iters, ...),
 * builds every split with mc_data_source_open exactly as training does, and prints:
 *
 *   # samples: train=N valid=N test=N        (len(dataset); 0 = no dataset for the split)
 *   then one line per sample i of --split-name (default train) in --samples A:B (default 0:10):
 *   i<TAB>ids     the seq_length + 1 ids of the sample's text (tokens = text[:-1], labels =
 *                 text[1:]), single spaces; a pad (-1) only ends a partial validation sample
 *   i<TAB>text    the ids decoded by the tokenizer, '\' written "\\" and newline "\n", other
 *                 bytes as they are (invalid UTF-8 included); trailing pads left out
 *   i<TAB>sha256  lowercase hex SHA-256 of the ids as little-endian int64
 *
 * With --iteration I (0-based), instead of the sample lines: one line per microbatch of
 * iteration I of data-parallel rank --data-parallel-rank R (default 0) of
 * --data-parallel-size D (default 1): "m<TAB>global train-sample indices" (Megatron's
 * MegatronPretrainingSampler, consumed_samples = I x global batch size; MEGATRON.md 2.9).
 *
 * cli/inspect_args.c reads the command line (inspect-data's own options and training's table in
 * one parser) and validates the training arguments with world size D (tensor/pipeline/context
 * parallel sizes are 1, so dp = D). Model-shape and optimizer flags that training requires
 * (--num-layers, --hidden-size, --num-attention-heads, --max-position-embeddings, --lr;
 * --micro-batch-size when --global-batch-size is given and there is no --iteration) may be given
 * as in training but are not required: they do not change the datasets. Every problem is one
 * line and exit 2 (mc_user_error). */
#ifndef MC_DATA_INSPECT_H
#define MC_DATA_INSPECT_H

#include <stdbool.h>
#include <stdint.h>

#include "config/microbatches.h"
#include "data/source.h"

enum { MC_INSPECT_IDS, MC_INSPECT_TEXT, MC_INSPECT_SHA256 };

/* inspect-data's own options, checked against each other (cli/inspect_args.c). */
typedef struct {
    int split;          /* MC_SPLIT_TRAIN, ...: --split-name */
    int format;         /* MC_INSPECT_*: --format */
    bool samples_given; /* --samples A:B; ":B" and "A:" leave one out */
    bool begin_given, end_given;
    int64_t begin, end;
    bool iteration_given; /* --iteration I of --data-parallel-rank R */
    int64_t iteration, dp_rank;
    /* the training arguments the sampler follows: --train-iters, the micro batch, dp and the
     * global batch of every iteration (--rampup-batch-size) */
    int64_t train_iters;
    int micro_batch_size, data_parallel_size;
    mc_microbatches_t batches;
} mc_inspect_opts_t;

extern const char *const mc_inspect_split_names[3]; /* "train", "valid", "test" */

/* Builds the datasets of dc and prints what o asks. Returns 0; errors exit (2 for the user's, 1
 * for a read error). */
int mc_inspect_run(const mc_data_config_t *dc, const mc_inspect_opts_t *o);

#endif
