/* See cli_run.h. */
#include "test/unit/cli_run.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"

int mc_run_split(const char *line, char *buf, size_t n, char **argv)
{
    snprintf(buf, n, "%s", line);
    int argc = 0;
    for (char *tok = strtok(buf, " "); tok && argc < MC_RUN_MAX_ARGS; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    return argc;
}

void mc_run_parse_here(mc_args_t *a, const char *line, int world_size)
{
    static char buf[8192];
    static char *argv[MC_RUN_MAX_ARGS];
    int argc = mc_run_split(line, buf, sizeof(buf), argv);
    mc_args_free(a); /* the lists of a previous parse into the same (static) arguments */
    mc_args_parse(a, argc, argv, world_size);
}

static void read_all(int fd, char *buf, size_t n)
{
    size_t len = 0;
    ssize_t r;
    while ((r = read(fd, buf + len, n - 1 - len)) > 0) len += (size_t)r;
    buf[len] = '\0';
    /* Drain whatever did not fit so the child can finish. */
    char sink[4096];
    while (r > 0 && read(fd, sink, sizeof(sink)) > 0) {}
    close(fd);
}

void mc_run_parse(mc_run_t *r, const char *line, int world_size)
{
    int out[2], err[2];
    assert_int_equal(pipe(out), 0);
    assert_int_equal(pipe(err), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        close(out[0]), close(err[0]), close(out[1]), close(err[1]);
        static mc_args_t a;
        mc_run_parse_here(&a, line, world_size);
        mc_args_free(&a);
        fflush(NULL);
        _exit(0);
    }
    close(out[1]), close(err[1]);
    read_all(out[0], r->out, sizeof(r->out)); /* stderr is small: no deadlock reading in turn */
    read_all(err[0], r->err, sizeof(r->err));
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int mc_run_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; *p; p++) n += *p == '\n';
    return n;
}

void mc_expect_error_world(const char *line, int world_size, const char *what)
{
    static mc_run_t r;
    mc_run_parse(&r, line, world_size);
    if (r.status != 2 || !strstr(r.err, what))
        fail_msg("for '%s': status %d, stderr '%s', expected '%s'", line, r.status, r.err, what);
    assert_int_equal(strncmp(r.err, "megatron-c: error: ", 19), 0);
    const char *nl = strchr(r.err, '\n');
    assert_non_null(nl);
    if (nl[1]) fail_msg("for '%s': more than one line: '%s'", line, r.err);
    assert_string_equal(r.out, "");
}

void mc_expect_error(const char *line, const char *what) { mc_expect_error_world(line, 1, what); }

void mc_expect_errors(const char *line, int n, const char *const *what)
{
    mc_expect_errors_world(line, 1, n, what);
}

void mc_expect_errors_world(const char *line, int world_size, int n, const char *const *what)
{
    static mc_run_t r;
    mc_run_parse(&r, line, world_size);
    if (r.status != 2 || mc_run_lines(r.err) != n)
        fail_msg("for '%s': status %d, stderr '%s', expected %d lines", line, r.status, r.err, n);
    const char *p = r.err;
    for (int k = 0; k < n; k++) {
        const char *nl = strchr(p, '\n');
        char one[1024];
        snprintf(one, sizeof(one), "%.*s", (int)(nl - p), p);
        if (strncmp(one, "megatron-c: error: ", 19) != 0 || !strstr(one, what[k]))
            fail_msg("for '%s': line %d is '%s', expected '%s'", line, k + 1, one, what[k]);
        p = nl + 1;
    }
    assert_string_equal(r.out, "");
}
