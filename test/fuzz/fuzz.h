/* A small mutation fuzzer shared by test/fuzz/fuzz_*.c (scripts/fuzz.sh drives them).
 *
 * Each program mutates seed inputs with a deterministic generator (--seed) and runs every input
 * in a forked child, so that a sanitizer report, a crash or a hang (alarm) ends the child and
 * not the fuzzer: the parent saves the input under --crashes DIR and reruns it once with stderr
 * to DIR/<name>.log. A child "passes" when it exits with one of the codes the target allows
 * (the parsers' own errors: 0, or 2 for the flag parser's usage errors). Exit status of the
 * fuzzer: 0 when no input failed, 1 otherwise. */
#ifndef MC_TEST_FUZZ_H
#define MC_TEST_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sanitizer reports exit with this code, told apart from the targets' own exits. */
#define FUZZ_SANITIZER_EXIT 86

typedef struct {
    uint8_t *p;
    size_t n, cap;
} fuzz_buf_t;

typedef struct {
    double seconds;       /* --seconds: how long to run (default 10) */
    uint64_t seed;        /* --seed */
    const char *crashes;  /* --crashes DIR: where failing inputs go (default fuzz-crashes) */
    int timeout_s;        /* a child running longer is a hang (default 10) */
    long max_runs;        /* --runs N: stop after N inputs (0: by time only) */
    int argc;             /* the rest of the command line: the target's seed files */
    char **argv;
} fuzz_opts_t;

/* Parses --seconds --seed --crashes --runs; the other arguments are left in o->argv. Exits 2 on
 * a bad option. */
void fuzz_parse(fuzz_opts_t *o, int argc, char **argv, const char *usage);

uint64_t fuzz_rand(void);                  /* xorshift64*, seeded by fuzz_srand */
void fuzz_srand(uint64_t seed);
static inline uint64_t fuzz_below(uint64_t n) { return n ? fuzz_rand() % n : 0; }

void fuzz_buf_set(fuzz_buf_t *b, const void *p, size_t n);
void fuzz_buf_free(fuzz_buf_t *b);
/* Reads a whole file into b; 0 or -1. */
int fuzz_read_file(const char *path, fuzz_buf_t *b);
int fuzz_write_file(const char *path, const void *p, size_t n);

/* 1 to 4 byte-level mutations of b: bit flips, random or boundary bytes, boundary integers of
 * 1/2/4/8 bytes (little-endian), a range copied, inserted or deleted, truncation. hot_end > 0
 * makes half the mutations land in b[0, hot_end) (a header). max_len bounds growth. */
void fuzz_mutate(fuzz_buf_t *b, size_t hot_end, size_t max_len);

/* Runs fn(ctx) in a forked child with stdout and stderr sent to /dev/null (or to log when not
 * NULL). Returns true when the child exited with one of allowed[0..n_allowed); else describes
 * the failure in why ("signal 11", "exit 86 (sanitizer)", "hang"). */
bool fuzz_run_child(void (*fn)(void *), void *ctx, const int *allowed, int n_allowed,
                    int timeout_s, const char *log, char *why, size_t n);

/* The fuzzing loop: until o->seconds pass (or o->max_runs inputs), call make(ctx, i) to build
 * input i and run(ctx) in a child; on a failure call save(ctx, path_prefix) to store the input
 * as DIR/<name>-<i> and rerun it with its log. Prints one summary line to stdout and returns the
 * number of failing inputs. */
typedef struct {
    const char *name;                       /* "idx", "pt", "flags" */
    void (*make)(void *ctx, long i);
    void (*run)(void *ctx);
    void (*save)(void *ctx, const char *path_prefix);
    const int *allowed;
    int n_allowed;
    void *ctx;
} fuzz_target_t;

long fuzz_loop(const fuzz_opts_t *o, const fuzz_target_t *t);

#endif
