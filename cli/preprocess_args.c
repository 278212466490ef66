/* `megatron-c preprocess-data` flags: tools/preprocess_data.py's arguments (and the tokenizer
 * arguments it takes from Megatron's _add_tokenizer_args) as a flag table, read by the shared
 * parser with the script's abbreviations, and the checks the script makes (or would crash
 * without). */
#include "cli/preprocess_args.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cli/cli.h"
#include "config/flags_table.h"
#include "data/tokenizer.h"

#define OPT(x) FIELD_OF(mc_preprocess_args_t, x)
#define REF(x) REF_OF(mc_preprocess_args_t, x)
#define TOK .group = "tokenizer"
#define INPUT .group = "input data"
#define TOKENIZE .group = "tokenization process"
#define OUTPUT .group = "output data"
#define RUNTIME .group = "runtime"

/* Megatron's order: the tokenizer group first (_add_tokenizer_args is called before the
 * script's own groups), then input data, tokenization process, output data, runtime. */
static const mc_flag_t FLAGS[] = {
    MC_FLAG_HELP_ROW(""),
    {.name = "--tokenizer-type",
     TOK,
     STRING,
     REF(tokenizer_type),
     .required = 4,
     IMPLEMENTED,
     .help = "What type of tokenizer to use (GPT2BPETokenizer, NullTokenizer, "
             "HuggingFaceTokenizer, TikTokenizer, SentencePieceTokenizer, "
             "GPTSentencePieceTokenizer, Llama2Tokenizer)."},
    {.name = "--vocab-file",
     TOK,
     STRING,
     REF(vocab_file),
     IMPLEMENTED,
     .help = "Path to the vocab file."},
    {.name = "--merge-file",
     TOK,
     STRING,
     REF(merge_file),
     IMPLEMENTED,
     .help = "Path to the BPE merge file."},
    {.name = "--vocab-size",
     TOK,
     INT64,
     OPT(vocab_size),
     .none = "-1",
     IMPLEMENTED,
     .help = "Size of vocab before EOD or padding (NullTokenizer, TikTokenizer)."},
    {.name = "--tokenizer-model",
     TOK,
     STRING,
     REF(tokenizer_model),
     IMPLEMENTED_NOTE("HuggingFaceTokenizer's directory (tokenizer.json), TikTokenizer's JSON, "
                      "the SentencePiece types' .model file"),
     .help = "Sentencepiece tokenizer model."},
    {.name = "--vocab-extra-ids",
     TOK,
     INT64,
     OPT(vocab_extra_ids),
     .def = "0",
     IMPLEMENTED_NOTE("the legacy SentencePieceTokenizer's <extra_id_N> tokens (with "
                      "--legacy-tokenizer); Megatron's default tokenizers ignore it"),
     .help = "Number of additional vocabulary tokens. They are used for span masking in the T5 "
             "model"},
    {.name = "--legacy-tokenizer",
     TOK,
     TRUE_IF_GIVEN,
     OPT(legacy_tokenizer),
     IMPLEMENTED_NOTE("the legacy classes' ids: HuggingFaceTokenizer adds its post-processor's "
                      "special tokens (BOS), the SentencePiece types follow data/tokenizer_sp.h; "
                      "the same ids for GPT-2 and Null. Megatron core_v0.15.0's own script fails "
                      "with it: its Encoder never sets the tokenizer it builds"),
     .help = "Use Megatron's legacy tokenizer classes."},
    {.name = "--tiktoken-pattern",
     TOK,
     STRING,
     REF(tiktoken_pattern),
     IMPLEMENTED,
     .help = "Which tiktoken pattern to use. Options: [v1, v2]"},
    {.name = "--tiktoken-num-special-tokens",
     TOK,
     INT64,
     OPT(tiktoken_num_special_tokens),
     .def = "1000",
     IMPLEMENTED,
     .help = "Number of special tokens in tiktoken tokenizer."},
    {.name = "--tiktoken-special-tokens",
     TOK,
     LIST(-1),
     IMPLEMENTED,
     .help = "List of tiktoken special tokens (must include <unk>, <s>, </s>)."},
    {.name = "--input",
     INPUT,
     STRING,
     REF(input),
     .required = 1,
     IMPLEMENTED,
     .help = "Path to input JSON lines (.gz read through zlib); a glob when --partitions > 1."},
    {.name = "--json-keys",
     INPUT,
     LIST(-1),
     .def = "['text']",
     IMPLEMENTED,
     .help = "space separate listed of keys to extract from json"},
    {.name = "--split-sentences",
     INPUT,
     TRUE_IF_GIVEN,
     OPT(split_sentences),
     TODO("sentence splitting needs NLTK's punkt models"),
     .help = "Split documents into sentences."},
    {.name = "--keep-newlines",
     INPUT,
     TRUE_IF_GIVEN,
     OPT(keep_newlines),
     TODO("sentence splitting needs NLTK's punkt models"),
     .help = "Keep newlines between sentences when splitting."},
    {.name = "--append-eod",
     TOKENIZE,
     TRUE_IF_GIVEN,
     OPT(append_eod),
     IMPLEMENTED,
     .help = "Append an <eod> token to the end of a document."},
    {.name = "--lang",
     TOKENIZE,
     STRING,
     REF(lang),
     .def = "english",
     IMPLEMENTED,
     .help = "Language to use for NLTK-powered sentence splitting."},
    {.name = "--output-prefix",
     OUTPUT,
     STRING,
     REF(output_prefix),
     .required = 2,
     IMPLEMENTED,
     .help = "Path to binary output file without suffix"},
    {.name = "--workers",
     RUNTIME,
     INT,
     OPT(workers),
     .required = 3,
     IMPLEMENTED,
     .help = "Number of tokenizing threads (Megatron: worker processes)."},
    {.name = "--find-optimal-num-workers",
     RUNTIME,
     TRUE_IF_GIVEN,
     OPT(find_optimal_num_workers),
     TODO(NULL),
     .help = "Find optimal number of workers."},
    {.name = "--workers-to-check",
     RUNTIME,
     INT_LIST(-1),
     .def = "[16, 32, 64]",
     TODO(NULL),
     .help = "list of workers to run data processing with (--find-optimal-num-workers)."},
    {.name = "--max-documents",
     RUNTIME,
     INT64,
     OPT(max_documents),
     .none = "-1",
     IMPLEMENTED,
     .help = "Stop after this many documents (megatron-c: always; Megatron: only with "
             "--find-optimal-num-workers, default 100000)."},
    {.name = "--partitions",
     RUNTIME,
     INT,
     OPT(partitions),
     .def = "1",
     IMPLEMENTED,
     .help = "Number of file partitions"},
    {.name = "--log-interval",
     RUNTIME,
     INT64,
     OPT(log_interval),
     .def = "1000",
     IMPLEMENTED,
     .help = "Interval between progress updates"},
    {.name = "--keep-sequential-samples",
     RUNTIME,
     TRUE_IF_GIVEN,
     OPT(keep_sequential_samples),
     IMPLEMENTED,
     .help = "Ensure ordering of samples in .jsonl files is preserved when using partitions>1."},
    {.name = "--skip-malformed",
     .group = "megatron-c",
     TRUE_IF_GIVEN,
     OPT(skip_malformed),
     IMPLEMENTED,
     .help = "Skip lines that are not a JSON object with a string (or list of strings) under "
             "every key, count them and report the count, instead of stopping at the first."},
};

/* Megatron's --tokenizer-type choices; the first four and the SentencePiece ones are
 * implemented. */
enum { N_IMPLEMENTED = 4 };
static const char *const TOKENIZERS[] = {"GPT2BPETokenizer",
                                         "NullTokenizer",
                                         "HuggingFaceTokenizer",
                                         "TikTokenizer",
                                         "BertWordPieceLowerCase",
                                         "BertWordPieceCase",
                                         "SentencePieceTokenizer",
                                         "GPTSentencePieceTokenizer",
                                         "Llama2Tokenizer",
                                         "MultimodalTokenizer",
                                         "NullMultimodalTokenizer",
                                         "SFTTokenizer",
                                         NULL};

static mc_cli_t command(mc_preprocess_args_t *a)
{
    return (mc_cli_t){.prog = "megatron-c preprocess-data",
                      .sets = {{FLAGS, sizeof(FLAGS) / sizeof(FLAGS[0]), a}},
                      .nsets = 1,
                      .allow_abbrev = true, /* argparse's default, which the script keeps */
                      .help = mc_preprocess_args_help};
}

const char *mc_preprocess_flag_resolve(const char *name, bool *ambiguous)
{
    mc_cli_t c = command(NULL);
    const mc_flag_t *f = mc_cli_resolve(&c, name, ambiguous);
    return f ? f->name : NULL;
}

const char *mc_preprocess_flag_suggest(const char *name)
{
    mc_cli_t c = command(NULL);
    return mc_cli_suggest(&c, name);
}

void mc_preprocess_args_help(FILE *f)
{
    fprintf(f, "usage: megatron-c preprocess-data --input INPUT --output-prefix PREFIX "
               "--workers N --tokenizer-type TYPE [options]\n\n"
               "Megatron's tools/preprocess_data.py: JSON lines to "
               "{PREFIX}_{KEY}_document.bin/.idx.\n");
    mc_flag_set_t set = {FLAGS, sizeof(FLAGS) / sizeof(FLAGS[0]), NULL};
    mc_cli_print_flags(f, &set);
}

static void need_int_range(const char *name, int64_t v, int64_t lo, int64_t hi)
{
    if (v < lo) mc_user_error("%s must be >= %lld (got %lld)", name, (long long)lo, (long long)v);
    if (v > hi) mc_user_error("%s must be <= %lld (got %lld)", name, (long long)hi, (long long)v);
}

static void check_tokenizer(const mc_preprocess_args_t *a)
{
    char b[MC_SHOWN_MAX + 4];
    const char *t = a->tokenizer_type;
    int k = -1;
    for (int i = 0; TOKENIZERS[i]; i++)
        if (strcmp(TOKENIZERS[i], t) == 0) k = i;
    if (k < 0) {
        const char *near =
            mc_flag_closest(t, TOKENIZERS, sizeof(TOKENIZERS) / sizeof(TOKENIZERS[0]) - 1);
        if (near)
            mc_user_error("argument --tokenizer-type: invalid choice: '%s' (did you mean %s?)",
                          mc_shown(t, b), near);
        mc_user_error("argument --tokenizer-type: invalid choice: '%s' (choose from "
                      "GPT2BPETokenizer, NullTokenizer, ...)",
                      mc_shown(t, b));
    }
    const bool sp = mc_tokenizer_is_sentencepiece(t);
    if (k >= N_IMPLEMENTED && !sp)
        mc_user_error("--tokenizer-type %s is not implemented yet in megatron-c (implemented: "
                      "GPT2BPETokenizer, NullTokenizer, HuggingFaceTokenizer, TikTokenizer, "
                      "SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer)",
                      t);
    if (sp && (!a->tokenizer_model || !*a->tokenizer_model))
        mc_user_error("--tokenizer-type %s needs --tokenizer-model FILE.model", t);
    need_int_range("--vocab-extra-ids", a->vocab_extra_ids, 0, 1000000);
    if (k == 0 && (!a->vocab_file || !a->merge_file))
        mc_user_error("--tokenizer-type GPT2BPETokenizer needs --vocab-file and --merge-file");
    if (k == 1 && a->vocab_size < 0)
        mc_user_error("--tokenizer-type NullTokenizer needs --vocab-size");
    if (k >= 2 && !a->tokenizer_model)
        mc_user_error("--tokenizer-type %s needs --tokenizer-model", t);
    if (k == 3 && (!a->tiktoken_pattern || (strcmp(a->tiktoken_pattern, "v1") != 0 &&
                                            strcmp(a->tiktoken_pattern, "v2") != 0)))
        mc_user_error("--tokenizer-type TikTokenizer needs --tiktoken-pattern v1 or v2");
}

/* --json-keys, duplicates removed (Megatron keys a dict by them, so a repeated key is one
 * output); default {"text"}. */
static void json_keys(mc_preprocess_args_t *a, const mc_flag_seen_t *s)
{
    static const char *const def_keys[] = {"text"};
    const char *const *given = s->given ? s->values : def_keys;
    const int nv = s->given ? s->nvalues : 1;
    if (!(a->json_keys = calloc((size_t)nv, sizeof(*a->json_keys)))) mc_fatal("out of memory");
    for (int v = 0; v < nv; v++) {
        bool dup = false;
        for (int j = 0; j < a->n_json_keys; j++) dup |= strcmp(a->json_keys[j], given[v]) == 0;
        if (!dup) a->json_keys[a->n_json_keys++] = given[v];
    }
    for (int k = 0; k < a->n_json_keys; k++)
        if (a->json_keys[k][0] == '\0') mc_user_error("--json-keys: a key must not be empty");
}

void mc_preprocess_args_parse(mc_preprocess_args_t *a, int argc, char **argv)
{
    memset(a, 0, sizeof(*a));
    mc_cli_t c = command(a);
    mc_cli_defaults(&c);
    mc_flag_seen_t *seen = mc_cli_parse(&c, argc, argv);
    for (size_t k = 0; k < sizeof(FLAGS) / sizeof(FLAGS[0]); k++)
        if (seen[k].given && FLAGS[k].status == MC_FLAG_NOT_IMPLEMENTED) {
            if (FLAGS[k].note)
                mc_user_error("%s is not implemented yet in megatron-c (%s)", FLAGS[k].name,
                              FLAGS[k].note);
            mc_user_error("%s is not implemented yet in megatron-c", FLAGS[k].name);
        }
    need_int_range("--workers", a->workers, 1, 4096);
    const bool max_given = mc_cli_seen(&c, seen, "--max-documents")->given;
    need_int_range("--max-documents", a->max_documents, max_given ? 0 : -1, INT64_MAX);
    need_int_range("--partitions", a->partitions, 1, 4096);
    need_int_range("--log-interval", a->log_interval, 1, INT64_MAX);
    json_keys(a, mc_cli_seen(&c, seen, "--json-keys"));
    const mc_flag_seen_t *special = mc_cli_seen(&c, seen, "--tiktoken-special-tokens");
    if (special->given) { /* the pointers, into argv, outlive the parser's list */
        const char **v = calloc((size_t)special->nvalues, sizeof(*v));
        if (!v) mc_fatal("out of memory");
        for (int k = 0; k < special->nvalues; k++) v[k] = special->values[k];
        a->tiktoken_special_tokens = v;
        a->n_tiktoken_special_tokens = special->nvalues;
    }
    if (a->input[0] == '\0') mc_user_error("--input must not be empty");
    if (a->output_prefix[0] == '\0') mc_user_error("--output-prefix must not be empty");
    if (a->vocab_size != -1) need_int_range("--vocab-size", a->vocab_size, 1, INT32_MAX - 1);
    if (a->workers % a->partitions != 0)
        mc_user_error("--workers (%d) must be divisible by --partitions (%d)", a->workers,
                      a->partitions);
    check_tokenizer(a);
}

void mc_preprocess_args_free(mc_preprocess_args_t *a)
{
    free(a->json_keys);
    free((void *)a->tiktoken_special_tokens);
    memset(a, 0, sizeof(*a));
}

int mc_cli_preprocess(int argc, char **argv)
{
    mc_preprocess_args_t a;
    mc_preprocess_args_parse(&a, argc - 1, argv + 1);
    int rc = mc_preprocess_run(&a);
    mc_preprocess_args_free(&a);
    return rc;
}
