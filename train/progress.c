/* --log-progress: Megatron's progress.txt (see train/progress.h). */
#define _GNU_SOURCE /* strptime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/error.h"
#include "train/progress.h"

static void progress_path(const mc_trainer_t *t, char *path, size_t n)
{
    snprintf(path, n, "%s/progress.txt", t->args->save);
}

void mc_progress_append(const mc_trainer_t *t, const char *text)
{
    if (!t->args->save[0]) return;
    mc_barrier(t->comm, t->comm->world);
    if (t->par.rank != 0) return;
    char path[4200], err[4400];
    progress_path(t, path, sizeof(path));
    /* Megatron's open fails on a --save that does not exist yet; the save would make it */
    if (mc_mkdirs(t->args->save, err, sizeof(err)) != 0) mc_fatal("--log-progress: %s", err);
    FILE *f = fopen(path, "a");
    if (!f) mc_fatal("cannot append to %s (--log-progress)", path);
    time_t now = time(NULL);
    char when[64];
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&now));
    const char *job = getenv("SLURM_JOB_ID");
    fprintf(f, "%s\tJob ID: %s\t# GPUs: %d\t%s\n", when, job ? job : "", t->args->world_size, text);
    if (fclose(f) != 0) mc_fatal("cannot write %s (--log-progress)", path);
}

/* The value after ": " of a field ("# GPUs: 2"), or NULL. */
static const char *field_value(const char *tok)
{
    const char *c = tok ? strstr(tok, ": ") : NULL;
    return c ? c + 2 : NULL;
}

/* Megatron's get_start_time_from_progress_log: the time of the first "Starting job" line of the
 * latest run of jobs with this world size, and the operations of the last "Saved checkpoint"
 * line before it (a line of another world size restarts the search). Returns the epoch seconds
 * of that start; *flops gets the operations. */
static double start_of_world_size(const mc_trainer_t *t, const char *path, double *flops)
{
    FILE *f = fopen(path, "r");
    if (!f) mc_fatal("cannot read %s (--log-progress)", path);
    char *line = NULL, start[64] = "";
    size_t cap = 0;
    double latest = 0, start_flops = 0;
    while (getline(&line, &cap, f) >= 0) {
        line[strcspn(line, "\r\n")] = 0;
        char *tok[8] = {0}, *save = NULL;
        int n = 0;
        for (char *s = strtok_r(line, "\t", &save); s && n < 8; s = strtok_r(NULL, "\t", &save))
            tok[n++] = s;
        const char *gpus = field_value(tok[2]);
        if (n < 4 || !gpus) continue;
        if (strcmp(tok[3], "Saved checkpoint") == 0 && field_value(tok[7]))
            latest = strtod(field_value(tok[7]), NULL);
        if (atoi(gpus) != t->args->world_size) {
            start[0] = 0;
            continue;
        }
        if (strcmp(tok[3], "Starting job") == 0 && !start[0]) {
            snprintf(start, sizeof(start), "%s", tok[0]);
            start_flops = latest;
        }
    }
    free(line);
    fclose(f);
    struct tm tm = {0};
    if (!start[0] || !strptime(start, "%Y-%m-%d %H:%M:%S", &tm))
        mc_fatal("%s: should have seen at least one 'Starting job' entry with same world_size",
                 path);
    tm.tm_isdst = -1; /* the local time Megatron's datetime.now() wrote */
    *flops = start_flops;
    return (double)mktime(&tm);
}

void mc_progress_saved(const mc_trainer_t *t, double job_start, double flops_at_start)
{
    const mc_args_t *a = t->args;
    if (!a->save[0]) return;
    char text[512] = "";
    if (t->par.rank == 0) {
        const double flops = mc_trainer_flops_so_far(t);
        const double now = mc_wall_s(), per = 1e12 * a->world_size;
        const double job = (flops - flops_at_start) / ((now - job_start) * per);
        char path[4200];
        progress_path(t, path, sizeof(path));
        double start_flops;
        const double start = start_of_world_size(t, path, &start_flops);
        const double cumulative = (flops - start_flops) / ((now - start) * per);
        const double tokens = (double)t->consumed_train_samples * a->seq_length;
        snprintf(text, sizeof(text),
                 "%s\tIteration: %lld\tJob throughput: %.1f TFLOP/s/GPU\tCumulative throughput: "
                 "%.1f TFLOP/s/GPU\tFloating-point operations: %.2e\tTokens (in billions): %.2f",
                 a->async_save ? "Saving async checkpoint" : "Saved checkpoint",
                 (long long)t->iteration, job, cumulative, flops, tokens / 1e9);
    }
    mc_progress_append(t, text);
}
