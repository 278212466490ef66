/* Values of flags: parsing, checking and storing one value into a flag's field, defaults, and
 * the support status of what was given. Shared by every subcommand's table (config/flags.h) and
 * by values that come from elsewhere than a command line (a checkpoint's args: mc_args_take).
 * Every problem is one line: returned in an (err, n) buffer, so that a command line's parser can
 * gather them all, or through mc_user_error (exit 2). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "config/args.h"
#include "config/flags.h"

/* ---- text ---- */

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

static int check_bounds(const mc_flag_t *f, double v, const char *text, char *err, size_t n)
{
    if (mc_flag_within_bounds(f, v)) return 0;
    char b[MC_SHOWN_MAX + 4], range[96];
    mc_flag_bounds_text(f, range, sizeof(range));
    return mc_errf(err, n, "argument %s: invalid value '%s' (must be %s)", f->name,
                   mc_shown(text, b), range);
}

static int parse_integer(const mc_flag_t *f, mc_flag_type_t type, const char *text, long long *v,
                         char *err, size_t n)
{
    char b[MC_SHOWN_MAX + 4];
    if (!parse_integer_text(text, v))
        return mc_errf(err, n, "argument %s: invalid int value: '%s'", f->name, mc_shown(text, b));
    if (type == MC_FLAG_INT && (*v < INT_MIN || *v > INT_MAX))
        return mc_errf(err, n, "argument %s: value '%s' is too large", f->name, mc_shown(text, b));
    return 0;
}

static int parse_real(const mc_flag_t *f, const char *text, double *v, char *err, size_t n)
{
    char b[MC_SHOWN_MAX + 4];
    if (!parse_real_text(text, v))
        return mc_errf(err, n, "argument %s: invalid float value: '%s'", f->name,
                       mc_shown(text, b));
    return 0;
}

static int check_choice(const mc_flag_t *f, const char *text, char *err, size_t n)
{
    for (const char *const *c = f->choices; *c; c++)
        if (strcmp(*c, text) == 0) return 0;
    char list[512] = "", b[MC_SHOWN_MAX + 4];
    for (const char *const *c = f->choices; *c; c++) {
        if (c != f->choices) strncat(list, ", ", sizeof(list) - strlen(list) - 1);
        strncat(list, *c, sizeof(list) - strlen(list) - 1);
    }
    return mc_errf(err, n, "argument %s: invalid choice: '%s' (choose from %s)", f->name,
                   mc_shown(text, b), list);
}

/* ---- fields ---- */

static void *field_of(void *base, const mc_flag_t *f) { return (char *)base + f->field; }

/* Integer fields are int or int64_t; store_true/false flags may fill an int (1, 0, or the
 * .none "not given" value) when a subcommand needs three states. */
static void store_integer(void *base, const mc_flag_t *f, long long v)
{
    if (f->field_size == sizeof(int64_t) && f->type != MC_FLAG_INT) {
        int64_t x = v;
        memcpy(field_of(base, f), &x, sizeof(x));
    } else {
        int x = (int)v;
        memcpy(field_of(base, f), &x, sizeof(x));
    }
}

static int store_string(void *base, const mc_flag_t *f, const char *text, char *err, size_t n)
{
    if (f->ref) {
        memcpy(field_of(base, f), &text, sizeof(text));
        return 0;
    }
    if (strlen(text) >= f->field_size)
        return mc_errf(err, n, "argument %s: value is too long (at most %zu characters)", f->name,
                       f->field_size - 1);
    memcpy(field_of(base, f), text, strlen(text) + 1);
    return 0;
}

/* A numeric value, as the field's type. */
static int store_number_text(void *base, const mc_flag_t *f, const char *text, bool bounded,
                             char *err, size_t n)
{
    if (f->type == MC_FLAG_FLOAT) {
        double v;
        if (parse_real(f, text, &v, err, n) || (bounded && check_bounds(f, v, text, err, n)))
            return -1;
        if (f->field_size) memcpy(field_of(base, f), &v, sizeof(v));
    } else {
        long long v;
        mc_flag_type_t t = f->type == MC_FLAG_INT64 ? MC_FLAG_INT64 : MC_FLAG_INT;
        if (parse_integer(f, t, text, &v, err, n) ||
            (bounded && check_bounds(f, (double)v, text, err, n)))
            return -1;
        if (f->field_size) store_integer(base, f, v);
    }
    return 0;
}

int mc_flag_parse_text(void *base, const mc_flag_t *f, const char *text, char *err, size_t n)
{
    switch (f->type) {
    case MC_FLAG_INT:
    case MC_FLAG_INT64:
    case MC_FLAG_FLOAT: return store_number_text(base, f, text, true, err, n);
    case MC_FLAG_CHOICE:
        if (check_choice(f, text, err, n)) return -1;
        /* fall through */
    case MC_FLAG_STRING: return f->field_size ? store_string(base, f, text, err, n) : 0;
    default: return 0;
    }
}

/* Defaults go through here too, so a default the table gets wrong fails loudly. */
void mc_flag_set_text(void *base, const mc_flag_t *f, const char *text)
{
    char err[512];
    if (mc_flag_parse_text(base, f, text, err, sizeof(err))) mc_user_error("%s", err);
}

void mc_flag_set_bool(void *base, const mc_flag_t *f, bool v)
{
    if (!f->field_size) return;
    if (f->field_size == sizeof(int)) store_integer(base, f, v);
    else memcpy(field_of(base, f), &v, sizeof(v));
}

void mc_flag_free_list(void *base, const mc_flag_t *f)
{
    char **items = field_of(base, f);
    int *count = (int *)((char *)base + f->count_field);
    for (int i = 0; i < *count; i++) free(items[i]);
    memset(items, 0, f->field_size);
    *count = 0;
}

int mc_flag_parse_list(void *base, const mc_flag_t *f, const char *const *values, int count,
                       char *err, size_t n)
{
    if (f->nargs > 0 && count != f->nargs)
        return mc_errf(err, n, "argument %s: expected %d arguments", f->name, f->nargs);
    if (f->nargs < 0 && count == 0)
        return mc_errf(err, n, "argument %s: expected at least one argument", f->name);
    long long v;
    for (int i = 0; i < count; i++)
        if (f->elem == MC_FLAG_INT && parse_integer(f, MC_FLAG_INT, values[i], &v, err, n))
            return -1;
    if (!f->field_size) return 0;
    size_t cap = f->field_size / sizeof(char *);
    if ((size_t)count > cap)
        return mc_errf(err, n, "argument %s: at most %zu values", f->name, cap);
    mc_flag_free_list(base, f);
    char **items = field_of(base, f);
    for (int i = 0; i < count; i++)
        if (!(items[i] = strdup(values[i]))) mc_fatal("out of host memory parsing %s", f->name);
    *(int *)((char *)base + f->count_field) = count;
    return 0;
}

void mc_flag_set_list(void *base, const mc_flag_t *f, const char *const *values, int n)
{
    char err[512];
    if (mc_flag_parse_list(base, f, values, n, err, sizeof(err))) mc_user_error("%s", err);
}

static void none_value(void *base, const mc_flag_t *f)
{
    char err[512];
    if (store_number_text(base, f, f->none, false, err, sizeof(err)))
        mc_fatal("internal: the not-given value of %s: %s", f->name, err);
}

void mc_flag_default(void *base, const mc_flag_t *f)
{
    if (!f->field_size) return;
    switch (f->type) {
    case MC_FLAG_STORE_TRUE:
    case MC_FLAG_STORE_FALSE:
        if (f->none) none_value(base, f);
        else mc_flag_set_bool(base, f, strcmp(mc_flag_default_text(f), "True") == 0);
        break;
    case MC_FLAG_LIST:
    case MC_FLAG_ACTION: break; /* lists default to None: no values */
    default:
        if (f->def) mc_flag_set_text(base, f, f->def);
        else if (f->none) /* the "not given" sentinel lies outside the flag's bounds */
            none_value(base, f);
    }
}

/* ---- support status of what was given ---- */

bool mc_flag_same_value(const mc_flag_t *f, const char *x, const char *y)
{
    double dx, dy;
    long long ix, iy;
    if (f->type == MC_FLAG_FLOAT && parse_real_text(x, &dx) && parse_real_text(y, &dy))
        return dx == dy;
    if ((f->type == MC_FLAG_INT || f->type == MC_FLAG_INT64) && parse_integer_text(x, &ix) &&
        parse_integer_text(y, &iy))
        return ix == iy;
    return strcmp(x, y) == 0;
}

static void join_values(const mc_flag_seen_t *s, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int i = 0; i < s->nvalues; i++) {
        if (i) strncat(buf, " ", n - strlen(buf) - 1);
        strncat(buf, s->values[i], n - strlen(buf) - 1);
    }
}

/* Whether what was given equals Megatron's default (so a not-implemented flag given its
 * default, like --tensor-model-parallel-size 1 in a generic script, is harmless). */
static bool is_default(const mc_flag_t *f, const mc_flag_seen_t *s)
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
    default: return f->def && mc_flag_same_value(f, s->value, f->def);
    }
}

/* Why a value given for f is not accepted (-1 with the line in err), or 0. */
static int unsupported(const mc_flag_t *f, const mc_flag_seen_t *s, char *err, size_t n)
{
    char list[256] = "", b[MC_SHOWN_MAX + 4];
    for (const char *const *v = f->supported; *v; v++) {
        if (mc_flag_same_value(f, s->value, *v)) return 0;
        if (v != f->supported) strncat(list, ", ", sizeof(list) - strlen(list) - 1);
        strncat(list, *v, sizeof(list) - strlen(list) - 1);
    }
    if (f->status == MC_FLAG_LEGACY)
        return mc_errf(err, n, "%s %s is not supported (supported: %s): %s", f->name,
                       mc_shown(s->value, b), list, f->note);
    return mc_errf(err, n,
                   "%s %s is recognised but not implemented yet in megatron-c (supported: "
                   "%s; see docs/FLAGS.md)",
                   f->name, mc_shown(s->value, b), list);
}

int mc_flag_status_problem(const mc_flag_t *f, const mc_flag_seen_t *s, char *err, size_t n)
{
    switch (f->status) {
    case MC_FLAG_IMPLEMENTED:
    case MC_FLAG_NOOP: return 0;
    case MC_FLAG_PARTIAL: return s->given ? unsupported(f, s, err, n) : 0;
    case MC_FLAG_LEGACY: return s->given && f->supported ? unsupported(f, s, err, n) : 0;
    case MC_FLAG_DEPRECATED: return is_default(f, s) ? 0 : mc_errf(err, n, "%s", f->note);
    case MC_FLAG_NOT_IMPLEMENTED:
        if (is_default(f, s) || f->checked_first) return 0; /* validation refuses it */
        /* the note names what is missing, or the implemented alternative */
        return mc_errf(err, n,
                       "%s is recognised but not implemented yet in megatron-c (%s%ssee "
                       "docs/FLAGS.md)",
                       f->name, f->note ? f->note : "", f->note ? "; " : "");
    }
    return 0;
}

/* ---- mc_args_t ---- */

void mc_args_defaults(mc_args_t *args)
{
    memset(args, 0, sizeof(*args));
    mc_flag_set_t sets[MC_TRAINING_SETS];
    for (int k = 0, n = mc_flag_training_sets(sets, args); k < n; k++)
        for (size_t i = 0; i < sets[k].count; i++) mc_flag_default(args, &sets[k].flags[i]);
    args->world_size = 1;
    args->data_parallel_size = 1;
    args->virtual_pipeline_model_parallel_size = 1; /* None: no interleaving */
}

void mc_args_free(mc_args_t *args)
{
    for (size_t i = 0; i < mc_flag_count(); i++) {
        const mc_flag_t *f = mc_flag_at(i);
        if (f->type == MC_FLAG_LIST && f->field_size) mc_flag_free_list(args, f);
    }
}

int mc_args_take(mc_args_t *a, const mc_flag_t *f, const char *text, char *err, size_t n)
{
    mc_flag_seen_t s = {.given = true, .value = text, .values = &s.value, .nvalues = 1};
    if (f->type == MC_FLAG_STORE_TRUE || f->type == MC_FLAG_STORE_FALSE) {
        const bool v = strcmp(text, "True") == 0;
        /* given on a command line means the flag's non-default value */
        s.given = v == (f->type == MC_FLAG_STORE_TRUE);
        if (mc_flag_status_problem(f, &s, err, n) != 0) return -1;
        mc_flag_set_bool(a, f, v);
        return 0;
    }
    if (mc_flag_status_problem(f, &s, err, n) != 0) return -1;
    if (f->type == MC_FLAG_LIST) return 0; /* none of the flags taken this way fills a list */
    mc_flag_set_text(a, f, text);
    if (f->set_size) *((bool *)((char *)a + f->set_field)) = true;
    return 0;
}
