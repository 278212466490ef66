/* The whole of Megatron-LM's pretrain_gpt.py command line is in the flag table: every option
 * string its parser has at core_v0.15.0 and at main (test/fixtures/megatron-flags-*.tsv, written
 * by scripts/megatron-flags.py from Megatron's own argparse parser), with Megatron's form (a
 * switch is a switch, a valued flag takes as many values as Megatron's nargs says), and each,
 * given alone, is accepted or refused by name: never "unrecognized". */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/flags.h"
#include "test/unit/cli_run.h"
#include "test/unit/fixture.h"

/* The lists Megatron's parsers gave (scripts/megatron-flags.py names the commits). */
static const char *const k_lists[] = {"megatron-flags-core_v0.15.0.tsv",
                                      "megatron-flags-main-d98e8a64dd.tsv"};

/* One option string of one list: the columns the checks need. */
typedef struct {
    char option[96];
    char action[24]; /* store, store_true, store_false, boolean_optional, help */
    char type[48];
    char nargs[8];
    char def[256];
    char choices[1024];
} row_t;

enum { MAX_ROWS = 2048 };
static row_t g_rows[MAX_ROWS];
static int g_nrows;

/* The tab-separated column `col` of line into out (cut to n). */
static void column(const char *line, int col, char *out, size_t n)
{
    const char *p = line;
    for (int c = 0; c < col && p; c++) p = (p = strchr(p, '\t')) ? p + 1 : NULL;
    size_t len = 0;
    if (p)
        while (p[len] && p[len] != '\t' && p[len] != '\n') len++;
    snprintf(out, n, "%.*s", (int)len, p ? p : "");
}

static void load_list(const char *file)
{
    char path[4096];
    assert_int_equal(mc_fx_path(path, sizeof(path), file), 0);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s", path);
    static char line[1 << 16];
    int n = 0;
    for (bool header = true; fgets(line, sizeof(line), f); header = false) {
        if (header) continue; /* option action type nargs default const choices ... */
        assert_true(g_nrows < MAX_ROWS);
        row_t *r = &g_rows[g_nrows++];
        column(line, 0, r->option, sizeof(r->option));
        column(line, 1, r->action, sizeof(r->action));
        column(line, 2, r->type, sizeof(r->type));
        column(line, 3, r->nargs, sizeof(r->nargs));
        column(line, 4, r->def, sizeof(r->def));
        column(line, 6, r->choices, sizeof(r->choices));
        n++;
    }
    fclose(f);
    /* A truncated or empty list would make the checks below vacuous. */
    if (n < 500) fail_msg("%s has only %d option strings", path, n);
}

static int setup(void **state)
{
    (void)state;
    g_nrows = 0;
    for (size_t i = 0; i < sizeof(k_lists) / sizeof(k_lists[0]); i++) load_list(k_lists[i]);
    return 0;
}

static bool is_switch(const row_t *r)
{
    return strcmp(r->action, "store_true") == 0 || strcmp(r->action, "store_false") == 0 ||
           strcmp(r->action, "boolean_optional") == 0;
}

/* Entries that read fewer values than Megatron's type takes, on purpose or not yet fixed:
 * each is named here so that a new one fails. */
static bool known_narrower(const char *name)
{
    /* an int where Megatron's type=float (1000 reads alike; 1e3 does not) */
    return strcmp(name, "--loss-scale-window") == 0;
}

static bool integer_choices(const char *choices)
{
    for (const char *p = choices; *p; p++)
        if (*p != '|' && (*p < '0' || *p > '9') && *p != '-') return false;
    return true;
}

/* Whether the table's type t (a list's element type when elem) reads every value Megatron's
 * type reads: an int as INT, INT64 or FLOAT; a float as FLOAT (list elements as text: the
 * table has no float lists); choices as CHOICE or text, integer ones also as INT with bounds;
 * text and Megatron's own converters (tuple_type, moe_freq_type, ...) as text. */
static bool same_value_type(mc_flag_type_t t, const row_t *r, bool elem)
{
    if (known_narrower(r->option)) return true;
    bool text = t == MC_FLAG_STRING || t == MC_FLAG_CHOICE;
    if (r->choices[0])
        return text || (integer_choices(r->choices) && (t == MC_FLAG_INT || t == MC_FLAG_INT64));
    if (strcmp(r->type, "int") == 0)
        return t == MC_FLAG_INT || t == MC_FLAG_INT64 || t == MC_FLAG_FLOAT;
    if (strcmp(r->type, "float") == 0) return t == MC_FLAG_FLOAT || (elem && t == MC_FLAG_STRING);
    return text;
}

/* Whether the table's entry parses the way Megatron's action does: a switch as a switch, a
 * valued flag with Megatron's number of values, each read as Megatron's type reads it. */
static bool same_form(const mc_flag_t *f, const row_t *r)
{
    if (strcmp(r->action, "help") == 0) return f->type == MC_FLAG_ACTION;
    if (is_switch(r)) return f->type == MC_FLAG_STORE_TRUE || f->type == MC_FLAG_STORE_FALSE;
    if (f->type == MC_FLAG_STORE_TRUE || f->type == MC_FLAG_STORE_FALSE ||
        f->type == MC_FLAG_ACTION)
        return false;
    if (!r->nargs[0]) return f->type != MC_FLAG_LIST && same_value_type(f->type, r, false);
    if (f->type != MC_FLAG_LIST || !same_value_type(f->elem, r, true)) return false;
    if (strcmp(r->nargs, "+") == 0) return f->nargs == -1;
    if (strcmp(r->nargs, "*") == 0) return f->nargs == 0;
    return f->nargs == atoi(r->nargs);
}

static void test_every_string_is_in_the_table(void **state)
{
    (void)state;
    int missing = 0;
    for (int i = 0; i < g_nrows; i++) {
        const row_t *r = &g_rows[i];
        if (mc_flag_find(r->option)) continue;
        print_message("# %s is not in the flag table\n", r->option);
        missing++;
    }
    if (missing) fail_msg("%d of Megatron's option strings are missing from the table", missing);
}

/* A flag both versions have in different forms (--lazy-mpu-init: a bool value at
 * core_v0.15.0, a switch at main) agrees with one of them. */
static void test_forms_agree_with_megatron(void **state)
{
    (void)state;
    int bad = 0;
    for (int i = 0; i < g_nrows; i++) {
        const mc_flag_t *f = mc_flag_find(g_rows[i].option);
        if (!f) continue;
        bool agrees = false;
        for (int j = 0; j < g_nrows && !agrees; j++)
            if (strcmp(g_rows[j].option, g_rows[i].option) == 0) agrees = same_form(f, &g_rows[j]);
        if (agrees) continue;
        print_message("# %s: Megatron's is %s type '%s' nargs '%s', the table's is not alike\n",
                      g_rows[i].option, g_rows[i].action, g_rows[i].type, g_rows[i].nargs);
        bad++;
    }
    if (bad) fail_msg("%d flags parse otherwise than Megatron's", bad);
}

#define LINE                                                                                        \
    "--device cpu --mock-data --num-layers 2 --hidden-size 64 --num-attention-heads 4 "            \
    "--seq-length 64 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 8 "     \
    "--train-iters 50 --lr 1e-3 --vocab-size 512"

/* Megatron's choice as the command line spells it: an enum's name ("<AttnBackend.flash: 1>"). */
static void choice_text(const char *c, size_t len, char *out, size_t n)
{
    const char *dot = memchr(c, '.', len), *colon = memchr(c, ':', len);
    if (c[0] == '<' && dot && colon && dot < colon) c = dot + 1, len = (size_t)(colon - c);
    snprintf(out, n, "%.*s", (int)len, c);
}

/* A value Megatron's parser takes for r: its first choice, else its default, else one of its
 * type. */
static void valid_value(const row_t *r, char *out, size_t n)
{
    char one[256];
    if (r->choices[0]) choice_text(r->choices, strcspn(r->choices, "|"), one, sizeof(one));
    else if (strcmp(r->def, "None") != 0 && r->def[0] && !strchr(r->def, ' ') &&
             !strchr(r->def, '[') && !strchr(r->def, '(') && strncmp(r->def, "stub:", 5) != 0)
        snprintf(one, sizeof(one), "%s", r->def);
    else if (strcmp(r->type, "int") == 0) snprintf(one, sizeof(one), "1");
    else if (strcmp(r->type, "float") == 0) snprintf(one, sizeof(one), "0.5");
    else snprintf(one, sizeof(one), "x");
    int count = r->nargs[0] >= '1' && r->nargs[0] <= '9' ? atoi(r->nargs) : 1;
    out[0] = '\0';
    for (int k = 0; k < count; k++)
        snprintf(out + strlen(out), n - strlen(out), "%s%s", k ? " " : "", one);
}

/* The row an option is tried with: of the lists whose form the table has (a flag whose form
 * changed between versions is tried in the form megatron-c took), one with choices (a value of
 * the version that restricts it is valid in both); NULL when i is not the option's first row. */
static const row_t *row_to_try(int i, const mc_flag_t *f)
{
    const row_t *best = NULL;
    for (int j = 0; j < g_nrows; j++) {
        if (strcmp(g_rows[j].option, g_rows[i].option) != 0) continue;
        if (j < i) return NULL;
        if (same_form(f, &g_rows[j]) && (!best || (!best->choices[0] && g_rows[j].choices[0])))
            best = &g_rows[j];
    }
    return best;
}

/* Refused by the parser itself: the flag's form or value ("argument --x: expected one
 * argument", "... invalid choice"), not what megatron-c supports. */
static bool parse_error(const char *err)
{
    return strstr(err, "unrecognized") || strstr(err, "error: argument --");
}

/* Each option string alone on a valid line, with a valid value: accepted, or refused by name.
 * A flag megatron-c implements may also be refused by validation for what the rest of the line
 * lacks (--vocab-file without --merge-file): it was recognised and taken, which is the point. */
static void test_each_alone_accepted_or_refused_by_name(void **state)
{
    (void)state;
    static mc_run_t run;
    int bad = 0;
    for (int i = 0; i < g_nrows; i++) {
        const mc_flag_t *f = mc_flag_find(g_rows[i].option);
        const row_t *r = f ? row_to_try(i, f) : NULL;
        if (!r || strcmp(r->action, "help") == 0) continue;
        char value[1024] = "", line[2048];
        if (!is_switch(r)) valid_value(r, value, sizeof(value));
        snprintf(line, sizeof(line), "%s %s%s%s", LINE, r->option, value[0] ? " " : "", value);
        mc_run_parse(&run, line, 1);
        bool taken = f->status != MC_FLAG_NOT_IMPLEMENTED && f->status != MC_FLAG_DEPRECATED;
        bool ok = run.status == 0 ||
                  (run.status == 2 && !parse_error(run.err) && (strstr(run.err, r->option) || taken));
        if (ok) continue;
        print_message("# '%s %s': status %d: %s", r->option, value, run.status, run.err);
        bad++;
    }
    if (bad) fail_msg("%d of Megatron's flags given alone were not taken or refused by name", bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_string_is_in_the_table),
        cmocka_unit_test(test_forms_agree_with_megatron),
        cmocka_unit_test(test_each_alone_accepted_or_refused_by_name),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
