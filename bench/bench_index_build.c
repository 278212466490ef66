/* Benchmark helper for bench/bench-data.sh: the time to build a GPT dataset's indices
 * (document index, sample index, shuffle index: Megatron's
 * GPTDataset._build_document_sample_shuffle_indices) for a large indexed dataset. Built by the
 * script against the repository's objects; not part of the megatron-c binary.
 *
 *   bench_index_build gen PREFIX DOCS MAXLEN SEED
 *       Writes PREFIX.idx (Megatron's MMIDIDX v1, uint16 tokens) for DOCS documents of one
 *       sequence each, with lengths uniform in [1, MAXLEN] from a fixed generator, and makes
 *       PREFIX.bin a sparse file of the matching size (ftruncate). Index building reads only the
 *       sequence lengths, and the reader only checks the .bin's size, so the tokens need not
 *       exist. Prints the document and token counts.
 *
 *   bench_index_build build PREFIX SEQ_LENGTH EPOCHS [SEED]
 *       Builds the train split over all of PREFIX (as --train-data-path PREFIX) through
 *       mc_gpt_datasets_build, the function megatron-c's training start-up calls, requesting
 *       EPOCHS * floor((tokens - 1) / SEQ_LENGTH) samples (exactly EPOCHS epochs; 1 = one
 *       epoch). Prints one line of key=value pairs: the wall time of mc_indexed_open alone
 *       (open_s), of the whole build including that open (build_s), the sample count, the
 *       epochs, the bytes of the three index arrays and the process's peak RSS. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "data/gpt_dataset.h"
#include "data/indexed.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *fmt, const char *a)
{
    fprintf(stderr, "bench_index_build: ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, "\n");
    exit(1);
}

static void put(FILE *f, const void *p, size_t n, const char *path)
{
    if (fwrite(p, 1, n, f) != n) die("cannot write %s", path);
}

/* splitmix64: a fixed, portable generator for the synthetic lengths. */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int gen(const char *prefix, int64_t docs, int64_t maxlen, uint64_t seed)
{
    if (docs < 1 || maxlen < 1 || maxlen > INT32_MAX) die("bad DOCS or MAXLEN%s", "");
    char path[4096];
    snprintf(path, sizeof path, "%s.idx", prefix);
    FILE *f = fopen(path, "wb");
    if (!f) die("cannot create %s", path);
    static char vbuf[1 << 20];
    setvbuf(f, vbuf, _IOFBF, sizeof vbuf);
    const uint8_t magic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
    uint64_t version = 1, s_count = (uint64_t)docs, d_count = (uint64_t)docs + 1;
    uint8_t dtype = MC_DTYPE_UINT16;
    put(f, magic, 9, path);
    put(f, &version, 8, path);        /* little-endian host assumed (x86-64, aarch64) */
    put(f, &dtype, 1, path);
    put(f, &s_count, 8, path);
    put(f, &d_count, 8, path);
    uint64_t st = seed;
    int64_t tokens = 0;
    for (int64_t i = 0; i < docs; i++) { /* sequence_lengths (int32) */
        int32_t len = (int32_t)(1 + mix(&st) % (uint64_t)maxlen);
        put(f, &len, 4, path);
        tokens += len;
    }
    st = seed;
    int64_t ptr = 0;
    for (int64_t i = 0; i < docs; i++) { /* sequence_pointers (int64 byte offsets) */
        int32_t len = (int32_t)(1 + mix(&st) % (uint64_t)maxlen);
        put(f, &ptr, 8, path);
        ptr += (int64_t)len * 2;
    }
    for (int64_t i = 0; i <= docs; i++) put(f, &i, 8, path); /* document_indices 0..S */
    if (fclose(f) != 0) die("cannot write %s", path);
    snprintf(path, sizeof path, "%s.bin", prefix);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)(tokens * 2)) != 0 || close(fd) != 0)
        die("cannot create the sparse %s", path);
    printf("documents=%lld tokens=%lld\n", (long long)docs, (long long)tokens);
    return 0;
}

static int build(const char *prefix, int seq, int64_t epochs, int64_t seed)
{
    char err[1024];
    /* the token count first (not timed) */
    mc_indexed_t x;
    if (mc_indexed_open(&x, prefix, false, err, sizeof err) != 0) die("%s", err);
    int64_t tokens = 0;
    for (int64_t i = 0; i < x.num_sequences; i++) tokens += x.sequence_lengths[i];
    mc_indexed_close(&x);

    double t0 = now();
    if (mc_indexed_open(&x, prefix, false, err, sizeof err) != 0) die("%s", err);
    double open_s = now() - t0;
    mc_indexed_close(&x);

    char *paths[1] = {(char *)prefix};
    mc_gpt_data_config_t c;
    memset(&c, 0, sizeof c);
    c.n_split_data_path[MC_SPLIT_TRAIN] = 1;
    c.split_data_path[MC_SPLIT_TRAIN] = paths;
    c.seq_length = seq;
    c.seed = seed;
    c.num_samples[MC_SPLIT_TRAIN] = epochs * ((tokens - 1) / seq);
    c.num_samples[MC_SPLIT_VALID] = c.num_samples[MC_SPLIT_TEST] = -1;
    c.mid_level_dataset_surplus = 0.005;
    c.drop_last_partial_validation_sequence = true;
    c.sample.eod = 50256;
    c.sample.pad = MC_PAD_TOKEN_ID;

    t0 = now();
    mc_gpt_datasets_t *D = mc_gpt_datasets_build(&c, err, sizeof err);
    double build_s = now() - t0;
    if (!D) die("%s", err);
    const mc_gpt_dataset_t *g = mc_gpt_datasets_component(D, MC_SPLIT_TRAIN, 0);
    size_t bytes = (size_t)g->document_index_len * 4 +
                   (size_t)(g->length + 1) * 2 * (g->sample_index_int64 ? 8 : 4) +
                   (size_t)g->length * (g->shuffle_index_int64 ? 8 : 4);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("documents=%lld tokens=%lld seq_length=%d samples_requested=%lld samples=%lld "
           "epochs=%lld separate_final_epoch=%d open_s=%.4f build_s=%.4f index_bytes=%zu "
           "peak_rss_kb=%ld\n",
           (long long)g->document_index_len / (long long)g->num_epochs, (long long)tokens, seq,
           (long long)c.num_samples[MC_SPLIT_TRAIN], (long long)mc_gpt_datasets_len(D, 0),
           (long long)g->num_epochs, (int)g->separate_final_epoch, open_s, build_s, bytes,
           ru.ru_maxrss);
    mc_gpt_datasets_free(D);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 6 && !strcmp(argv[1], "gen"))
        return gen(argv[2], atoll(argv[3]), atoll(argv[4]), strtoull(argv[5], NULL, 10));
    if ((argc == 5 || argc == 6) && !strcmp(argv[1], "build"))
        return build(argv[2], atoi(argv[3]), atoll(argv[4]), argc == 6 ? atoll(argv[5]) : 1234);
    fprintf(stderr, "usage: bench_index_build gen PREFIX DOCS MAXLEN SEED\n"
                    "       bench_index_build build PREFIX SEQ_LENGTH EPOCHS [SEED]\n");
    return 2;
}
