/* Signals during training.
 *
 * --exit-signal-handler is Megatron's DistributedSignalHandler (training/dist_signal_handler.py):
 * every rank catches --exit-signal (SIGTERM by default, which Slurm sends before preempting a
 * job or at its time limit) and only notes it. At the end of each iteration the ranks ask, in
 * one all-reduce, whether any of them got it, so all stop after the same iteration even when
 * the signal reached one rank only: the loop then saves a checkpoint (with --save), prints
 * "[exiting program after receiving SIGTERM.] datetime: ..." and the job exits 0. Without the
 * flag the signal keeps its default action.
 *
 * Independently of the flag, SIGXFSZ is ignored: a file-size limit (ulimit -f) then fails the
 * write that crosses it with EFBIG, which the checkpoint code reports naming the file, instead
 * of killing the process. */
#ifndef MC_TRAIN_SIGNALS_H
#define MC_TRAIN_SIGNALS_H

#include <stdbool.h>

#include "base/signame.h"
#include "comm/comm.h"

/* Ignores SIGXFSZ; with exit_signal > 0 also installs the handler that notes exit_signal. */
void mc_signals_init(int exit_signal);

/* Collective over the world: true on every rank when any rank has received the exit signal. */
bool mc_signals_received(mc_comm_t *comm);

#endif
