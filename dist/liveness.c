/* Liveness of peers on this node (dist/liveness.h). */
#include "dist/liveness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool mc_pid_dead(pid_t pid)
{
    if (kill(pid, 0) != 0) return errno == ESRCH;
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false; /* just reaped: the next check sees ESRCH */
    ssize_t k = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (k <= 0) return false;
    buf[k] = '\0';
    /* "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')' */
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
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
