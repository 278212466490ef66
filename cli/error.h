/* One way to report errors (DESIGN decision 8).
 * User errors: "megatron-c: error: <what> (<what to do>)", exit 2.
 * Runtime errors: name the rank, exit 1 (and abort the job once there is more than one rank). */
#ifndef MC_CLI_ERROR_H
#define MC_CLI_ERROR_H

#include <stdarg.h>

__attribute__((noreturn, format(printf, 1, 2))) void mc_user_error(const char *fmt, ...);
__attribute__((noreturn, format(printf, 1, 2))) void mc_fatal(const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void mc_warn(const char *fmt, ...);

/* Set once the runtime knows who we are; runtime errors then say "rank N". */
void mc_error_set_rank(int rank, int world_size);
/* Called by mc_fatal before exiting (the comm layer installs a job abort). */
void mc_error_set_abort_hook(void (*hook)(int code));

#endif
