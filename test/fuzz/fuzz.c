/* The shared mutation fuzzer; see fuzz.h. */
#include "test/fuzz/fuzz.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"

/* Sanitizer reports exit with a code of their own; leaks count as failures too. */
__attribute__((used, visibility("default"))) const char *__asan_default_options(void)
{
    return "exitcode=86:abort_on_error=0:detect_leaks=1:allocator_may_return_null=1";
}
__attribute__((used, visibility("default"))) const char *__ubsan_default_options(void)
{
    return "halt_on_error=1:exitcode=86:print_stacktrace=1";
}

static uint64_t g_state = 0x9e3779b97f4a7c15ull;

void fuzz_srand(uint64_t seed) { g_state = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull; }

uint64_t fuzz_rand(void)
{
    g_state ^= g_state >> 12;
    g_state ^= g_state << 25;
    g_state ^= g_state >> 27;
    return g_state * 0x2545f4914f6cdd1dull;
}

/* A child that reads past a heap block: the sanitizers report it (exit 86), a release build
 * then crashes on purpose. The driver must call it a failure. */
static void overflow(void *ctx)
{
    volatile char *p = calloc(8, 1);
    if (!p) abort();
    volatile char c = p[8 + (int)(uintptr_t)ctx];
    (void)c;
    free((void *)p);
    raise(SIGSEGV);
}

static int fuzz_selftest(void)
{
    static const int allowed[] = {0};
    char why[128] = "";
    if (fuzz_run_child(overflow, NULL, allowed, 1, 10, NULL, why, sizeof why)) {
        printf("fuzz selftest: a heap overflow in the child went unnoticed\n");
        return 1;
    }
    printf("fuzz selftest: the driver caught a heap overflow (%s)\n", why);
    return 0;
}

void fuzz_parse(fuzz_opts_t *o, int argc, char **argv, const char *usage)
{
    *o = (fuzz_opts_t){.seconds = 10, .seed = 1, .crashes = "fuzz-crashes", .timeout_s = 10};
    int k = 1;
    for (; k < argc; k++) {
        const char *a = argv[k];
        if (!strcmp(a, "--seconds") && k + 1 < argc) o->seconds = atof(argv[++k]);
        else if (!strcmp(a, "--seed") && k + 1 < argc) o->seed = strtoull(argv[++k], NULL, 0);
        else if (!strcmp(a, "--crashes") && k + 1 < argc) o->crashes = argv[++k];
        else if (!strcmp(a, "--runs") && k + 1 < argc) o->max_runs = atol(argv[++k]);
        else if (!strcmp(a, "--timeout") && k + 1 < argc) o->timeout_s = atoi(argv[++k]);
        else if (!strcmp(a, "--selftest")) exit(fuzz_selftest());
        else if (!strcmp(a, "--")) { k++; break; }
        else if (!strncmp(a, "--", 2)) {
            fprintf(stderr, "usage: %s [--seconds N] [--seed S] [--crashes DIR] [--runs N] %s\n",
                    argv[0], usage);
            exit(2);
        } else break;
    }
    o->argc = argc - k;
    o->argv = argv + k;
    fuzz_srand(o->seed);
}

void fuzz_buf_set(fuzz_buf_t *b, const void *p, size_t n)
{
    if (b->cap < n + 1) {
        b->p = realloc(b->p, n + 1);
        if (!b->p) abort();
        b->cap = n + 1;
    }
    if (n) memcpy(b->p, p, n);
    b->n = n;
}

void fuzz_buf_free(fuzz_buf_t *b)
{
    free(b->p);
    *b = (fuzz_buf_t){0};
}

int fuzz_read_file(const char *path, fuzz_buf_t *b)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    b->n = 0;
    uint8_t chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b->cap < b->n + got + 1) {
            size_t cap = (b->n + got + 1) * 2;
            b->p = realloc(b->p, cap);
            if (!b->p) abort();
            b->cap = cap;
        }
        memcpy(b->p + b->n, chunk, got);
        b->n += got;
    }
    fclose(f);
    return 0;
}

int fuzz_write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    bool ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static void reserve(fuzz_buf_t *b, size_t n)
{
    if (b->cap >= n + 1) return;
    b->p = realloc(b->p, n + 1);
    if (!b->p) abort();
    b->cap = n + 1;
}

static const uint64_t INTERESTING[] = {
    0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff, 0x10000, 0x7fffffff, 0x80000000,
    0xffffffff, 0x100000000ull, 0x7fffffffffffffffull, 0x8000000000000000ull,
    0xffffffffffffffffull, 0xfffffffffffffffeull, 34, 64, 4096,
};

static void mutate_once(fuzz_buf_t *b, size_t hot_end, size_t max_len)
{
    size_t span = hot_end && hot_end < b->n && fuzz_below(2) ? hot_end : b->n;
    size_t at = fuzz_below(span ? span : 1);
    switch (fuzz_below(9)) {
    case 0: /* bit flip */
        if (b->n) b->p[at] ^= (uint8_t)(1u << fuzz_below(8));
        break;
    case 1: /* random byte */
        if (b->n) b->p[at] = (uint8_t)fuzz_rand();
        break;
    case 2: /* small add or subtract */
        if (b->n) b->p[at] = (uint8_t)(b->p[at] + (int)fuzz_below(33) - 16);
        break;
    case 3: case 4: { /* a boundary integer of 1, 2, 4 or 8 bytes */
        int w = 1 << fuzz_below(4);
        uint64_t v = INTERESTING[fuzz_below(sizeof INTERESTING / sizeof INTERESTING[0])];
        if (fuzz_below(4) == 0) v = 0 - v; /* the negative, two's complement */
        if (at + (size_t)w <= b->n) memcpy(b->p + at, &v, (size_t)w);
        break;
    }
    case 5: { /* copy a range over another */
        if (b->n < 2) break;
        size_t len = 1 + fuzz_below(b->n < 64 ? b->n : 64), from = fuzz_below(b->n);
        if (from + len > b->n) len = b->n - from;
        if (at + len > b->n) len = b->n - at;
        memmove(b->p + at, b->p + from, len);
        break;
    }
    case 6: { /* insert random bytes */
        size_t len = 1 + fuzz_below(16);
        if (b->n + len > max_len) break;
        reserve(b, b->n + len);
        if (at > b->n) at = b->n;
        memmove(b->p + at + len, b->p + at, b->n - at);
        for (size_t i = 0; i < len; i++) b->p[at + i] = (uint8_t)fuzz_rand();
        b->n += len;
        break;
    }
    case 7: { /* delete a range */
        if (!b->n) break;
        size_t len = 1 + fuzz_below(16);
        if (at + len > b->n) len = b->n - at;
        memmove(b->p + at, b->p + at + len, b->n - at - len);
        b->n -= len;
        break;
    }
    default: /* truncate (rarely) */
        if (fuzz_below(4) == 0) b->n = fuzz_below(b->n + 1);
        break;
    }
}

void fuzz_mutate(fuzz_buf_t *b, size_t hot_end, size_t max_len)
{
    int k = 1 + (int)fuzz_below(4);
    for (int i = 0; i < k; i++) mutate_once(b, hot_end, max_len);
}

static void redirect(int fd, const char *path)
{
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (f >= 0) {
        dup2(f, fd);
        close(f);
    }
}

bool fuzz_run_child(void (*fn)(void *), void *ctx, const int *allowed, int n_allowed,
                    int timeout_s, const char *log, char *why, size_t n)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, n, "fork failed: %s", strerror(errno));
        return false;
    }
    if (pid == 0) {
        redirect(1, log ? log : "/dev/null");
        redirect(2, log ? log : "/dev/null");
        alarm((unsigned)timeout_s);
        fn(ctx);
        exit(0);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            snprintf(why, n, "waitpid failed: %s", strerror(errno));
            return false;
        }
    if (WIFEXITED(st)) {
        int code = WEXITSTATUS(st);
        for (int i = 0; i < n_allowed; i++)
            if (code == allowed[i]) return true;
        snprintf(why, n, "exit %d%s", code, code == FUZZ_SANITIZER_EXIT ? " (sanitizer report)" : "");
        return false;
    }
    int sig = WTERMSIG(st);
    snprintf(why, n, sig == SIGALRM ? "hang (over %d s)" : "signal %d", sig == SIGALRM ? timeout_s : sig);
    return false;
}

long fuzz_loop(const fuzz_opts_t *o, const fuzz_target_t *t)
{
    double end = mc_now_s() + o->seconds;
    long runs = 0, failures = 0;
    char why[128];
    for (long i = 0; (o->max_runs == 0 || i < o->max_runs) && (i == 0 || mc_now_s() < end); i++) {
        t->make(t->ctx, i);
        runs++;
        if (fuzz_run_child(t->run, t->ctx, t->allowed, t->n_allowed, o->timeout_s, NULL, why,
                           sizeof why))
            continue;
        failures++;
        mkdir(o->crashes, 0755);
        char prefix[4096], log[4200];
        snprintf(prefix, sizeof prefix, "%s/%s-seed%llu-%ld", o->crashes, t->name,
                 (unsigned long long)o->seed, i);
        t->save(t->ctx, prefix);
        snprintf(log, sizeof log, "%s.log", prefix);
        char again[128];
        fuzz_run_child(t->run, t->ctx, t->allowed, t->n_allowed, o->timeout_s, log, again,
                       sizeof again);
        fprintf(stderr, "fuzz %s: input %ld fails: %s (saved as %s*, its output in %s)\n",
                t->name, i, why, prefix, log);
        if (failures >= 10) break;
    }
    printf("fuzz %s: %ld inputs, %ld failing, seed %llu\n", t->name, runs, failures,
           (unsigned long long)o->seed);
    return failures;
}
