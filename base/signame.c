/* Signal names (base/signame.h). */
#include "base/signame.h"

#include <signal.h>
#include <stddef.h>
#include <string.h>

/* Megatron offers every signal, but catching SIGKILL or SIGSTOP fails at start-up. */
static const struct {
    const char *name;
    int signo;
} NAMES[] = {
    {"SIGTERM", SIGTERM}, {"SIGINT", SIGINT},   {"SIGHUP", SIGHUP},
    {"SIGQUIT", SIGQUIT}, {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2},
    {"SIGALRM", SIGALRM}, {"SIGXCPU", SIGXCPU}, {"SIGPWR", SIGPWR},
};

int mc_signal_number(const char *name)
{
    for (size_t i = 0; i < sizeof(NAMES) / sizeof(NAMES[0]); i++)
        if (strcmp(NAMES[i].name, name) == 0) return NAMES[i].signo;
    return -1;
}

const char *mc_signal_name(int signo)
{
    for (size_t i = 0; i < sizeof(NAMES) / sizeof(NAMES[0]); i++)
        if (NAMES[i].signo == signo) return NAMES[i].name;
    return NULL;
}
