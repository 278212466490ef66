/* `megatron-c preprocess-data` flags: a small table of tools/preprocess_data.py's arguments
 * (and the tokenizer arguments it takes from Megatron's _add_tokenizer_args), the parser and
 * the checks the script makes (or would crash without). */
#include "cli/preprocess_args.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

typedef enum { PA_BOOL, PA_STRING, PA_INT, PA_LIST, PA_HELP } pa_type_t;
typedef enum { PA_IMPLEMENTED, PA_NOOP, PA_NOT_IMPLEMENTED } pa_status_t;

typedef struct {
    const char *name;
    pa_type_t type;
    const char *group;
    const char *def;  /* shown by --help */
    const char *help;
    pa_status_t status;
} pa_flag_t;

/* Megatron's order: the tokenizer group first (_add_tokenizer_args is called before the
 * script's own groups), then input data, tokenization process, output data, runtime. */
static const pa_flag_t FLAGS[] = {
    {"--help", PA_HELP, "", NULL, "show this help message and exit", PA_IMPLEMENTED},
    {"--tokenizer-type", PA_STRING, "tokenizer", NULL,
     "What type of tokenizer to use (GPT2BPETokenizer, NullTokenizer).", PA_IMPLEMENTED},
    {"--vocab-file", PA_STRING, "tokenizer", NULL, "Path to the vocab file.", PA_IMPLEMENTED},
    {"--merge-file", PA_STRING, "tokenizer", NULL, "Path to the BPE merge file.", PA_IMPLEMENTED},
    {"--vocab-size", PA_INT, "tokenizer", NULL,
     "Size of vocab before EOD or padding (NullTokenizer).", PA_IMPLEMENTED},
    {"--tokenizer-model", PA_STRING, "tokenizer", NULL,
     "Tokenizer model file (read by no tokenizer megatron-c implements yet).", PA_NOOP},
    {"--legacy-tokenizer", PA_BOOL, "tokenizer", "False",
     "Use Megatron's legacy tokenizer classes (same ids here; accepted, no effect).", PA_NOOP},
    {"--input", PA_STRING, "input data", NULL,
     "Path to input JSON lines (.gz read through zlib); a glob when --partitions > 1.",
     PA_IMPLEMENTED},
    {"--json-keys", PA_LIST, "input data", "['text']",
     "space separate listed of keys to extract from json", PA_IMPLEMENTED},
    {"--split-sentences", PA_BOOL, "input data", "False", "Split documents into sentences.",
     PA_NOT_IMPLEMENTED},
    {"--keep-newlines", PA_BOOL, "input data", "False",
     "Keep newlines between sentences when splitting.", PA_NOT_IMPLEMENTED},
    {"--append-eod", PA_BOOL, "tokenization process", "False",
     "Append an <eod> token to the end of a document.", PA_IMPLEMENTED},
    {"--lang", PA_STRING, "tokenization process", "english",
     "Language to use for NLTK-powered sentence splitting.", PA_IMPLEMENTED},
    {"--output-prefix", PA_STRING, "output data", NULL,
     "Path to binary output file without suffix", PA_IMPLEMENTED},
    {"--workers", PA_INT, "runtime", NULL,
     "Number of tokenizing threads (Megatron: worker processes).", PA_IMPLEMENTED},
    {"--find-optimal-num-workers", PA_BOOL, "runtime", "False",
     "Find optimal number of workers.", PA_NOT_IMPLEMENTED},
    {"--workers-to-check", PA_LIST, "runtime", "[16, 32, 64]",
     "list of workers to run data processing with (--find-optimal-num-workers).",
     PA_NOT_IMPLEMENTED},
    {"--max-documents", PA_INT, "runtime", "None",
     "Stop after this many documents (megatron-c: always; Megatron: only with "
     "--find-optimal-num-workers, default 100000).", PA_IMPLEMENTED},
    {"--partitions", PA_INT, "runtime", "1", "Number of file partitions", PA_IMPLEMENTED},
    {"--log-interval", PA_INT, "runtime", "1000", "Interval between progress updates",
     PA_IMPLEMENTED},
    {"--keep-sequential-samples", PA_BOOL, "runtime", "False",
     "Ensure ordering of samples in .jsonl files is preserved when using partitions>1.",
     PA_IMPLEMENTED},
    {"--skip-malformed", PA_BOOL, "megatron-c", "False",
     "Skip lines that are not a JSON object with a string (or list of strings) under every "
     "key, count them and report the count, instead of stopping at the first.",
     PA_IMPLEMENTED},
};
enum { N_FLAGS = sizeof(FLAGS) / sizeof(FLAGS[0]) };

/* Megatron's --tokenizer-type choices; the first two are implemented. */
static const char *const TOKENIZERS[] = {
    "GPT2BPETokenizer", "NullTokenizer", "BertWordPieceLowerCase", "BertWordPieceCase",
    "SentencePieceTokenizer", "GPTSentencePieceTokenizer", "HuggingFaceTokenizer",
    "Llama2Tokenizer", "TikTokenizer", "MultimodalTokenizer", "NullMultimodalTokenizer",
    "SFTTokenizer", NULL};

/* ---- user text in one-line messages ---- */


/* ---- lookup ---- */

static const pa_flag_t *find_exact(const char *name)
{
    for (int i = 0; i < N_FLAGS; i++)
        if (strcmp(FLAGS[i].name, name) == 0) return &FLAGS[i];
    if (strcmp(name, "-h") == 0) return &FLAGS[0];
    return NULL;
}

/* argparse with allow_abbrev=True: an exact name, else the only flag the name is a prefix of. */
static const pa_flag_t *resolve(const char *name, bool *ambiguous)
{
    *ambiguous = false;
    const pa_flag_t *f = find_exact(name);
    if (f) return f;
    if (strncmp(name, "--", 2) != 0 || name[2] == '\0') return NULL;
    size_t len = strlen(name);
    for (int i = 0; i < N_FLAGS; i++) {
        if (strncmp(FLAGS[i].name, name, len) != 0) continue;
        if (f) {
            *ambiguous = true;
            return NULL;
        }
        f = &FLAGS[i];
    }
    return f;
}

const char *mc_preprocess_flag_resolve(const char *name, bool *ambiguous)
{
    const pa_flag_t *f = resolve(name, ambiguous);
    return f ? f->name : NULL;
}


static const char *closest(const char *name, const char *const *names, size_t n_names)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < n_names; i++) {
        size_t d = mc_edit_distance(name, names[i]);
        /* A cut-off name ("--output", "GPT2BPE") is a typo too, though far by edit distance. */
        if (strlen(name) >= 5 && strncmp(names[i], name, strlen(name)) == 0 && d > 1) d = 1;
        if (d < best_d) best_d = d, best = names[i];
    }
    size_t limit = strlen(name) / 3;
    if (limit < 2) limit = 2;
    return best_d <= limit ? best : NULL;
}

const char *mc_preprocess_flag_suggest(const char *name)
{
    const char *names[N_FLAGS];
    for (int i = 0; i < N_FLAGS; i++) names[i] = FLAGS[i].name;
    return closest(name, names, N_FLAGS);
}

/* ---- help ---- */

void mc_preprocess_args_help(FILE *f)
{
    fprintf(f, "usage: megatron-c preprocess-data --input INPUT --output-prefix PREFIX "
               "--workers N --tokenizer-type TYPE [options]\n\n"
               "Megatron's tools/preprocess_data.py: JSON lines to "
               "{PREFIX}_{KEY}_document.bin/.idx.\n");
    const char *group = NULL;
    for (int i = 0; i < N_FLAGS; i++) {
        const pa_flag_t *p = &FLAGS[i];
        if (!group || strcmp(group, p->group) != 0) {
            group = p->group;
            fprintf(f, "\n%s:\n", group[0] ? group : "options");
        }
        fprintf(f, "  %-28s %s", p->name, p->help);
        if (p->def) fprintf(f, " (default: %s)", p->def);
        if (p->status == PA_NOOP) fputs(" [no-op]", f);
        if (p->status == PA_NOT_IMPLEMENTED) fputs(" [not implemented yet]", f);
        fputc('\n', f);
    }
}

/* ---- values ---- */

/* argparse: a token starting with '-' is a flag unless it looks like a negative number. */
static bool is_value_token(const char *tok)
{
    if (tok[0] != '-' || tok[1] == '\0') return true;
    return isdigit((unsigned char)tok[1]) || (tok[1] == '.' && isdigit((unsigned char)tok[2]));
}

static int64_t parse_int(const pa_flag_t *f, const char *s)
{
    char b[MC_SHOWN_MAX + 4];
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    while (end != s && isspace((unsigned char)*end)) end++;
    if (end == s || *end != '\0' || errno == ERANGE)
        mc_user_error("argument %s: invalid int value: '%s'", f->name, mc_shown(s, b));
    return (int64_t)v;
}

static void need_int_range(const char *name, int64_t v, int64_t lo, int64_t hi)
{
    if (v < lo) mc_user_error("%s must be >= %lld (got %lld)", name, (long long)lo, (long long)v);
    if (v > hi) mc_user_error("%s must be <= %lld (got %lld)", name, (long long)hi, (long long)v);
}

/* ---- parse ---- */

typedef struct {
    bool given;
    const char *value;
    char **values;
    int nvalues;
} seen_t;

static void check_tokenizer(const mc_preprocess_args_t *a)
{
    char b[MC_SHOWN_MAX + 4];
    const char *t = a->tokenizer_type;
    int k = -1;
    for (int i = 0; TOKENIZERS[i]; i++)
        if (strcmp(TOKENIZERS[i], t) == 0) k = i;
    if (k < 0) {
        const char *near = closest(t, TOKENIZERS, sizeof(TOKENIZERS) / sizeof(TOKENIZERS[0]) - 1);
        if (near)
            mc_user_error("argument --tokenizer-type: invalid choice: '%s' (did you mean %s?)",
                          mc_shown(t, b), near);
        mc_user_error("argument --tokenizer-type: invalid choice: '%s' (choose from "
                      "GPT2BPETokenizer, NullTokenizer, ...)", mc_shown(t, b));
    }
    if (k >= 2)
        mc_user_error("--tokenizer-type %s is not implemented yet in megatron-c (implemented: "
                      "GPT2BPETokenizer, NullTokenizer)", t);
    if (k == 0 && (!a->vocab_file || !a->merge_file))
        mc_user_error("--tokenizer-type GPT2BPETokenizer needs --vocab-file and --merge-file");
    if (k == 1 && a->vocab_size < 0)
        mc_user_error("--tokenizer-type NullTokenizer needs --vocab-size");
}

void mc_preprocess_args_parse(mc_preprocess_args_t *a, int argc, char **argv)
{
    char b[MC_SHOWN_MAX + 4];
    seen_t seen[N_FLAGS];
    memset(seen, 0, sizeof(seen));

    for (int i = 0; i < argc; i++) {
        const char *tok = argv[i];
        if (is_value_token(tok))
            mc_user_error("unrecognized arguments: %s (preprocess-data takes no positional "
                          "arguments)", mc_shown(tok, b));
        char name[256];
        const char *eq = strchr(tok, '=');
        size_t len = eq ? (size_t)(eq - tok) : strlen(tok);
        if (len >= sizeof(name)) len = sizeof(name) - 1;
        memcpy(name, tok, len);
        name[len] = '\0';
        if (eq) eq++;
        bool ambiguous;
        const pa_flag_t *f = resolve(name, &ambiguous);
        if (!f && ambiguous) {
            char list[512] = "";
            size_t n = strlen(name);
            for (int j = 0; j < N_FLAGS; j++)
                if (strncmp(FLAGS[j].name, name, n) == 0) {
                    if (list[0]) strncat(list, ", ", sizeof(list) - strlen(list) - 1);
                    strncat(list, FLAGS[j].name, sizeof(list) - strlen(list) - 1);
                }
            mc_user_error("ambiguous option: %s could match %s", mc_shown(name, b), list);
        }
        if (!f) {
            const char *near = mc_preprocess_flag_suggest(name);
            if (near)
                mc_user_error("unrecognized argument %s (did you mean %s?)", mc_shown(name, b), near);
            mc_user_error("unrecognized argument %s (see megatron-c preprocess-data --help)",
                          mc_shown(name, b));
        }
        seen_t *s = &seen[f - FLAGS];
        s->given = true;
        switch (f->type) {
        case PA_HELP:
            mc_preprocess_args_help(stdout);
            fflush(stdout);
            exit(0);
        case PA_BOOL:
            if (eq)
                mc_user_error("argument %s: ignored explicit argument '%s'", f->name, mc_shown(eq, b));
            break;
        case PA_LIST:
            if (eq) {
                s->values = argv + i;
                s->nvalues = -1; /* the single value is `eq` */
                s->value = eq;
            } else {
                int n = 0;
                while (i + 1 + n < argc && is_value_token(argv[i + 1 + n])) n++;
                if (n == 0) mc_user_error("argument %s: expected at least one argument", f->name);
                s->values = argv + i + 1;
                s->nvalues = n;
                i += n;
            }
            break;
        default:
            if (!eq) {
                if (i + 1 >= argc || !is_value_token(argv[i + 1]))
                    mc_user_error("argument %s: expected one argument", f->name);
                eq = argv[++i];
            }
            s->value = eq;
            if (f->type == PA_INT) parse_int(f, eq); /* syntax errors in argv order */
        }
    }

    memset(a, 0, sizeof(*a));
    a->lang = "english";
    a->partitions = 1;
    a->log_interval = 1000;
    a->max_documents = -1;
    a->vocab_size = -1;
    a->workers = 0;

    /* argparse's required arguments, named together, then the tokenizer type. */
    static const char *const required[] = {"--input", "--output-prefix", "--workers",
                                           "--tokenizer-type"};
    char missing[256] = "";
    for (size_t r = 0; r < sizeof(required) / sizeof(required[0]); r++) {
        if (seen[find_exact(required[r]) - FLAGS].given) continue;
        if (missing[0]) strcat(missing, ", ");
        strcat(missing, required[r]);
    }
    if (missing[0]) mc_user_error("the following arguments are required: %s", missing);

    for (int k = 0; k < N_FLAGS; k++) {
        const pa_flag_t *f = &FLAGS[k];
        const seen_t *s = &seen[k];
        if (!s->given) continue;
        if (f->status == PA_NOT_IMPLEMENTED) {
            if (strcmp(f->name, "--split-sentences") == 0 || strcmp(f->name, "--keep-newlines") == 0)
                mc_user_error("%s is not implemented yet in megatron-c (sentence splitting needs "
                              "NLTK's punkt models)", f->name);
            mc_user_error("%s is not implemented yet in megatron-c", f->name);
        }
        const char *n = f->name;
        if (strcmp(n, "--tokenizer-type") == 0) a->tokenizer_type = s->value;
        else if (strcmp(n, "--vocab-file") == 0) a->vocab_file = s->value;
        else if (strcmp(n, "--merge-file") == 0) a->merge_file = s->value;
        else if (strcmp(n, "--vocab-size") == 0) a->vocab_size = parse_int(f, s->value);
        else if (strcmp(n, "--tokenizer-model") == 0) a->tokenizer_model = s->value;
        else if (strcmp(n, "--legacy-tokenizer") == 0) a->legacy_tokenizer = true;
        else if (strcmp(n, "--input") == 0) a->input = s->value;
        else if (strcmp(n, "--json-keys") == 0) {
            int nv = s->nvalues < 0 ? 1 : s->nvalues;
            const char **keys = calloc((size_t)nv, sizeof(*keys));
            if (!keys) mc_fatal("out of memory");
            int nk = 0;
            for (int v = 0; v < nv; v++) {
                const char *key = s->nvalues < 0 ? s->value : s->values[v];
                bool dup = false;
                for (int j = 0; j < nk; j++) dup |= strcmp(keys[j], key) == 0;
                if (!dup) keys[nk++] = key;
            }
            free(a->json_keys);
            a->json_keys = keys;
            a->n_json_keys = nk;
        }
        else if (strcmp(n, "--append-eod") == 0) a->append_eod = true;
        else if (strcmp(n, "--lang") == 0) a->lang = s->value;
        else if (strcmp(n, "--output-prefix") == 0) a->output_prefix = s->value;
        else if (strcmp(n, "--workers") == 0) {
            int64_t v = parse_int(f, s->value);
            need_int_range("--workers", v, 1, 4096);
            a->workers = (int)v;
        } else if (strcmp(n, "--max-documents") == 0) {
            a->max_documents = parse_int(f, s->value);
            need_int_range("--max-documents", a->max_documents, 0, INT64_MAX);
        } else if (strcmp(n, "--partitions") == 0) {
            int64_t v = parse_int(f, s->value);
            need_int_range("--partitions", v, 1, 4096);
            a->partitions = (int)v;
        } else if (strcmp(n, "--log-interval") == 0) {
            a->log_interval = parse_int(f, s->value);
            need_int_range("--log-interval", a->log_interval, 1, INT64_MAX);
        } else if (strcmp(n, "--keep-sequential-samples") == 0) a->keep_sequential_samples = true;
        else if (strcmp(n, "--skip-malformed") == 0) a->skip_malformed = true;
    }
    if (!a->json_keys) {
        static const char *def_keys[] = {"text"};
        a->json_keys = calloc(1, sizeof(*a->json_keys));
        if (!a->json_keys) mc_fatal("out of memory");
        a->json_keys[0] = def_keys[0];
        a->n_json_keys = 1;
    }
    for (int k = 0; k < a->n_json_keys; k++)
        if (a->json_keys[k][0] == '\0') mc_user_error("--json-keys: a key must not be empty");
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
    memset(a, 0, sizeof(*a));
}
