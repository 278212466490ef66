/* The command-line parser of every subcommand (cli/cli.h), driven by flag tables
 * (config/flags.h): argparse's syntax, abbreviations where the subcommand's parser allows them,
 * required flags, --help; values are checked and stored by config/flag_value.c. Unlike
 * argparse it reads on past a problem, so that one run names every problem of the line. */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cli/cli.h"

/* ---- the problems of one command line ---- */

/* Kept reachable: the report exits with them allocated. */
static char **g_problems;
static int g_nproblems, g_cap;

void mc_cli_problem(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    for (int i = 0; i < g_nproblems; i++)
        if (strcmp(g_problems[i], line) == 0) return; /* a flag given twice: said once */
    if (g_nproblems == g_cap) {
        g_cap = g_cap ? 2 * g_cap : 16;
        g_problems = realloc(g_problems, (size_t)g_cap * sizeof(*g_problems));
        if (!g_problems) mc_fatal("out of host memory parsing the command line");
    }
    if (!(g_problems[g_nproblems++] = strdup(line)))
        mc_fatal("out of host memory parsing the command line");
}

/* Every problem gathered, one line each, then exit 2; nothing when there is none. */
static void report_problems(void)
{
    if (g_nproblems) mc_user_errors((const char *const *)g_problems, g_nproblems);
}

/* ---- lookup over the sets ---- */

static size_t total_flags(const mc_cli_t *c)
{
    size_t n = 0;
    for (int k = 0; k < c->nsets; k++) n += c->sets[k].count;
    return n;
}

/* The flag with index i over all sets, and the set it belongs to. */
static const mc_flag_t *flag_at(const mc_cli_t *c, size_t i, const mc_flag_set_t **set)
{
    for (int k = 0; k < c->nsets; k++) {
        if (i < c->sets[k].count) {
            if (set) *set = &c->sets[k];
            return &c->sets[k].flags[i];
        }
        i -= c->sets[k].count;
    }
    return NULL;
}

static long find_exact(const mc_cli_t *c, const char *name)
{
    for (size_t i = 0, n = total_flags(c); i < n; i++) {
        const mc_flag_t *f = flag_at(c, i, NULL);
        if (strcmp(f->name, name) == 0 || (f->alias && strcmp(f->alias, name) == 0)) return (long)i;
    }
    return -1;
}

/* argparse: an exact name, else (allow_abbrev) the only flag the name is a prefix of. */
static long resolve_index(const mc_cli_t *c, const char *name, bool *ambiguous)
{
    *ambiguous = false;
    long hit = find_exact(c, name);
    if (hit >= 0 || !c->allow_abbrev || strncmp(name, "--", 2) != 0 || name[2] == '\0') return hit;
    for (size_t i = 0, n = total_flags(c), len = strlen(name); i < n; i++) {
        if (strncmp(flag_at(c, i, NULL)->name, name, len) != 0) continue;
        if (hit >= 0) {
            *ambiguous = true;
            return -1;
        }
        hit = (long)i;
    }
    return hit;
}

const mc_flag_t *mc_cli_resolve(const mc_cli_t *c, const char *name, bool *ambiguous)
{
    long i = resolve_index(c, name, ambiguous);
    return i >= 0 ? flag_at(c, (size_t)i, NULL) : NULL;
}

const char *mc_cli_suggest(const mc_cli_t *c, const char *name)
{
    const size_t n = total_flags(c);
    const char **names = malloc(n * sizeof(*names));
    if (!names) mc_fatal("out of host memory");
    for (size_t i = 0; i < n; i++) names[i] = flag_at(c, i, NULL)->name;
    const char *best = mc_flag_closest(name, names, n);
    free(names);
    return best;
}

const mc_flag_seen_t *mc_cli_seen(const mc_cli_t *c, const mc_flag_seen_t *seen, const char *name)
{
    long i = find_exact(c, name);
    if (i < 0) mc_fatal("internal: no flag %s in %s's table", name, c->prog);
    return &seen[i];
}

void mc_cli_defaults(const mc_cli_t *c)
{
    const mc_flag_set_t *set = NULL;
    for (size_t i = 0, n = total_flags(c); i < n; i++) {
        const mc_flag_t *f = flag_at(c, i, &set);
        mc_flag_default(set->base, f);
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

/* The flags suggested for unknown ones in the line being read: a required flag among them is
 * missing because of that typo, which is problem enough. */
enum { MAX_SUGGESTED = 64 };
static const char *g_suggested[MAX_SUGGESTED];
static int g_nsuggested;

/* name: a flag's .name (suggestions are those very strings) */
static bool was_suggested(const char *name)
{
    for (int i = 0; i < g_nsuggested; i++)
        if (g_suggested[i] == name) return true;
    return false;
}

static void unknown_flag(const mc_cli_t *c, const char *name)
{
    char b[MC_SHOWN_MAX + 4];
    bool ambiguous;
    if (!mc_cli_resolve(c, name, &ambiguous) && ambiguous) {
        char list[512] = "";
        for (size_t i = 0, n = total_flags(c), len = strlen(name); i < n; i++) {
            const char *other = flag_at(c, i, NULL)->name;
            if (strncmp(other, name, len) != 0) continue;
            if (list[0]) strncat(list, ", ", sizeof(list) - strlen(list) - 1);
            strncat(list, other, sizeof(list) - strlen(list) - 1);
        }
        mc_cli_problem("ambiguous option: %s could match %s", mc_shown(name, b), list);
        return;
    }
    const char *near = mc_cli_suggest(c, name);
    if (near && g_nsuggested < MAX_SUGGESTED) g_suggested[g_nsuggested++] = near;
    if (near)
        mc_cli_problem("unrecognized argument %s (did you mean %s?)", mc_shown(name, b), near);
    else mc_cli_problem("unrecognized argument %s (see %s --help)", mc_shown(name, b), c->prog);
}

static void run_action(const mc_cli_t *c, const mc_flag_t *f)
{
    switch (f->action) {
    case MC_ACTION_HELP:
        if (c->help) c->help(stdout);
        else mc_flags_print_help(stdout);
        break;
    case MC_ACTION_MARKDOWN: mc_flags_print_markdown(stdout); break;
    default: mc_cli_problem("--version must be the first argument (megatron-c --version)"); return;
    }
    fflush(stdout);
    exit(0);
}

/* A value refused: one problem, and the flag's support status is not judged on it. */
static void refused(mc_flag_seen_t *s, const char *err)
{
    mc_cli_problem("%s", err);
    s->invalid = true;
}

/* Handles the flag at argv[i] (value `eq` when written --flag=value); returns the index of the
 * last token it consumed. */
static int take_flag(const mc_cli_t *c, void *base, const mc_flag_t *f, const char *eq, int argc,
                     char **argv, int i, mc_flag_seen_t *s)
{
    char b[MC_SHOWN_MAX + 4], err[512];
    s->given = true;
    s->invalid = false;
    switch (f->type) {
    case MC_FLAG_ACTION: run_action(c, f); break;
    case MC_FLAG_STORE_TRUE:
    case MC_FLAG_STORE_FALSE:
        if (eq) {
            snprintf(err, sizeof(err), "argument %s: ignored explicit argument '%s'", f->name,
                     mc_shown(eq, b));
            refused(s, err);
            break;
        }
        mc_flag_set_bool(base, f, f->type == MC_FLAG_STORE_TRUE);
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
        if (mc_flag_parse_list(base, f, s->values, s->nvalues, err, sizeof(err))) refused(s, err);
        break;
    default:
        if (!eq) {
            if (i + 1 >= argc || !is_value_token(argv[i + 1])) {
                snprintf(err, sizeof(err), "argument %s: expected one argument", f->name);
                refused(s, err);
                break;
            }
            eq = argv[++i];
        }
        s->value = eq;
        if (mc_flag_parse_text(base, f, eq, err, sizeof(err))) refused(s, err);
    }
    if (f->set_size && !s->invalid) *((bool *)((char *)base + f->set_field)) = true;
    return i;
}

/* argparse names the missing required arguments together. */
static void check_required(const mc_cli_t *c, const mc_flag_seen_t *seen)
{
    char missing[512] = "";
    for (int rank = 1;; rank++) {
        bool any = false;
        for (size_t i = 0, n = total_flags(c); i < n; i++) {
            const mc_flag_t *f = flag_at(c, i, NULL);
            if (f->required < rank) continue;
            any = true;
            if (f->required > rank || seen[i].given || was_suggested(f->name)) continue;
            if (missing[0]) strncat(missing, ", ", sizeof(missing) - strlen(missing) - 1);
            strncat(missing, f->name, sizeof(missing) - strlen(missing) - 1);
        }
        if (!any) break;
    }
    if (missing[0]) mc_cli_problem("the following arguments are required: %s", missing);
}

/* The parser's record of the last command line: kept reachable, since every error exits with
 * it allocated. */
static mc_flag_seen_t *g_seen;

/* Reads the whole line, gathering its problems (reported by the caller). */
static mc_flag_seen_t *parse_line(const mc_cli_t *c, int argc, char **argv)
{
    free(g_seen);
    mc_flag_seen_t *seen = g_seen = calloc(total_flags(c) + 1, sizeof(*seen));
    if (!seen) mc_fatal("out of host memory parsing the command line");
    g_nsuggested = 0;
    char b[MC_SHOWN_MAX + 4];
    for (int i = 0; i < argc; i++) {
        const char *tok = argv[i];
        if (is_value_token(tok)) {
            mc_cli_problem("unrecognized argument '%s' (%s takes only --flags; see %s --help)",
                           mc_shown(tok, b), c->prog, c->prog);
            continue;
        }
        /* Only long options take "=value", as in argparse. */
        const char *eq = strncmp(tok, "--", 2) == 0 ? strchr(tok, '=') : NULL;
        char name[256];
        size_t len = eq ? (size_t)(eq - tok) : strlen(tok);
        if (len >= sizeof(name)) len = sizeof(name) - 1;
        memcpy(name, tok, len);
        name[len] = '\0';
        bool ambiguous;
        long k = resolve_index(c, name, &ambiguous);
        if (k < 0) {
            unknown_flag(c, name);
            /* the values that follow are the unknown flag's, not problems of their own */
            while (!eq && i + 1 < argc && is_value_token(argv[i + 1])) i++;
            continue;
        }
        const mc_flag_set_t *set = NULL;
        const mc_flag_t *f = flag_at(c, (size_t)k, &set);
        i = take_flag(c, set->base, f, eq ? eq + 1 : NULL, argc, argv, i, &seen[k]);
    }
    check_required(c, seen);
    return seen;
}

mc_flag_seen_t *mc_cli_parse(const mc_cli_t *c, int argc, char **argv)
{
    mc_flag_seen_t *seen = parse_line(c, argc, argv);
    report_problems();
    return seen;
}

/* The support status of what sets[first..first+n) were given, as problems. */
static void status_problems(const mc_cli_t *c, const mc_flag_seen_t *seen, int first, int n)
{
    size_t i = 0;
    for (int k = 0; k < first + n && k < c->nsets; k++)
        for (size_t j = 0; j < c->sets[k].count; j++, i++) {
            char err[512];
            if (k < first || seen[i].invalid) continue;
            if (mc_flag_status_problem(&c->sets[k].flags[j], &seen[i], err, sizeof(err)))
                mc_cli_problem("%s", err);
        }
}

void mc_cli_check_status(const mc_cli_t *c, const mc_flag_seen_t *seen, int first, int n)
{
    status_problems(c, seen, first, n);
    report_problems();
}

/* ---- training ---- */

static mc_args_hook_t g_hook;
static void *g_hook_ctx;

void mc_args_set_hook(mc_args_hook_t hook, void *ctx)
{
    g_hook = hook;
    g_hook_ctx = ctx;
}

void mc_args_run_hook(mc_args_t *args)
{
    if (g_hook) g_hook(args, g_hook_ctx);
}

void mc_args_parse(mc_args_t *args, int argc, char **argv, int world_size)
{
    mc_args_defaults(args);
    mc_cli_t c = {.prog = "megatron-c"};
    c.nsets = mc_flag_training_sets(c.sets, args);
    mc_flag_seen_t *seen = parse_line(&c, argc, argv);
    /* After the whole line, so that a later occurrence of a flag can undo an earlier one. */
    status_problems(&c, seen, 0, c.nsets);
    mc_cli_legacy_map(&c, seen, args);
    report_problems();
    mc_cli_legacy_warn();
    mc_args_run_hook(args);
    mc_args_finalize(args, world_size);
}
