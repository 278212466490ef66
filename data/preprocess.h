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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The options of `megatron-c preprocess-data` (Megatron's tools/preprocess_data.py flags),
 * filled by cli/preprocess_args.c. */
typedef struct {
    /* input data */
    const char *input;      /* required; a glob when partitions > 1 */
    const char **json_keys; /* default {"text"}; duplicates removed (Megatron keys a
                             * dict by them, so a repeated key is one output) */
    int n_json_keys;
    bool split_sentences; /* not implemented yet (needs NLTK punkt) */
    bool keep_newlines;   /* not implemented yet */
    /* tokenization process */
    bool append_eod;
    const char *lang; /* "english"; only used by sentence splitting */
    /* output data */
    const char *output_prefix; /* required */
    /* runtime */
    int workers;                   /* required, >= 1, divisible by partitions */
    bool find_optimal_num_workers; /* not implemented yet */
    int partitions;                /* 1 */
    int64_t log_interval;          /* 1000 */
    bool keep_sequential_samples;
    int64_t max_documents; /* -1: no limit (see preprocess.h for the semantics) */
    /* tokenizer */
    const char *tokenizer_type; /* required (Megatron's default None crashes the script) */
    const char *vocab_file;
    const char *merge_file;
    int64_t vocab_size;           /* -1: not given */
    const char *tokenizer_model;  /* HuggingFaceTokenizer's directory, TikTokenizer's JSON, the
                                  * SentencePiece types' .model */
    int64_t vocab_extra_ids;      /* legacy SentencePieceTokenizer's <extra_id_N> */
    bool legacy_tokenizer;        /* Megatron's legacy tokenizer classes */
    const char *tiktoken_pattern; /* NULL: not given */
    int64_t tiktoken_num_special_tokens;        /* 1000 */
    const char *const *tiktoken_special_tokens; /* NULL: not given */
    int n_tiktoken_special_tokens;
    /* megatron-c extension */
    bool skip_malformed;
} mc_preprocess_args_t;

/* Runs the pipeline for parsed arguments. Returns 0; errors exit 2 after cleaning up. */
int mc_preprocess_run(const mc_preprocess_args_t *a);

#endif
