/* --help and --flags-markdown (docs/FLAGS.md), both printed from the flag table. */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "cli/cli.h"
#include "config/env.h"
#include "config/flags.h"

enum { HELP_WIDTH = 100, HELP_COLUMN = 24 };

/* argparse's metavar: the dest in capitals. */
static void metavar(const mc_flag_t *f, char *buf, size_t n)
{
    size_t j = 0;
    for (const char *p = f->name + 2; *p && j + 1 < n; p++)
        buf[j++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    buf[j] = '\0';
}

static void join(const char *const *list, const char *sep, char *buf, size_t n)
{
    buf[0] = '\0';
    for (const char *const *v = list; *v; v++) {
        if (v != list) strncat(buf, sep, n - strlen(buf) - 1);
        strncat(buf, *v, n - strlen(buf) - 1);
    }
}

/* "--num-layers NUM_LAYERS", "--optimizer {adam,sgd}", "--data-path [DATA_PATH ...]". */
static void invocation(const mc_flag_t *f, char *buf, size_t n)
{
    char mv[128], names[128];
    snprintf(names, sizeof(names), "%s%s%s", f->alias ? f->alias : "", f->alias ? ", " : "",
             f->name);
    metavar(f, mv, sizeof(mv));
    switch (f->type) {
    case MC_FLAG_STORE_TRUE:
    case MC_FLAG_STORE_FALSE:
    case MC_FLAG_ACTION: snprintf(buf, n, "%s", names); break;
    case MC_FLAG_CHOICE: {
        char list[512];
        join(f->choices, ",", list, sizeof(list));
        snprintf(buf, n, "%s {%s}", names, list);
        break;
    }
    case MC_FLAG_LIST:
        if (f->nargs == 0) {
            snprintf(buf, n, "%s [%s ...]", names, mv);
        } else if (f->nargs < 0) {
            snprintf(buf, n, "%s %s [%s ...]", names, mv, mv);
        } else {
            snprintf(buf, n, "%s", names);
            for (int i = 0; i < f->nargs; i++) {
                strncat(buf, " ", n - strlen(buf) - 1);
                strncat(buf, mv, n - strlen(buf) - 1);
            }
        }
        break;
    default: snprintf(buf, n, "%s %s", names, mv);
    }
}

static const char *default_shown(const mc_flag_t *f)
{
    const char *d = mc_flag_default_text(f);
    return *d ? d : "''"; /* Python's repr of the empty-string defaults */
}

/* What an old flag is taken as: "--recompute-granularity full --recompute-method METHOD (and
 * --recompute-num-layers 1 unless given)", or "" when it stands for nothing. */
static void legacy_meaning(const mc_flag_t *f, char *buf, size_t n)
{
    buf[0] = '\0';
    if (!f->modern) return;
    char mv[128], text[512];
    metavar(f, mv, sizeof(mv));
    const char *at = strstr(f->modern, "%s");
    if (at) snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - f->modern), f->modern, mv, at + 2);
    else snprintf(text, sizeof(text), "%s", f->modern);
    snprintf(buf, n, "%s%s%s%s%s%s", text, f->modern_default ? " (and " : "",
             f->modern_default ? f->modern_default : "", f->modern_default ? " unless given)" : "",
             f->only_with ? "; no effect without " : "", f->only_with ? f->only_with : "");
}

/* "[partial: supported 1]", "[no-op: why]", ... or "" for implemented flags. */
static void status_tag(const mc_flag_t *f, char *buf, size_t n)
{
    char list[256], meaning[768];
    switch (f->status) {
    case MC_FLAG_IMPLEMENTED: buf[0] = '\0'; break;
    case MC_FLAG_PARTIAL:
        join(f->supported, ", ", list, sizeof(list));
        snprintf(buf, n, " [partial: supported %s]", list);
        break;
    case MC_FLAG_NOOP: snprintf(buf, n, " [no-op: %s]", f->note); break;
    case MC_FLAG_DEPRECATED: snprintf(buf, n, " [deprecated: refused]"); break;
    case MC_FLAG_NOT_IMPLEMENTED: snprintf(buf, n, " [not implemented yet]"); break;
    case MC_FLAG_LEGACY:
        legacy_meaning(f, meaning, sizeof(meaning));
        snprintf(buf, n, " [legacy: %s%s]",
                 meaning[0] ? "taken as " : "accepted, removed from Megatron", meaning);
        break;
    }
}

/* Prints text word-wrapped to HELP_WIDTH with continuation lines indented by `indent`; the
 * cursor is at column `col` when called, at the start of the text's first line. */
static void wrap(FILE *out, const char *text, int col, int indent)
{
    bool fresh = true; /* no word on this line yet */
    for (const char *p = text; *p;) {
        while (*p == ' ') p++;
        if (!*p) break;
        int word = (int)strcspn(p, " ");
        if (!fresh && col + 1 + word > HELP_WIDTH) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
            fresh = true;
        }
        if (!fresh) fputc(' ', out), col++;
        fwrite(p, 1, (size_t)word, out);
        col += word;
        p += word;
        fresh = false;
    }
    fputc('\n', out);
}

static void print_flag_help(FILE *out, const mc_flag_t *f)
{
    char inv[768], tag[1024], text[2048];
    invocation(f, inv, sizeof(inv));
    status_tag(f, tag, sizeof(tag));
    if (f->type == MC_FLAG_ACTION) snprintf(text, sizeof(text), "%s%s", f->help, tag);
    else snprintf(text, sizeof(text), "%s (default: %s)%s", f->help, default_shown(f), tag);
    int col = fprintf(out, "  %s", inv);
    if (col + 2 > HELP_COLUMN) {
        fprintf(out, "\n%*s", HELP_COLUMN, "");
    } else {
        fprintf(out, "%*s", HELP_COLUMN - col, "");
    }
    wrap(out, text, HELP_COLUMN, HELP_COLUMN);
}

void mc_flags_print_help(FILE *out)
{
    fputs(
        "usage: megatron-c [train] [--flag VALUE ...]\n"
        "       megatron-c preprocess-data --input FILE --output-prefix PREFIX ... (--help)\n"
        "       megatron-c inspect-data <training flags> [--split-name S] [--samples A:B] (--help)\n"
        "       megatron-c convert-checkpoint --load-dir DIR --save-dir DIR\n"
        "                  [--target-tensor-parallel-size T] [--target-pipeline-parallel-size P] ... (--help)\n"
        "       megatron-c export-hf --load DIR --output DIR [--max-shard-size 5GB] (--help)\n"
        "       megatron-c import-hf --hf-dir DIR --save DIR [--tensor-model-parallel-size T] ... (--help)\n"
        "       megatron-c --version\n\n",
        out);
    wrap(out,
         "Megatron-LM's GPT pretraining (pretrain_gpt.py) as one binary. The flags are "
         "Megatron's, with Megatron's defaults; the \"megatron-c\" group holds megatron-c's "
         "own. A flag marked [not implemented yet] stops the run if it is given anything but "
         "its default; [no-op] flags are accepted and change nothing; [legacy] flags are ones "
         "Megatron removed, taken as the flags named. docs/FLAGS.md has the full support "
         "table.",
         0, 0);
    for (const char *const *g = mc_flag_groups(); *g; g++) {
        fprintf(out, "\n%s:\n", *g);
        for (size_t i = 0; i < mc_flag_count(); i++) {
            const mc_flag_t *f = mc_flag_at(i);
            if (strcmp(f->group, *g) == 0) print_flag_help(out, f);
        }
    }
}

/* A subcommand's table: its groups in table order, each flag as training's --help shows it. */
void mc_cli_print_flags(FILE *out, const mc_flag_set_t *set)
{
    const char *group = NULL;
    for (size_t i = 0; i < set->count; i++) {
        const mc_flag_t *f = &set->flags[i];
        const char *g = f->group && f->group[0] ? f->group : "options";
        if (!group || strcmp(group, g) != 0) fprintf(out, "\n%s:\n", group = g);
        print_flag_help(out, f);
    }
}

/* ---- docs/FLAGS.md ---- */

/* A table cell: '|' would end the cell early. */
static void cell(FILE *out, const char *text)
{
    for (const char *p = text; *p; p++) {
        if (*p == '|') fputc('\\', out);
        fputc(*p, out);
    }
}

static void markdown_row(FILE *out, const mc_flag_t *f)
{
    fprintf(out, "| `%s`", f->name);
    if (f->alias) fprintf(out, " (`%s`)", f->alias);
    fputs(" | ", out);
    if (f->type != MC_FLAG_ACTION) {
        fputc('`', out);
        cell(out, default_shown(f));
        fputc('`', out);
    }
    fprintf(out, " | %s | ", mc_flag_status_name(f->status));
    if (f->supported) { /* partial, or an old flag with some values refused */
        char list[256];
        join(f->supported, ", ", list, sizeof(list));
        fputs("supported: ", out);
        cell(out, list);
        fputs(f->note ? ". " : "", out);
    }
    if (f->status == MC_FLAG_LEGACY && f->modern) {
        char meaning[768];
        legacy_meaning(f, meaning, sizeof(meaning));
        fputs("taken as ", out);
        cell(out, meaning);
        fputs(": ", out);
    }
    if (f->note) cell(out, f->note);
    fputs(" |\n", out);
}

static void markdown_summary(FILE *out)
{
    size_t counts[MC_FLAG_LEGACY + 1] = {0};
    for (size_t i = 0; i < mc_flag_count(); i++) counts[mc_flag_at(i)->status]++;
    fprintf(out,
            "%zu flags: %zu implemented, %zu partial, %zu no-op, %zu not implemented yet, "
            "%zu deprecated, %zu legacy.\n",
            mc_flag_count(), counts[MC_FLAG_IMPLEMENTED], counts[MC_FLAG_PARTIAL],
            counts[MC_FLAG_NOOP], counts[MC_FLAG_NOT_IMPLEMENTED], counts[MC_FLAG_DEPRECATED],
            counts[MC_FLAG_LEGACY]);
}

void mc_flags_print_markdown(FILE *out)
{
    fputs(
        "# megatron-c flags\n\n"
        "<!-- Generated by `megatron-c --flags-markdown` (`make docs`) from the flag table in "
        "config/ and the environment table in config/env.c. Do not edit. -->\n\n"
        "The flags of Megatron-LM's `pretrain_gpt.py` that megatron-c recognises, grouped as in "
        "Megatron's `--help`, with Megatron's defaults (MEGATRON.md sections 3 and 11), and "
        "megatron-c's own flags in the last group.\n\n"
        "| status | meaning |\n|---|---|\n"
        "| implemented | does what Megatron does |\n"
        "| partial | implemented for the values listed; any other value stops the run (exit 2) |\n"
        "| no-op | accepted and changes nothing in megatron-c; the note says why |\n"
        "| not implemented yet | accepted with its default value; anything else stops the run "
        "(exit 2) |\n"
        "| deprecated | refused, as Megatron refuses it |\n"
        "| legacy | Megatron removed it, but old recipes pass it: accepted and taken as the "
        "modern flags shown (one warning line says so); one that disagrees with a flag given "
        "too stops the run (exit 2) |\n\n",
        out);
    markdown_summary(out);
    for (const char *const *g = mc_flag_groups(); *g; g++) {
        fprintf(out, "\n## %s\n\n| flag | default | status | note |\n|---|---|---|---|\n", *g);
        for (size_t i = 0; i < mc_flag_count(); i++) {
            const mc_flag_t *f = mc_flag_at(i);
            if (strcmp(f->group, *g) == 0) markdown_row(out, f);
        }
    }
    mc_env_print_markdown(out);
}
