/* The start-up "arguments" block, as Megatron's _print_args prints it: every argument sorted
 * case-insensitively, name padded with dots, value after validation and derivation. Names are
 * Megatron's attributes (the flags' dest: --no-log-loss-scale-to-tensorboard is
 * log_loss_scale_to_tensorboard, True unless given), each once however many flags fill it. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/flags.h"

typedef struct {
    char name[64];
    char value[256];
} row_t;

static int row_cmp(const void *a, const void *b)
{
    return strcasecmp(((const row_t *)a)->name, ((const row_t *)b)->name);
}

/* The value a field holds while its flag is not given (Megatron's None). */
static double none_value(const mc_flag_t *f) { return f->none ? strtod(f->none, NULL) : 0.0; }

static void format_value(const mc_flag_t *f, const mc_args_t *a, char *out, size_t n)
{
    const char *p = (const char *)a + f->field;
    switch (f->type) {
    case MC_FLAG_STORE_TRUE: snprintf(out, n, "%s", *(const bool *)p ? "True" : "False"); break;
    case MC_FLAG_STORE_FALSE: snprintf(out, n, "%s", *(const bool *)p ? "True" : "False"); break;
    case MC_FLAG_INT:
    case MC_FLAG_INT64: {
        long long v = f->field_size == sizeof(int64_t) ? *(const int64_t *)p : *(const int *)p;
        if (!f->def && (double)v == none_value(f)) snprintf(out, n, "None");
        else snprintf(out, n, "%lld", v);
        break;
    }
    case MC_FLAG_FLOAT: {
        double v = *(const double *)p;
        if (!f->def && v == none_value(f)) snprintf(out, n, "None");
        else snprintf(out, n, "%.10g", v);
        break;
    }
    case MC_FLAG_STRING:
    case MC_FLAG_CHOICE: snprintf(out, n, "%s", *p ? p : "None"); break;
    case MC_FLAG_LIST: {
        int count = f->count_field ? *(const int *)((const char *)a + f->count_field) : 0;
        char *const *items = (char *const *)p;
        size_t used = 0;
        if (!count && f->def) { /* Megatron's default list of one value (--profile-ranks: [0]) */
            snprintf(out, n, f->elem == MC_FLAG_INT ? "[%s]" : "['%s']", f->def);
            break;
        }
        used += (size_t)snprintf(out, n, count ? "[" : "None");
        for (int i = 0; i < count && used < n; i++)
            used +=
                (size_t)snprintf(out + used, n - used, f->elem == MC_FLAG_INT ? "%s%s" : "%s'%s'",
                                 i ? ", " : "", items[i]); /* ints unquoted, as Python's */
        if (count && used < n) snprintf(out + used, n - used, "]");
        break;
    }
    case MC_FLAG_ACTION: snprintf(out, n, "None"); break;
    }
}

void mc_args_each(const mc_args_t *a, void (*fn)(void *ctx, const char *name, const char *value),
                  void *ctx)
{
    size_t n = mc_flag_count(), k = 0;
    row_t *rows = calloc(n + 8, sizeof(row_t));
    if (!rows) return;
    for (size_t i = 0; i < n; i++) {
        const mc_flag_t *f = mc_flag_at(i);
        if (!f->field_size || f->type == MC_FLAG_ACTION) continue;
        row_t *r = &rows[k++];
        if (f->dest) snprintf(r->name, sizeof(r->name), "%s", f->dest);
        else snprintf(r->name, sizeof(r->name), "%s", f->name + 2);
        for (char *c = r->name; *c; c++)
            if (*c == '-') *c = '_';
        format_value(f, a, r->value, sizeof(r->value));
    }
    /* values derived in validate_args that no flag sets */
    const struct {
        const char *name;
        int v;
    } derived[] = {
        {"world_size", a->world_size},
        {"data_parallel_size", a->data_parallel_size},
        {"num_microbatches", a->num_microbatches},
    };
    for (size_t i = 0; i < sizeof(derived) / sizeof(derived[0]); i++) {
        row_t *r = &rows[k++];
        snprintf(r->name, sizeof(r->name), "%s", derived[i].name);
        snprintf(r->value, sizeof(r->value), "%d", derived[i].v);
    }
    row_t *vpp = &rows[k++];
    snprintf(vpp->name, sizeof(vpp->name), "virtual_pipeline_model_parallel_size");
    if (a->virtual_pipeline_model_parallel_size > 1)
        snprintf(vpp->value, sizeof(vpp->value), "%d", a->virtual_pipeline_model_parallel_size);
    else snprintf(vpp->value, sizeof(vpp->value), "None");
    qsort(rows, k, sizeof(row_t), row_cmp);
    for (size_t i = 0; i < k; i++) /* a field two flags fill (--add-bias-linear and
                                     * --disable-bias-linear), its value alike, once */
        if (i == 0 || strcmp(rows[i].name, rows[i - 1].name) != 0)
            fn(ctx, rows[i].name, rows[i].value);
    free(rows);
}

static void print_row(void *out, const char *name, const char *value)
{
    int dots = 48 - (int)strlen(name);
    fprintf(out, "  %s %.*s %s\n", name, dots > 0 ? dots : 0,
            "................................................", value);
}

void mc_args_print(FILE *out, const mc_args_t *a)
{
    fprintf(out, "------------------------ arguments ------------------------\n");
    mc_args_each(a, print_row, out);
    fprintf(out, "-------------------- end of arguments ---------------------\n");
}
