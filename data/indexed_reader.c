/* Reader of Megatron's indexed dataset (MEGATRON.md section 1): <prefix>.idx + <prefix>.bin.
 *
 * Everything the rest of the program relies on is validated once, in mc_indexed_open, so that
 * later reads need no checks beyond the caller's own bounds: a corrupt or truncated file is
 * rejected with one line naming the file, never read out of bounds.
 *
 * Alignment: the .idx arrays start at byte 34, so in a mapping of the file the int32 lengths sit
 * at an address 2 mod 4 and the int64 arrays at 2 or 6 mod 8. Dereferencing such pointers is
 * undefined behaviour (UBSan stops on it; GCC may vectorise with aligned loads). So the .idx is
 * mapped, checked, and copied once into a heap image shifted so every array is naturally
 * aligned; the struct's array pointers point into that image. It costs the .idx size in memory
 * (12 bytes per sequence), which Megatron's dataset classes spend too when they index these
 * arrays. The .bin (the tokens, the large file) stays mapped and is read with memcpy. */
#include "base/error.h"
#include "data/indexed.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "the .idx/.bin arrays are little-endian and are used in place");

#define HEADER_SIZE 34
static const uint8_t MAGIC[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
static const uint8_t LEGACY_MAGIC[8] = {'T', 'N', 'T', 'I', 'D', 'X', 0, 0};

int mc_indexed_dtype_size(int dtype)
{
    switch (dtype) {
    case MC_DTYPE_UINT8:
    case MC_DTYPE_INT8: return 1;
    case MC_DTYPE_INT16:
    case MC_DTYPE_UINT16: return 2;
    case MC_DTYPE_INT32:
    case MC_DTYPE_FLOAT32: return 4;
    case MC_DTYPE_INT64:
    case MC_DTYPE_FLOAT64: return 8;
    default: return 0;
    }
}

const char *mc_indexed_dtype_name(int dtype)
{
    static const char *const names[] = {NULL,    "uint8",   "int8",    "int16", "int32",
                                        "int64", "float64", "float32", "uint16"};
    return dtype >= 1 && dtype <= 8 ? names[dtype] : "invalid";
}

int mc_indexed_optimal_dtype(int64_t vocab_size)
{
    return vocab_size < 65500 ? MC_DTYPE_UINT16 : MC_DTYPE_INT32;
}


/* prefix + ext, made absolute (cwd prepended) so error messages name the full path. */
static char *full_path(const char *prefix, const char *ext)
{
    char cwd[4096] = "";
    if (prefix[0] != '/' && !getcwd(cwd, sizeof(cwd))) cwd[0] = 0;
    size_t n = strlen(cwd) + 1 + strlen(prefix) + strlen(ext) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s%s%s", cwd, cwd[0] ? "/" : "", prefix, ext);
    return p;
}

typedef struct {
    const uint8_t *p; /* NULL for an empty file (mmap cannot map 0 bytes) */
    size_t size;
} map_t;

static int map_file(const char *path, map_t *m, char *err, size_t n)
{
    m->p = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mc_path_errf(err, n, path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return mc_path_errf(err, n, path, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return mc_path_errf(err, n, path, "not a regular file");
    }
    m->size = (size_t)st.st_size;
    if (m->size > 0) {
        void *p = mmap(NULL, m->size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return mc_path_errf(err, n, path, "cannot mmap %zu bytes: %s", m->size, strerror(e));
        }
        m->p = p;
    }
    close(fd); /* the mapping keeps the file */
    return 0;
}

static void unmap_file(map_t *m)
{
    if (m->p) munmap((void *)m->p, m->size);
    m->p = NULL;
    m->size = 0;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

typedef struct {
    int dtype;
    uint64_t S, D;
} header_t;

/* Magic, version, dtype, and the array sizes against the file size (overflow-safe). */
static int check_header(const map_t *m, bool multimodal, header_t *h, const char *path, char *err,
                        size_t n)
{
    size_t head = m->size < sizeof(MAGIC) ? m->size : sizeof(MAGIC);
    if (m->size >= sizeof(LEGACY_MAGIC) && memcmp(m->p, LEGACY_MAGIC, sizeof(LEGACY_MAGIC)) == 0)
        return mc_path_errf(err, n, path,
                            "bad magic: legacy TNTIDX index (Megatron's obsolete non-mmap "
                            "format; re-run preprocess_data to get an MMIDIDX index)");
    if (head > 0 && memcmp(m->p, MAGIC, head) != 0)
        return mc_path_errf(err, n, path, "bad magic (not a Megatron MMIDIDX index)");
    if (m->size < HEADER_SIZE)
        return mc_path_errf(err, n, path, "truncated: %zu bytes, the header alone is %d", m->size,
                            HEADER_SIZE);
    uint64_t version = le64(m->p + 9);
    if (version != 1)
        return mc_path_errf(err, n, path, "unsupported version %llu (expected 1)",
                            (unsigned long long)version);
    h->dtype = m->p[17];
    if (mc_indexed_dtype_size(h->dtype) == 0)
        return mc_path_errf(err, n, path, "bad dtype code %d (expected 1..8)", h->dtype);
    h->S = le64(m->p + 18);
    h->D = le64(m->p + 26);
    if (h->D == 0)
        return mc_path_errf(err, n, path,
                            "document count is 0 (document_indices must start with 0)");

    /* 34 + 12S + 8D (+ S sequence_modes), computed without wrapping. */
    uint64_t per_seq = multimodal ? 13 : 12, a, b, c, need;
    if (__builtin_mul_overflow(h->S, per_seq, &a) || __builtin_mul_overflow(h->D, 8, &b) ||
        __builtin_add_overflow(a, b, &c) || __builtin_add_overflow(c, HEADER_SIZE, &need))
        return mc_path_errf(err, n, path,
                            "header claims %llu sequences and %llu document indices, "
                            "impossibly many (corrupt index)",
                            (unsigned long long)h->S, (unsigned long long)h->D);
    if (need > m->size)
        return mc_path_errf(err, n, path,
                            "truncated: %llu sequences and %llu document indices need "
                            "%llu bytes, the file has %zu",
                            (unsigned long long)h->S, (unsigned long long)h->D,
                            (unsigned long long)need, m->size);
    if (need < m->size) {
        uint64_t extra = m->size - need;
        return mc_path_errf(
            err, n, path,
            "%llu trailing bytes after %llu sequences and %llu document "
            "indices%s",
            (unsigned long long)extra, (unsigned long long)h->S, (unsigned long long)h->D,
            !multimodal && extra == h->S ? " (a multimodal index with sequence_modes?)" : "");
    }
    return 0;
}

/* Copies the .idx into d->idx_map, shifted so that lengths (at file offset 34) are 4-aligned and
 * pointers/document_indices (at 34+4S) are 8-aligned: shift + 34 + 4S must be 0 mod 8. */
static int copy_aligned(mc_indexed_t *d, const map_t *m, const header_t *h, const char *path,
                        char *err, size_t n)
{
    size_t shift = h->S % 2 == 0 ? 6 : 2;
    uint8_t *img = malloc(m->size + shift);
    if (!img)
        return mc_path_errf(err, n, path, "out of memory copying the %zu-byte index", m->size);
    memcpy(img + shift, m->p, m->size);
    const uint8_t *base = img + shift + HEADER_SIZE;
    d->idx_map = img;
    d->idx_size = m->size;
    d->sequence_lengths = (const int32_t *)base;
    d->sequence_pointers = (const int64_t *)(base + 4 * h->S);
    d->document_indices = (const int64_t *)(base + 12 * h->S);
    d->sequence_modes = NULL;
    return 0;
}

/* document_indices: starts at 0, never decreases, ends at S. Lengths are non-negative. */
static int check_arrays(const mc_indexed_t *d, int64_t D, const char *path, char *err, size_t n)
{
    const int64_t *di = d->document_indices;
    if (di[0] != 0)
        return mc_path_errf(err, n, path, "document_indices[0] is %lld, not 0", (long long)di[0]);
    for (int64_t i = 1; i < D; i++)
        if (di[i] < di[i - 1])
            return mc_path_errf(err, n, path, "document_indices decrease at %lld (%lld after %lld)",
                                (long long)i, (long long)di[i], (long long)di[i - 1]);
    if (di[D - 1] != d->num_sequences)
        return mc_path_errf(err, n, path,
                            "document_indices end at %lld, not at the sequence count %lld",
                            (long long)di[D - 1], (long long)d->num_sequences);
    for (int64_t i = 0; i < d->num_sequences; i++)
        if (d->sequence_lengths[i] < 0)
            return mc_path_errf(err, n, path, "sequence %lld has negative length %d", (long long)i,
                                d->sequence_lengths[i]);
    return 0;
}

/* Every sequence lies inside the .bin. Like Megatron's reader, pointers need not be contiguous
 * (an index may share or skip .bin bytes); they only have to be in bounds. */
static int check_pointers(const mc_indexed_t *d, const char *bin_path, char *err, size_t n)
{
    for (int64_t i = 0; i < d->num_sequences; i++) {
        int64_t p = d->sequence_pointers[i];
        int64_t bytes = (int64_t)d->sequence_lengths[i] * d->itemsize; /* < 2^35, no wrap */
        if (p < 0 || (uint64_t)p > d->bin_size || (uint64_t)bytes > d->bin_size - (uint64_t)p)
            return mc_path_errf(err, n, bin_path,
                                "sequence %lld (%lld bytes at byte offset %lld) lies "
                                "outside the file's %zu bytes (truncated .bin or "
                                "corrupt .idx)",
                                (long long)i, (long long)bytes, (long long)p, d->bin_size);
    }
    return 0;
}

static int open_idx(mc_indexed_t *d, const char *path, bool multimodal, char *err, size_t n)
{
    map_t m;
    if (map_file(path, &m, err, n)) return -1;
    header_t h = {0, 0, 0};
    int rc = check_header(&m, multimodal, &h, path, err, n);
    if (rc == 0) rc = copy_aligned(d, &m, &h, path, err, n);
    unmap_file(&m);
    if (rc) return -1;
    d->dtype = h.dtype;
    d->itemsize = mc_indexed_dtype_size(h.dtype);
    d->num_sequences = (int64_t)h.S; /* < file size, so it fits */
    d->num_documents = (int64_t)h.D - 1;
    if (multimodal) d->sequence_modes = (const int8_t *)(d->document_indices + h.D);
    return check_arrays(d, (int64_t)h.D, path, err, n);
}

static int open_bin(mc_indexed_t *d, const char *path, char *err, size_t n)
{
    map_t m;
    if (map_file(path, &m, err, n)) return -1;
    d->bin = m.p;
    d->bin_size = m.size;
    return check_pointers(d, path, err, n);
}

int mc_indexed_open(mc_indexed_t *d, const char *prefix, bool multimodal, char *err, size_t n)
{
    memset(d, 0, sizeof(*d));
    char *idx_path = full_path(prefix, ".idx"), *bin_path = full_path(prefix, ".bin");
    d->prefix = strdup(prefix);
    int rc;
    if (!idx_path || !bin_path || !d->prefix) rc = mc_path_errf(err, n, prefix, "out of memory");
    else rc = open_idx(d, idx_path, multimodal, err, n);
    if (rc == 0) rc = open_bin(d, bin_path, err, n);
    free(idx_path);
    free(bin_path);
    if (rc) mc_indexed_close(d);
    return rc;
}

void mc_indexed_close(mc_indexed_t *d)
{
    if (d->bin) munmap((void *)d->bin, d->bin_size);
    free(d->idx_map);
    free(d->prefix);
    memset(d, 0, sizeof(*d));
}

/* Copies n items of the dataset's dtype at src to int32; the bytes may be unaligned (pointers
 * need only be in bounds), hence memcpy per item, which compiles to plain loads. */
#define CONVERT(T)                                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                              \
        T v;                                                                                       \
        memcpy(&v, src + i * (int64_t)sizeof(T), sizeof(T));                                       \
        out[i] = (int32_t)v;                                                                       \
    }

/* int64 tokens: the one dtype whose values may not fit int32. Returns the bad index or -1. */
static int64_t convert_int64(const uint8_t *src, int64_t n, int32_t *out, int64_t *bad)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        memcpy(&v, src + i * 8, 8);
        if (v < INT32_MIN || v > INT32_MAX) {
            *bad = v;
            return i;
        }
        out[i] = (int32_t)v;
    }
    return -1;
}

int mc_indexed_get(const mc_indexed_t *d, int64_t seq, int64_t offset, int64_t length, int32_t *out,
                   char *err, size_t n_err)
{
    char name[4096];
    snprintf(name, sizeof(name), "%s.bin", d->prefix ? d->prefix : "(closed dataset)");
    if (seq < 0 || seq >= d->num_sequences)
        return mc_path_errf(err, n_err, name, "sequence %lld out of range [0, %lld)",
                            (long long)seq, (long long)d->num_sequences);
    int64_t len = d->sequence_lengths[seq];
    if (offset < 0 || length < 0 || offset > len || length > len - offset)
        return mc_path_errf(err, n_err, name,
                            "tokens [%lld, %lld + %lld) out of range of sequence %lld "
                            "(length %lld)",
                            (long long)offset, (long long)offset, (long long)length, (long long)seq,
                            (long long)len);
    const uint8_t *src = d->bin + d->sequence_pointers[seq] + offset * d->itemsize;
    int64_t n = length;
    if (n == 0) return 0; /* src may be NULL for an empty .bin */
    switch (d->dtype) {
    case MC_DTYPE_UINT8: CONVERT(uint8_t) break;
    case MC_DTYPE_INT8: CONVERT(int8_t) break;
    case MC_DTYPE_INT16: CONVERT(int16_t) break;
    case MC_DTYPE_UINT16: CONVERT(uint16_t) break;
    case MC_DTYPE_INT32: CONVERT(int32_t) break;
    case MC_DTYPE_INT64: {
        int64_t bad = 0, at = convert_int64(src, n, out, &bad);
        if (at >= 0)
            return mc_path_errf(err, n_err, name,
                                "token %lld at position %lld of sequence %lld does "
                                "not fit int32",
                                (long long)bad, (long long)(offset + at), (long long)seq);
        break;
    }
    default:
        return mc_path_errf(err, n_err, name, "dtype %s is not a token dtype (integers only)",
                            mc_indexed_dtype_name(d->dtype));
    }
    return 0;
}
