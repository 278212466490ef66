/* Command-line parsing, like Megatron's argparse parser (allow_abbrev=False), driven by the flag
 * table: defaults, value syntax and bounds, then the support status of every flag given. Every
 * problem is one line through mc_user_error (exit 2). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/args.h"
#include "base/error.h"
#include "config/flags.h"

/* What the command line said about one flag; the last occurrence wins, as in argparse. */
typedef struct {
    bool given;
    const char *value;          /* single-valued flags */
    const char *const *values;  /* list flags: the values of the last occurrence */
    int nvalues;
} seen_t;

/* ---- quoting user text in one-line messages ---- */


/* ---- values ---- */

static bool parse_integer_text(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE) return false;
    *out = v;
    return true;
}

/* Python's float(): decimal and exponent forms. Hex floats, inf and nan are refused (no flag
 * means anything with them). */
static bool parse_real_text(const char *s, double *out)
{
    if (strpbrk(s, "xX")) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v)) return false;
    *out = v;
    return true;
}

static void check_bounds(const mc_flag_t *f, double v, const char *text)
{
    if (mc_flag_within_bounds(f, v)) return;
    char b[MC_SHOWN_MAX + 4], range[96];
    mc_flag_bounds_text(f, range, sizeof(range));
    mc_user_error("argument %s: invalid value '%s' (must be %s)", f->name, mc_shown(text, b), range);
}

static long long parse_integer(const mc_flag_t *f, mc_flag_type_t type, const char *text)
{
    char b[MC_SHOWN_MAX + 4];
    long long v;
    if (!parse_integer_text(text, &v)) mc_user_error("argument %s: invalid int value: '%s'", f->name, mc_shown(text, b));
    if (type == MC_FLAG_INT && (v < INT_MIN || v > INT_MAX))
        mc_user_error("argument %s: value '%s' is too large", f->name, mc_shown(text, b));
    return v;
}

static double parse_real(const mc_flag_t *f, const char *text)
{
    char b[MC_SHOWN_MAX + 4];
    double v;
    if (!parse_real_text(text, &v)) mc_user_error("argument %s: invalid float value: '%s'", f->name, mc_shown(text, b));
    return v;
}

static void check_choice(const mc_flag_t *f, const char *text)
{
    for (const char *const *c = f->choices; *c; c++)
        if (strcmp(*c, text) == 0) return;
    char list[512] = "", b[MC_SHOWN_MAX + 4];
    for (const char *const *c = f->choices; *c; c++) {
        if (c != f->choices) strncat(list, ", ", sizeof(list) - strlen(list) - 1);
        strncat(list, *c, sizeof(list) - strlen(list) - 1);
    }
    mc_user_error("argument %s: invalid choice: '%s' (choose from %s)", f->name, mc_shown(text, b), list);
}

/* ---- storing into mc_args_t ---- */

static void *field_of(mc_args_t *a, const mc_flag_t *f) { return (char *)a + f->field; }

static void store_integer(mc_args_t *a, const mc_flag_t *f, long long v)
{
    if (f->type == MC_FLAG_INT64) {
        int64_t x = v;
        memcpy(field_of(a, f), &x, sizeof(x));
    } else {
        int x = (int)v;
        memcpy(field_of(a, f), &x, sizeof(x));
    }
}

static void store_string(mc_args_t *a, const mc_flag_t *f, const char *text)
{
    if (strlen(text) >= f->field_size)
        mc_user_error("argument %s: value is too long (at most %zu characters)", f->name, f->field_size - 1);
    memcpy(field_of(a, f), text, strlen(text) + 1);
}

/* A numeric value already checked, as the field's type. */
static void store_number_text(mc_args_t *a, const mc_flag_t *f, const char *text, bool bounded)
{
    if (f->type == MC_FLAG_FLOAT) {
        double v = parse_real(f, text);
        if (bounded) check_bounds(f, v, text);
        if (f->field_size) memcpy(field_of(a, f), &v, sizeof(v));
    } else {
        long long v = parse_integer(f, f->type, text);
        if (bounded) check_bounds(f, (double)v, text);
        if (f->field_size) store_integer(a, f, v);
    }
}

/* Parses and checks one value and stores it in the flag's field, if it has one. Defaults go
 * through here too, so a default the table gets wrong fails loudly. */
static void set_value(mc_args_t *a, const mc_flag_t *f, const char *text)
{
    switch (f->type) {
    case MC_FLAG_INT:
    case MC_FLAG_INT64:
    case MC_FLAG_FLOAT: store_number_text(a, f, text, true); break;
    case MC_FLAG_CHOICE: check_choice(f, text); /* fall through */
    case MC_FLAG_STRING:
        if (f->field_size) store_string(a, f, text);
        break;
    default: break;
    }
}

static void set_bool(mc_args_t *a, const mc_flag_t *f, bool v)
{
    if (f->field_size) memcpy(field_of(a, f), &v, sizeof(v));
}

static void free_list(mc_args_t *a, const mc_flag_t *f)
{
    char **items = field_of(a, f);
    int *count = (int *)((char *)a + f->count_field);
    for (int i = 0; i < *count; i++) free(items[i]);
    memset(items, 0, f->field_size);
    *count = 0;
}

static void set_list(mc_args_t *a, const mc_flag_t *f, const char *const *values, int n)
{
    if (f->nargs > 0 && n != f->nargs) mc_user_error("argument %s: expected %d arguments", f->name, f->nargs);
    if (f->nargs < 0 && n == 0) mc_user_error("argument %s: expected at least one argument", f->name);
    for (int i = 0; i < n; i++)
        if (f->elem == MC_FLAG_INT) parse_integer(f, MC_FLAG_INT, values[i]);
    if (!f->field_size) return;
    size_t cap = f->field_size / sizeof(char *);
    if ((size_t)n > cap) mc_user_error("argument %s: at most %zu values", f->name, cap);
    free_list(a, f);
    char **items = field_of(a, f);
    for (int i = 0; i < n; i++)
        if (!(items[i] = strdup(values[i]))) mc_fatal("out of host memory parsing %s", f->name);
    *(int *)((char *)a + f->count_field) = n;
}

/* ---- defaults ---- */

static void apply_default(mc_args_t *a, const mc_flag_t *f)
{
    switch (f->type) {
    case MC_FLAG_STORE_TRUE:
    case MC_FLAG_STORE_FALSE: set_bool(a, f, strcmp(mc_flag_default_text(f), "True") == 0); break;
    case MC_FLAG_LIST:
    case MC_FLAG_ACTION: break; /* lists default to None: no values */
    default:
        if (f->def)
            set_value(a, f, f->def);
        else if (f->none) /* the "not given" sentinel lies outside the flag's bounds */
            store_number_text(a, f, f->none, false);
    }
}

void mc_args_defaults(mc_args_t *args)
{
    memset(args, 0, sizeof(*args));
    for (size_t i = 0; i < mc_flag_count(); i++) {
        const mc_flag_t *f = mc_flag_at(i);
        if (f->field_size) apply_default(args, f);
    }
    args->world_size = 1;
    args->data_parallel_size = 1;
    args->virtual_pipeline_model_parallel_size = 1; /* None: no interleaving */
}

void mc_args_free(mc_args_t *args)
{
    for (size_t i = 0; i < mc_flag_count(); i++) {
        const mc_flag_t *f = mc_flag_at(i);
        if (f->type == MC_FLAG_LIST && f->field_size) free_list(args, f);
    }
}

/* ---- the command line ---- */

/* argparse's rule: a token starting with '-' is a flag unless it looks like a negative number
 * (so `--num-layers -1` reaches the range check instead of "expected one argument"). */
static bool is_value_token(const char *tok)
{
    if (tok[0] != '-' || tok[1] == '\0') return true;
    return isdigit((unsigned char)tok[1]) || (tok[1] == '.' && isdigit((unsigned char)tok[2]));
}

static size_t index_of(const mc_flag_t *f)
{
    size_t i = 0;
    while (mc_flag_at(i) != f) i++;
    return i;
}

__attribute__((noreturn)) static void unknown_flag(const char *tok)
{
    char name[256], b[MC_SHOWN_MAX + 4];
    size_t len = strcspn(tok, "=");
    snprintf(name, sizeof(name), "%.*s", (int)(len < sizeof(name) ? len : sizeof(name) - 1), tok);
    const char *near = mc_flag_suggest(name);
    if (near) mc_user_error("unrecognized argument %s (did you mean %s?)", mc_shown(name, b), near);
    mc_user_error("unrecognized argument %s (see megatron-c --help)", mc_shown(name, b));
}

static void run_action(const mc_flag_t *f)
{
    switch (f->action) {
    case MC_ACTION_HELP: mc_flags_print_help(stdout); break;
    case MC_ACTION_MARKDOWN: mc_flags_print_markdown(stdout); break;
    default: mc_user_error("--version must be the first argument (megatron-c --version)");
    }
    fflush(stdout);
    exit(0);
}

/* Handles the flag at argv[i] (value `eq` when written --flag=value); returns the index of the
 * last token it consumed. */
static int take_flag(mc_args_t *a, const mc_flag_t *f, const char *eq, int argc, char **argv, int i,
                     seen_t *s)
{
    char b[MC_SHOWN_MAX + 4];
    s->given = true;
    switch (f->type) {
    case MC_FLAG_ACTION: run_action(f); break;
    case MC_FLAG_STORE_TRUE:
    case MC_FLAG_STORE_FALSE:
        if (eq) mc_user_error("argument %s: ignored explicit argument '%s'", f->name, mc_shown(eq, b));
        set_bool(a, f, f->type == MC_FLAG_STORE_TRUE);
        break;
    case MC_FLAG_LIST:
        if (eq) {
            s->value = eq;
            s->values = &s->value;
            s->nvalues = 1;
        } else {
            int n = 0;
            while (i + 1 + n < argc && is_value_token(argv[i + 1 + n])) n++;
            s->values = (const char *const *)(argv + i + 1);
            s->nvalues = n;
            i += n;
        }
        set_list(a, f, s->values, s->nvalues);
        break;
    default:
        if (!eq) {
            if (i + 1 >= argc || !is_value_token(argv[i + 1]))
                mc_user_error("argument %s: expected one argument", f->name);
            eq = argv[++i];
        }
        s->value = eq;
        set_value(a, f, eq);
    }
    if (f->set_size) *((bool *)((char *)a + f->set_field)) = true;
    return i;
}

static void scan(mc_args_t *a, int argc, char **argv, seen_t *seen)
{
    char b[MC_SHOWN_MAX + 4];
    for (int i = 0; i < argc; i++) {
        const char *tok = argv[i];
        if (is_value_token(tok))
            mc_user_error("unrecognized argument '%s' (megatron-c takes only --flags; see megatron-c --help)",
                          mc_shown(tok, b));
        /* Only long options take "=value", as in argparse. */
        const char *eq = strncmp(tok, "--", 2) == 0 ? strchr(tok, '=') : NULL;
        char name[256];
        size_t len = eq ? (size_t)(eq - tok) : strlen(tok);
        if (len >= sizeof(name)) unknown_flag(tok);
        memcpy(name, tok, len);
        name[len] = '\0';
        const mc_flag_t *f = mc_flag_find(name);
        if (!f) unknown_flag(tok);
        i = take_flag(a, f, eq ? eq + 1 : NULL, argc, argv, i, &seen[index_of(f)]);
    }
}

/* ---- support status of what was given ---- */

static bool same_text(const mc_flag_t *f, const char *x, const char *y)
{
    double dx, dy;
    long long ix, iy;
    if (f->type == MC_FLAG_FLOAT && parse_real_text(x, &dx) && parse_real_text(y, &dy)) return dx == dy;
    if ((f->type == MC_FLAG_INT || f->type == MC_FLAG_INT64) && parse_integer_text(x, &ix) &&
        parse_integer_text(y, &iy))
        return ix == iy;
    return strcmp(x, y) == 0;
}

static void join_values(const seen_t *s, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int i = 0; i < s->nvalues; i++) {
        if (i) strncat(buf, " ", n - strlen(buf) - 1);
        strncat(buf, s->values[i], n - strlen(buf) - 1);
    }
}

/* Whether what was given equals Megatron's default (so a not-implemented flag given its
 * default, like --tensor-model-parallel-size 1 in a generic script, is harmless). */
static bool is_default(const mc_flag_t *f, const seen_t *s)
{
    if (!s->given) return true;
    switch (f->type) {
    case MC_FLAG_STORE_TRUE: return strcmp(mc_flag_default_text(f), "True") == 0;
    case MC_FLAG_STORE_FALSE: return strcmp(mc_flag_default_text(f), "False") == 0;
    case MC_FLAG_LIST: {
        char joined[1024];
        join_values(s, joined, sizeof(joined));
        return f->def && strcmp(joined, f->def) == 0;
    }
    default: return f->def && same_text(f, s->value, f->def);
    }
}

/* Why a value given for f is not accepted (-1 with the line in err), or 0. */
static int unsupported(const mc_flag_t *f, const seen_t *s, char *err, size_t n)
{
    char list[256] = "", b[MC_SHOWN_MAX + 4];
    for (const char *const *v = f->supported; *v; v++) {
        if (same_text(f, s->value, *v)) return 0;
        if (v != f->supported) strncat(list, ", ", sizeof(list) - strlen(list) - 1);
        strncat(list, *v, sizeof(list) - strlen(list) - 1);
    }
    return mc_errf(err, n, "%s %s is recognised but not implemented yet in megatron-c (supported: "
                   "%s; see docs/FLAGS.md)", f->name, mc_shown(s->value, b), list);
}

static int status_problem(const mc_flag_t *f, const seen_t *s, char *err, size_t n)
{
    switch (f->status) {
    case MC_FLAG_IMPLEMENTED:
    case MC_FLAG_NOOP: return 0;
    case MC_FLAG_PARTIAL: return s->given ? unsupported(f, s, err, n) : 0;
    case MC_FLAG_DEPRECATED: return is_default(f, s) ? 0 : mc_errf(err, n, "%s", f->note);
    case MC_FLAG_NOT_IMPLEMENTED:
        if (is_default(f, s)) return 0;
        return mc_errf(err, n, "%s is recognised but not implemented yet in megatron-c (see "
                       "docs/FLAGS.md)", f->name);
    }
    return 0;
}

static void check_status(const mc_flag_t *f, const seen_t *s)
{
    char err[512];
    if (status_problem(f, s, err, sizeof(err)) != 0) mc_user_error("%s", err);
}

static mc_args_hook_t g_hook;
static void *g_hook_ctx;

void mc_args_set_hook(mc_args_hook_t hook, void *ctx)
{
    g_hook = hook;
    g_hook_ctx = ctx;
}

int mc_args_take(mc_args_t *a, const mc_flag_t *f, const char *text, char *err, size_t n)
{
    seen_t s = {.given = true, .value = text, .values = &s.value, .nvalues = 1};
    if (f->type == MC_FLAG_STORE_TRUE || f->type == MC_FLAG_STORE_FALSE) {
        const bool v = strcmp(text, "True") == 0;
        /* given on a command line means the flag's non-default value */
        s.given = v == (f->type == MC_FLAG_STORE_TRUE);
        if (status_problem(f, &s, err, n) != 0) return -1;
        set_bool(a, f, v);
        return 0;
    }
    if (status_problem(f, &s, err, n) != 0) return -1;
    if (f->type == MC_FLAG_LIST) return 0; /* none of the flags taken this way fills a list */
    set_value(a, f, text);
    if (f->set_size) *((bool *)((char *)a + f->set_field)) = true;
    return 0;
}

void mc_args_parse(mc_args_t *args, int argc, char **argv, int world_size)
{
    mc_args_defaults(args);
    size_t n = mc_flag_count();
    seen_t *seen = calloc(n, sizeof(*seen));
    if (!seen) mc_fatal("out of host memory parsing the command line");
    scan(args, argc, argv, seen);
    /* After the whole line, so that a later occurrence of a flag can undo an earlier one. */
    for (size_t i = 0; i < n; i++) check_status(mc_flag_at(i), &seen[i]);
    free(seen);
    if (g_hook) g_hook(args, g_hook_ctx);
    mc_args_finalize(args, world_size);
}
