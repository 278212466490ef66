/* The flag table as one sequence (it is written in two files), lookup and typo suggestions. */
#include "base/error.h"
#include "config/flags.h"

#include <stdlib.h>
#include <string.h>

#include "config/flags_table.h"

size_t mc_flag_count(void) { return mc_flags_model_count + mc_flags_train_count; }

const mc_flag_t *mc_flag_at(size_t i)
{
    if (i < mc_flags_model_count) return &mc_flags_model[i];
    i -= mc_flags_model_count;
    return i < mc_flags_train_count ? &mc_flags_train[i] : NULL;
}

const char *const *mc_flag_groups(void)
{
    /* The order of Megatron's parse_args (arguments.py), so --help reads like Megatron's. */
    static const char *const groups[] = {"network size",
                                         "regularization",
                                         "training",
                                         "initialization",
                                         "learning rate",
                                         "checkpointing",
                                         "mixed precision",
                                         "distributed",
                                         "validation",
                                         "data and dataloader",
                                         "tokenizer",
                                         "moe",
                                         "logging",
                                         "Transformer-Engine",
                                         "experimental",
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


const char *mc_flag_closest(const char *name, const char *const *names, size_t n)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        size_t d = mc_edit_distance(name, names[i]);
        /* A cut-off name ("--micro-batch") is a typo too, though far by edit distance. */
        if (strlen(name) >= 5 && strncmp(names[i], name, strlen(name)) == 0 && d > 1) d = 1;
        if (d < best_d) best_d = d, best = names[i];
    }
    /* A third of the name (at least 2 edits) still reads as a typo; beyond that the
     * suggestion would be noise. */
    size_t limit = strlen(name) / 3;
    if (limit < 2) limit = 2;
    return best_d <= limit ? best : NULL;
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

int mc_flag_training_sets(mc_flag_set_t out[2], mc_args_t *args)
{
    out[0] = (mc_flag_set_t){mc_flags_model, mc_flags_model_count, args};
    out[1] = (mc_flag_set_t){mc_flags_train, mc_flags_train_count, args};
    return 2;
}

const char *mc_flag_status_name(mc_flag_status_t status)
{
    switch (status) {
    case MC_FLAG_IMPLEMENTED: return "implemented";
    case MC_FLAG_PARTIAL: return "partial";
    case MC_FLAG_NOOP: return "no-op";
    case MC_FLAG_DEPRECATED: return "deprecated";
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
