#include "cli/error.h"

#include <stdio.h>
#include <stdlib.h>

static int g_rank = 0, g_world = 1;
static void (*g_abort_hook)(int code);

void mc_error_set_rank(int rank, int world_size) { g_rank = rank; g_world = world_size; }
void mc_error_set_abort_hook(void (*hook)(int code)) { g_abort_hook = hook; }

void mc_user_error(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("megatron-c: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (g_world > 1 && g_abort_hook) g_abort_hook(2);
    exit(2);
}

void mc_fatal(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "megatron-c: rank %d: error: ", g_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (g_world > 1 && g_abort_hook) g_abort_hook(1);
    exit(1);
}

void mc_warn(const char *fmt, ...)
{
    va_list ap;
    fputs("megatron-c: warning: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
