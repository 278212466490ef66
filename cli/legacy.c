/* The flags Megatron removed that old recipes pass (cli/cli.h, config/flags_legacy.c), taken as
 * today's flags. An old flag's .modern text is read as a command line: each flag it names gets
 * the value the old flag meant. Where the line gives one of those flags another value, or two
 * old flags disagree, that is a problem rather than a silent pick (old Megatron let the later
 * assignment in validate_args win, which neither spelling's reader would expect). */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "cli/cli.h"

enum { MAX_TAKEN = 32, MAX_OLD = 32, MAX_TOKENS = 8, TEXT = 1024 };

/* A value an old flag gave a modern one ("" for a switch), and who gave it. */
typedef struct {
    const mc_flag_t *flag;
    char value[64];
    char by[160];
} taken_t;

static taken_t g_taken[MAX_TAKEN];
static int g_ntaken;
static char g_warnings[MAX_OLD][TEXT];
static int g_nwarnings;

/* The flag called name in the line's sets (exact: training has no abbreviations), and what the
 * line gave it. */
static const mc_flag_t *lookup(const mc_cli_t *c, const mc_flag_seen_t *seen, const char *name,
                               const mc_flag_seen_t **s)
{
    bool ambiguous;
    const mc_flag_t *f = mc_cli_resolve(c, name, &ambiguous);
    if (!f) mc_fatal("internal: an old flag stands for %s, which is not in the table", name);
    *s = mc_cli_seen(c, seen, name);
    return f;
}

/* The value the line already fixes for modern flag f ("" for a switch) and who fixed it, or
 * NULL when f is free. */
static const char *fixed_value(const mc_cli_t *c, const mc_flag_seen_t *seen, const mc_flag_t *f,
                               char *who, size_t n)
{
    for (int k = 0; k < g_ntaken; k++)
        if (g_taken[k].flag == f) {
            snprintf(who, n, "%s", g_taken[k].by);
            return g_taken[k].value;
        }
    const mc_flag_seen_t *s;
    lookup(c, seen, f->name, &s);
    if (s->given && !s->invalid) {
        bool valued = f->type != MC_FLAG_STORE_TRUE && f->type != MC_FLAG_STORE_FALSE;
        snprintf(who, n, "%s%s%s", f->name, valued ? " " : "", valued ? s->value : "");
        return valued ? s->value : "";
    }
    /* --recompute-activations is today's --recompute-granularity selective (validation sets it) */
    if (strcmp(f->name, "--recompute-granularity") == 0) {
        lookup(c, seen, "--recompute-activations", &s);
        if (s->given) {
            snprintf(who, n, "--recompute-activations");
            return "selective";
        }
    }
    return NULL;
}

/* Stores value (NULL: the switch is given) into modern flag f, as the command line would have;
 * false when f refuses it (a problem told, naming the old flag `old`). */
static bool store(mc_args_t *a, const mc_flag_t *f, const char *value, const char *old)
{
    char err[512];
    mc_flag_seen_t as = {.given = true, .value = value, .values = &as.value, .nvalues = 1};
    if (value && mc_flag_parse_text(a, f, value, err, sizeof(err)) != 0) {
        mc_cli_problem("%s (now %s %s): %s", old, f->name, value, err);
        return false;
    }
    if (!value) mc_flag_set_bool(a, f, f->type == MC_FLAG_STORE_TRUE);
    if (mc_flag_status_problem(f, &as, err, sizeof(err)) != 0) {
        mc_cli_problem("%s (now %s%s%s): %s", old, f->name, value ? " " : "", value ? value : "",
                       err);
        return false;
    }
    if (f->set_size) *((bool *)((char *)a + f->set_field)) = true;
    return true;
}

/* Old flag `old` sets modern flag `name` to value (NULL: a switch). An old default (`soft`)
 * yields to what the line fixes; anything else conflicts with a different value. Returns
 * whether the value was set now. */
static bool take(const mc_cli_t *c, const mc_flag_seen_t *seen, mc_args_t *a, const char *old,
                 const char *name, const char *value, bool soft)
{
    const mc_flag_seen_t *s;
    const mc_flag_t *f = lookup(c, seen, name, &s);
    char who[160];
    const char *fixed = fixed_value(c, seen, f, who, sizeof(who));
    if (fixed) {
        if (!soft && value && !mc_flag_same_value(f, fixed, value))
            mc_cli_problem("%s conflicts with %s (the old flag means %s %s; give one of them)", old,
                           who, name, value);
        return false;
    }
    if (!store(a, f, value, old)) return false;
    if (g_ntaken == MAX_TAKEN) mc_fatal("internal: more than %d values from old flags", MAX_TAKEN);
    taken_t *t = &g_taken[g_ntaken++];
    t->flag = f;
    snprintf(t->value, sizeof(t->value), "%s", value ? value : "");
    snprintf(t->by, sizeof(t->by), "%s", old);
    return true;
}

/* Splits a .modern text into its tokens (in buf); %s stands for the old flag's value. */
static int tokens(const char *text, const char *value, char *buf, size_t n, char **tok)
{
    snprintf(buf, n, "%s", text);
    int k = 0;
    for (char *save, *t = strtok_r(buf, " ", &save); t && k < MAX_TOKENS;
         t = strtok_r(NULL, " ", &save))
        tok[k++] = strcmp(t, "%s") == 0 ? (char *)value : t;
    return k;
}

/* Takes every "--flag [value]" of text; what was set now is appended to `applied`. */
static void take_text(const mc_cli_t *c, const mc_flag_seen_t *seen, mc_args_t *a, const char *old,
                      const char *text, const char *value, bool soft, char *applied, size_t n)
{
    char buf[256], *tok[MAX_TOKENS];
    int k = tokens(text, value, buf, sizeof(buf), tok);
    for (int i = 0; i < k; i++) {
        const char *v = i + 1 < k && strncmp(tok[i + 1], "--", 2) != 0 ? tok[i + 1] : NULL;
        if (take(c, seen, a, old, tok[i], v, soft) || !soft) {
            size_t len = strlen(applied);
            snprintf(applied + len, n - len, "%s%s%s%s", len ? " " : "", tok[i], v ? " " : "",
                     v ? v : "");
        }
        i += v != NULL;
    }
}

/* Whether the flag value only_with names ("--recompute-granularity full") holds in args. */
static bool holds(const mc_cli_t *c, const mc_flag_seen_t *seen, const mc_args_t *a,
                  const char *only_with)
{
    char buf[256], *tok[MAX_TOKENS];
    if (tokens(only_with, NULL, buf, sizeof(buf), tok) != 2) mc_fatal("internal: %s", only_with);
    const mc_flag_seen_t *s;
    const mc_flag_t *f = lookup(c, seen, tok[0], &s);
    if (f->type != MC_FLAG_CHOICE || f->ref) mc_fatal("internal: only_with %s", only_with);
    return mc_flag_same_value(f, (const char *)a + f->field, tok[1]);
}

/* What one old flag did, for its warning. */
typedef struct {
    const mc_flag_t *f;
    char given[160]; /* as written: "--activations-checkpoint-method uniform" */
    const char *value;
    bool ignored; /* its only_with did not hold */
    char applied[256];
} old_use_t;

static void warning(const old_use_t *u)
{
    char *w = g_warnings[g_nwarnings++];
    const mc_flag_t *f = u->f;
    if (u->ignored) {
        char buf[256], *tok[MAX_TOKENS], meaning[256] = "";
        int k = tokens(f->modern, u->value, buf, sizeof(buf), tok);
        for (int i = 0; i < k; i++) {
            size_t len = strlen(meaning);
            snprintf(meaning + len, sizeof(meaning) - len, "%s%s", i ? " " : "", tok[i]);
        }
        snprintf(w, TEXT,
                 "%s is an old Megatron flag for %s (%s); without %s it has no effect, as in "
                 "Megatron",
                 u->given, meaning, f->note, f->only_with);
    } else if (!f->modern)
        snprintf(w, TEXT, "%s is an old Megatron flag, accepted: %s", u->given, f->note);
    else
        snprintf(w, TEXT, "%s is an old Megatron flag, taken as %s (%s)", u->given, u->applied,
                 f->note);
}

/* Until it dropped --DDP-impl, Megatron asserted local DDP for these (validate_args at
 * 3fb3e95ec6^). */
static void ddp_torch(const mc_cli_t *c, const mc_flag_seen_t *seen)
{
    static const char *const needs_local[][2] = {
        {"--bf16", "gradients accumulated and all-reduced in fp32, which bf16 implies"},
        {"--accumulate-allreduce-grads-in-fp32", "gradients accumulated and all-reduced in fp32"},
        {"--use-distributed-optimizer", "the distributed optimizer"}};
    const mc_flag_seen_t *s;
    lookup(c, seen, "--DDP-impl", &s);
    if (!s->given || s->invalid || strcmp(s->value, "torch") != 0) return;
    for (size_t k = 0; k < sizeof(needs_local) / sizeof(needs_local[0]); k++) {
        lookup(c, seen, needs_local[k][0], &s);
        if (s->given)
            mc_cli_problem("--DDP-impl torch conflicts with %s (Megatron required local DDP for "
                           "%s; drop --DDP-impl: megatron-c's data parallelism is Megatron's "
                           "local DDP)",
                           needs_local[k][0], needs_local[k][1]);
    }
}

void mc_cli_legacy_map(const mc_cli_t *c, const mc_flag_seen_t *seen, mc_args_t *a)
{
    old_use_t uses[MAX_OLD];
    int n = 0;
    g_ntaken = g_nwarnings = 0;
    size_t i = 0;
    for (int k = 0; k < c->nsets; k++)
        for (size_t j = 0; j < c->sets[k].count; j++, i++) {
            const mc_flag_t *f = &c->sets[k].flags[j];
            if (f->status != MC_FLAG_LEGACY || !seen[i].given || seen[i].invalid) continue;
            if (n == MAX_OLD) mc_fatal("internal: more than %d old flags", MAX_OLD);
            old_use_t *u = &uses[n++];
            memset(u, 0, sizeof(*u));
            u->f = f;
            u->value = seen[i].value;
            bool valued = f->type != MC_FLAG_STORE_TRUE && f->type != MC_FLAG_STORE_FALSE;
            snprintf(u->given, sizeof(u->given), "%s%s%s", f->name, valued ? " " : "",
                     valued ? u->value : "");
        }
    /* The old flags always in effect first; those that needed another's value read it after. */
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < n; k++) {
            old_use_t *u = &uses[k];
            if (!u->f->modern || (u->f->only_with != NULL) != pass) continue;
            if (u->f->only_with && !holds(c, seen, a, u->f->only_with)) u->ignored = true;
            else
                take_text(c, seen, a, u->given, u->f->modern, u->value, false, u->applied,
                          sizeof(u->applied));
        }
    /* Old defaults last: they yield to every flag given, old or new. */
    for (int k = 0; k < n; k++)
        if (uses[k].f->modern_default && !uses[k].ignored)
            take_text(c, seen, a, uses[k].given, uses[k].f->modern_default, NULL, true,
                      uses[k].applied, sizeof(uses[k].applied));
    ddp_torch(c, seen);
    for (int k = 0; k < n; k++) warning(&uses[k]);
}

void mc_cli_legacy_warn(void)
{
    for (int k = 0; k < g_nwarnings; k++) mc_input_warn("%s", g_warnings[k]);
}
