/* preprocess-data's files: the input list (a path, or a glob with --partitions), line counts for
 * --keep-sequential-samples, and removing outputs after an error. */
#include <errno.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "data/preprocess_pipe.h"

char *mc_prep_fmt(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = malloc((size_t)n + 1);
    if (!s) mc_fatal("out of memory");
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

void mc_prep_remove_outputs(mc_prep_out_t *o)
{
    if (o->w) mc_indexed_writer_abort(o->w);
    o->w = NULL;
    if (o->finished) {
        char *bin = mc_prep_fmt("%s.bin", o->prefix), *idx = mc_prep_fmt("%s.idx", o->prefix);
        unlink(bin);
        unlink(idx);
        free(bin);
        free(idx);
        o->finished = false;
    }
}

const char *mc_prep_gz_message(gzFile gz, const char *path)
{
    int errnum;
    const char *msg = gzerror(gz, &errnum);
    if (errnum == Z_ERRNO) return strerror(errno);
    size_t n = strlen(path);
    if (strncmp(msg, path, n) == 0 && strncmp(msg + n, ": ", 2) == 0) msg += n + 2;
    return msg;
}

void mc_prep_free_files(char **files, int n)
{
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
}

static void check_input(const char *path, char **files, int n)
{
    char msg[ERR_LEN] = "";
    struct stat st;
    if (stat(path, &st) != 0 || access(path, R_OK) != 0)
        snprintf(msg, sizeof(msg), "cannot open --input %s: %s", path, strerror(errno));
    else if (S_ISDIR(st.st_mode))
        snprintf(msg, sizeof(msg), "--input %s is a directory (expected a JSON lines file)", path);
    if (!msg[0]) return;
    mc_prep_free_files(files, n);
    mc_user_error("%s", msg);
}

char **mc_prep_input_files(const mc_preprocess_args_t *a, int *n_out)
{
    char **files;
    int n = 0;
    if (a->partitions == 1) {
        files = malloc(sizeof(*files));
        if (!files || !(files[0] = strdup(a->input))) mc_fatal("out of memory");
        n = 1;
    } else {
        glob_t g;
        int rc = glob(a->input, 0, NULL, &g);
        if (rc == GLOB_NOMATCH)
            mc_user_error("--input %s matched no files (with --partitions > 1 it is a glob)",
                          a->input);
        if (rc != 0) mc_user_error("--input %s: glob failed", a->input);
        files = malloc(g.gl_pathc * sizeof(*files));
        if (!files) mc_fatal("out of memory");
        for (size_t i = 0; i < g.gl_pathc; i++)
            if (!(files[n++] = strdup(g.gl_pathv[i]))) mc_fatal("out of memory");
        globfree(&g);
    }
    for (int i = 0; i < n; i++) check_input(files[i], files, n);
    *n_out = n;
    return files;
}

int64_t mc_prep_count_lines(const char *path, char *buf)
{
    gzFile gz = gzopen(path, "rb");
    if (!gz) mc_user_error("cannot open --input %s: %s", path, strerror(errno));
    gzbuffer(gz, READ_BYTES);
    int64_t lines = 0;
    char last = '\n';
    int n;
    while ((n = gzread(gz, buf, READ_BYTES)) > 0) {
        for (const char *q = buf, *end = buf + n; (q = memchr(q, '\n', (size_t)(end - q))); q++)
            lines++;
        last = buf[n - 1];
    }
    int errnum;
    gzerror(gz, &errnum);
    if (n < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) {
        char m[256];
        snprintf(m, sizeof(m), "%s", mc_prep_gz_message(gz, path));
        gzclose(gz);
        mc_user_error("reading --input %s: %s", path, m);
    }
    gzclose(gz);
    return lines + (last != '\n');
}
