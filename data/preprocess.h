/* `megatron-c preprocess-data`: Megatron's tools/preprocess_data.py (MEGATRON.md section 10).
 *
 * Each line of the input (JSON lines, gzip read through zlib) is one document. For every
 * --json-keys key the value is tokenized as one sequence (a list of strings gives one sequence
 * per non-empty string, as Megatron's Encoder.encode does); --append-eod adds the tokenizer's eod
 * to a non-empty document; an empty document still gets a document entry. The output, per key,
 * is {output_prefix}_{key}_document.bin/.idx with dtype optimal_dtype(vocab_size), byte-identical
 * to Megatron's for the same input and flags.
 *
 * Pipeline (bounded memory, input order kept): a reader thread cuts the input into chunks of
 * lines; --workers threads parse and tokenize whole chunks; the calling thread writes the
 * chunks strictly in order. Lines are parsed by a one-pass validating scanner (json.loads'
 * grammar, NaN/Infinity included) that hands the wanted strings to the tokenizer without
 * copying; anything unusual or wrong goes to jansson, which decides and words the error. Chunks live in a fixed ring, so memory does not grow with the
 * input (only with its longest line).
 *
 * Where megatron-c differs from the script, on purpose:
 * - A line that is not a JSON object with a string (or list of strings) under every key, or
 *   that the tokenizer refuses, stops the run with one line naming the file and its 1-based line
 *   number (Megatron dies with a Python traceback). A blank line is such a line (json.loads('')
 *   raises in Megatron too). --skip-malformed (extension) skips those lines instead, counts them
 *   and reports the count and the first one at the end.
 * - Lines end at '\n' only (Python's text mode would also split at a lone '\r').
 * - --max-documents stops after that many documents whenever it is given (Megatron applies it
 *   only with --find-optimal-num-workers, default 100000).
 * - .gz is decompressed with --partitions 1 too (the script opens that file as text).
 * - --partitions N: the files the --input glob matches, in sorted order (Python's glob order
 *   is the directory's), are dealt line by line to N partitions, round-robin or, with
 *   --keep-sequential-samples, in N consecutive runs of ceil(lines/N) lines, as the script
 *   does; partition i is written to {prefix}_{i}_{key}_document, merged into the final name
 *   with add_index, then removed. The script's per-partition copies of the input
 *   ({input}_{i}.jsonl) are not written (nor reused when they exist). A glob matching nothing is
 *   an error. All --workers threads serve every partition (one pipeline).
 * - Every key's .idx is written (the partitions == 1 path of some script versions finalises
 *   only the last key).
 * Outputs are written under temporary names and renamed at the end; after any error no file
 * exists at a final name and no temporary file is left. */
#ifndef MC_DATA_PREPROCESS_H
#define MC_DATA_PREPROCESS_H

#include <stddef.h>

#include "cli/preprocess_args.h"

/* Entry point of `megatron-c preprocess-data`; argv[0] is "preprocess-data". Returns 0 on
 * success; errors exit 2 with one line (mc_user_error). */
int mc_preprocess_main(int argc, char **argv);

/* Runs the pipeline for parsed arguments. Returns 0; errors exit 2 after cleaning up. */
int mc_preprocess_run(const mc_preprocess_args_t *a);

#endif
