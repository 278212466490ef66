/* Liveness of peers on this node (comm/liveness.h). */
#include "comm/liveness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The state letter of /proc/<pid>/stat ("pid (comm) S ..."), or 0 when it cannot be read. */
static char pid_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t k = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (k <= 0) return 0;
    buf[k] = '\0';
    /* comm may hold spaces and parentheses: the state follows the last ')' */
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : 0;
}

bool mc_pid_dead(pid_t pid)
{
    if (kill(pid, 0) != 0) return errno == ESRCH;
    char st = pid_state(pid); /* 0: just reaped, the next check sees ESRCH */
    return st == 'Z' || st == 'X';
}

bool mc_pid_stopped(pid_t pid)
{
    char st = pid_state(pid);
    return st == 'T' || st == 't';
}

double mc_stopped_for(pid_t pid, mc_stop_seen_t *s, double now)
{
    if (!mc_pid_stopped(pid)) {
        s->since = s->last = 0;
        return 0;
    }
    /* not looked at for a while (it took no part in the collectives since): it may have run
     * in between, so its silence counts from now */
    if (s->since == 0 || now - s->last > MC_STOP_GAP_S) s->since = now;
    s->last = now;
    return now - s->since;
}

void mc_silent_line(const mc_runtime_t *rt, int r, double for_s, const char *how,
                    const char *during, char *buf, size_t n)
{
    snprintf(
        buf, n,
        "rank %d (host %s, pid %d) has not responded for %.0f s (stopped or hung: %s, while this "
        "rank waits in %s; raise --heartbeat-timeout-seconds if this is expected, 0 turns the "
        "check off)",
        r, rt->hosts[r], (int)rt->pids[r], for_s, how, during);
}

void mc_pid_space(char out[MC_PID_SPACE_LEN])
{
    char boot[40] = "";
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t k = read(fd, boot, 36);
        boot[k > 0 ? k : 0] = '\0';
        close(fd);
    }
    struct stat st;
    unsigned long long ns = stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long long)st.st_ino : 0;
    memset(out, 0, MC_PID_SPACE_LEN);
    snprintf(out, MC_PID_SPACE_LEN, "%s/%llu", boot, ns);
}

void mc_liveness_watch(const mc_runtime_t *rt, const char *spaces, bool *watch)
{
    const char *mine = spaces + (size_t)rt->rank * MC_PID_SPACE_LEN;
    for (int r = 0; r < rt->size; r++)
        watch[r] = r != rt->rank && rt->pids[r] > 0 && strcmp(rt->hosts[r], rt->host) == 0 &&
                   memcmp(spaces + (size_t)r * MC_PID_SPACE_LEN, mine, MC_PID_SPACE_LEN) == 0 &&
                   mine[0] != '/';
}
