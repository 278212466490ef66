#include "train/signals.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>

static volatile sig_atomic_t g_received;

/* Async-signal-safe: one store. Any thread may run it (the signal is process-directed). */
static void note(int signo)
{
    (void)signo;
    g_received = 1;
}

void mc_signals_init(int exit_signal)
{
    signal(SIGXFSZ, SIG_IGN);
    if (exit_signal <= 0) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = note;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* system calls in flight on any thread carry on */
    sigaction(exit_signal, &sa, NULL);
}

bool mc_signals_received(mc_comm_t *comm)
{
    int64_t any = g_received != 0;
    mc_all_reduce(comm, comm->world, &any, 1, MC_DT_I64, MC_OP_MAX);
    return any != 0;
}
