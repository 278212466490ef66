/* `megatron-c inspect-data`: the datasets training would build, printed.
 *
 * Takes training's command line (the data, tokenizer and batch flags decide the datasets:
 * --data-path/--split or the per-split paths or --mock-data, --seq-length, --seed,
 * --train-iters/--train-samples, --global-batch-size, --eval-interval, --eval-iters, ...),
 * builds every split with mc_data_source_open exactly as training does, and prints:
 *
 *   # samples: train=N valid=N test=N        (len(dataset); 0 = no dataset for the split;
 *                                             "unbounded" with --mock-data)
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
 * Inspect-only options are taken out of argv first; the rest goes to mc_args_parse with world
 * size D (tensor/pipeline/context parallel sizes are 1, so dp = D). Model-shape and optimizer
 * flags that training requires (--num-layers, --hidden-size, --num-attention-heads,
 * --max-position-embeddings, --lr; --micro-batch-size when --global-batch-size is given and
 * there is no --iteration) may be given as in training but are not required: they do not
 * change the datasets. Every problem is one line and exit 2 (mc_user_error). */
#ifndef MC_DATA_INSPECT_H
#define MC_DATA_INSPECT_H

/* Entry point; argv[0] is "inspect-data". Returns 0; errors exit (2 for the user's, 1 for a
 * read error). */
int mc_inspect_main(int argc, char **argv);

#endif
