/* The command-line parser of every subcommand (cli/cli.h), driven by flag tables
 * (config/flags.h): argparse's syntax, abbreviations where the subcommand's parser allows them,
 * required flags, --help; values are checked and stored by config/flag_value.c. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cli/cli.h"

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

__attribute__((noreturn)) static void unknown_flag(const mc_cli_t *c, const char *name)
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
        mc_user_error("ambiguous option: %s could match %s", mc_shown(name, b), list);
    }
    const char *near = mc_cli_suggest(c, name);
    if (near) mc_user_error("unrecognized argument %s (did you mean %s?)", mc_shown(name, b), near);
    mc_user_error("unrecognized argument %s (see %s --help)", mc_shown(name, b), c->prog);
}

static void run_action(const mc_cli_t *c, const mc_flag_t *f)
{
    switch (f->action) {
    case MC_ACTION_HELP:
        if (c->help) c->help(stdout);
        else mc_flags_print_help(stdout);
        break;
    case MC_ACTION_MARKDOWN: mc_flags_print_markdown(stdout); break;
    default: mc_user_error("--version must be the first argument (megatron-c --version)");
    }
    fflush(stdout);
    exit(0);
}

/* Handles the flag at argv[i] (value `eq` when written --flag=value); returns the index of the
 * last token it consumed. */
static int take_flag(const mc_cli_t *c, void *base, const mc_flag_t *f, const char *eq, int argc,
                     char **argv, int i, mc_flag_seen_t *s)
{
    char b[MC_SHOWN_MAX + 4];
    s->given = true;
    switch (f->type) {
    case MC_FLAG_ACTION: run_action(c, f); break;
    case MC_FLAG_STORE_TRUE:
    case MC_FLAG_STORE_FALSE:
        if (eq)
            mc_user_error("argument %s: ignored explicit argument '%s'", f->name, mc_shown(eq, b));
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
        mc_flag_set_list(base, f, s->values, s->nvalues);
        break;
    default:
        if (!eq) {
            if (i + 1 >= argc || !is_value_token(argv[i + 1]))
                mc_user_error("argument %s: expected one argument", f->name);
            eq = argv[++i];
        }
        s->value = eq;
        mc_flag_set_text(base, f, eq);
    }
    if (f->set_size) *((bool *)((char *)base + f->set_field)) = true;
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
            if (f->required > rank || seen[i].given) continue;
            if (missing[0]) strncat(missing, ", ", sizeof(missing) - strlen(missing) - 1);
            strncat(missing, f->name, sizeof(missing) - strlen(missing) - 1);
        }
        if (!any) break;
    }
    if (missing[0]) mc_user_error("the following arguments are required: %s", missing);
}

/* The parser's record of the last command line: kept reachable, since every error exits with
 * it allocated. */
static mc_flag_seen_t *g_seen;

mc_flag_seen_t *mc_cli_parse(const mc_cli_t *c, int argc, char **argv)
{
    free(g_seen);
    mc_flag_seen_t *seen = g_seen = calloc(total_flags(c) + 1, sizeof(*seen));
    if (!seen) mc_fatal("out of host memory parsing the command line");
    char b[MC_SHOWN_MAX + 4];
    for (int i = 0; i < argc; i++) {
        const char *tok = argv[i];
        if (is_value_token(tok))
            mc_user_error("unrecognized argument '%s' (%s takes only --flags; see %s --help)",
                          mc_shown(tok, b), c->prog, c->prog);
        /* Only long options take "=value", as in argparse. */
        const char *eq = strncmp(tok, "--", 2) == 0 ? strchr(tok, '=') : NULL;
        char name[256];
        size_t len = eq ? (size_t)(eq - tok) : strlen(tok);
        if (len >= sizeof(name)) len = sizeof(name) - 1;
        memcpy(name, tok, len);
        name[len] = '\0';
        bool ambiguous;
        long k = resolve_index(c, name, &ambiguous);
        if (k < 0) unknown_flag(c, name);
        const mc_flag_set_t *set = NULL;
        const mc_flag_t *f = flag_at(c, (size_t)k, &set);
        i = take_flag(c, set->base, f, eq ? eq + 1 : NULL, argc, argv, i, &seen[k]);
    }
    check_required(c, seen);
    return seen;
}

void mc_cli_check_status(const mc_cli_t *c, const mc_flag_seen_t *seen, int first, int n)
{
    size_t i = 0;
    for (int k = 0; k < first + n && k < c->nsets; k++)
        for (size_t j = 0; j < c->sets[k].count; j++, i++) {
            char err[512];
            if (k < first) continue;
            if (mc_flag_status_problem(&c->sets[k].flags[j], &seen[i], err, sizeof(err)))
                mc_user_error("%s", err);
        }
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
    mc_flag_seen_t *seen = mc_cli_parse(&c, argc, argv);
    /* After the whole line, so that a later occurrence of a flag can undo an earlier one. */
    mc_cli_check_status(&c, seen, 0, c.nsets);
    mc_args_run_hook(args);
    mc_args_finalize(args, world_size);
}
