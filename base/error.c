#include "base/error.h"

#include <ctype.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_rank = 0, g_world = 1;
static void (*g_abort_hook)(int code);
static bool g_rank_local_inputs;
static void (*g_user_trap)(const char *line);

void mc_error_set_rank(int rank, int world_size)
{
    g_rank = rank;
    g_world = world_size;
}
void mc_error_set_abort_hook(void (*hook)(int code)) { g_abort_hook = hook; }
void mc_error_set_rank_local(bool on) { g_rank_local_inputs = on; }

/* Until training starts (flags, data files) every rank reads the same inputs and meets the
 * same errors, so rank 0 speaks for all and every rank exits with the code (no abort: it could
 * kill rank 0 before it speaks). Later errors may be one rank's: every rank that meets one
 * reports it and ends the job. */
static bool speaks_for_inputs(void) { return g_rank == 0 || g_rank_local_inputs; }

__attribute__((noreturn)) static void exit_user_error(void)
{
    /* The launcher tears the job down once the first rank exits: a write by a library (PMIx's
     * connection to its daemon) while this rank waits or exits must not turn the refusal into a
     * death by SIGPIPE (mpirun then reports 141 instead of 2; seen once in CI). */
    if (g_world > 1) signal(SIGPIPE, SIG_IGN);
    if (g_world > 1 && g_rank_local_inputs && g_abort_hook) g_abort_hook(2);
    /* Launchers end the whole job when the first rank exits non-zero: the silent ranks leave
     * rank 0 time to print first (a loaded machine delayed it past their exit in CI). */
    if (g_world > 1 && g_rank != 0 && !g_rank_local_inputs)
        nanosleep(&(struct timespec){.tv_sec = 2}, NULL);
    exit(2);
}

void mc_user_error_trap(void (*trap)(const char *line)) { g_user_trap = trap; }

/* One line to stderr in one write: several ranks and the launcher share the stream, and a line
 * written in pieces can be cut by theirs. */
static void write_line(const char *prefix, const char *fmt, va_list ap)
{
    char line[8192];
    int k = snprintf(line, sizeof(line), "%s", prefix);
    if (k < 0 || k >= (int)sizeof(line) - 1) k = 0;
    int m = vsnprintf(line + k, sizeof(line) - (size_t)k - 1, fmt, ap);
    if (m < 0) m = 0;
    size_t len = (size_t)k + (size_t)m;
    if (len > sizeof(line) - 2) len = sizeof(line) - 2;
    line[len++] = '\n';
    fwrite(line, 1, len, stderr);
}

void mc_user_error(const char *fmt, ...)
{
    va_list ap;
    if (g_user_trap) {
        char line[1024];
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        g_user_trap(line); /* does not return; if it did, the line is still reported */
    }
    fflush(stdout);
    if (speaks_for_inputs()) {
        va_start(ap, fmt);
        write_line("megatron-c: error: ", fmt, ap);
        va_end(ap);
    }
    exit_user_error();
}

void mc_user_errors(const char *const *lines, int n)
{
    fflush(stdout);
    if (speaks_for_inputs())
        for (int i = 0; i < n; i++) fprintf(stderr, "megatron-c: error: %s\n", lines[i]);
    exit_user_error();
}

__attribute__((noreturn)) static void vfatal(const char *fmt, va_list ap)
{
    fflush(stdout);
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "megatron-c: rank %d: error: ", g_rank);
    write_line(prefix, fmt, ap);
    if (g_world > 1 && g_abort_hook) g_abort_hook(1);
    exit(1);
}

void mc_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfatal(fmt, ap);
}

void mc_fatal_by(int reporter, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (g_rank == reporter) vfatal(fmt, ap);
    va_end(ap);
    fflush(stdout);
    /* the reporter's abort ends this rank; should it never come, end anyway */
    nanosleep(&(struct timespec){.tv_sec = 30}, NULL);
    exit(1);
}

static void vwarn(const char *fmt, va_list ap)
{
    fputs("megatron-c: warning: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void mc_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwarn(fmt, ap);
    va_end(ap);
}

void mc_input_warn(const char *fmt, ...)
{
    if (!speaks_for_inputs()) return;
    va_list ap;
    va_start(ap, fmt);
    vwarn(fmt, ap);
    va_end(ap);
}

int mc_errf(char *err, size_t n, const char *fmt, ...)
{
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int mc_path_errf(char *err, size_t n, const char *path, const char *fmt, ...)
{
    if (!err || n == 0) return -1;
    int k = snprintf(err, n, "%s: ", path);
    if (k >= 0 && (size_t)k < n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + k, n - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return -1;
}

const char *mc_shown(const char *s, char buf[MC_SHOWN_MAX + 4])
{
    size_t n = 0;
    for (; s[n] && n < MC_SHOWN_MAX; n++) buf[n] = iscntrl((unsigned char)s[n]) ? '?' : s[n];
    if (s[n]) memcpy(buf + n, "...", 3), n += 3;
    buf[n] = '\0';
    return buf;
}

/* Optimal string alignment: Levenshtein with a swap of two neighbouring characters as one
 * edit (the commonest typo: "lenght"), over two rolling rows and the one before them. */
size_t mc_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t *rows = malloc(3 * (lb + 1) * sizeof(*rows));
    if (!rows) return (size_t)-1;
    size_t *older = rows, *prev = rows + lb + 1, *cur = rows + 2 * (lb + 1);
    for (size_t j = 0; j <= lb; j++) prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t best = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < best) best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                older[j - 2] + 1 < best)
                best = older[j - 2] + 1;
            cur[j] = best;
        }
        size_t *t = older;
        older = prev, prev = cur, cur = t;
    }
    size_t d = prev[lb];
    free(rows);
    return d;
}
