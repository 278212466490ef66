/* Signals by Python's signal.Signals names ("SIGTERM"): the --exit-signal choices
 * (config/flags_train.c), which training catches (train/signals.h) and checkpoints store as
 * Megatron's args do (ckpt/args.c). Only signals that ask a job to stop and that a process can
 * catch are named. */
#ifndef MC_BASE_SIGNAME_H
#define MC_BASE_SIGNAME_H

/* The number of a named signal, or -1. */
int mc_signal_number(const char *name);
/* The name of one of those signals by number, or NULL. */
const char *mc_signal_name(int signo);

#endif
