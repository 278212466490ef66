/* One way to report errors (DESIGN decision 8).
 * User errors: "megatron-c: error: <what> (<what to do>)", exit 2.
 * Runtime errors: name the rank, exit 1 (and abort the job once there is more than one rank). */
#ifndef MC_BASE_ERROR_H
#define MC_BASE_ERROR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

__attribute__((noreturn, format(printf, 1, 2))) void mc_user_error(const char *fmt, ...);
/* Several user errors found together (every problem of a command line): one line each, as
 * mc_user_error prints it, then exit 2 once. */
__attribute__((noreturn)) void mc_user_errors(const char *const *lines, int n);
/* While a trap is set, mc_user_error hands its line to the trap (which must not return: it
 * longjmps) instead of printing and exiting, so a caller can gather every problem of its inputs
 * and report them with mc_user_errors. NULL clears it. */
void mc_user_error_trap(void (*trap)(const char *line));
__attribute__((noreturn, format(printf, 1, 2))) void mc_fatal(const char *fmt, ...);
/* A runtime error that every rank meets at once (a value reduced over the ranks): rank
 * `reporter` reports it as mc_fatal does and ends the job; the others stay silent until then. */
__attribute__((noreturn, format(printf, 2, 3))) void mc_fatal_by(int reporter, const char *fmt,
                                                                 ...);
__attribute__((format(printf, 1, 2))) void mc_warn(const char *fmt, ...);
/* A warning about the inputs every rank reads alike (the command line): rank 0 prints it for
 * all, as it reports user errors, so a job shows it once. */
__attribute__((format(printf, 1, 2))) void mc_input_warn(const char *fmt, ...);

/* For functions that report failure through an (err, n) buffer: format one line into err
 * (when err is not NULL) and return -1. The path variant prefixes "<path>: ". */
__attribute__((format(printf, 3, 4))) int mc_errf(char *err, size_t n, const char *fmt, ...);
__attribute__((format(printf, 4, 5))) int mc_path_errf(char *err, size_t n, const char *path,
                                                       const char *fmt, ...);

/* User text quoted in a one-line message: at most MC_SHOWN_MAX characters (then "..."), control
 * characters replaced by '?'. buf needs MC_SHOWN_MAX + 4 bytes. */
#define MC_SHOWN_MAX 80
const char *mc_shown(const char *s, char buf[MC_SHOWN_MAX + 4]);

/* Edit distance (Levenshtein, with a swap of neighbouring characters as one edit), for "did
 * you mean" suggestions. */
size_t mc_edit_distance(const char *a, const char *b);

/* Set once the runtime knows who we are; runtime errors then say "rank N". */
void mc_error_set_rank(int rank, int world_size);
/* Called by mc_fatal before exiting (the comm layer installs a job abort). */
void mc_error_set_abort_hook(void (*hook)(int code));
/* From now on user errors may be one rank's own (set when training starts): every rank reports
 * them and they abort the job. Before, rank 0 reports for all. */
void mc_error_set_rank_local(bool on);

#endif
