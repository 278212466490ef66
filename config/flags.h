/* The flag table: the single source of truth for megatron-c's command line.
 *
 * One entry per flag of Megatron-LM's pretrain_gpt.py that megatron-c knows, plus the megatron-c
 * extensions. Each entry says how the value is parsed, Megatron's default (as the text its
 * argparse would turn into the value), the argparse group, the help text, which mc_args_t field
 * it fills, and how far megatron-c supports it. Parsing (cli/parse.c), defaults, --help and
 * docs/FLAGS.md (cli/help.c) are all driven by this table, so they cannot disagree. */
#ifndef MC_CONFIG_FLAGS_H
#define MC_CONFIG_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config/args.h"

/* The flag tables of every subcommand share this type: training's (config/flags_*.c, fields of
 * mc_args_t) and preprocess-data's, convert-checkpoint's and inspect-data's (cli/..._args.c,
 * fields of the options struct each consumer declares). One parser reads them all (cli/cli.h). */

typedef enum {
    MC_FLAG_INT,         /* int field (or no field), base-10 */
    MC_FLAG_INT64,       /* int64_t field */
    MC_FLAG_FLOAT,       /* double field; finite values only */
    MC_FLAG_STRING,      /* char[] field */
    MC_FLAG_CHOICE,      /* char[] field; one of .choices */
    MC_FLAG_STORE_TRUE,  /* bool field; no value */
    MC_FLAG_STORE_FALSE, /* bool field; no value (the --no-* / --disable-* flags) */
    MC_FLAG_LIST,        /* nargs: values up to the next flag; .nargs and .elem say how many/what */
    MC_FLAG_ACTION,      /* --help, --flags-markdown, --version: act, take no value */
} mc_flag_type_t;

/* Zero is "not implemented yet" on purpose: an entry that forgets its status is refused, never
 * silently accepted. */
typedef enum {
    MC_FLAG_NOT_IMPLEMENTED = 0, /* recognised; any value other than the default stops the run */
    MC_FLAG_IMPLEMENTED,         /* does what Megatron does */
    MC_FLAG_PARTIAL,             /* implemented for the values in .supported only */
    MC_FLAG_NOOP,                /* accepted, no effect in megatron-c (.note says why) */
    MC_FLAG_DEPRECATED,          /* Megatron refuses it too; .note is the message */
    MC_FLAG_LEGACY,              /* Megatron removed it but old recipes pass it: accepted, taken
                                  * as .modern (cli/legacy.c), with a warning; .note says
                                  * when and why Megatron dropped it */
} mc_flag_status_t;

typedef enum {
    MC_ACTION_NONE,
    MC_ACTION_HELP,
    MC_ACTION_MARKDOWN,
    MC_ACTION_VERSION
} mc_flag_action_t;

/* Bounds on numeric values (bits of .bounds). */
enum { MC_MIN = 1, MC_MIN_EXCL = 2, MC_MAX = 4, MC_MAX_EXCL = 8 };

typedef struct mc_flag {
    const char *name;  /* "--num-layers" */
    const char *alias; /* a second spelling Megatron accepts ("-h"), or NULL */
    mc_flag_type_t type;
    const char *group; /* Megatron's argparse group title */
    const char *def;   /* Megatron's default as text ("128", "1e-05", "linear");
                        * NULL = None (Python) for valued flags; for store_true /
                        * store_false NULL means False / True */
    const char *help;
    mc_flag_status_t status;
    const char *note;             /* why no-op, what is missing, deprecation message */
    const char *const *supported; /* MC_FLAG_PARTIAL: the values megatron-c implements */
    const char *const *choices;   /* MC_FLAG_CHOICE: the allowed values, NULL-terminated */
    size_t field;                 /* offsetof(mc_args_t, x) when field_size > 0 */
    size_t field_size;            /* 0 = the flag fills no field */
    size_t set_field;             /* offsetof a bool set true when the flag is given, if set_size */
    size_t set_size;
    size_t count_field;  /* MC_FLAG_LIST with a field: offsetof the int count */
    const char *none;    /* value the field holds while unset (default None), if not 0 */
    int nargs;           /* MC_FLAG_LIST: 0 = any number ('*'), -1 = at least one ('+'),
                          * N > 0 = exactly N */
    mc_flag_type_t elem; /* MC_FLAG_LIST: type of each value (MC_FLAG_STRING or INT) */
    unsigned bounds;     /* MC_MIN | MC_MIN_EXCL | MC_MAX | MC_MAX_EXCL */
    double min, max;
    mc_flag_action_t action;
    const char *dest; /* the field's name, which is Megatron's attribute (FIELD sets
                       * it; ckpt/args.c stores the fields under it) */
    bool ref;         /* MC_FLAG_STRING / CHOICE: the field is a const char * that
                       * points into argv (or at .def) instead of a char[] copy */
    int required;     /* > 0: must be given; "the following arguments are required"
                       * names the missing ones in the order of this number */
    /* MC_FLAG_LEGACY: what the old flag means in today's flags, as command-line text where %s
     * is the value given ("--recompute-granularity full --recompute-method %s"; NULL: nothing,
     * the note says why); today's flags it implied through old defaults, set unless given
     * ("--recompute-num-layers 1"); and the one flag value without which it had no effect
     * ("--recompute-granularity full"; NULL: always in effect). */
    const char *modern;
    const char *modern_default;
    const char *only_with;
    /* MC_FLAG_NOT_IMPLEMENTED with a field (a feature on its way): the parser takes the value,
     * validation checks it by Megatron's rules first and then refuses it as not implemented yet
     * (cli/validate_moe.c), so a bad combination gets Megatron's message. */
    bool checked_first;
} mc_flag_t;

/* A table and the struct its fields lie in. */
typedef struct {
    const mc_flag_t *flags;
    size_t count;
    void *base;
} mc_flag_set_t;

/* What a command line said about one flag; the last occurrence wins, as in argparse. */
typedef struct {
    bool given;
    bool invalid;              /* its value was refused (one problem is enough) */
    const char *value;         /* single-valued flags */
    const char *const *values; /* list flags: the values of the last occurrence */
    int nvalues;
} mc_flag_seen_t;

/* Training's table as sets over *args (the table is written in parts: the model's, the run's,
 * the flags Megatron removed, and five of Megatron's flags megatron-c lacks, by feature);
 * returns MC_TRAINING_SETS. */
enum { MC_TRAINING_SETS = 8 };
int mc_flag_training_sets(mc_flag_set_t out[MC_TRAINING_SETS], mc_args_t *args);

/* ---- values (config/flag_value.c) ---- */

/* Megatron's default (or the "not given" value) into the flag's field. */
void mc_flag_default(void *base, const mc_flag_t *f);
/* A value as given on a command line, parsed, checked (syntax, choices, bounds) and stored;
 * -1 with one line in err when refused (nothing stored). */
int mc_flag_parse_text(void *base, const mc_flag_t *f, const char *text, char *err, size_t n);
/* The same, the refusal through mc_user_error (exit 2). */
void mc_flag_set_text(void *base, const mc_flag_t *f, const char *text);
void mc_flag_set_bool(void *base, const mc_flag_t *f, bool v);
/* nargs and each value checked; stored (copies) when the flag has a field. */
int mc_flag_parse_list(void *base, const mc_flag_t *f, const char *const *values, int count,
                       char *err, size_t n);
void mc_flag_set_list(void *base, const mc_flag_t *f, const char *const *values, int n);
void mc_flag_free_list(void *base, const mc_flag_t *f);
/* Whether two texts are the same value of f ("1e-3" and "0.001" are). */
bool mc_flag_same_value(const mc_flag_t *f, const char *x, const char *y);
/* Why the support status refuses what was given (-1, one line in err), or 0. */
int mc_flag_status_problem(const mc_flag_t *f, const mc_flag_seen_t *s, char *err, size_t n);

/* The name of names[0..n) that `name` is a plausible typo of, or NULL. Plausible: the same
 * but for case and '-' versus '_', or the words run together, or cut off, or word by word
 * with at most two small slips inside words (an edit of a word of 3 or more letters, two of
 * one of 8 or more) and at most one word left out of a name of three or more, not its first;
 * an extra word, or a word swapped for another (--q-lora-rank against --local-rank), never
 * is. The closest by those edits wins, the first on ties. */
const char *mc_flag_closest(const char *name, const char *const *names, size_t n);

/* The table, in help order within each group. */
size_t mc_flag_count(void);
const mc_flag_t *mc_flag_at(size_t i);

/* Megatron's group titles in Megatron's --help order, NULL-terminated. */
const char *const *mc_flag_groups(void);

/* Exact lookup by name or alias (no abbreviations: Megatron's parser has allow_abbrev=False).
 * Returns NULL when unknown. */
const mc_flag_t *mc_flag_find(const char *name);

/* The known flag name `name` is a plausible typo of (mc_flag_closest), or NULL. */
const char *mc_flag_suggest(const char *name);

/* Whether v satisfies the flag's bounds, and the bounds as text (">= 1", "in [0, 1)") for
 * error messages. A flag without bounds accepts every value. */
bool mc_flag_within_bounds(const mc_flag_t *f, double v);
void mc_flag_bounds_text(const mc_flag_t *f, char *buf, size_t n);

/* "implemented", "partial", "no-op", "not implemented yet", "deprecated", "legacy". */
const char *mc_flag_status_name(mc_flag_status_t status);

/* The default as --help shows it: "None", "False", "True", "128", ... */
const char *mc_flag_default_text(const mc_flag_t *f);

/* --help: every flag, grouped, with its default and (when not plainly implemented) status. */
void mc_flags_print_help(FILE *f);

/* docs/FLAGS.md: a Markdown table per group (flag, default, status, note). */
void mc_flags_print_markdown(FILE *f);

#endif
