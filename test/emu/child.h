// For the emulator's own tests (test/emu/test_emu_*): runs what must end the process (the
// emulator's failures exit 86) in a child, keeping its stderr.
#ifndef MC_TEST_EMU_CHILD_H
#define MC_TEST_EMU_CHILD_H

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

// f() in a forked child with its stderr appended to *err: the child's exit status (128 + the
// signal when one ended it; 0 when f returned), or -1 when no pipe could be made.
static inline int in_child(const std::function<void()> &f, std::string *err)
{
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(stdout), fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2), close(fds[0]), close(fds[1]);
        f();
        _exit(0);
    }
    close(fds[1]);
    char buf[512];
    ssize_t got;
    while ((got = read(fds[0], buf, sizeof(buf))) > 0) err->append(buf, (size_t)got);
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif
