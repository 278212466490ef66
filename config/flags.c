/* The flag table as one sequence (it is written in several files), lookup and typo suggestions. */
#include "base/error.h"
#include "config/flags.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "config/flags_table.h"

/* The table's parts in lookup and help order: the flags megatron-c implements (or names the
 * alternative of) first, so that "did you mean" prefers them on ties. */
static const struct {
    const mc_flag_t *flags;
    const size_t *count;
} k_parts[MC_TRAINING_SETS] = {
    {mc_flags_model, &mc_flags_model_count},       {mc_flags_train, &mc_flags_train_count},
    {mc_flags_legacy, &mc_flags_legacy_count},     {mc_flags_moe, &mc_flags_moe_count},
    {mc_flags_mla_fp8, &mc_flags_mla_fp8_count},   {mc_flags_serving, &mc_flags_serving_count},
    {mc_flags_services, &mc_flags_services_count}, {mc_flags_misc, &mc_flags_misc_count},
};

size_t mc_flag_count(void)
{
    size_t n = 0;
    for (int k = 0; k < MC_TRAINING_SETS; k++) n += *k_parts[k].count;
    return n;
}

const mc_flag_t *mc_flag_at(size_t i)
{
    for (int k = 0; k < MC_TRAINING_SETS; k++) {
        if (i < *k_parts[k].count) return &k_parts[k].flags[i];
        i -= *k_parts[k].count;
    }
    return NULL;
}

const char *const *mc_flag_groups(void)
{
    /* The order of Megatron's parse_args (arguments.py), so --help reads like Megatron's; the
     * titles are core_v0.15.0's where it has the group, main's otherwise (main renamed some:
     * a flag of both versions is under the old title, one only main has under the new). */
    static const char *const groups[] = {"network size",
                                         "transformer configuration",
                                         "regularization",
                                         "training",
                                         "rl",
                                         "initialization",
                                         "learning rate",
                                         "learning rate and weight decay",
                                         "checkpointing",
                                         "mixed precision",
                                         "distributed",
                                         "distributed init",
                                         "validation",
                                         "data and dataloader",
                                         "tokenizer",
                                         "autoresume",
                                         "biencoder",
                                         "vision",
                                         "retro",
                                         "moe",
                                         "mla",
                                         "experimental_attention_variant",
                                         "heterogeneous architecture",
                                         "logging",
                                         "profiling",
                                         "config logger",
                                         "Logits Distillation",
                                         "straggler",
                                         "workload inspector",
                                         "inference",
                                         "Transformer-Engine",
                                         "experimental",
                                         "one logger",
                                         "In-process restart",
                                         "ft_package",
                                         "rerun engine",
                                         "msc",
                                         "kitchen",
                                         "sft",
                                         "fault injector",
                                         "opentelemetry",
                                         "modelopt-generic",
                                         "megatron-c",
                                         NULL};
    return groups;
}

const mc_flag_t *mc_flag_find(const char *name)
{
    for (size_t i = 0; i < mc_flag_count(); i++) {
        const mc_flag_t *f = mc_flag_at(i);
        if (strcmp(f->name, name) == 0 || (f->alias && strcmp(f->alias, name) == 0)) return f;
    }
    return NULL;
}


/* ---- did you mean ---- */

enum { MAX_WORDS = 16, NAME_MAX_LEN = 128 };

/* A name as typos are judged: without its leading dashes, in lower case, '_' read as '-'; its
 * words; and the words run together. */
typedef struct {
    char norm[NAME_MAX_LEN];
    char flat[NAME_MAX_LEN];
    char words[MAX_WORDS][NAME_MAX_LEN];
    int n;
} words_t;

static bool split_words(const char *name, words_t *w)
{
    while (*name == '-') name++;
    if (strlen(name) >= NAME_MAX_LEN) return false;
    size_t k = 0, f = 0, len = 0;
    w->n = 0;
    for (const char *p = name;; p++) {
        char ch = *p == '_' ? '-' : (char)tolower((unsigned char)*p);
        if (ch != '\0') w->norm[k++] = ch;
        if (ch != '-' && ch != '\0') {
            w->flat[f++] = ch;
            if (w->n == MAX_WORDS) return false;
            w->words[w->n][len++] = ch;
            continue;
        }
        if (len) w->words[w->n++][len] = '\0', len = 0;
        if (ch == '\0') break;
    }
    w->norm[k] = w->flat[f] = '\0';
    return w->n > 0;
}

/* The slips that turn the typed word a into b, when small enough to be a typo: one edit in a
 * word of three letters or more, two in one of eight or more; else -1. */
static int word_slips(const char *a, const char *b)
{
    size_t d = mc_edit_distance(a, b), la = strlen(a), lb = strlen(b);
    size_t shorter = la < lb ? la : lb;
    if (d == 0 || (d == 1 && shorter >= 3) || (d == 2 && shorter >= 8)) return (int)d;
    return -1;
}

/* Word by word, in order: every typed word is a word of the candidate with small slips (two
 * at most in all), and at most one candidate word is left out, not the first (a leading word
 * names another thing: --expert-tensor-parallel-size), of a candidate of three words or more.
 * Costs a slip 1 and the left-out word 2; -1 when implausible. */
static int word_cost(const words_t *t, const words_t *c)
{
    enum { NONE = 1 << 20 };
    /* the fewest slips matching the first i typed words with the first j candidate words,
     * with o (0 or 1) candidate words left out */
    int slips[MAX_WORDS + 1][MAX_WORDS + 1][2];
    for (int i = 0; i <= t->n; i++)
        for (int j = 0; j <= c->n; j++) slips[i][j][0] = slips[i][j][1] = NONE;
    slips[0][0][0] = 0;
    for (int i = 0; i <= t->n; i++)
        for (int j = 0; j < c->n; j++)
            for (int o = 0; o < 2; o++) {
                int here = slips[i][j][o];
                if (here == NONE) continue;
                if (o == 0 && j > 0 && c->n >= 3 && here < slips[i][j + 1][1])
                    slips[i][j + 1][1] = here;
                int s = i < t->n ? word_slips(t->words[i], c->words[j]) : -1;
                if (s >= 0 && here + s < slips[i + 1][j + 1][o]) slips[i + 1][j + 1][o] = here + s;
            }
    int best = -1;
    for (int o = 0; o < 2; o++) {
        int s = slips[t->n][c->n][o];
        if (s <= 2 && (best < 0 || s + 2 * o < best)) best = s + 2 * o;
    }
    return best;
}

/* How far `typed` is from `cand` as a typo (0 is the same name), or -1 if it is not one. */
static int typo_cost(const words_t *t, const char *cand)
{
    words_t c;
    if (!split_words(cand, &c)) return -1;
    if (strcmp(t->norm, c.norm) == 0) return 0;
    if (strcmp(t->flat, c.flat) == 0) return 1; /* --global-batchsize */
    /* cut off: --micro-batch */
    if (strlen(t->norm) >= 3 && strncmp(c.norm, t->norm, strlen(t->norm)) == 0) return 1;
    return word_cost(t, &c);
}

const char *mc_flag_closest(const char *name, const char *const *names, size_t n)
{
    words_t t;
    if (!split_words(name, &t)) return NULL;
    const char *best = NULL;
    int best_cost = -1;
    for (size_t i = 0; i < n; i++) {
        int cost = typo_cost(&t, names[i]);
        if (cost >= 0 && (best_cost < 0 || cost < best_cost)) best_cost = cost, best = names[i];
    }
    return best;
}

const char *mc_flag_suggest(const char *name)
{
    const size_t n = mc_flag_count();
    const char **names = malloc(n * sizeof(*names));
    if (!names) mc_fatal("out of host memory");
    for (size_t i = 0; i < n; i++) names[i] = mc_flag_at(i)->name;
    const char *best = mc_flag_closest(name, names, n);
    free(names);
    return best;
}

int mc_flag_training_sets(mc_flag_set_t out[MC_TRAINING_SETS], mc_args_t *args)
{
    for (int k = 0; k < MC_TRAINING_SETS; k++)
        out[k] = (mc_flag_set_t){k_parts[k].flags, *k_parts[k].count, args};
    return MC_TRAINING_SETS;
}

const char *mc_flag_status_name(mc_flag_status_t status)
{
    switch (status) {
    case MC_FLAG_IMPLEMENTED: return "implemented";
    case MC_FLAG_PARTIAL: return "partial";
    case MC_FLAG_NOOP: return "no-op";
    case MC_FLAG_DEPRECATED: return "deprecated";
    case MC_FLAG_LEGACY: return "legacy";
    case MC_FLAG_NOT_IMPLEMENTED: break;
    }
    return "not implemented yet";
}

const char *mc_flag_default_text(const mc_flag_t *f)
{
    switch (f->type) {
    case MC_FLAG_STORE_TRUE: return f->def ? f->def : "False";
    case MC_FLAG_STORE_FALSE: return f->def ? f->def : "True";
    case MC_FLAG_ACTION: return "";
    default: return f->def ? f->def : "None";
    }
}

bool mc_flag_within_bounds(const mc_flag_t *f, double v)
{
    if ((f->bounds & MC_MIN) && !(v >= f->min)) return false;
    if ((f->bounds & MC_MIN_EXCL) && !(v > f->min)) return false;
    if ((f->bounds & MC_MAX) && !(v <= f->max)) return false;
    if ((f->bounds & MC_MAX_EXCL) && !(v < f->max)) return false;
    return true;
}

void mc_flag_bounds_text(const mc_flag_t *f, char *buf, size_t n)
{
    bool lo = f->bounds & (MC_MIN | MC_MIN_EXCL), hi = f->bounds & (MC_MAX | MC_MAX_EXCL);
    if (lo && hi)
        snprintf(buf, n, "in %c%.15g, %.15g%c", (f->bounds & MC_MIN) ? '[' : '(', f->min, f->max,
                 (f->bounds & MC_MAX) ? ']' : ')');
    else if (lo) snprintf(buf, n, "%s %.15g", (f->bounds & MC_MIN) ? ">=" : ">", f->min);
    else if (hi) snprintf(buf, n, "%s %.15g", (f->bounds & MC_MAX) ? "<=" : "<", f->max);
    else snprintf(buf, n, "any value");
}
